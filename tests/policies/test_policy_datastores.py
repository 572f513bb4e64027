"""tenant-datastore-separation over TenantControlPlanes, KamajiControlPlanes and DataStores."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_platform_policies.pack import validate_datastores
from pulumi_policy import PolicyResource

from tests.policies.builders import (
    DATASTORE,
    GPU_TENANT,
    KCP,
    TCP,
    U,
    policy_resource,
    run_stack,
    tcp,
)


def tenant_tcp(name: str, **kwargs: Any) -> tuple[PolicyResource, PolicyResource]:
    """A GpuTenant component and its TCP (tenant found through the parent)."""
    component = policy_resource(GPU_TENANT, name, {})
    return component, policy_resource(TCP, f"{name}-tcp", tcp(name, **kwargs), parent=component)


def kcp(name: str, data_store: Any, schema: Any, username: Any) -> PolicyResource:
    spec: dict[str, Any] = {"version": "v1.35.0", "addons": {"konnectivity": {}}}
    for key, value in (
        ("dataStoreName", data_store),
        ("dataStoreSchema", schema),
        ("dataStoreUsername", username),
    ):
        if value is not None:
            spec[key] = value
    props = {"metadata": {"name": name, "labels": {"gpu-platform.io/tenant": name}}, "spec": spec}
    return policy_resource(KCP, name, props)


def datastore(name: str, driver: str) -> PolicyResource:
    return policy_resource(
        DATASTORE,
        name,
        {"metadata": {"name": name}, "spec": {"driver": driver, "endpoints": ["x:1"]}},
    )


def check(*resources: PolicyResource, dedicated: bool = False) -> list[tuple[str, str | None]]:
    return run_stack(validate_datastores, resources, {"requireDedicatedDataStore": dedicated})


def test_the_labs_shared_etcd_with_distinct_schemas_and_users_passes() -> None:
    assert check(*tenant_tcp("tenant-a"), *tenant_tcp("tenant-b")) == []


def test_the_prods_dedicated_datastores_pass_with_require_dedicated() -> None:
    resources = [
        kcp("team-vision", "team-vision-etcd", "team_vision", "team_vision"),
        kcp("team-llm", "team-llm-etcd", "team_llm", "team_llm"),
    ]
    assert check(*resources, dedicated=True) == []


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("spec.dataStore", {"data_store": None}),
        ("spec.dataStoreSchema", {"schema": False}),
        ("spec.dataStoreUsername", {"username": False}),
        ("spec.dataStoreSchema", {"schema": ""}),
    ],
)
def test_each_binding_must_be_named_explicitly(field: str, kwargs: dict[str, Any]) -> None:
    component, plane = tenant_tcp("tenant-a", **kwargs)
    found = check(component, plane)
    assert len(found) == 1
    message, where = found[0]
    assert where == plane.urn
    assert "does not name its" in message
    assert f"({field})" in message
    assert "(tenant tenant-a)" in message


def test_kamaji_control_planes_use_data_store_name() -> None:
    found = check(kcp("team-llm", None, "team_llm", "team_llm"))
    assert len(found) == 1
    assert "(spec.dataStoreName)" in found[0][0]


def test_a_schema_shared_by_two_tenants_is_reported_on_both() -> None:
    a = tenant_tcp("tenant-a", schema="shared")
    b = tenant_tcp("tenant-b", schema="shared")
    found = check(*a, *b)
    assert sorted(where or "" for _m, where in found) == sorted([a[1].urn, b[1].urn])
    assert all("spec.dataStoreSchema 'shared'" in m for m, _w in found)
    assert any("as do tenant-b" in m for m, _w in found)


def test_a_username_shared_by_two_tenants_is_reported() -> None:
    found = check(*tenant_tcp("tenant-a", username="app"), *tenant_tcp("tenant-b", username="app"))
    assert len(found) == 2
    assert all("spec.dataStoreUsername 'app'" in m for m, _w in found)


def test_schemas_are_unique_across_tcps_and_kcps() -> None:
    found = check(*tenant_tcp("tenant-a", schema="x"), kcp("team-b", "etcd-b", "x", "team_b"))
    assert len(found) == 2


def test_a_nats_datastore_serving_two_tenants_is_a_violation() -> None:
    nats = datastore("nats-shared", "NATS")
    found = check(
        nats,
        *tenant_tcp("tenant-a", data_store="nats-shared"),
        *tenant_tcp("tenant-b", data_store="nats-shared"),
    )
    assert len(found) == 1
    message, where = found[0]
    assert where == nats.urn
    assert "NATS DataStore nats-shared serves tenants tenant-a, tenant-b" in message


def test_a_nats_datastore_serving_one_tenant_passes() -> None:
    assert check(datastore("nats-a", "NATS"), *tenant_tcp("tenant-a", data_store="nats-a")) == []


def test_an_etcd_datastore_may_be_shared_unless_dedicated_is_required() -> None:
    resources = [
        datastore("shared-etcd", "etcd"),
        *tenant_tcp("tenant-a", data_store="shared-etcd"),
        *tenant_tcp("tenant-b", data_store="shared-etcd"),
    ]
    assert check(*resources) == []
    found = check(*resources, dedicated=True)
    assert len(found) == 2
    assert all("shares DataStore shared-etcd" in m for m, _w in found)
    assert all("requireDedicatedDataStore" in m for m, _w in found)


def test_require_dedicated_accepts_a_string_flag() -> None:
    resources = [*tenant_tcp("tenant-a"), *tenant_tcp("tenant-b")]
    found = run_stack(validate_datastores, resources, {"requireDedicatedDataStore": "true"})
    assert len(found) == 2


def test_unknown_values_are_not_violations() -> None:
    resources = [
        *tenant_tcp("tenant-a", data_store=U, schema=U, username=U),
        *tenant_tcp("tenant-b", data_store=U, schema=U, username=U),
    ]
    assert check(*resources, dedicated=True) == []
    whole_spec = tcp("tenant-c")
    whole_spec["spec"] = U
    assert check(policy_resource(TCP, "c", whole_spec)) == []


def test_control_planes_without_a_tenant_are_told_apart_by_name() -> None:
    a = policy_resource(TCP, "a", tcp("a", schema="same"))
    b = policy_resource(TCP, "b", tcp("b", schema="same"))
    found = check(a, b)
    assert len(found) == 2


def test_the_programs_read_of_a_control_planes_uid_is_not_a_second_control_plane() -> None:
    """GpuTenant reads each control plane back by its ID for its uid (``<name>-identity``, same
    type): in a first preview the read is skipped and has no outputs (pulumi/pulumi v3.259.0
    pkg/resource/deploy/step.go:1314-1320), which must not read as a TCP naming no DataStore."""
    component, control_plane = tenant_tcp("tenant-a")
    name = "tenant-a-control-plane-identity"
    skipped = policy_resource(TCP, name, {}, parent=component)
    assert check(component, control_plane, skipped) == []
    live = policy_resource(TCP, name, tcp("tenant-a"), parent=component)
    assert check(component, control_plane, live) == []
