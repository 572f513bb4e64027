"""TC-01: hosted control planes are up.

In the management cluster each tenant's TenantControlPlane reports ``Ready``; each tenant API
server answers ``/version`` with its configured Kubernetes version (its own, else the platform's).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.hami_evidence import Verdict, tcp_status, version_matches
from tests.acceptance.kube import API_ERRORS, describe_error, read_tenant_control_plane
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]


@pytest.mark.tc("TC-01")
def test_hosted_control_planes_ready(live: LiveStack, evidence: Evidence) -> None:
    configured = {t.name: live.platform.version_of(t) for t in live.platform.tenants}
    management = live.management_cluster()
    verdict = Verdict()
    seen: dict[str, dict[str, Any]] = {}
    for tenant in live.platform.tenants:
        out = live.outputs.tenants[tenant.name]
        row: dict[str, Any] = {"tcp": f"{out.namespace}/{out.control_plane}"}
        seen[tenant.name] = row
        try:
            obj = read_tenant_control_plane(management, out.namespace, out.control_plane)
        except API_ERRORS as exc:
            verdict.problems.append(
                f"{tenant.name}: TenantControlPlane unreadable: {describe_error(exc)}"
            )
        else:
            status, installed = tcp_status(obj)
            row.update(status=status, installedVersion=installed)
            row["endpoint"] = (obj.get("status") or {}).get("controlPlaneEndpoint", "")
            if status != "Ready":
                verdict.problems.append(f"{tenant.name}: TenantControlPlane status {status!r}")
        if tenant.name in live.unreachable:
            verdict.problems.append(f"{tenant.name}: {live.unreachable[tenant.name]}")
            continue
        try:
            git_version = live.tenants[tenant.name].git_version()
        except API_ERRORS as exc:
            verdict.problems.append(f"{tenant.name}: /version failed: {describe_error(exc)}")
            continue
        row["apiServer"] = live.tenants[tenant.name].host
        row["gitVersion"] = git_version
        if not version_matches(git_version, configured[tenant.name]):
            verdict.problems.append(
                f"{tenant.name}: API server answers {git_version}, configured "
                f"{configured[tenant.name]}"
            )
    evidence.record("configuredVersion", configured)
    evidence.record("controlPlanes", seen)
    for name, row in seen.items():
        evidence.summary(f"{name} {row.get('status', '?')} {row.get('gitVersion', '?')}")
    assert verdict.ok, verdict.explain()
