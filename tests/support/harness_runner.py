"""Child process of ``tests.support.harness.evaluate``: one program evaluation under mocks.

Reads ``{"stack", "preview", "config"}`` as JSON on stdin, runs ``__main__.py`` with a recording
mock monitor, prints the recording as JSON on stdout. A program error is recorded, not raised, so
that tests can assert on it (e.g. bad config fails before any registration).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import pkgutil
import runpy
import sys
import traceback
import uuid
from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.runtime import mocks, rpc
from pulumi.runtime.config import set_all_config
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from tests.support import harness

SECRET_SIG = rpc._special_secret_sig
SIG_KEY = rpc._special_sig_key

FakeFn = Callable[[mocks.MockResourceArgs, bool], "dict[str, Any] | None"]


def _unwrap(value: Any, path: str, secrets: list[str]) -> Any:
    """Strip secret wrappers, recording the dotted paths that were secret; unknowns become
    ``harness.UNKNOWN``; resource references become their URN."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            secrets.append(path)
            return _unwrap(value.get("value"), path, [])
        return {k: _unwrap(v, f"{path}.{k}" if path else k, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, f"{path}[{i}]", secrets) for i, v in enumerate(value)]
    if isinstance(value, pulumi.Resource):
        return f"<resource {type(value).__name__}>"
    if (
        value is rpc.UNKNOWN
        or isinstance(value, pulumi.output.Unknown)
        or (isinstance(value, str) and value == rpc.UNKNOWN)
    ):
        return harness.UNKNOWN
    return value


def _load_fakes() -> list[FakeFn]:
    """Every ``fake_outputs`` function in ``tests/support/fakes_*.py``."""
    import tests.support as support

    found: list[FakeFn] = []
    for info in sorted(pkgutil.iter_modules(support.__path__), key=lambda m: m.name):
        if info.name.startswith("fakes_"):
            module = importlib.import_module(f"tests.support.{info.name}")
            found.append(module.fake_outputs)
    return found


def _api_server_uid(args: mocks.MockResourceArgs, state: dict[str, Any]) -> None:
    """A Kubernetes object the API server has stored carries ``metadata.uid``; give it one that
    is the same for every evaluation of the same resource (a real uid is new per creation)."""
    metadata = state.get("metadata")
    if not args.typ.startswith("kubernetes:") or not isinstance(metadata, dict):
        return
    if "uid" not in metadata:
        uid = uuid.uuid5(uuid.NAMESPACE_URL, f"mock-api-server/{args.typ}/{args.name}")
        state["metadata"] = {**metadata, "uid": str(uid)}


class FakeMocks(pulumi.runtime.Mocks):
    """Answers like the engine: inputs echoed as outputs, plus per-type fakes for what a
    provider computes (command output, secrets read from a cluster). In preview, the fakes
    decide what stays unknown."""

    def __init__(self, preview: bool) -> None:
        self.preview = preview
        self.fakes = _load_fakes()

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        for fake in self.fakes:
            extra = fake(args, self.preview)
            if extra is not None:
                state.update(extra)
                break
        resource_id = args.resource_id or f"{args.name}-id"
        if not self.preview:
            _api_server_uid(args, state)
        return resource_id, state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class DuplicateUrnError(Exception):
    """What the engine answers a second registration of one URN."""


