"""Fixtures of the real-engine tier: the Pulumi tools, the prod stack in a working directory of
its own against the ``management_apiserver`` of ``tests/local/conftest.py``, and the operations
the tests read (each run once per session, in order: preview, up, preview of the update,
destroy).

``scripts/local_e2e/build-pulumi-tools.sh`` builds the tools (``make local-e2e`` runs it first;
the ``engine_tools`` fixture runs it too, a no-op when they are cached). Without Go the tier
skips with one line; in CI it fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.local.conftest import MANAGEMENT_CONTROLLERS, StartAPIServer
from tests.local.engine.engine import (
    BUILD_SCRIPT,
    POLICY_PACK,
    POLICY_PACK_LAUNCHER,
    PROJECT,
    REPO_ROOT,
    EngineTools,
    Outcome,
    Project,
)
from tests.local.kube import APIServer
from tests.support import harness

PROD_POLICY_CONFIG = POLICY_PACK / "config" / "prod.json"
# The environment the program reads, passed on to it (the chart archives: components.chart_cache).
PASSED_ON = ("GPU_PLATFORM_CHARTS_DIR", "XDG_CACHE_HOME", "HOME")


def require(ok: bool, reason: str) -> None:
    """Skip with one line, or fail under CI, where .ci/run provides everything."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run this tier: .ci/run installs Go's toolchain)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def engine_tools() -> EngineTools:
    # The program's prod checks ask the API server with kubectl (scripts/management/
    # namespaces-exist.sh); it is on the project's machine image (Debian's kubectl package).
    require(shutil.which("kubectl") is not None, "kubectl is not on PATH (the prod checks run it)")
    built = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if built.returncode == 3:
        require(False, built.stderr.strip().splitlines()[-1])
    if built.returncode != 0:
        pytest.fail(f"{BUILD_SCRIPT.name} failed ({built.returncode}):\n{built.stderr[-3000:]}")
    root = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return EngineTools(Path(root))


def prod_secret_config(kubeconfig: str) -> dict[str, str]:
    """Made-up values for every secret key Pulumi.prod.yaml names (the keys and shapes
    ``scripts/set_secret_config.py`` sets in CI: components.config.required_secret_keys), with
    the management kubeconfig pointing at the test API server."""
    config = yaml.safe_load((REPO_ROOT / "Pulumi.prod.yaml").read_text())["config"]
    platform = config[f"{PROJECT}:platform"]
    values = harness.operator_secret_placeholders(platform)
    key = platform["management"]["existing"]["kubeconfigConfigKey"]
    assert key in values, f"{key} is not among the prod stack's secret keys {sorted(values)}"
    values[key] = kubeconfig
    return values


def adopted_namespaces() -> list[str]:
    """The namespaces the prod stack adopts (``managementNamespace.existing``): the operator
    enrols the tenants' BareMetalHosts there before ``pulumi up``, and a preview fails while one
    is missing."""
    config = yaml.safe_load((REPO_ROOT / "Pulumi.prod.yaml").read_text())["config"]
    tenants = config[f"{PROJECT}:platform"]["tenants"]
    return [t["name"] for t in tenants if (t.get("managementNamespace") or {}).get("existing")]


@pytest.fixture(scope="session")
def engine_management(start_apiserver: StartAPIServer) -> APIServer:
    """The prod stack's management cluster: an API server of its own (same controllers as
    ``management_apiserver``), so that what the stack leaves behind is the stack's alone and no
    other suite's objects are in the way; with the adopted namespaces the operator creates."""
    server = start_apiserver("engine-management", controllers=MANAGEMENT_CONTROLLERS)
    for name in adopted_namespaces():
        server.admin.call(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
    return server


@pytest.fixture(scope="session")
def prod_secrets(engine_management: APIServer) -> dict[str, str]:
    return prod_secret_config(Path(engine_management.kubeconfig).read_text())


@pytest.fixture(scope="session")
def new_prod_project(
    engine_tools: EngineTools, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Project]:
    """A factory: the prod stack in a new working directory (its own state and PULUMI_HOME)."""
    root = tmp_path_factory.mktemp("engine")
    environment = {k: os.environ[k] for k in PASSED_ON if k in os.environ}
    # The local API server runs no kubelet, so it lists no nodes, and the capacity check
    # (components.management_nodes) would refuse the stack against 0 allocatable: a recorded,
    # roomy cluster stands in for the nodes (the namespace check still asks the server).
    nodes = root / "management-nodes.json"
    allocatable = {"cpu": "64", "memory": "256Gi"}
    nodes.write_text(json.dumps({"items": [{"spec": {}, "status": {"allocatable": allocatable}}]}))
    environment["GPU_PLATFORM_MANAGEMENT_NODES"] = str(nodes)

    def create(name: str) -> Project:
        return Project.create(engine_tools, root / name, "prod", environment)

    return create


@pytest.fixture(scope="session")
def prod_project(
    new_prod_project: Callable[[str], Project], prod_secrets: dict[str, str]
) -> Project:
    """The prod stack with every secret set (`pulumi config set --secret`)."""
    project = new_prod_project("prod")
    outcome = project.run("set_config", values=prod_secrets)
    assert outcome.error is None, outcome.error
    return project


def policy_options() -> dict[str, Any]:
    return {
        "policy_packs": [str(POLICY_PACK_LAUNCHER)],
        "policy_pack_configs": [str(PROD_POLICY_CONFIG)],
    }


@pytest.fixture(scope="session")
def prod_preview(prod_project: Project) -> Outcome:
    """``pulumi preview -s prod --policy-pack policies`` of the new stack."""
    return prod_project.run("preview", **policy_options())


@pytest.fixture(scope="session")
def mock_prod_preview() -> harness.Recording:
    """The mock harness's preview of the same stack file."""
    return harness.evaluate("prod", preview=True)


def prod_config_installing_cert_manager() -> dict[str, Any]:
    """Pulumi.prod.yaml with ``certManager: install``, the value its own comment gives for a
    management cluster without cert-manager: the program then installs it with a Helm release
    instead of gating on the cluster's (a pulumi-command resource), so the engine gets through
    the releases and everything beside them before the first command gate registers."""
    data = yaml.safe_load((REPO_ROOT / "Pulumi.prod.yaml").read_text())
    data["config"][f"{PROJECT}:platform"]["management"]["existing"]["certManager"] = "install"
    return dict(data)


@pytest.fixture(scope="session")
def prod_install_preview(
    new_prod_project: Callable[[str], Project], prod_secrets: dict[str, str]
) -> Outcome:
    """``pulumi preview --policy-pack`` of the prod stack with ``certManager: install``."""
    project = new_prod_project("prod-install-cert-manager")
    (project.directory / "Pulumi.prod.yaml").write_text(
        yaml.safe_dump(prod_config_installing_cert_manager(), sort_keys=False)
    )
    outcome = project.run("set_config", values=prod_secrets)
    assert outcome.error is None, outcome.error
    return project.run("preview", **policy_options())


@pytest.fixture(scope="session")
def mock_prod_install_preview() -> harness.Recording:
    return harness.evaluate(
        "prod", preview=True, config=prod_config_installing_cert_manager()["config"]
    )


def summarize(outcome: Outcome) -> str:
    """How far an operation got, for a failure message: its steps and its errors."""
    ops: dict[str, int] = {}
    for op in outcome.ops().values():
        ops[op] = ops.get(op, 0) + 1
    return json.dumps({"steps": ops, "errors": outcome.errors()[:5], "error": outcome.error})
