"""Child process of ``tests.local.engine.engine.run``: one operation of the real Pulumi CLI.

Reads a request as JSON on stdin, runs one Automation API operation (``preview``, ``up``,
``destroy``, ``set_secrets``) on the stack in ``work_dir`` with the project's ``__main__.py`` as an
inline program, prints the result as JSON on stdout: the engine's events (which resources it
stepped, with which operation and diff; policy violations; diagnostics), the error if the
operation failed, and the stack's state afterwards (``pulumi stack export``).

Why inline: the program's language host, ``pulumi-language-python``, is not served by the Go
module proxy reachable here (docs/testing.md, "The real-engine tier"). An inline program is the
Automation API's own way to run a Python program without it: the SDK serves the
LanguageRuntime in this process and the CLI connects to it with ``--client`` (pulumi 3.272.0,
pulumi/automation/_stack.py:409-428 and _server.py:59-139, the strategy of
pulumi-language-python-exec). Everything else is the real thing: the CLI, the engine, the
providers it loads, the policy pack it runs.

A child process because the Pulumi runtime keeps global state, and the program's output should
not mix with pytest's.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

from pulumi import automation as auto

REPO_ROOT = Path(__file__).resolve().parents[3]


def program() -> None:
    """The project's program, exactly as ``pulumi up`` runs it from the repository."""
    runpy.run_path(str(REPO_ROOT / "__main__.py"), run_name="__main__")


def _event(event: auto.events.EngineEvent) -> dict[str, Any] | None:
    """The parts of an engine event the tests read."""
    if event.resource_pre_event is not None:
        meta = event.resource_pre_event.metadata
        return {
            "kind": "pre",
            "urn": meta.urn,
            "type": meta.type,
            "op": meta.op.value,
            "keys": list(meta.keys or []),
            "diffs": list(meta.diffs or []),
            "provider": meta.provider,
            # The inputs as the engine shows them (secrets as "[secret]").
            "inputs": dict(meta.new.inputs) if meta.new is not None else {},
            "parent": meta.new.parent if meta.new is not None else "",
        }
    for kind, ended in (
        ("outputs", event.res_outputs_event),
        ("failed", event.res_op_failed_event),
    ):
        if ended is not None:
            meta = ended.metadata
            return {"kind": kind, "urn": meta.urn, "type": meta.type, "op": meta.op.value}
    if event.diagnostic_event is not None:
        diag = event.diagnostic_event
        return {
            "kind": "diag",
            "urn": diag.urn or "",
            "severity": diag.severity,
            "message": diag.message,
        }
    if event.policy_event is not None:
        policy = event.policy_event
        return {
            "kind": "policy",
            "urn": policy.resource_urn or "",
            "policy": policy.policy_name,
            "pack": policy.policy_pack_name,
            "level": policy.enforcement_level,
            "message": policy.message,
        }
    if event.summary_event is not None:
        summary = event.summary_event
        return {
            "kind": "summary",
            "changes": {
                k.value if hasattr(k, "value") else str(k): v
                for k, v in (summary.resource_changes or {}).items()
            },
            "policy_packs": dict(summary.policy_packs or {}),
        }
    return None


def main() -> int:
    request = json.load(sys.stdin)
    env = {key: str(value) for key, value in request["env"].items()}
    workspace = auto.LocalWorkspace(
        work_dir=request["work_dir"],
        pulumi_home=request["pulumi_home"],
        env_vars=env,
        program=program,
        pulumi_command=auto.PulumiCommand(root=request["cli_root"], skip_version_check=True),
    )
    stack = auto.Stack.create_or_select(request["stack"], workspace)
    events: list[dict[str, Any]] = []

    def on_event(event: auto.events.EngineEvent) -> None:
        recorded = _event(event)
        if recorded is not None:
            events.append(recorded)

    result: dict[str, Any] = {"error": None, "stdout": "", "stderr": ""}
    op = request["op"]
    try:
        if op == "set_config":
            # `pulumi config set [--secret]`: secret unless the request says clear.
            secret = not request.get("clear")
            for key, value in request["values"].items():
                stack.set_config(key, auto.ConfigValue(value=value, secret=secret))
        elif op == "preview":
            preview = stack.preview(
                policy_packs=request.get("policy_packs") or None,
                policy_pack_configs=request.get("policy_pack_configs") or None,
                expect_no_changes=bool(request.get("expect_no_changes")),
                target=request.get("target") or None,
                on_event=on_event,
                color="never",
            )
            result["stdout"], result["stderr"] = preview.stdout, preview.stderr
            result["change_summary"] = {str(k): v for k, v in preview.change_summary.items()}
        elif op == "up":
            up = stack.up(
                policy_packs=request.get("policy_packs") or None,
                policy_pack_configs=request.get("policy_pack_configs") or None,
                on_event=on_event,
                color="never",
                continue_on_error=bool(request.get("continue_on_error")),
                target=request.get("target") or None,
            )
            result["stdout"], result["stderr"] = up.stdout, up.stderr
        elif op == "destroy":
            destroy = stack.destroy(on_event=on_event, color="never", continue_on_error=True)
            result["stdout"], result["stderr"] = destroy.stdout, destroy.stderr
        elif op != "export":
            raise ValueError(f"unknown operation {op}")
    except auto.errors.CommandError as error:
        result["error"] = str(error)
    except Exception:  # reported to the test, which fails with it
        result["error"] = traceback.format_exc()
    deployment = stack.export_stack().deployment or {}
    result["state"] = deployment.get("resources") or []
    result["events"] = events
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
