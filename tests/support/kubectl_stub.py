"""A stand-in ``kubectl`` for the backup scripts (scripts/backup/*.sh), modelling what they act on.

State lives in ``$STUB_DIR/state.json``; every call is appended to ``$STUB_DIR/calls``. The model:
a TenantControlPlane that Kamaji reconciles (it scales the Deployment back to the TCP's replicas
on every call unless the TCP carries ``kamaji.clastix.io/paused``), its Deployment and API server
pods (gone one call after a scale to 0), in prod the Cluster whose controllers rewrite the TCP
unless ``spec.paused``, the tenant's backup CronJob (``spec.suspend``), Jobs by name (their
conditions and active pods) and Secrets by name (their base64 ``data``; ``patch --type merge``
merges it, a missing one is NotFound). ``-o jsonpath=`` is evaluated on the objects as the API
returns them (dotted paths with ``\\.`` escapes, ``[*]``, ``[?(@.f=="v")]``, ``{range}…{end}``,
quoted literals; a map prints as compact JSON with sorted keys, as kubectl's does); ``annotate``
honours ``--overwrite`` and ``--resource-version`` (a stale one is a conflict, as the API's
optimistic concurrency makes it).

Run as a file (``install`` writes a ``kubectl`` that execs it); stdlib only.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

PAUSED = "kamaji.clastix.io/paused"


def initial_state(cluster: bool = False) -> dict[str, Any]:
    return {
        "tcp": {"replicas": 2, "annotations": {}, "resourceVersion": 1},
        "deployment": {
            "replicas": 2,
            "args": [
                "--allow-privileged=true",
                "--etcd-servers=https://kamaji-etcd-0.kamaji-etcd.kamaji-system.svc:2379,"
                "https://kamaji-etcd-1.kamaji-etcd.kamaji-system.svc:2379",
                "--etcd-prefix=/tenant_a",
            ],
            "image": "registry.k8s.io/kube-apiserver:v1.35.0",
        },
        "pods": 2,
        "cluster": {"paused": False, "kcpReplicas": 2} if cluster else None,
        "cronjob": {"suspend": None},
        "jobs": {},
        "secrets": {},
    }


def install(directory: Path, state: dict[str, Any]) -> dict[str, str]:
    """Write the stub and its state under ``directory``; the environment that puts it first on
    the PATH."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    stub = bin_dir / "kubectl"
    stub.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    stub.chmod(0o755)
    (directory / "state.json").write_text(json.dumps(state))
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_DIR": str(directory)}


def read_state(directory: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((directory / "state.json").read_text())
    return state


def write_state(directory: Path, state: dict[str, Any]) -> None:
    (directory / "state.json").write_text(json.dumps(state))


# ------------------------------------------------------------------------------- jsonpath


def _segments(path: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    current, i = "", 0
    while i < len(path):
        char = path[i]
        if char == "\\":
            current += path[i + 1]
            i += 2
            continue
        if char in ".[":
            if current:
                out.append(("key", current))
                current = ""
            if char == "[":
                end = path.index("]", i)
                inner = path[i + 1 : end]
                if inner == "*":
                    out.append(("all", None))
                else:
                    match = re.fullmatch(r"\?\(@\.(\w+)==[\"'](.*)[\"']\)", inner)
                    if match is None:
                        raise SystemExit(f"stub: unsupported jsonpath [{inner}]")
                    out.append(("filter", (match[1], match[2])))
                i = end + 1
                continue
            i += 1
            continue
        current += char
        i += 1
    if current:
        out.append(("key", current))
    return out


def _evaluate(path: str, root: Any) -> list[Any]:
    if path == "@":
        return [root]
    nodes = [root]
    for kind, arg in _segments(path.removeprefix("@")):
        if kind == "key":
            nodes = [n[arg] for n in nodes if isinstance(n, dict) and arg in n]
        else:
            flat = [item for n in nodes if isinstance(n, list) for item in n]
            if kind == "filter":
                field, value = arg
                flat = [n for n in flat if isinstance(n, dict) and str(n.get(field)) == value]
            nodes = flat
    return nodes


def _text(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(template: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(template):
        if template[i] == "{":
            end = template.index("}", i)
            tokens.append(("expr", template[i + 1 : end].strip()))
            i = end + 1
        else:
            end = template.find("{", i)
            end = len(template) if end < 0 else end
            tokens.append(("text", template[i:end]))
            i = end
    return tokens


def _render(tokens: list[tuple[str, str]], root: Any) -> str:
    out, i = "", 0
    while i < len(tokens):
        kind, body = tokens[i]
        if kind == "text":
            out += body
        elif body.startswith('"'):
            out += json.loads(body)
        elif body.startswith("range "):
            depth, j = 1, i + 1
            while depth:
                if tokens[j] == ("expr", "end"):
                    depth -= 1
                elif tokens[j][0] == "expr" and tokens[j][1].startswith("range "):
                    depth += 1
                j += 1
            inner = tokens[i + 1 : j - 1]
            for item in _evaluate(body[len("range ") :], root):
                for element in item if isinstance(item, list) else [item]:
                    out += _render(inner, element)
            i = j
            continue
        else:
            out += " ".join(_text(v) for v in _evaluate(body, root))
        i += 1
    return out


def jsonpath(template: str, obj: Any) -> str:
    return _render(_parse(template), obj)


# ------------------------------------------------------------------------------- the model


def _objects(state: dict[str, Any]) -> dict[str, Any]:
    tcp = state["tcp"]
    cron_spec: dict[str, Any] = {"schedule": "17 */6 * * *"}
    if state["cronjob"].get("suspend") is not None:
        cron_spec["suspend"] = state["cronjob"]["suspend"]
    return {
        "tcp": {
            "metadata": {
                "name": "tenant-a",
                "resourceVersion": str(tcp["resourceVersion"]),
                **({"annotations": tcp["annotations"]} if tcp["annotations"] else {}),
            },
            "spec": {"controlPlane": {"deployment": {"replicas": tcp["replicas"]}}},
        },
        "deployment": {
            "spec": {
                "replicas": state["deployment"]["replicas"],
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "kube-apiserver",
                                "args": state["deployment"]["args"],
                                "image": state["deployment"]["image"],
                            }
                        ]
                    }
                },
            }
        },
        "cronjob": {"metadata": {"name": "datastore-backup"}, "spec": cron_spec},
    }


