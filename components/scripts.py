"""Shell scripts that run on the lab host or in containers live under ``scripts/`` (shellcheck
checks them in CI); components read them from there instead of embedding shell in Python."""

from __future__ import annotations

from pathlib import Path

SCRIPTS_ROOT = Path(__file__).resolve().parent.parent / "scripts"


def read_script(folder: str, name: str) -> str:
    """The text of ``scripts/<folder>/<name>``."""
    return (SCRIPTS_ROOT / folder / name).read_text()
