"""Fallback fakes: nothing extra (inputs echoed). Component-specific fakes live beside this file
as ``fakes_<component>.py`` and each defines ``fake_outputs(args, preview)``."""

from __future__ import annotations

from typing import Any

from pulumi.runtime.mocks import MockResourceArgs


def fake_outputs(args: MockResourceArgs, preview: bool) -> dict[str, Any] | None:
    return None
