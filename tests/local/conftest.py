"""The local tier's fixtures: real etcd, kube-apiserver and kube-controller-manager on 127.0.0.1.

The tools are built from ``tests/local/tools/kube`` (pinned Go modules) by
``scripts/local_e2e/build-kube-tools.sh`` into a per-user cache; ``make local-e2e`` builds them
before pytest runs, and the ``kube_tools`` fixture runs the same script (a no-op when they are
cached), so ``pytest tests/local`` alone works too. Without Go the tier skips with one line; in
CI (``CI`` set: ``.ci/run``) it fails instead. ``GPU_PLATFORM_LOCAL_E2E_BIN`` names a directory
that already holds the tools (etcd, kube-apiserver, kube-controller-manager) and skips the build.

Fixtures other suites build on (the interface is stable):

* ``kube_tools``: ``KubeTools`` with the binaries' paths;
* ``local_etcd``: one etcd for the session (``.endpoint``);
* ``start_apiserver``: a factory ``start_apiserver(name, controllers=..., admission_plugins=...)``
  that starts another kube-apiserver on its own etcd prefix ``/<name>`` (as Kamaji runs a tenant
  on a shared datastore), stopped at the end of the session or by ``.stop()``;
* ``management_apiserver``: one such server for the session, with the controllers
  ``MANAGEMENT_CONTROLLERS`` running; ``tenant_apiserver``: another, configured as Kamaji
  configures a tenant's (``KAMAJI_ADMISSION_PLUGINS``) with ``TENANT_CONTROLLERS``.

Each server (``tests.local.kube.APIServer``) has ``.kubeconfig`` (admin, ``system:masters``),
``.server``, ``.ca_file``, ``.user_kubeconfig(user, groups)``, ``.client(user, groups)`` and
``.admin`` (REST clients).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.local.kube import (
    KAMAJI_ADMISSION_PLUGINS,
    APIServer,
    Etcd,
    remove_tree,
)
from tests.local.kube import start_apiserver as launch_apiserver

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "local_e2e" / "build-kube-tools.sh"
BIN_ENV = "GPU_PLATFORM_LOCAL_E2E_BIN"
TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager")

# kube-controller-manager's controllers the tier runs (names: k8s.io/kubernetes v1.35.0
# cmd/kube-controller-manager/names/controller_names.go:43-90): the "default" ServiceAccount of
# each namespace (the ServiceAccount admission plugin refuses a pod without it), the aggregated
# ClusterRoles (admin/edit/view are empty until this controller fills them from the
# aggregate-to-* roles: plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), and the
# type checking of ValidatingAdmissionPolicies (status.typeChecking is written by this
# controller, pkg/controller/validatingadmissionpolicystatus/controller.go, not by the API server).
TENANT_CONTROLLERS = (
    "serviceaccount-controller",
    "clusterrole-aggregation-controller",
    "validatingadmissionpolicy-status-controller",
)
MANAGEMENT_CONTROLLERS = (*TENANT_CONTROLLERS, "namespace-controller")


def require(ok: bool, reason: str) -> None:
    """Skip with one line, or fail under CI, where .ci/run provides everything."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run this tier: .ci/run installs Go's toolchain)")
    pytest.skip(reason)


@dataclass(frozen=True)
class KubeTools:
    bin: Path

    @property
    def etcd(self) -> Path:
        return self.bin / "etcd"

    @property
    def apiserver(self) -> Path:
        return self.bin / "kube-apiserver"

    @property
    def controller_manager(self) -> Path:
        return self.bin / "kube-controller-manager"


@pytest.fixture(scope="session")
def kube_tools() -> KubeTools:
    explicit = os.environ.get(BIN_ENV)
    if explicit:
        bin_dir = Path(explicit)
    else:
        built = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False
        )
        if built.returncode == 3:
            require(False, built.stderr.strip().splitlines()[-1])
        if built.returncode != 0:
            pytest.fail(f"{BUILD_SCRIPT.name} failed ({built.returncode}):\n{built.stderr[-3000:]}")
        bin_dir = Path(
            subprocess.run(
                ["bash", str(BUILD_SCRIPT), "--print-dir"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    missing = [t for t in TOOLS if not os.access(bin_dir / t, os.X_OK)]
    require(not missing, f"local tier tools missing in {bin_dir}: {', '.join(missing)}")
    return KubeTools(bin_dir)


@pytest.fixture(scope="session")
def local_workdir() -> Iterator[Path]:
    """The session's temporary directory (certificates, data, logs), removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="gpu-platform-local-e2e-"))
    yield directory
    remove_tree(directory)


@pytest.fixture(scope="session")
def local_etcd(kube_tools: KubeTools, local_workdir: Path) -> Iterator[Etcd]:
    etcd = Etcd.start(kube_tools.etcd, local_workdir / "etcd")
    yield etcd
    etcd.stop()


StartAPIServer = Callable[..., APIServer]


@pytest.fixture(scope="session")
def start_apiserver(
    kube_tools: KubeTools, local_etcd: Etcd, local_workdir: Path
) -> Iterator[StartAPIServer]:
    started: list[APIServer] = []
    names: set[str] = set()

    def start(
        name: str,
        *,
        controllers: Sequence[str] = (),
        admission_plugins: Sequence[str] = (),
        extra_args: Sequence[str] = (),
    ) -> APIServer:
        if name in names:
            raise ValueError(f"an API server named {name!r} was already started (etcd prefix)")
        names.add(name)
        server = launch_apiserver(
            name,
            apiserver=kube_tools.apiserver,
            etcd=local_etcd,
            directory=local_workdir / name,
            controller_manager=kube_tools.controller_manager,
            controllers=controllers,
            admission_plugins=admission_plugins,
            extra_args=extra_args,
        )
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture(scope="session")
def management_apiserver(start_apiserver: StartAPIServer) -> APIServer:
    """A management cluster's API server for the session (plain defaults, RBAC)."""
    return start_apiserver("management", controllers=MANAGEMENT_CONTROLLERS)


@pytest.fixture(scope="session")
def tenant_apiserver(start_apiserver: StartAPIServer) -> APIServer:
    """A tenant's API server as Kamaji runs one: on the same etcd under its own prefix, with
    Kamaji's default admission plugins."""
    return start_apiserver(
        "tenant",
        controllers=TENANT_CONTROLLERS,
        admission_plugins=KAMAJI_ADMISSION_PLUGINS,
    )
