"""Issue 26, item 3: the workload rules find pod specs by shape in any registered object, GPU
quota against the declared workloads, GPU pods where HAMi's webhook does not run, and added
capabilities / host namespaces treated as privileged is."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_platform_policies.kube import is_pod_spec, pod_specs
from gpu_platform_policies.model import Resource
from gpu_platform_policies.pack import (
    validate_capacity,
    validate_gpu_namespaces,
    validate_gpu_requests,
    validate_quota,
)
from gpu_platform_policies.props import UNKNOWN

from tests.policies.builders import (
    A100,
    CONFIG_MAP,
    DEPLOYMENT,
    NAMESPACE,
    RELEASE,
    TENANT_LABEL,
    U,
    container,
    deployment,
    gpu,
    gpu_deployment,
    hami_release,
    hami_values,
    inventory,
    pod_spec,
    policy_resource,
    resource_args,
    run_resource,
    run_stack,
)

BAD = pod_spec([container(gpu(memory="20Gi"))])
GOOD = pod_spec([container(gpu())])


def template(spec: Any, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {"app": "x"}}, "spec": spec}


def _meta(name: str = "w") -> dict[str, Any]:
    return {"name": name, "namespace": "default", "labels": {TENANT_LABEL: "tenant-a"}}


# Each: type token, props with the pod spec(s) put in, and the paths they are at.
CUSTOM: dict[str, tuple[str, Any, list[str]]] = {
    "ReplicationController": (
        "kubernetes:core/v1:ReplicationController",
        lambda s: {"metadata": _meta(), "spec": {"replicas": 2, "template": template(s)}},
        ["spec.template.spec"],
    ),
    "PodTemplate": (
        "kubernetes:core/v1:PodTemplate",
        lambda s: {"metadata": _meta(), "template": template(s)},
        ["template.spec"],
    ),
    "PyTorchJob": (
        "kubernetes:kubeflow.org/v1:PyTorchJob",
        lambda s: {
            "metadata": _meta(),
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template(s)},
                    "Worker": {"replicas": 3, "template": template(s)},
                }
            },
        },
        [
            "spec.pytorchReplicaSpecs.Master.template.spec",
            "spec.pytorchReplicaSpecs.Worker.template.spec",
        ],
    ),
    "JobSet": (
        "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
        lambda s: {
            "metadata": _meta(),
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 2,
                        "template": {"spec": {"parallelism": 4, "template": template(s)}},
                    }
                ]
            },
        },
        ["spec.replicatedJobs[0].template.spec.template.spec"],
    ),
    "LeaderWorkerSet": (
        "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
        lambda s: {
            "metadata": _meta(),
            "spec": {
                "replicas": 2,
                "leaderWorkerTemplate": {
                    "size": 4,
                    "leaderTemplate": template(s),
                    "workerTemplate": template(s),
                },
            },
        },
        [
            "spec.leaderWorkerTemplate.leaderTemplate.spec",
            "spec.leaderWorkerTemplate.workerTemplate.spec",
        ],
    ),
    "RayCluster": (
        "kubernetes:ray.io/v1:RayCluster",
        lambda s: {
            "metadata": _meta(),
            "spec": {
                "headGroupSpec": {"template": template(s)},
                "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "template": template(s)}],
            },
        },
        ["spec.headGroupSpec.template.spec", "spec.workerGroupSpecs[0].template.spec"],
    ),
    "ArgoWorkflow": (
        "kubernetes:argoproj.io/v1alpha1:Workflow",
        lambda s: {
            "metadata": _meta(),
            "spec": {
                "entrypoint": "train",
                "templates": [{"name": "train", "container": s["containers"][0]}],
            },
        },
        ["spec.templates[0]"],
    ),
}


@pytest.mark.parametrize("kind", sorted(CUSTOM))
def test_gpu_requests_are_found_by_shape_in_any_object(kind: str) -> None:
    type_, build, paths = CUSTOM[kind]
    messages = run_resource(validate_gpu_requests, resource_args(type_, build(BAD)))
    assert len(messages) == len(paths), messages
    assert all("20Gi" in m and "20480" in m for m in messages)
    if not type_.startswith("kubernetes:core/"):  # built-ins: the kind says where
        assert [m.split(": ", 2)[1] for m in messages] == paths
    assert run_resource(validate_gpu_requests, resource_args(type_, build(GOOD))) == []


def test_pod_counts_multiply_along_the_path() -> None:
    counts = {
        kind: [ref.count for ref in pod_specs(Resource("u", type_, "w", build(GOOD)))]
        for kind, (type_, build, _paths) in CUSTOM.items()
    }
    assert counts == {
        "ReplicationController": [2],
        "PodTemplate": [1],
        "PyTorchJob": [1, 3],
        "JobSet": [8],
        "LeaderWorkerSet": [2, 6],  # one leader and size-1 workers per group
        "RayCluster": [1, 2],
        "ArgoWorkflow": [1],
    }


@pytest.mark.parametrize(
    "value",
    [
        {"containers": []},
        {"containers": ["busybox"]},
        {"containers": [{"image": "busybox:1.37.0"}]},  # no name
        {"containers": [{"name": "x"}]},  # neither image nor resources
        {"containers": {"name": "x", "image": "y"}},
    ],
)
def test_what_is_not_a_pod_spec(value: Any) -> None:
    assert not is_pod_spec(value)


def test_unknown_templates_of_custom_resources_are_never_violations() -> None:
    props = {"metadata": _meta(), "spec": {"pytorchReplicaSpecs": {"Worker": {"template": U}}}}
    resource_type = "kubernetes:kubeflow.org/v1:PyTorchJob"
    refs = pod_specs(Resource("u", resource_type, "w", {"spec": {"workerTemplate": UNKNOWN}}))
    assert [ref.where for ref in refs] == ["spec.workerTemplate"]
    assert run_resource(validate_gpu_requests, resource_args(resource_type, props)) == []


def test_helm_release_values_are_not_searched() -> None:
    values = {
        "x": {"containers": [{"name": "c", "image": "i", "resources": {"limits": gpu("1Gi")}}]}
    }
    assert run_resource(validate_gpu_requests, resource_args(RELEASE, hami_release(values))) == []


def test_capacity_counts_pods_of_custom_resources() -> None:
    # 1 master + 3 workers x 30 GiB on one 80 GiB card: only two fit.
    type_, build, _ = CUSTOM["PyTorchJob"]
    job = build(pod_spec([container(gpu(30000.0, 10.0))]))
    resources = [
        policy_resource(CONFIG_MAP, "inv", inventory("tenant-a", "a100", [A100])),
        policy_resource(type_, "train", job),
    ]
    found = [m for m, _ in run_stack(validate_capacity, resources)]
    assert len(found) == 1
    assert "PyTorchJob default/w (spec.pytorchReplicaSpecs." in found[0]
    small = build(pod_spec([container(gpu(10000.0, 10.0))]))
    resources[1] = policy_resource(type_, "train", small)
    assert run_stack(validate_capacity, resources) == []


# ------------------------------------------------------------------------ capabilities, host ns


@pytest.mark.parametrize("capability", ["SYS_ADMIN", "ALL", "all", "CAP_SYS_RAWIO", "sys_module",
                                        "SYS_PTRACE"])  # fmt: skip
def test_device_capabilities_on_a_gpu_pod_are_refused(capability: str) -> None:
    bad = container(gpu())
    bad["securityContext"] = {"capabilities": {"add": ["NET_BIND_SERVICE", capability]}}
    messages = run_resource(
        validate_gpu_requests, resource_args(DEPLOYMENT, deployment("w", pod_spec([bad])))
    )
    assert len(messages) == 1
    assert f"adds capabilities {capability}" in messages[0]


def test_harmless_capabilities_and_cpu_pods_with_sys_admin_pass() -> None:
    fine = container(gpu())
    fine["securityContext"] = {"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}
    cpu = container({"cpu": "1"})
    cpu["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    for spec in (pod_spec([fine]), pod_spec([cpu], hostPID=True)):
        assert (
            run_resource(validate_gpu_requests, resource_args(DEPLOYMENT, deployment("w", spec)))
            == []
        )


@pytest.mark.parametrize("key", ["hostPID", "hostIPC"])
def test_host_namespaces_on_a_gpu_pod_are_refused(key: str) -> None:
    spec = pod_spec([container(gpu())], **{key: True})
    messages = run_resource(validate_gpu_requests, resource_args(DEPLOYMENT, deployment("w", spec)))
    assert len(messages) == 1
    assert f"sets {key}: true" in messages[0]
    fine = pod_spec([container(gpu())], **{key: False})
    assert (
        run_resource(validate_gpu_requests, resource_args(DEPLOYMENT, deployment("w", fine))) == []
    )


# ---------------------------------------------------------------------------------- quota


def quota(namespace: str = "default", memory: int = 40000, cores: int = 100, cards: int = 4) -> Any:
    return {
        "metadata": {"name": "gpu-quota", "namespace": namespace,
                     "labels": {TENANT_LABEL: "tenant-a"}},
        "spec": {"hard": {"limits.nvidia.com/gpumem": str(memory),
                          "limits.nvidia.com/gpucores": str(cores),
                          "requests.nvidia.com/gpu": str(cards)}},
    }  # fmt: skip


QUOTA = "kubernetes:core/v1:ResourceQuota"


def test_declared_workloads_over_their_quota_are_refused() -> None:
    # 3 replicas x 20000 MiB = 60000 > 40000.
    resources = [
        policy_resource(QUOTA, "q", quota()),
        policy_resource(DEPLOYMENT, "w", gpu_deployment("w", replicas=3.0)),
    ]
    found = [m for m, _ in run_stack(validate_quota, resources)]
    assert len(found) == 1
    assert "need 60000 MiB of gpumem" in found[0]
    assert "allows 40000" in found[0]
    assert "gpuQuotas[].gpuMemoryMiB" in found[0]
    resources[1] = policy_resource(DEPLOYMENT, "w", gpu_deployment("w", replicas=2.0))
    assert run_stack(validate_quota, resources) == []


def test_quota_counts_every_workload_of_the_namespace_and_only_it() -> None:
    elsewhere = gpu_deployment("other", replicas=5.0)
    elsewhere["metadata"]["namespace"] = "team-b"
    resources = [
        policy_resource(QUOTA, "q", quota(memory=100000, cores=100)),
        policy_resource(DEPLOYMENT, "a", gpu_deployment("a", replicas=2.0, cores=30.0)),
        policy_resource(DEPLOYMENT, "b", gpu_deployment("b", replicas=1.0, cores=50.0)),
        policy_resource(DEPLOYMENT, "o", elsewhere),
    ]
    found = [m for m, _ in run_stack(validate_quota, resources)]
    assert len(found) == 1
    assert "need 110 % of gpucores" in found[0]


def test_quota_with_unknown_replicas_is_not_judged() -> None:
    resources = [
        policy_resource(QUOTA, "q", quota()),
        policy_resource(DEPLOYMENT, "w", gpu_deployment("w", replicas=U)),
    ]
    assert run_stack(validate_quota, resources) == []


# --------------------------------------------------------------------- webhook coverage


def _tenant_stack(workload: dict[str, Any], labels_ignore: bool = False) -> list[Any]:
    ns = {"metadata": {"name": "batch", "labels": {TENANT_LABEL: "tenant-a"}}}
    if labels_ignore:
        ns["metadata"]["labels"]["hami.io/webhook"] = "ignore"
    release = hami_release(hami_values(whitelist=("kube-system", "hami-system")))
    return [
        policy_resource(RELEASE, "hami", release, provider_name="tenant-a-provider"),
        policy_resource(NAMESPACE, "ns", ns),
        policy_resource(DEPLOYMENT, "w", workload),
    ]


def _in(namespace: str, **kwargs: Any) -> dict[str, Any]:
    workload = gpu_deployment("w", **kwargs)
    workload["metadata"]["namespace"] = namespace
    return workload


def test_gpu_workloads_in_namespaces_the_webhook_skips_are_refused() -> None:
    found = [m for m, _ in run_stack(validate_gpu_namespaces, _tenant_stack(_in("hami-system")))]
    assert len(found) == 1
    assert "namespace hami-system, which HAMi's webhook skips" in found[0]
    labelled = _tenant_stack(_in("batch"), labels_ignore=True)
    found = [m for m, _ in run_stack(validate_gpu_namespaces, labelled)]
    assert len(found) == 1
    assert "namespace batch" in found[0]
    assert run_stack(validate_gpu_namespaces, _tenant_stack(_in("batch"))) == []
    assert run_stack(validate_gpu_namespaces, _tenant_stack(_in("default"))) == []


def test_gpu_pods_labelled_to_skip_the_webhook_are_refused() -> None:
    workload = _in("default")
    workload["spec"]["template"]["metadata"]["labels"]["hami.io/webhook"] = "ignore"
    found = [m for m, _ in run_stack(validate_gpu_namespaces, _tenant_stack(workload))]
    assert len(found) == 1
    assert "labelled hami.io/webhook=ignore" in found[0]


def test_cpu_workloads_may_run_in_skipped_namespaces() -> None:
    workload = deployment("w", pod_spec([container({"cpu": "1"})]))
    workload["metadata"]["namespace"] = "hami-system"
    assert run_stack(validate_gpu_namespaces, _tenant_stack(workload)) == []
