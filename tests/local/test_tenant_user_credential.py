"""``make tenant-user`` (scripts/tenant/user-kubeconfig.sh, issue 41) against a real tenant API
server: the kubeconfig it writes from the tenant's admin one lets the team member edit the
namespaces named and nothing else, keeps nothing of the admin's credentials, and the script is
idempotent and refuses what it should with one line.

Run with the pinned kubectl of the tier (built with kube-apiserver, tests/local/tools/kube), on
the session's tenant API server (RBAC, the clusterrole-aggregation controller that fills
``edit``, the service-account token signer).
"""

from __future__ import annotations

import os
import stat
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from components.metrics import self_view, usage_publisher
from tests.local.conftest import KubeTools, require
from tests.local.kube import APIServer, wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tenant" / "user-kubeconfig.sh"
MEMBER = "alice"
EDITABLE = ("member-ml", "member-inference")
OTHER = "member-other"


def _run(
    tools: KubeTools, server: APIServer, output: Path, namespaces: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{tools.bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "TENANT_KUBECONFIG": str(server.kubeconfig),
        "TEAM_MEMBER": MEMBER,
        "NAMESPACES": namespaces,
        "OUTPUT": str(output),
        "TOKEN_DURATION": "1h",
        **extra,
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _can(tools: KubeTools, kubeconfig: Path, *args: str) -> str:
    result = subprocess.run(
        [str(tools.kubectl), "--kubeconfig", str(kubeconfig), "auth", "can-i", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.stdout.strip()


@pytest.fixture(scope="module")
def member_kubeconfig(
    kube_tools: KubeTools, tenant_apiserver: APIServer, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    require(kube_tools.kubectl.is_file(), f"kubectl not built in {kube_tools.bin}")
    admin = tenant_apiserver.admin
    for name in (*EDITABLE, OTHER):
        admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # The aggregated `edit` role is filled by the controller manager a moment after start.
    wait_for(
        "the edit ClusterRole's aggregated rules",
        lambda: (admin.get("rbac.authorization.k8s.io/v1", "ClusterRole", "edit") or {}).get(
            "rules"
        ),
    )
    output = tmp_path_factory.mktemp("member") / f"tenant-{MEMBER}.yaml"
    result = _run(kube_tools, tenant_apiserver, output, ",".join(EDITABLE))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(output)
    return output


def test_the_member_may_edit_the_namespaces_named_and_nothing_else(
    kube_tools: KubeTools, member_kubeconfig: Path
) -> None:
    for namespace in EDITABLE:
        assert _can(kube_tools, member_kubeconfig, "create", "pods", "-n", namespace) == "yes"
        assert _can(kube_tools, member_kubeconfig, "create", "secrets", "-n", namespace) == "yes"
        # `edit` holds no RBAC: the member cannot grant themself more.
        assert (
            _can(kube_tools, member_kubeconfig, "create", "rolebindings", "-n", namespace) == "no"
        )
    assert _can(kube_tools, member_kubeconfig, "create", "pods", "-n", OTHER) == "no"
    assert _can(kube_tools, member_kubeconfig, "create", "pods", "-n", "kube-system") == "no"
    assert _can(kube_tools, member_kubeconfig, "list", "nodes") == "no"
    assert (
        _can(
            kube_tools,
            member_kubeconfig,
            "create",
            "validatingadmissionpolicies.admissionregistration.k8s.io",
        )
        == "no"
    )


def test_the_kubeconfig_is_private_and_holds_nothing_of_the_admins(member_kubeconfig: Path) -> None:
    assert stat.S_IMODE(member_kubeconfig.stat().st_mode) == 0o600
    config = yaml.safe_load(member_kubeconfig.read_text())
    (user,) = config["users"]
    assert set(user["user"]) == {"token"}
    (cluster,) = config["clusters"]
    assert set(cluster["cluster"]) == {"server", "certificate-authority-data"}
    assert config["contexts"][0]["context"]["namespace"] == EDITABLE[0]


def test_a_second_run_is_refused_without_overwrite_and_renews_the_token_with_it(
    kube_tools: KubeTools, tenant_apiserver: APIServer, member_kubeconfig: Path
) -> None:
    before = member_kubeconfig.read_text()
    refused = _run(kube_tools, tenant_apiserver, member_kubeconfig, ",".join(EDITABLE))
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith("exists: remove it or set OVERWRITE=1")
    assert member_kubeconfig.read_text() == before
    again = _run(kube_tools, tenant_apiserver, member_kubeconfig, ",".join(EDITABLE), OVERWRITE="1")
    assert again.returncode == 0, again.stderr
    assert member_kubeconfig.read_text() != before  # a fresh token
    assert _can(kube_tools, member_kubeconfig, "create", "pods", "-n", EDITABLE[0]) == "yes"


def test_a_missing_namespace_or_a_bad_name_is_one_line(
    kube_tools: KubeTools, tenant_apiserver: APIServer, tmp_path: Path
) -> None:
    missing = _run(kube_tools, tenant_apiserver, tmp_path / "x.yaml", "member-nowhere")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        "[user-kubeconfig] namespace 'member-nowhere' does not exist in the tenant: create it "
        "first (kubectl create namespace member-nowhere)"
    ]
    bad = _run(
        kube_tools, tenant_apiserver, tmp_path / "y.yaml", EDITABLE[0], TEAM_MEMBER="Alice_1"
    )
    assert bad.returncode == 1
    assert "is not a DNS label" in bad.stderr
    assert not (tmp_path / "x.yaml").exists()
    assert not (tmp_path / "y.yaml").exists()


def test_every_member_may_get_the_tenants_published_usage_and_change_nothing(
    kube_tools: KubeTools, tenant_apiserver: APIServer, member_kubeconfig: Path
) -> None:
    """docs/metrics.md "Your own usage, as a tenant": the Role and binding the program puts in
    each tenant let every authenticated user — this namespace-scoped member too — get the usage
    ConfigMap, and nothing else there: no write, no list, no other ConfigMap."""
    admin = tenant_apiserver.admin
    admin.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self_view.NAMESPACE}}
    )
    for manifest in usage_publisher.tenant_reader("tenant-a"):
        admin.apply(manifest)
    end = datetime(2026, 12, 6, 5, 17, tzinfo=UTC)
    entries = [self_view.window_usage("tenant-a", w, [], None) for w in self_view.windows(end)]
    admin.apply(self_view.config_map("tenant-a", end, entries))
    other = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "1"}}
    admin.apply({**other, "metadata": {"name": "other", "namespace": self_view.NAMESPACE}})
    ns = ("-n", self_view.NAMESPACE)
    wait_for(
        "the reader binding to take effect",
        lambda: _can(kube_tools, member_kubeconfig, "get", "configmaps/gpu-usage", *ns) == "yes",
    )
    for verb in ("update", "patch", "delete"):
        assert _can(kube_tools, member_kubeconfig, verb, "configmaps/gpu-usage", *ns) == "no"
    assert _can(kube_tools, member_kubeconfig, "list", "configmaps", *ns) == "no"
    assert _can(kube_tools, member_kubeconfig, "get", "configmaps/other", *ns) == "no"
    read = subprocess.run(
        [
            str(kube_tools.kubectl),
            "--kubeconfig",
            str(member_kubeconfig),
            "get",
            "configmap",
            self_view.CONFIG_MAP,
            *ns,
            "-o",
            "jsonpath={.data.usage\\.txt}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.startswith("GPU usage of tenant tenant-a, published 2026-12-06T05:17:00Z")
