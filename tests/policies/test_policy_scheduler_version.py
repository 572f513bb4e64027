"""hami-scheduler-version: HAMi's kube-scheduler tag equals the tenant's Kubernetes version."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_platform_policies.pack import validate_scheduler_version
from pulumi_policy import PolicyResource

from tests.policies.builders import (
    GPU_TENANT,
    KCP,
    RELEASE,
    TCP,
    U,
    hami_release,
    hami_values,
    policy_resource,
    run_stack,
    tcp,
)


def tenant(
    version: Any = "v1.35.0", tag: Any = "v1.35.0", name: str = "tenant-a"
) -> list[PolicyResource]:
    component = policy_resource(GPU_TENANT, name, {})
    plane = policy_resource(TCP, f"{name}-tcp", tcp(name, version=version), parent=component)
    release = policy_resource(
        RELEASE, f"{name}-hami", hami_release(hami_values(tag=tag)), parent=component,
        provider_name=f"{name}-provider",
    )  # fmt: skip
    return [component, plane, release]


def check(*resources: PolicyResource) -> list[tuple[str, str | None]]:
    return run_stack(validate_scheduler_version, resources)


def test_matching_tag_passes() -> None:
    assert check(*tenant()) == []


def test_mismatched_tag_is_a_violation_naming_the_version() -> None:
    resources = tenant(tag="v1.34.2")
    found = check(*resources)
    assert len(found) == 1
    message, where = found[0]
    assert where == resources[2].urn
    assert (
        "scheduler.kubeScheduler.image.tag is v1.34.2 but the tenant runs Kubernetes v1.35.0"
        in message
    )
    assert "set scheduler.kubeScheduler.image.tag to v1.35.0" in message


def test_missing_tag_is_a_violation() -> None:
    found = check(*tenant(tag=None))
    assert len(found) == 1
    assert "does not pin scheduler.kubeScheduler.image.tag" in found[0][0]


def test_legacy_image_tag_key_is_named() -> None:
    resources = tenant(tag=None)
    values = hami_values(tag=None)
    values["scheduler"]["kubeScheduler"] = {"imageTag": "v1.35.0"}
    resources[2] = policy_resource(
        RELEASE, "tenant-a-hami", hami_release(values), provider_name="tenant-a-provider"
    )
    found = check(*resources)
    assert len(found) == 1
    assert "imageTag 'v1.35.0' is ignored" in found[0][0]


def test_each_tenant_is_paired_with_its_own_control_plane() -> None:
    a = tenant(version="v1.35.0", tag="v1.35.0", name="tenant-a")
    b = tenant(version="v1.34.1", tag="v1.35.0", name="tenant-b")
    found = check(*a, *b)
    assert [where for _m, where in found] == [b[2].urn]


def test_kamaji_control_plane_version() -> None:
    kcp = policy_resource(
        KCP, "team", {"metadata": {"name": "team", "labels": {"gpu-platform.io/tenant": "team"}},
                      "spec": {"version": "v1.35.0"}},
    )  # fmt: skip
    good = policy_resource(RELEASE, "h", hami_release(hami_values()), provider_name="team-provider")
    bad = policy_resource(
        RELEASE, "h", hami_release(hami_values(tag="v1.33.0")), provider_name="team-provider"
    )
    assert check(kcp, good) == []
    assert len(check(kcp, bad)) == 1


def test_release_without_a_control_plane_of_its_tenant_is_not_judged() -> None:
    release = policy_resource(
        RELEASE, "h", hami_release(hami_values(tag="v1.20.0")), provider_name="x-provider"
    )
    assert check(release) == []


def test_kube_scheduler_disabled_is_not_judged() -> None:
    resources = tenant(tag="v1.20.0")
    values = hami_values(tag="v1.20.0")
    values["scheduler"]["kubeScheduler"]["enabled"] = False
    resources[2] = policy_resource(
        RELEASE, "h", hami_release(values), provider_name="tenant-a-provider"
    )
    assert check(*resources) == []


@pytest.mark.parametrize(("version", "tag"), [(U, "v1.20.0"), ("v1.35.0", U)])
def test_unknown_values_are_not_violations(version: Any, tag: Any) -> None:
    assert check(*tenant(version=version, tag=tag)) == []
