"""hami-gpu-requests: GPU containers ask the HAMi way (driven through pulumi-policy's args)."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_platform_policies.pack import validate_gpu_requests

from tests.policies.builders import (
    DEPLOYMENT,
    POD,
    U,
    container,
    deployment,
    gpu,
    pod_spec,
    resource_args,
    run_resource,
)


def check(spec: dict[str, Any], type_: str = DEPLOYMENT) -> list[str]:
    props = (
        {"metadata": {"name": "w", "namespace": "default"}, "spec": spec}
        if type_ == POD
        else (deployment("w", spec))
    )
    return run_resource(validate_gpu_requests, resource_args(type_, props))


def one(limits: dict[str, Any], **container_args: Any) -> list[str]:
    return check(pod_spec([container(limits, **container_args)]))


# ------------------------------------------------------------------------------- compliant


@pytest.mark.parametrize(
    "limits",
    [
        gpu(20000.0, 30.0),  # numbers as Pulumi delivers them
        gpu("20000", "30", "1"),  # quantity strings
        {"nvidia.com/gpu": 2.0, "nvidia.com/gpumem-percentage": 50.0, "nvidia.com/gpucores": 100.0},
        {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4096},  # memory alone is not a bare card
        {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 1},
        {**gpu(), "nvidia.com/priority": 1.0},
    ],
)
def test_hami_requests_pass(limits: dict[str, Any]) -> None:
    assert one(limits) == []


def test_workloads_without_nvidia_resources_pass_even_with_node_name_and_privileged() -> None:
    spec = pod_spec(
        [container({"cpu": "1", "memory": "1Gi"}, privileged=True)],
        nodeName="node-1",
        schedulerName="default-scheduler",
    )
    assert check(spec) == []


def test_hami_scheduler_name_is_fine() -> None:
    assert check(pod_spec([container(gpu())], schedulerName="hami-scheduler")) == []


def test_default_scheduler_written_out_is_fine() -> None:
    # The API server defaults an absent schedulerName to default-scheduler before admission, and
    # HAMi's webhook (--force-overwrite-default-scheduler=true, chart 2.10.0 default) rewrites it
    # to hami-scheduler: manifests exported with `kubectl get -o yaml` carry it and are fine.
    assert check(pod_spec([container(gpu())], schedulerName="default-scheduler")) == []


def test_non_workload_types_are_ignored() -> None:
    props = {"data": {"x": "nvidia.com/gpumem: 20Gi"}}
    args = resource_args("kubernetes:core/v1:ConfigMap", props)
    assert run_resource(validate_gpu_requests, args) == []


# ------------------------------------------------------------------------------- violations


def test_gpumem_with_a_unit_suffix_is_a_violation_with_the_mib_to_write() -> None:
    messages = one(gpu(memory="20Gi"))
    assert len(messages) == 1
    assert "nvidia.com/gpumem is '20Gi'" in messages[0]
    assert "20480" in messages[0]  # 20 GiB = 20 * 1024 MiB
    assert messages[0].startswith("Deployment default/w: container main:")


@pytest.mark.parametrize("memory", ["20000Mi", "20G", 1.5, "1.5", 0.0, "-1"])
def test_gpumem_must_be_a_plain_positive_integer(memory: Any) -> None:
    messages = one(gpu(memory=memory))
    assert any("nvidia.com/gpumem is" in m for m in messages), messages


@pytest.mark.parametrize("cards", [1.5, "500m", 0.0, "2Gi", True])
def test_gpu_count_must_be_a_whole_number_of_at_least_one(cards: Any) -> None:
    messages = one(gpu(cards=cards))
    assert any("nvidia.com/gpu is" in m for m in messages), messages


@pytest.mark.parametrize("percentage", [0.0, 101.0, "50%", 12.5])
def test_gpumem_percentage_must_be_1_to_100(percentage: Any) -> None:
    limits = {"nvidia.com/gpu": 1.0, "nvidia.com/gpumem-percentage": percentage}
    messages = one({**limits, "nvidia.com/gpucores": 20.0})
    assert any("gpumem-percentage is" in m for m in messages), messages


@pytest.mark.parametrize("cores", [0.0, 101.0, 150, "30%", 2.5])
def test_gpucores_must_be_1_to_100(cores: Any) -> None:
    messages = one(gpu(cores=cores))
    assert any("nvidia.com/gpucores is" in m for m in messages), messages


def test_bare_whole_card_request_is_a_violation() -> None:
    messages = one({"nvidia.com/gpu": 1.0})
    assert len(messages) == 1
    assert "nvidia.com/gpu alone" in messages[0]
    assert "exclusive" in messages[0]


def test_hami_resources_without_a_card_count_are_a_violation() -> None:
    messages = one({"nvidia.com/gpumem": 20000.0, "nvidia.com/gpucores": 30.0})
    assert len(messages) == 1
    assert "without nvidia.com/gpu" in messages[0]


def test_both_memory_forms_are_a_violation() -> None:
    messages = one({**gpu(), "nvidia.com/gpumem-percentage": 50.0})
    assert len(messages) == 1
    assert "both" in messages[0]


def test_nvidia_resources_hami_does_not_schedule_are_a_violation() -> None:
    messages = one({"nvidia.com/mig-1g.10gb": 1.0})
    assert any("nvidia.com/mig-1g.10gb" in m and "does not schedule" in m for m in messages)


def test_requests_differing_from_limits_are_a_violation() -> None:
    messages = check(pod_spec([container(gpu(), requests={"nvidia.com/gpumem": 10000.0})]))
    assert len(messages) == 1
    assert "differs from limits" in messages[0]


def test_requests_only_are_checked_too() -> None:
    messages = check(pod_spec([container(requests=gpu(memory="10Gi"))]))
    assert any("10240" in m for m in messages), messages


def test_privileged_gpu_container_is_a_violation() -> None:
    messages = one(gpu(), privileged=True)
    assert len(messages) == 1
    assert "container main: is privileged" in messages[0]
    assert "denies" in messages[0]


def test_privileged_sidecar_of_a_gpu_pod_is_a_violation() -> None:
    # HAMi 2.10's webhook denies the whole pod when any of its containers is privileged.
    spec = pod_spec([container(gpu()), container({"cpu": "1"}, name="sidecar", privileged=True)])
    messages = check(spec)
    assert len(messages) == 1
    assert "container sidecar: is privileged" in messages[0]


def test_numbers_are_shown_as_written() -> None:
    messages = one(gpu(cores=150.0))
    assert "nvidia.com/gpucores is 150;" in messages[0]


def test_node_name_pinning_is_a_violation() -> None:
    messages = check(pod_spec([container(gpu())], nodeName="gpu-node-1"))
    assert len(messages) == 1
    assert "nodeName 'gpu-node-1'" in messages[0]


@pytest.mark.parametrize("scheduler", ["volcano", "my-scheduler"])
def test_scheduler_names_bypassing_hami_are_a_violation(scheduler: str) -> None:
    messages = check(pod_spec([container(gpu())], schedulerName=scheduler))
    assert len(messages) == 1
    assert f"schedulerName {scheduler!r}" in messages[0]


def test_init_containers_are_checked() -> None:
    spec = pod_spec([container({"cpu": "1"})], init=[container(gpu(memory="8Gi"), name="warm")])
    messages = check(spec)
    assert len(messages) == 1
    assert messages[0].startswith("Deployment default/w: init container warm:")


WORKLOAD_PROPS: dict[str, Any] = {
    "kubernetes:core/v1:Pod": lambda s: {"metadata": {"name": "w"}, "spec": s},
    "kubernetes:apps/v1:Deployment": lambda s: {"spec": {"template": {"spec": s}}},
    "kubernetes:apps/v1:StatefulSet": lambda s: {"spec": {"template": {"spec": s}}},
    "kubernetes:apps/v1:DaemonSet": lambda s: {"spec": {"template": {"spec": s}}},
    "kubernetes:apps/v1:ReplicaSet": lambda s: {"spec": {"template": {"spec": s}}},
    "kubernetes:batch/v1:Job": lambda s: {"spec": {"template": {"spec": s}}},
    "kubernetes:batch/v1:CronJob": lambda s: {
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": s}}}}
    },
    "kubernetes:apps/v1:DeploymentPatch": lambda s: {"spec": {"template": {"spec": s}}},
    "kubernetes:core/v1:PodPatch": lambda s: {"spec": s},
    "kubernetes:batch/v1:CronJobPatch": lambda s: {
        "spec": {"jobTemplate": {"spec": {"template": {"spec": s}}}}
    },
}


@pytest.mark.parametrize("type_", sorted(WORKLOAD_PROPS))
def test_every_workload_kind_is_checked(type_: str) -> None:
    props = WORKLOAD_PROPS[type_](pod_spec([container(gpu(memory="20Gi"))]))
    messages = run_resource(validate_gpu_requests, resource_args(type_, props))
    assert len(messages) == 1
    assert "20Gi" in messages[0]
    good = WORKLOAD_PROPS[type_](pod_spec([container(gpu())]))
    assert run_resource(validate_gpu_requests, resource_args(type_, good)) == []


# -------------------------------------------------------------------------------- unknowns


@pytest.mark.parametrize(
    "spec",
    [
        pod_spec([container(gpu(memory=U))]),
        pod_spec([container(gpu(cores=U, cards=U))]),
        pod_spec([{"name": "main", "resources": U}]),
        pod_spec([{"name": "main", "resources": {"limits": U}}]),
        pod_spec([container(gpu())], nodeName=U, schedulerName=U),
        pod_spec([container(gpu(), privileged=U)]),  # type: ignore[arg-type]
        U,
    ],
)
def test_unknown_values_are_not_violations(spec: Any) -> None:
    assert check(spec) == []


def test_unknown_container_list_is_not_a_violation() -> None:
    assert check({"containers": U}) == []
