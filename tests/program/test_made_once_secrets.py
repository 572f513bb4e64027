"""Secrets the program makes once on the host (``components.substrate.secret_made_once``): the
lab backup store's root secret, each lab tenant's archive key, the central Prometheus' password.

pulumi-command v1.2.1 runs ``create`` again on any changed input when no ``update`` is given
(provider/pkg/provider/common/inputs.go:26-30), so an edited comment in ``new-secret.sh`` once
rotated every tenant's archive key on the next ``make lab`` (its stored backups then refused to
restore), and it logs a command's stdout by default (local/logging.go:27-28), even a secret one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from components.substrate import MADE_ONCE_IGNORED
from tests.support.harness import Recording, Registration


def _made_once(recording: Recording) -> list[Registration]:
    return [
        r
        for r in recording.resources
        if r.type == "command:local:Command" and "urandom" in str(r.inputs.get("create", ""))
    ]


@pytest.mark.parametrize(("stack", "expected"), [("lab", 4), ("prod", 1)])
def test_every_made_once_secret_never_runs_again_and_is_never_logged(
    stack: str, expected: int, recordings: Callable[[str, bool], Recording]
) -> None:
    # lab: the backup store's root secret, tenant-a's and tenant-b's keys, the password; prod:
    # the password (its backup targets come from the user's secret config).
    commands = _made_once(recordings(stack, False))
    assert len(commands) == expected, [c.name for c in commands]
    for command in commands:
        name = command.name
        assert command.inputs["logging"] == "none", name
        ignored = set(command.options["ignore_changes"])
        assert set(MADE_ONCE_IGNORED) <= ignored, name
        assert {"create", "interpreter", "logging", "environment"} <= ignored, name
        assert "stdout" in command.options["additional_secret_outputs"], name