def _reconcile(state: dict[str, Any]) -> None:
    tcp = state["tcp"]
    if state.get("cluster") is not None and not state["cluster"]["paused"]:
        tcp["replicas"] = state["cluster"]["kcpReplicas"]
    if PAUSED not in tcp["annotations"]:
        state["deployment"]["replicas"] = tcp["replicas"]
    if state["deployment"]["replicas"] == 0 and state["pods"] > 0:
        state["pods"] -= 1
    elif state["deployment"]["replicas"] > 0:
        state["pods"] = state["deployment"]["replicas"]


def _kind(resource: str) -> str:
    if resource.startswith("tenantcontrolplanes"):
        return "tcp"
    if resource in ("deployment", "deployments", "deploy"):
        return "deployment"
    if resource in ("cronjob", "cronjobs"):
        return "cronjob"
    if resource in ("job", "jobs"):
        return "job"
    if resource.startswith("clusters"):
        return "cluster"
    if resource in ("secret", "secrets"):
        return "secret"
    raise SystemExit(f"stub: unknown resource {resource}")


def _option(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and index + 1 < len(args):
            return args[index + 1]
    return None


def _get(state: dict[str, Any], args: list[str]) -> None:
    query = _option(args, "-o") or ""
    if args[1] == "pods":
        print("\n".join(f"pod/api-{i}" for i in range(state["pods"])))
        return
    kind = _kind(args[1])
    if kind == "job":
        job = state["jobs"].get(args[2])
        if job is None:
            if "--ignore-not-found" in args:
                return
            sys.stderr.write(f'Error from server (NotFound): jobs.batch "{args[2]}" not found\n')
            raise SystemExit(1)
        obj = {"metadata": {"name": args[2]}, "status": job}
    else:
        obj = _objects(state)[kind]
    if not query.startswith("jsonpath="):
        raise SystemExit(f"stub: unsupported output {query}")
    sys.stdout.write(jsonpath(query[len("jsonpath=") :], obj))


def _annotate(state: dict[str, Any], args: list[str]) -> None:
    if _kind(args[1]) != "tcp":
        raise SystemExit("stub: annotate only TCPs")
    tcp = state["tcp"]
    version = _option(args, "--resource-version")
    if version is not None and version != str(tcp["resourceVersion"]):
        sys.stderr.write(
            "Error from server (Conflict): Operation cannot be fulfilled on tenantcontrolplanes: "
            "the object has been modified; please apply your changes to the latest version\n"
        )
        raise SystemExit(1)
    changes = [a for a in args[3:] if not a.startswith("--")]
    for change in changes:
        if change.endswith("-"):
            tcp["annotations"].pop(change[:-1], None)
        else:
            key, value = change.split("=", 1)
            if key in tcp["annotations"] and "--overwrite" not in args:
                sys.stderr.write(f"error: --overwrite is false but found the key {key}\n")
                raise SystemExit(1)
            tcp["annotations"][key] = value
    tcp["resourceVersion"] += 1


def _patch(state: dict[str, Any], args: list[str]) -> None:
    body = json.loads(_option(args, "-p") or "{}")
    kind = _kind(args[1])
    if kind == "cluster":
        state["cluster"]["paused"] = body["spec"]["paused"]
    elif kind == "cronjob":
        state["cronjob"]["suspend"] = body["spec"]["suspend"]
    elif kind == "secret":
        secrets = state.setdefault("secrets", {})
        if args[2] not in secrets:
            sys.stderr.write(f'Error from server (NotFound): secrets "{args[2]}" not found\n')
            raise SystemExit(1)
        secrets[args[2]].update(body.get("data", {}))
    else:
        raise SystemExit(f"stub: patch of {kind}")


def main(args: list[str]) -> None:
    directory = Path(os.environ["STUB_DIR"])
    # One call at a time, as the API server serialises writes to one object: concurrent scripts
    # (two restores) then race only as they would against a real API.
    with (directory / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _call(directory, args)


def _call(directory: Path, args: list[str]) -> None:
    state = read_state(directory)
    with (directory / "calls").open("a") as calls:
        calls.write(" ".join(args) + "\n")
    _reconcile(state)
    verb = args[0]
    if verb == "get":
        _get(state, args)
    elif verb == "annotate":
        _annotate(state, args)
    elif verb == "patch":
        _patch(state, args)
    elif verb == "scale":
        state["deployment"]["replicas"] = int(args[-1].split("=")[1])
    elif verb == "rollout":
        if state["deployment"]["replicas"] == 0:
            raise SystemExit("stub: rollout of a Deployment at 0 replicas")
    else:
        raise SystemExit(f"stub: unknown verb {args}")
    _reconcile(state)
    write_state(directory, state)


if __name__ == "__main__":
    main(sys.argv[1:])
