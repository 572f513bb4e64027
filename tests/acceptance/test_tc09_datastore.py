"""TC-09 (beyond the report): datastore separation, seen from the management cluster.

Each tenant's TenantControlPlane reports its own ``status.storage.setup.schema`` (and user), as
configured in the stack file, no two alike; each DataStore's ``status.usedBy`` lists every
TenantControlPlane that uses it (``namespace/name``). Field names from the pinned Kamaji CRDs.
"""

from __future__ import annotations

import pytest

from tests.acceptance.hami_evidence import TcpStorage, Verdict, judge_datastores, tcp_storage
from tests.acceptance.kube import (
    API_ERRORS,
    describe_error,
    list_datastores,
    read_tenant_control_plane,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]


@pytest.mark.tc("TC-09")
def test_datastore_separation(live: LiveStack, evidence: Evidence) -> None:
    management = live.management_cluster()
    verdict = Verdict()
    storages: list[TcpStorage] = []
    for tenant in live.platform.tenants:
        out = live.outputs.tenants[tenant.name]
        try:
            obj = read_tenant_control_plane(management, out.namespace, out.control_plane)
        except API_ERRORS as exc:
            verdict.problems.append(
                f"{tenant.name}: TenantControlPlane unreadable: {describe_error(exc)}"
            )
            continue
        storages.append(tcp_storage(tenant.name, obj))
    used_by = {
        str(item["metadata"]["name"]): list((item.get("status") or {}).get("usedBy") or [])
        for item in list_datastores(management)
    }
    expected = {
        t.name: (t.data_store.schema_name, t.data_store.username) for t in live.platform.tenants
    }
    judged = judge_datastores(storages, used_by, expected=expected)
    verdict.problems.extend(judged.problems)
    evidence.record("datastores", judged.facts)
    for storage in storages:
        evidence.summary(
            f"{storage.tenant}: {storage.datastore}/{storage.schema} "
            f"({'listed' if storage.key in used_by.get(storage.datastore, []) else 'NOT listed'})"
        )
    assert verdict.ok, verdict.explain()
