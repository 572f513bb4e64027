"""Run ``__main__.py`` under Pulumi mocks and record every registration.

``evaluate(stack, preview)`` runs the whole program for ``Pulumi.<stack>.yaml`` in a child process
(the Pulumi runtime keeps global state, so each evaluation gets a clean interpreter) and returns a
``Recording``: every resource with its type, name, inputs, parent, provider, dependencies and which
inputs were secret; the stack outputs; the log lines the program wrote.

Mode matters: in ``preview`` mode the mocks answer like ``pulumi preview`` does, with outputs that
come from a cluster or a command left unknown; in update mode they answer like a successful
``pulumi up`` with plausible values (see ``tests/support/fakes_*.py``). ``preview`` with
``prior=<an update-mode recording>`` is a preview of an *update* of that deployed stack: each
registration is planned against the recording as the engine would (same, update, replace,
create; reads run when their ID is known), and ``Registration.step`` says which (see
``tests/support/harness_runner.PriorState``).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT = "gpu-platform"
SECRET_PLACEHOLDER = "mock-secret-value"
UNKNOWN = "<unknown>"
STACK_TYPE = "pulumi:pulumi:Stack"


# The JSON form of a config value that ``pulumi config set --secret`` stored: ``Secret(text)``.
SECRET_MARK = "__secret_config_value__"


def Secret(plaintext: str) -> dict[str, str]:
    """A config value as ``pulumi config set --secret`` stores it, for a test to hand the mocks
    (a plain string is a value written in clear into the stack file)."""
    return {SECRET_MARK: plaintext}


@dataclass
class Registration:
    """One resource the program registered (or read), as the engine saw it."""

    urn: str
    type: str
    name: str
    custom: bool
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    secret_inputs: list[str]
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    options: dict[str, Any]
    read: bool = False
    # The engine's URN (the parent's whole type chain), the ID ("<unknown>" while unknown), and
    # in a preview of an update the planned step: same, update, replace, create, read or
    # read-skipped.
    engine_urn: str = ""
    id: str = ""
    step: str = ""

    @property
    def provider_urn(self) -> str:
        """The URN part of the provider reference (``urn::id``)."""
        return self.provider.rsplit("::", 1)[0] if self.provider else ""

    def input_is_secret(self, path: str) -> bool:
        """True when the input at ``path`` (dotted) or anything under it was secret."""
        return any(p == path or p.startswith(path + ".") for p in self.secret_inputs)


@dataclass
class Recording:
    """Everything one program evaluation registered."""

    stack: str
    preview: bool
    resources: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: list[str]
    logs: list[str]
    error: str | None = None
    # Whether the program failed with a pulumi.RunError (printed by the CLI as one message, with
    # no traceback).
    run_error: bool = False
    duplicate_urns: list[str] = field(default_factory=list)

    def by_urn(self) -> dict[str, Registration]:
        return {r.urn: r for r in self.resources}

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> Registration:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def children(self, parent: Registration) -> list[Registration]:
        return [r for r in self.resources if r.parent == parent.urn]

    def ancestors(self, reg: Registration) -> Iterator[Registration]:
        index = self.by_urn()
        current = index.get(reg.parent)
        while current is not None:
            yield current
            current = index.get(current.parent)

    def component_of(self, reg: Registration, type_suffix: str) -> Registration | None:
        """The nearest ancestor whose type ends with ``type_suffix`` (e.g. ``:GpuTenant``)."""
        return next((a for a in self.ancestors(reg) if a.type.endswith(type_suffix)), None)

    def provider_of(self, reg: Registration) -> Registration | None:
        return self.by_urn().get(reg.provider_urn)

    def dependency_closure(self, reg: Registration) -> set[str]:
        """URNs ``reg`` waits for: explicit and property dependencies, its provider, its
        parent's dependencies, transitively."""
        index = self.by_urn()
        seen: set[str] = set()
        stack = [reg.urn]
        while stack:
            current = index.get(stack.pop())
            if current is None:
                continue
            edges = set(current.dependencies)
            for deps in current.property_dependencies.values():
                edges.update(deps)
            if current.provider_urn:
                edges.add(current.provider_urn)
            for edge in edges - seen:
                seen.add(edge)
                stack.append(edge)
        return seen


# ------------------------------------------------------------------------------- config


def stack_file(stack: str) -> Path:
    return REPO_ROOT / f"Pulumi.{stack}.yaml"


def load_stack_config(stack: str) -> dict[str, Any]:
    """The ``config:`` block of ``Pulumi.<stack>.yaml``."""
    data = yaml.safe_load(stack_file(stack).read_text()) or {}
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"Pulumi.{stack}.yaml: config must be a mapping")
    return config


