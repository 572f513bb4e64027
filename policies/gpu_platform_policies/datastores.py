"""tenant-datastore-separation: every tenant's control-plane state is kept apart.

Why: Kamaji defaults ``dataStore``, ``dataStoreSchema`` and ``dataStoreUsername`` (immutable once
set) to the TCP's UID and does not enforce their uniqueness; two tenants with the same schema or
username on one DataStore would share an etcd prefix or a database. A NATS DataStore serves one
tenant only (a second TCP fails at reconcile time). Production may require a DataStore per tenant
(policy config ``requireDedicatedDataStore``). Platform.md §3 and §4 pitfall 9.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from gpu_platform_policies.common import Violation
from gpu_platform_policies.kube import DATASTORE_TYPE, ControlPlane, control_plane
from gpu_platform_policies.model import Stack
from gpu_platform_policies.props import UNKNOWN, get

REQUIRE_DEDICATED_KEY: Final = "requireDedicatedDataStore"
NATS: Final = "NATS"


def _tenant_key(stack: Stack, cp: ControlPlane) -> str:
    """The tenant a control plane serves, or the control plane itself when no tenant is known."""
    tenant = stack.tenant_of(cp.resource)
    if isinstance(tenant, str):
        return tenant
    return cp.resource.describe()


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _others(tenants: Iterable[str], me: str) -> str:
    return ", ".join(sorted(t for t in set(tenants) if t != me))


def check_datastores(stack: Stack, require_dedicated: bool = False) -> list[Violation]:
    """All tenant-datastore-separation violations of a stack."""
    violations: list[Violation] = []
    planes = [cp for cp in (control_plane(r) for r in stack) if cp is not None]
    keyed = [(cp, _tenant_key(stack, cp)) for cp in planes]

    for cp, tenant in keyed:
        for what, value, key in (
            ("DataStore", cp.data_store, cp.data_store_key),
            ("schema", cp.schema, "spec.dataStoreSchema"),
            ("username", cp.username, "spec.dataStoreUsername"),
        ):
            if value is UNKNOWN or _text(value):
                continue
            violations.append(
                Violation(
                    f"{cp.resource.describe()} (tenant {tenant}) does not name its {what} "
                    f"({key}); Kamaji then picks a default (the control plane's UID) that cannot "
                    f"be reviewed or changed later. Set {key} explicitly from the tenant's "
                    "dataStore settings",
                    cp.resource.urn,
                )
            )

    for what, key in (("schema", "spec.dataStoreSchema"), ("username", "spec.dataStoreUsername")):
        users: dict[str, set[str]] = {}
        for cp, tenant in keyed:
            value = _text(cp.schema if what == "schema" else cp.username)
            if value is not None:
                users.setdefault(value, set()).add(tenant)
        for cp, tenant in keyed:
            value = _text(cp.schema if what == "schema" else cp.username)
            if value is None or len(users[value]) < 2:
                continue
            violations.append(
                Violation(
                    f"{cp.resource.describe()} (tenant {tenant}) uses {key} {value!r}, as do "
                    f"{_others(users[value], tenant)}; Kamaji does not keep them apart, so the "
                    f"tenants would share one etcd prefix/database or user. Give every tenant its "
                    f"own {what}",
                    cp.resource.urn,
                )
            )

    stores: dict[str, set[str]] = {}
    for cp, tenant in keyed:
        name = _text(cp.data_store)
        if name is not None:
            stores.setdefault(name, set()).add(tenant)

    for resource in stack.of_type(DATASTORE_TYPE):
        driver = get(resource.props, "spec", "driver")
        name = resource.k8s_name
        if driver != NATS or not isinstance(name, str):
            continue
        tenants = stores.get(name, set())
        if len(tenants) > 1:
            violations.append(
                Violation(
                    f"NATS DataStore {name} serves tenants {', '.join(sorted(tenants))}; a NATS "
                    "DataStore serves one tenant only (the second control plane fails to "
                    "reconcile). Give each tenant its own DataStore",
                    resource.urn,
                )
            )

    if require_dedicated:
        for cp, tenant in keyed:
            name = _text(cp.data_store)
            if name is None or len(stores[name]) < 2:
                continue
            violations.append(
                Violation(
                    f"{cp.resource.describe()} (tenant {tenant}) shares DataStore {name} with "
                    f"{_others(stores[name], tenant)}, but this stack's policy config sets "
                    f"{REQUIRE_DEDICATED_KEY}: give the tenant a dedicated DataStore "
                    "(dataStore.dedicated in the stack config)",
                    cp.resource.urn,
                )
            )
    return violations
