"""tenant-webhook-path: Konnectivity, webhook admission plugins, and prod's Fail policy."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_platform_policies.pack import validate_webhook_path
from pulumi_policy import PolicyResource

from tests.policies.builders import (
    A100,
    CONFIG_MAP,
    GPU_TENANT,
    KCP,
    NAMESPACE,
    RELEASE,
    TCP,
    U,
    hami_release,
    hami_values,
    inventory,
    policy_resource,
    run_stack,
    tcp,
)

PROD = {"environment": "prod"}
LAB = {"environment": "lab"}


def plane(konnectivity: Any = True, **kwargs: Any) -> PolicyResource:
    return policy_resource(
        TCP, "tenant-a", tcp("tenant-a", konnectivity=konnectivity, tenant="tenant-a", **kwargs)
    )


def gpu_inventory() -> PolicyResource:
    return policy_resource(CONFIG_MAP, "inv", inventory("tenant-a", "a100", [A100]))


def release(values: dict[str, Any], tenant: str = "tenant-a") -> PolicyResource:
    return policy_resource(
        RELEASE, f"{tenant}-hami", hami_release(values), provider_name=f"{tenant}-provider"
    )


def check(
    *resources: PolicyResource, config: dict[str, Any] | None = None
) -> list[tuple[str, str | None]]:
    return run_stack(validate_webhook_path, resources, config if config is not None else LAB)


# --------------------------------------------------------------------------- konnectivity


def test_gpu_tenant_with_konnectivity_passes() -> None:
    assert check(plane(), gpu_inventory()) == []


def test_gpu_tenant_without_konnectivity_is_a_violation() -> None:
    cp = plane(konnectivity=None)
    found = check(cp, gpu_inventory())
    assert len(found) == 1
    message, where = found[0]
    assert where == cp.urn
    assert "has GPU pools but no Konnectivity" in message
    assert "spec.addons.konnectivity" in message


def test_konnectivity_with_defaults_only_counts_as_enabled() -> None:
    assert check(plane(konnectivity={}), gpu_inventory()) == []


def test_tenant_without_gpu_pools_needs_no_konnectivity() -> None:
    assert check(plane(konnectivity=None)) == []


def test_gpu_pools_are_also_found_from_worker_pool_components_and_hami() -> None:
    tenant = policy_resource(GPU_TENANT, "tenant-a", {})
    pool = policy_resource("gpu-platform:index:GpuWorkerPool", "tenant-a-a100", {}, parent=tenant)
    unlabelled = policy_resource(TCP, "cp", tcp("tenant-a", konnectivity=None), parent=tenant)
    assert len(check(tenant, pool, unlabelled)) == 1
    assert len(check(plane(konnectivity=None), release(hami_values()))) == 1


def test_kamaji_control_plane_konnectivity() -> None:
    props = {
        "metadata": {"name": "team", "labels": {"gpu-platform.io/tenant": "tenant-a"}},
        "spec": {"version": "v1.35.0", "addons": {"coreDNS": {}}},
    }
    found = check(policy_resource(KCP, "team", props), gpu_inventory())
    assert len(found) == 1
    assert (
        "KamajiControlPlane team (tenant tenant-a) has GPU pools but no Konnectivity" in found[0][0]
    )


@pytest.mark.parametrize("konnectivity", [U, {"server": U}])
def test_unknown_konnectivity_is_not_a_violation(konnectivity: Any) -> None:
    assert check(plane(konnectivity=konnectivity), gpu_inventory()) == []


def test_unknown_addons_are_not_a_violation() -> None:
    props = tcp("tenant-a", tenant="tenant-a")
    props["spec"]["addons"] = U
    assert check(policy_resource(TCP, "cp", props), gpu_inventory()) == []


# ------------------------------------------------------------------ admission controllers


def test_override_keeping_both_webhook_plugins_passes() -> None:
    plugins = ["NamespaceLifecycle", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"]
    assert check(plane(admission_controllers=plugins)) == []


@pytest.mark.parametrize(
    ("plugins", "missing"),
    [
        (["NamespaceLifecycle", "ValidatingAdmissionWebhook"], "MutatingAdmissionWebhook"),
        (["MutatingAdmissionWebhook"], "ValidatingAdmissionWebhook"),
        ([], "MutatingAdmissionWebhook and ValidatingAdmissionWebhook"),
    ],
)
def test_override_dropping_a_webhook_plugin_is_a_violation(
    plugins: list[str], missing: str
) -> None:
    found = check(plane(admission_controllers=plugins))
    assert len(found) == 1
    assert f"spec.kubernetes.admissionControllers without {missing}" in found[0][0]


def test_kamaji_control_plane_admission_controllers() -> None:
    props = {
        "metadata": {"name": "team"},
        "spec": {"version": "v1.35.0", "admissionControllers": ["LimitRanger"]},
    }
    found = check(policy_resource(KCP, "team", props))
    assert len(found) == 1
    assert "spec.admissionControllers without" in found[0][0]


def test_unknown_admission_controllers_are_not_a_violation() -> None:
    assert check(plane(admission_controllers=U)) == []
    assert check(plane(admission_controllers=["NamespaceLifecycle", U])) == []


# -------------------------------------------------------------------------- prod: webhook


def test_prod_release_with_fail_and_kube_system_excluded_passes() -> None:
    assert check(plane(), release(hami_values()), config=PROD) == []


@pytest.mark.parametrize(
    ("policy", "shown"), [(None, "absent (chart default Ignore)"), ("Ignore", "'Ignore'")]
)
def test_prod_needs_failure_policy_fail(policy: Any, shown: str) -> None:
    hami = release(hami_values(failure_policy=policy))
    found = check(plane(), hami, config=PROD)
    assert len(found) == 1
    message, where = found[0]
    assert where == hami.urn
    assert f"scheduler.admissionWebhook.failurePolicy is {shown}" in message
    assert "failurePolicy: Fail" in message


def test_lab_does_not_require_failure_policy_fail() -> None:
    assert check(plane(), release(hami_values(failure_policy="Ignore", whitelist=None))) == []
    assert (
        check(plane(), release(hami_values(failure_policy="Ignore", whitelist=None)), config={})
        == []
    )


def test_prod_needs_kube_system_excluded() -> None:
    found = check(plane(), release(hami_values(whitelist=["calico-system"])), config=PROD)
    assert len(found) == 1
    assert "the webhook also gates kube-system" in found[0][0]
    assert "whitelistNamespaces" in found[0][0]


def test_a_labelled_kube_system_namespace_of_the_same_tenant_excludes_it() -> None:
    hami = release(hami_values(whitelist=None))
    labelled = {"metadata": {"name": "kube-system", "labels": {"hami.io/webhook": "ignore"}}}
    own = policy_resource(NAMESPACE, "a-kube-system", labelled, provider_name="tenant-a-provider")
    other = policy_resource(NAMESPACE, "b-kube-system", labelled, provider_name="tenant-b-provider")
    assert check(plane(), hami, own, config=PROD) == []
    assert len(check(plane(), hami, other, config=PROD)) == 1


def test_a_namespace_selector_excluding_kube_system_counts() -> None:
    values = hami_values(whitelist=None)
    values["scheduler"]["admissionWebhook"]["namespaceSelector"] = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
        ]
    }
    assert check(plane(), release(values), config=PROD) == []


def test_system_namespaces_are_configurable() -> None:
    config = {**PROD, "systemNamespaces": ["kube-system", "calico-system"]}
    found = check(plane(), release(hami_values()), config=config)
    assert len(found) == 1
    assert "gates calico-system" in found[0][0]


def test_a_disabled_webhook_is_a_violation_in_prod() -> None:
    values = hami_values()
    values["scheduler"]["admissionWebhook"]["enabled"] = False
    found = check(plane(), release(values), config=PROD)
    assert len(found) == 1
    assert "disables HAMi's admission webhook" in found[0][0]


@pytest.mark.parametrize(
    "values",
    [
        U,
        {"scheduler": U},
        {"scheduler": {"admissionWebhook": U}},
        hami_values(failure_policy=U, whitelist=[U]),
    ],
)
def test_unknown_release_values_are_not_violations(values: Any) -> None:
    assert check(plane(), release(values), config=PROD) == []