class RecordingMonitor(mocks.MockMonitor):
    """A MockMonitor that keeps what the engine would see of each registration, and refuses a
    duplicate URN as the engine does."""

    def __init__(self, mocks_: FakeMocks) -> None:
        super().__init__(mocks_)
        self.records: list[dict[str, Any]] = []
        self.stack_outputs: dict[str, Any] = {}
        self.secret_outputs: list[str] = []
        self.seen_urns: set[str] = set()
        self.duplicates: list[str] = []
        # The engine's qualified type of each registered URN (the mock's URNs keep only the
        # parent's last type; the engine keeps the whole chain).
        self.qualified_types: dict[str, str] = {}

    def engine_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine gives a registration: the parent's whole qualified type chain,
        without the root stack's type (pulumi/pulumi v3.259.0,
        pkg/resource/deploy/deployment.go:795-805, sdk/go/common/resource/urn/urn.go:80-93)."""
        parent_type = self.qualified_types.get(parent, "")
        qualified = f"{parent_type}${type_}" if parent_type else type_
        urn = f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{qualified}::{name}"
        return urn

    def _check_unique(self, request: Any) -> None:
        """Refuse a second registration of one URN, with the engine's message
        (sdk/go/common/diag/errors.go:33, pkg/resource/deploy/step_generator.go:284)."""
        urn = self.engine_urn(request.parent, request.type, request.name)
        if urn in self.seen_urns:
            self.duplicates.append(urn)
            raise DuplicateUrnError(f"Duplicate resource URN '{urn}'; try giving it a unique name")
        self.seen_urns.add(urn)
        mock_urn = self.make_urn(request.parent, request.type, request.name)
        parent_type = self.qualified_types.get(request.parent, "")
        self.qualified_types[mock_urn] = (
            f"{parent_type}${request.type}" if parent_type else request.type
        )

    def _graph_record(self, request: Any, read: bool) -> dict[str, Any]:
        """What the dependency graph needs of a registration."""
        urn = self.make_urn(request.parent, request.type, request.name)
        return {
            "urn": urn,
            "type": request.type,
            "name": request.name,
            "custom": True if read else bool(request.custom),
            "parent": request.parent,
            "provider": request.provider,
            "dependencies": list(request.dependencies),
            "property_dependencies": {}
            if read
            else {k: list(v.urns) for k, v in request.propertyDependencies.items()},
            "read": read,
        }

    def _record(self, request: Any, read: bool) -> None:
        record = self._graph_record(request, read)
        _ensure_event_loop()
        raw = rpc.deserialize_properties(request.properties if read else request.object)
        secrets: list[str] = []
        record["inputs"] = _unwrap(raw, "", secrets)
        record["secret_inputs"] = secrets
        registered = self.resources.get(record["urn"])
        record["outputs"] = _unwrap(registered.state if registered else {}, "", [])
        options: dict[str, Any] = {}
        if not read:
            options = {
                "additional_secret_outputs": list(request.additionalSecretOutputs),
                "delete_before_replace": request.deleteBeforeReplace,
                "ignore_changes": list(request.ignoreChanges),
                "replace_on_changes": list(request.replaceOnChanges),
                "protect": request.protect,
                "retain_on_delete": request.retainOnDelete,
                "custom_timeouts": {
                    "create": request.customTimeouts.create,
                    "update": request.customTimeouts.update,
                    "delete": request.customTimeouts.delete,
                },
                "deleted_with": request.deletedWith,
                # Old URNs this registration answers for (the SDK sends full URNs when the
                # monitor does not take alias specs, as the mock's does not).
                "aliases": [alias.urn for alias in request.aliases if alias.urn],
            }
        record["options"] = options
        self.records.append(record)

    def RegisterResource(self, request: Any) -> Any:
        if request.type != harness.STACK_TYPE:
            self._check_unique(request)
        response = super().RegisterResource(request)
        if request.type != harness.STACK_TYPE:
            self._record(request, read=False)
        return response

    def ReadResource(self, request: Any) -> Any:
        self._check_unique(request)
        response = super().ReadResource(request)
        self._record(request, read=True)
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        if request.urn.split("::")[2] == harness.STACK_TYPE:
            _ensure_event_loop()
            secrets: list[str] = []
            self.stack_outputs = _unwrap(rpc.deserialize_properties(request.outputs), "", secrets)
            self.secret_outputs = secrets
        return super().RegisterResourceOutputs(request)


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main() -> None:
    request = json.load(sys.stdin)
    # Under mocks nothing runs on this host: the lab's host preflight has nothing to check.
    os.environ["GPU_PLATFORM_SKIP_PREFLIGHT"] = "1"
    # ... and it installs no chart, so the pinned Kamaji chart need not be on this machine.
    os.environ["GPU_PLATFORM_SKIP_CHART_CHECK"] = "1"
    # Nor is Docker asked about the host (an empty value means "no facts"; a test may set a path
    # to a `docker info` sample).
    os.environ.setdefault("GPU_PLATFORM_DOCKER_INFO", "")
    # The lab hands the host's proxy settings to its node containers: here only a test's own.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        os.environ.pop(name, None)
        os.environ.pop(name.lower(), None)
    os.environ.update(request.get("environment") or {})
    preview = bool(request["preview"])
    values, secret_keys = harness.mock_config(request["config"])
    set_all_config(values, secret_keys)
    monitor = RecordingMonitor(FakeMocks(preview))
    logger = logging.getLogger("pulumi-program")
    logger.propagate = False
    handler = _ListHandler()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    pulumi.runtime.set_mocks(
        monitor.mocks,  # type: ignore[arg-type]
        project=harness.PROJECT,
        stack=request["stack"],
        preview=preview,
        logger=logger,
        monitor=monitor,
    )
    error: str | None = None
    run_error = False
    program = str(harness.REPO_ROOT / request.get("program", "__main__.py"))
    try:
        _sync_await(run_pulumi_func(lambda: runpy.run_path(program, run_name="__main__")))
        # set_mocks finished the root stack before the program ran; finish it again so the
        # program's exports are registered like the engine's entry point does.
        root = pulumi.runtime.settings.get_root_resource()
        if root is not None:
            root._outputs_registered = False  # type: ignore[attr-defined]
            root._finish()  # type: ignore[attr-defined]
            _sync_await(run_pulumi_func(lambda: None))
    except Exception as exc:  # recorded for the test to judge
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        # The CLI prints a RunError as its message alone, anything else with a traceback.
        run_error = isinstance(exc, pulumi.RunError)
        if not isinstance(exc, ValueError):
            error += "\n" + traceback.format_exc()
    json.dump(
        {
            "stack": request["stack"],
            "preview": preview,
            "resources": monitor.records,
            "outputs": monitor.stack_outputs,
            "secret_outputs": monitor.secret_outputs,
            "logs": handler.lines,
            "error": error,
            "run_error": run_error,
            "duplicate_urns": monitor.duplicates,
        },
        sys.stdout,
        default=str,
    )


if __name__ == "__main__":
    main()