def mock_config(raw: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Config as the engine hands it to a program: fully qualified keys, string values,
    ``secure:`` values replaced by placeholders and listed as secret keys.

    Secrets the stack file names but does not hold (the operator sets them with
    ``pulumi config set --secret``) get placeholders too, so that the file evaluates as it will
    once they are set.
    """
    values: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in raw.items():
        qualified = key if ":" in key else f"{PROJECT}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            values[qualified] = SECRET_PLACEHOLDER
            secret_keys.append(qualified)
        elif isinstance(value, dict) and set(value) == {SECRET_MARK}:
            # What `pulumi config set --secret KEY VALUE` leaves: the value, marked secret.
            values[qualified] = value[SECRET_MARK]
            secret_keys.append(qualified)
        elif isinstance(value, str):
            values[qualified] = value
        else:
            values[qualified] = json.dumps(value)
    platform = raw.get(f"{PROJECT}:platform")
    if isinstance(platform, dict):
        for name, placeholder in operator_secret_placeholders(platform).items():
            qualified = f"{PROJECT}:{name}"
            if qualified not in values:
                values[qualified] = placeholder
                secret_keys.append(qualified)
    return values, secret_keys


def operator_secret_placeholders(platform: dict[str, Any]) -> dict[str, str]:
    """Placeholders, in the shape the program expects, for the secret config keys a platform
    block refers to: a kubeconfig for the management cluster, a JSON object with the driver's
    keys for DataStore credentials (see components.tenant_specs.DATASTORE_SECRET_KEYS), an S3
    target for a tenant's backups."""
    from components.config import ConfigError, required_secret_keys
    from components.stack import parse_platform
    from components.tenant_specs import DATASTORE_SECRET_KEYS

    try:
        parsed = parse_platform(platform)
    except ConfigError:
        return {}
    drivers = {d.credentials_config_key: d.driver for d in parsed.data_stores}
    for tenant in parsed.tenants:
        dedicated = tenant.data_store.dedicated
        if dedicated is not None and dedicated.credentials_config_key:
            drivers[dedicated.credentials_config_key] = dedicated.driver
    targets = {t.backups.named_target for t in parsed.tenants} - {None}
    placeholders: dict[str, str] = {}
    for key in required_secret_keys(parsed):
        driver = drivers.get(key)
        if key in targets:
            placeholders[key] = json.dumps(BACKUP_TARGET_PLACEHOLDER)
        elif driver is not None:
            fields = DATASTORE_SECRET_KEYS[driver]
            placeholders[key] = json.dumps(dict.fromkeys(fields, SECRET_PLACEHOLDER))
        else:
            placeholders[key] = MOCK_KUBECONFIG
    return placeholders


# A backup target in the shape docs/backups.md gives (components.backups.target).
BACKUP_TARGET_PLACEHOLDER = {
    "endpoint": "https://s3.mock.invalid",
    "bucket": "mock-tenant-backups",
    "accessKeyId": SECRET_PLACEHOLDER,
    "secretAccessKey": SECRET_PLACEHOLDER,
    "encryptionKey": "5e" * 32,
}

MOCK_KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters:
- name: mock
  cluster: {{server: "https://mock-management.invalid:6443"}}
users:
- name: mock
  user: {{token: {SECRET_PLACEHOLDER}}}
contexts:
- name: mock
  context: {{cluster: mock, user: mock}}
current-context: mock
"""


# ------------------------------------------------------------------------------ running


class DuplicateUrnError(AssertionError):
    """The program registered one URN twice: the engine refuses that (``Duplicate resource
    URN``), so no evaluation that does it may pass, whatever config it ran."""


def evaluate(
    stack: str,
    preview: bool,
    config: dict[str, Any] | None = None,
    timeout: float = 240.0,
    environment: dict[str, str] | None = None,
    program: str = "__main__.py",
    prior: Recording | None = None,
) -> Recording:
    """Evaluate the program for a stack (or an explicit config block) in a child process, with
    ``environment`` added to the child's (the host's proxy variables are never passed on).
    ``prior`` (with ``preview``): a preview of an update of the stack that recording deployed.

    Raises DuplicateUrnError when any URN was registered twice (the child refuses the second
    registration as the engine does, which also fails the program)."""
    request = {
        "stack": stack,
        "preview": preview,
        "config": config if config is not None else load_stack_config(stack),
        "environment": environment or {},
        "program": program,
    }
    if prior is not None:
        if prior.preview or prior.error is not None or not preview:
            raise ValueError("prior must be a successful update-mode recording, for a preview")
        request["prior"] = [
            {
                "engine_urn": r.engine_urn,
                "type": r.type,
                "id": r.id,
                "read": r.read,
                "inputs": r.inputs,
                "outputs": r.outputs,
            }
            for r in prior.resources
        ]
    payload = run_child("tests.support.harness_runner", request, timeout)
    resources = [Registration(**r) for r in payload.pop("resources")]
    recording = Recording(resources=resources, **payload)
    if recording.duplicate_urns:
        raise DuplicateUrnError(
            f"{stack}: the engine would refuse {len(recording.duplicate_urns)} duplicate URN(s), "
            f"first {recording.duplicate_urns[0]}: {recording.error}"
        )
    return recording


@functools.cache
def shipped(stack: str, preview: bool = False) -> Recording:
    """``evaluate`` of the stack file as shipped, once per process: the session's ``recordings``
    fixture and every module that needs the shipped stacks share it (each evaluation is a child
    process of a few seconds, and ``make test`` has a time budget)."""
    return evaluate(stack, preview)


def run_child(
    module: str,
    request: dict[str, Any],
    timeout: float,
    environment: Mapping[str, str] | None = None,
    import_paths: Sequence[Path] = (REPO_ROOT, REPO_ROOT / "policies"),
) -> dict[str, Any]:
    """Run ``python -m <module>`` from the repository with ``request`` as JSON on stdin and
    return the JSON it prints; a crash raises with the end of its stderr. ``environment`` is
    added to this process's; ``import_paths`` go first on the child's PYTHONPATH."""
    env = {**os.environ, **(environment or {})}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, import_paths), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", module],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        subject = " ".join(str(request[key]) for key in ("op", "stack") if key in request)
        raise RuntimeError(f"{module} crashed on {subject}:\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result
