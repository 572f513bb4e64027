"""The pack's plumbing: plain properties with explicit unknowns, numbers, tenant resolution."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_platform_policies import labels as pack_labels
from gpu_platform_policies.model import (
    Resource,
    Stack,
    from_policy_resource,
    from_validation_args,
    tenant_of,
    urn_name,
    urn_type,
)
from gpu_platform_policies.props import (
    UNKNOWN,
    contains_unknown,
    get,
    is_unknown,
    plain,
    quantity_text,
    walk_strings,
    whole_number,
)
from pulumi_policy import Secret
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UnknownValueError, unknown_checking_proxy

from components import labels as program_labels
from tests.policies.builders import (
    DEPLOYMENT,
    GPU_TENANT,
    U,
    policy_resource,
    resource_args,
    urn,
)


def test_plain_copies_proxies_and_makes_unknowns_explicit() -> None:
    props = unknown_checking_proxy(
        {"a": U, "b": [1.0, U, {"c": UNKNOWN_NUMBER_VALUE}], "d": {"e": "x"}}
    )
    with pytest.raises(UnknownValueError):
        _ = props["a"]  # what a naive policy would hit during preview
    assert plain(props) == {"a": UNKNOWN, "b": [1.0, UNKNOWN, {"c": UNKNOWN}], "d": {"e": "x"}}


def test_plain_unwraps_secrets() -> None:
    assert plain({"k": Secret({"v": [Secret("s")]})}) == {"k": {"v": ["s"]}}


def test_unknown_is_falsy_and_recognised() -> None:
    assert not UNKNOWN
    assert is_unknown(UNKNOWN)
    assert is_unknown(U)
    assert not is_unknown("x")
    assert not is_unknown(None)
    assert contains_unknown({"a": [1, {"b": UNKNOWN}]})
    assert not contains_unknown({"a": [1]})


def test_get_walks_dicts_and_lists_and_stops_at_unknowns() -> None:
    value = {"a": {"b": [{"c": 1}]}, "u": UNKNOWN}
    assert get(value, "a", "b", 0, "c") == 1
    assert get(value, "a", "x") is None
    assert get(value, "a", "b", 3) is None
    assert get(value, "u", "deeper") is UNKNOWN


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (3.0, 3), ("3", 3), (" 20000 ", 20000), (1.5, None), ("1.5", None), ("3Gi", None),
     ("-1", None), (-1, None), (True, None), (None, None), (UNKNOWN, None)],
)  # fmt: skip
def test_whole_number(value: Any, expected: int | None) -> None:
    assert whole_number(value) == expected


def test_quantity_text_drops_json_float_noise() -> None:
    assert quantity_text(20000.0) == "20000"
    assert quantity_text(1.5) == "1.5"
    assert quantity_text("10Gi") == "10Gi"
    assert quantity_text(True) is None


def test_walk_strings_skips_disabled_parts() -> None:
    value = {"on": {"enabled": True, "image": "a"}, "off": {"enabled": False, "image": "b"}}
    assert [text for _path, text in walk_strings(value)] == ["a"]


def test_urn_parts() -> None:
    full = urn(
        "kubernetes:core/v1:ConfigMap", "inv", [GPU_TENANT, "gpu-platform:index:GpuWorkerPool"]
    )
    assert urn_type(full) == "kubernetes:core/v1:ConfigMap"
    assert urn_name(full) == "inv"
    assert urn_type("nonsense") == ""


# ----------------------------------------------------------------------------- tenancy


def labelled(tenant: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"gpu-platform.io/tenant": tenant}}}


def test_label_wins_over_ancestor_and_provider() -> None:
    component = policy_resource(GPU_TENANT, "tenant-a", {})
    child = policy_resource(DEPLOYMENT, "d", labelled("tenant-x"), parent=component,
                            provider_name="tenant-b-provider")  # fmt: skip
    stack = Stack([from_policy_resource(component), from_policy_resource(child)])
    assert stack.tenant_of(from_policy_resource(child)) == "tenant-x"


def test_nearest_gpu_tenant_ancestor_through_other_components() -> None:
    component = policy_resource(GPU_TENANT, "tenant-a", {})
    pool = policy_resource(
        "gpu-platform:index:GpuWorkerPool", "tenant-a-a100", {}, parent=component
    )
    child = policy_resource(DEPLOYMENT, "d", {}, parent=pool, provider_name="management-provider")
    stack = Stack(from_policy_resource(r) for r in (component, pool, child))
    assert stack.tenant_of(stack.by_urn[child.urn]) == "tenant-a"


def test_parent_urn_names_the_tenant_when_the_component_is_missing() -> None:
    child = Resource("urn:x", DEPLOYMENT, "d", {}, parent_urn=urn(GPU_TENANT, "tenant-a"))
    assert Stack([child]).tenant_of(child) == "tenant-a"
    assert tenant_of(child) == "tenant-a"


def test_provider_name_is_the_fallback() -> None:
    assert (
        tenant_of(Resource("u", DEPLOYMENT, "d", {}, provider_name="tenant-b-provider"))
        == "tenant-b"
    )
    assert tenant_of(Resource("u", DEPLOYMENT, "d", {}, provider_name="default_4_34_2")) is None
    assert tenant_of(Resource("u", DEPLOYMENT, "d", {}, provider_name="-provider")) is None
    assert tenant_of(Resource("u", DEPLOYMENT, "d", {})) is None


def test_unknown_tenant_label_or_labels_make_the_tenant_unknown() -> None:
    assert tenant_of(Resource("u", DEPLOYMENT, "d", plain(labelled(U)))) is UNKNOWN
    unknown_labels = {"metadata": {"labels": U}}
    assert (
        tenant_of(Resource("u", DEPLOYMENT, "d", plain(unknown_labels), provider_name="t-provider"))
        is UNKNOWN
    )


def test_resource_args_conversion_keeps_parent_and_provider() -> None:
    args = resource_args(
        DEPLOYMENT,
        labelled("tenant-a"),
        name="d",
        provider_name="tenant-a-provider",
        parent_urn=urn(GPU_TENANT, "tenant-a"),
    )
    resource = from_validation_args(args)
    assert resource.provider_name == "tenant-a-provider"
    assert resource.parent_urn == urn(GPU_TENANT, "tenant-a")
    assert resource.labels == {"gpu-platform.io/tenant": "tenant-a"}


def test_policy_resource_conversion_falls_back_to_the_parent_option() -> None:
    orphan = policy_resource(DEPLOYMENT, "d", {}, parent_urn=urn(GPU_TENANT, "tenant-a"))
    assert orphan.parent is None
    assert from_policy_resource(orphan).parent_urn == urn(GPU_TENANT, "tenant-a")


# ------------------------------------------------------------------------ label copies


def test_the_packs_label_names_equal_the_programs() -> None:
    for name in (
        "TENANT_LABEL",
        "POOL_LABEL",
        "DECLARED_INVENTORY_LABEL",
        "INVENTORY_KEY",
        "LAB_ONLY_LABEL",
        "HAMI_NODE_REGISTER",
        "HAMI_WEBHOOK_IGNORE_LABEL",
        "IDENTITY_READ_SUFFIX",
    ):
        assert getattr(pack_labels, name) == getattr(program_labels, name), name


def test_the_packs_component_type_tokens_equal_the_programs() -> None:
    from components import gpu_tenant, gpu_worker_pool

    assert pack_labels.GPU_TENANT_TYPE == gpu_tenant.TYPE_TOKEN
    assert pack_labels.GPU_WORKER_POOL_TYPE == gpu_worker_pool.TYPE_TOKEN
