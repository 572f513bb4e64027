"""Real users' mistakes, each through the whole program under the mocks (issue 26, item 2).

Typos, wrong units, wrong shapes, copy-paste duplicates, values carried over from the other
stack, secrets written in clear: for each, ``__main__.py`` must register nothing, fail with a
``pulumi.RunError`` (the CLI prints its message alone), name the key, and say the fix.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.harness import MOCK_KUBECONFIG, Secret, evaluate, load_stack_config

P = "gpu-platform:platform"
Config = dict[str, Any]


@dataclass(frozen=True)
class Mistake:
    id: str
    stack: str
    make: Callable[[Config], None]  # turns the shipped stack config into the mistaken one
    key: str  # what the message must name
    fix: str  # what it must say to do


def _p(config: Config) -> Any:
    return config[P]


def _lab_tenant(config: Config, index: int = 0) -> Any:
    return _p(config)["tenants"][index]


def _workload(config: Config) -> Any:
    return _p(config)["tenants"][1]["workloads"][0]


def _pool(config: Config, tenant: int = 0) -> Any:
    return _p(config)["tenants"][tenant]["workerPools"][0]


def _set(path: str, value: Any) -> Callable[[Config], None]:
    """Set the dotted ``path`` (list indices as numbers) of the platform block to ``value``."""

    def make(config: Config) -> None:
        node = _p(config)
        parts = [int(p) if p.isdigit() else p for p in path.split(".")]
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = copy.deepcopy(value)

    return make


def _rename(path: str, new: str) -> Callable[[Config], None]:
    def make(config: Config) -> None:
        node = _p(config)
        parts = [int(p) if p.isdigit() else p for p in path.split(".")]
        for part in parts[:-1]:
            node = node[part]
        node[new] = node.pop(parts[-1])

    return make


def _drop(path: str) -> Callable[[Config], None]:
    def make(config: Config) -> None:
        node = _p(config)
        parts = [int(p) if p.isdigit() else p for p in path.split(".")]
        for part in parts[:-1]:
            node = node[part]
        del node[parts[-1]]

    return make


def _top(key: str, value: Any) -> Callable[[Config], None]:
    def make(config: Config) -> None:
        config[key] = value

    return make


def _move_platform(new_key: str) -> Callable[[Config], None]:
    def make(config: Config) -> None:
        config[new_key] = config.pop(P)

    return make


def _platform_as(transform: Callable[[Any], Any]) -> Callable[[Config], None]:
    def make(config: Config) -> None:
        config[P] = transform(config[P])

    return make


def _all(*steps: Callable[[Config], None]) -> Callable[[Config], None]:
    def make(config: Config) -> None:
        for step in steps:
            step(config)

    return make


def _copy_first_tenant(config: Config, name: str | None = None) -> None:
    clone = copy.deepcopy(_p(config)["tenants"][0])
    if name is not None:
        clone["name"] = name
    _p(config)["tenants"].append(clone)


def _prod_platform() -> Any:
    return copy.deepcopy(load_stack_config("prod")[P])


def _lab_platform() -> Any:
    return copy.deepcopy(load_stack_config("lab")[P])


def _second_prod_pool(config: Config) -> None:
    pool = copy.deepcopy(_pool(config))
    pool["name"] = "a100-spare"
    pool["slotsPerCard"] = 7
    _p(config)["tenants"][0]["workerPools"].append(pool)


LAB = [
    # --- the stack file's keys
    Mistake(
        "namespace typo",
        "lab",
        _move_platform("gpu-platfrom:platform"),
        "gpu-platfrom:platform",
        "did you mean gpu-platform:platform?",
    ),
    Mistake(
        "key typo",
        "lab",
        _move_platform("gpu-platform:platfrom"),
        "gpu-platform:platfrom",
        "did you mean gpu-platform:platform?",
    ),
    Mistake(
        "key capitalised",
        "lab",
        _move_platform("gpu-platform:Platform"),
        "gpu-platform:Platform",
        "did you mean gpu-platform:platform?",
    ),
    Mistake(
        "platform as a string",
        "lab",
        _platform_as(lambda _: "mode: lab"),
        "platform",
        "platform:\n        mode: lab",
    ),
    Mistake(
        "platform as a list",
        "lab",
        _platform_as(lambda p: [p]),
        "platform",
        "a list was written where a mapping",
    ),
    # --- top-level keys
    Mistake(
        "kubernetesVersion typo",
        "lab",
        _rename("kubernetesVersion", "kubernetesVersoin"),
        "kubernetesVersoin",
        "did you mean kubernetesVersion?",
    ),
    Mistake(
        "version without v",
        "lab",
        _set("kubernetesVersion", "1.35.0"),
        "kubernetesVersion",
        "write it like v1.35.0",
    ),
    Mistake(
        "unreleased patch in the lab",
        "lab",
        _set("kubernetesVersion", "v1.35.9"),
        "kubernetesVersion",
        # Only versions kind's pinned release has node images for: following it passes.
        "pick v1.34.3 or v1.35.0",
    ),
    Mistake(
        "version as a number",
        "lab",
        _set("kubernetesVersion", 1.35),
        "kubernetesVersion",
        "kubernetesVersion: v1.35.0",
    ),
    Mistake("mode capitalised", "lab", _set("mode", "Lab"), "mode", "write 'lab' or 'prod'"),
    Mistake("mode missing", "lab", _drop("mode"), "mode", "add it, like:\n      mode: lab"),
    Mistake(
        "tenants as a mapping",
        "lab",
        _platform_as(lambda p: {**p, "tenants": {t["name"]: t for t in p["tenants"]}}),
        "tenants",
        "tenants:\n        - name:",
    ),
    Mistake(
        "worker image of another version",
        "lab",
        _set("workerImage", "kindest/node:v1.34.0"),
        "workerImage",
        "workers must run the tenant version",
    ),
    Mistake(
        "gpuDriver from prod",
        "lab",
        _set("gpuDriver", {"source": "runtime-built"}),
        "gpuDriver",
        "remove gpuDriver",
    ),
    Mistake(
        "management from prod",
        "lab",
        _set("management", {"existing": {"kubeconfigConfigKey": "managementKubeconfig"}}),
        "management",
        "mode lab needs management.kind",
    ),
    # --- tenants
    Mistake(
        "tenant name in capitals",
        "lab",
        _set("tenants.0.name", "Tenant-A"),
        "tenants[0].name",
        "lower-case letters",
    ),
    Mistake(
        "tenant copied twice",
        "lab",
        lambda c: _copy_first_tenant(c),
        "tenants[].name",
        "names must be unique",
    ),
    Mistake(
        "copied tenant renamed only",
        "lab",
        lambda c: _copy_first_tenant(c, "tenant-c"),
        "tenants[].dataStore.schema",
        "give every tenant its own schema",
    ),
    Mistake(
        "tenant pod CIDR copied",
        "lab",
        _set("tenants.1.network.podCidr", "10.10.0.0/16"),
        "tenants[1].network.podCidr",
        "disjoint ranges",
    ),
    Mistake(
        "CIDR with host bits",
        "lab",
        _set("tenants.0.network.podCidr", "10.10.0.1/16"),
        "tenants[0].network.podCidr",
        "like 10.10.0.0/16",
    ),
    Mistake(
        "pod CIDR of the kind cluster",
        "lab",
        _set("tenants.0.network.podCidr", "10.244.0.0/16"),
        "management.kind.podSubnet",
        "disjoint ranges",
    ),
    Mistake(
        "network as a list",
        "lab",
        _set("tenants.0.network", ["10.10.0.0/16", "10.11.0.0/16"]),
        "tenants[0].network",
        "network:\n        podCidr:",
    ),
    Mistake(
        "podCidr in capitals",
        "lab",
        _rename("tenants.0.network.podCidr", "podCIDR"),
        "tenants[0].network.podCIDR",
        "did you mean podCidr?",
    ),
    Mistake(
        "unknown datastore",
        "lab",
        _set("tenants.0.dataStore.name", "etcd"),
        "tenants[0].dataStore.name",
        "declare it under dataStores",
    ),
    Mistake(
        "schema with a dash",
        "lab",
        _set("tenants.0.dataStore.schema", "tenant-a"),
        "tenants[0].dataStore.schema",
        "lower-case letters, digits and '_'",
    ),
    Mistake(
        "datastore shared and dedicated",
        "lab",
        _set("tenants.0.dataStore.dedicated", {"driver": "etcd"}),
        "tenants[0].dataStore",
        "give exactly one of name",
    ),
    Mistake(
        "datastore as a string",
        "lab",
        _set("tenants.0.dataStore", "default"),
        "tenants[0].dataStore",
        "dataStore:\n        schema:",
    ),
    Mistake(
        "worker pools missing",
        "lab",
        _drop("tenants.0.workerPools"),
        "tenants[0].workerPools",
        "workerPools:\n        - name:",
    ),
    Mistake(
        "adopted namespace in the lab",
        "lab",
        _set("tenants.0.managementNamespace", {"existing": True}),
        "tenants[0].managementNamespace.existing",
        "remove existing",
    ),
    Mistake(
        "two tenants pin one address",
        "lab",
        _all(
            _set("tenants.0.controlPlane", {"address": "172.18.255.250"}),
            _set("tenants.1.controlPlane", {"address": "172.18.255.250"}),
        ),
        "controlPlane.address 172.18.255.250",
        "give each tenant its own address",
    ),
    Mistake(
        "IPv6 control-plane address",
        "lab",
        _set("tenants.0.controlPlane", {"address": "fd00::10"}),
        "tenants[0].controlPlane.address",
        "write one like 10.0.100.10",
    ),
    Mistake(
        "admission list without webhooks",
        "lab",
        _set("tenants.0.controlPlane", {"admissionControllers": ["NodeRestriction"]}),
        "tenants[0].controlPlane.admissionControllers",
        "must keep MutatingAdmissionWebhook",
    ),
    Mistake(
        "admission list as a string",
        "lab",
        _set("tenants.0.controlPlane", {"admissionControllers": "NodeRestriction"}),
        "tenants[0].controlPlane.admissionControllers",
        "admissionControllers:\n        - ",
    ),
    Mistake(
        "cpu request in words",
        "lab",
        _set("tenants.0.controlPlane", {"resources": {"apiServer": {"requests": {"cpu": "half"}}}}),
        "tenants[0].controlPlane.resources.apiServer.requests",
        "write it like 250m",
    ),
    Mistake(
        "control-plane replicas true",
        "lab",
        _set("tenants.0.controlPlane", {"replicas": True}),
        "tenants[0].controlPlane.replicas",
        "a whole number (unquoted",
    ),
    # --- pools and cards
    Mistake(
        "pool replicas true",
        "lab",
        _set("tenants.0.workerPools.0.replicas", True),
        "tenants[0].workerPools[0].replicas",
        "a whole number (unquoted",
    ),
    Mistake(
        "pool replicas 1.0",
        "lab",
        _set("tenants.0.workerPools.0.replicas", 1.0),
        "tenants[0].workerPools[0].replicas",
        "a whole number (unquoted",
    ),
    Mistake(
        "pool replicas quoted",
        "lab",
        _set("tenants.0.workerPools.0.replicas", "1"),
        "tenants[0].workerPools[0].replicas",
        "a whole number (unquoted",
    ),
    Mistake(
        "pool replicas 0",
        "lab",
        _set("tenants.0.workerPools.0.replicas", 0),
        "tenants[0].workerPools[0].replicas",
        "zero or negative values are not allowed",
    ),
    Mistake(
        "slotPerCard typo",
        "lab",
        _rename("tenants.0.workerPools.0.slotsPerCard", "slotPerCard"),
        "tenants[0].workerPools[0].slotPerCard",
        "did you mean slotsPerCard?",
    ),
    Mistake(
        "cards as a mapping",
        "lab",
        _set("tenants.0.workerPools.0.cards", {"model": "A100-80GB", "count": 1}),
        "tenants[0].workerPools[0].cards",
        "cards:\n        - ",
    ),
    Mistake(
        "card model short name",
        "lab",
        _set("tenants.0.workerPools.0.cards.0.model", "A100"),
        "tenants[0].workerPools[0].cards[0]",
        "use one of A100-80GB",
    ),
    Mistake(
        "card count 2.0",
        "lab",
        _set("tenants.0.workerPools.0.cards.0.count", 2.0),
        "tenants[0].workerPools[0].cards[0].count",
        "a whole number (unquoted",
    ),
    Mistake(
        "card memory in Gi",
        "lab",
        _set("tenants.1.workerPools.0.cards.0.memoryMiB", "24Gi"),
        "tenants[1].workerPools[0].cards[0].memoryMiB",
        "24Gi is 24576 MiB, so write 24576",
    ),
    Mistake(
        "real GPUs in the lab",
        "lab",
        _set("tenants.0.workerPools.0.deviceMode", "nvidia"),
        "tenants[0].workerPools[0].deviceMode",
        "use mock",
    ),
    Mistake(
        "machine from prod",
        "lab",
        _set("tenants.0.workerPools.0.machine", {"provider": "metal3"}),
        "tenants[0].workerPools[0].machine",
        "remove machine",
    ),
    # --- quotas and workloads
    Mistake(
        "quota memory in Gi",
        "lab",
        _set("tenants.0.gpuQuotas.0.gpuMemoryMiB", "80Gi"),
        "tenants[0].gpuQuotas[0].gpuMemoryMiB",
        "80Gi is 81920 MiB, so write 81920",
    ),
    Mistake(
        "quota copied twice",
        "lab",
        lambda c: _lab_tenant(c)["gpuQuotas"].append(dict(_lab_tenant(c)["gpuQuotas"][0])),
        "quota namespace default is declared twice",
        "names are unique",
    ),
    Mistake(
        "gpumem 20Gi",
        "lab",
        lambda c: _workload(c)["gpu"].update(memoryMiB="20Gi"),
        "tenants[1].workloads[0].gpu.memoryMiB",
        "20Gi is 20480 MiB, so write 20480",
    ),
    Mistake(
        "gpucores above 100",
        "lab",
        lambda c: _workload(c)["gpu"].update(cores=150),
        "tenants[1].workloads[0].gpu.cores",
        "use a smaller value",
    ),
    Mistake(
        "memory twice",
        "lab",
        lambda c: _workload(c)["gpu"].update(memoryPercentage=50),
        "tenants[1].workloads[0].gpu",
        "give exactly one of memoryMiB or memoryPercentage",
    ),
    Mistake(
        "gpu as a list",
        "lab",
        lambda c: _workload(c).update(gpu=[{"cores": 30}]),
        "tenants[1].workloads[0].gpu",
        "gpu:\n        cores:",
    ),
    Mistake(
        "image latest",
        "lab",
        lambda c: _workload(c).update(image="busybox:latest"),
        "tenants[1].workloads[0].image",
        "not latest",
    ),
    Mistake(
        "image without a tag",
        "lab",
        lambda c: _workload(c).update(image="busybox"),
        "tenants[1].workloads[0].image",
        "write a release tag",
    ),
    Mistake(
        "workload outgrows its quota",
        "lab",
        lambda c: _workload(c).update(replicas=5),
        "tenants[1].gpuQuotas[0].gpuMemoryMiB",
        "raise it to at least 100000",
    ),
    Mistake(
        "workload larger than every card",
        "lab",
        lambda c: _workload(c)["gpu"].update(memoryMiB=100000),
        "tenants[1].workloads[0].gpu.memoryMiB",
        # Not "raise the quota": no quota lets it run (newcomer review, section 4).
        "ask at most",
    ),
    Mistake(
        "workload where no quota is",
        "lab",
        lambda c: _workload(c).update(namespace="ml"),
        "tenants[1].workloads[0].namespace",
        "add a quota for it",
    ),
    Mistake(
        "workload in kube-system",
        "lab",
        _all(
            lambda c: _workload(c).update(namespace="kube-system"),
            lambda c: _p(c)["tenants"][1]["gpuQuotas"].append(
                {"namespace": "kube-system", "gpuMemoryMiB": 1, "gpuCores": 1, "gpus": 1}
            ),
        ),
        "tenants[1].workloads[0].namespace",
        "bypass hami-scheduler",
    ),
    # --- management and HAMi
    Mistake(
        "pool size 1",
        "lab",
        _set("management.kind.metallbPoolSize", 1),
        "management.kind.metallbPoolSize",
        "use a larger value",
    ),
    Mistake(
        "pool size quoted",
        "lab",
        _set("management.kind.metallbPoolSize", "16"),
        "management.kind.metallbPoolSize",
        "a whole number (unquoted",
    ),
    Mistake(
        "metalLb spelled with capital L",
        "lab",
        _rename("management.kind.metallbPoolSize", "metalLbPoolSize"),
        "management.kind.metalLbPoolSize",
        "did you mean metallbPoolSize?",
    ),
    Mistake(
        "kind pod subnet without mask",
        "lab",
        _set("management.kind.podSubnet", "10.244/16"),
        "management.kind.podSubnet",
        "like 10.10.0.0/16",
    ),
    Mistake(
        "lock timeout in words",
        "lab",
        _set("hami.nodeLockTimeout", "thirty seconds"),
        "hami.nodeLockTimeout",
        "30s, 2m or 1m30s",
    ),
    Mistake(
        "lock timeout as a number",
        "lab",
        _set("hami.nodeLockTimeout", 30),
        "hami.nodeLockTimeout",
        "nodeLockTimeout: 30s",
    ),
    Mistake(
        "failure policy lower case",
        "lab",
        _set("hami.webhookFailurePolicy", "fail"),
        "hami.webhookFailurePolicy",
        "write 'Fail' or 'Ignore'",
    ),
    Mistake(
        "hami as a list",
        "lab",
        _set("hami", [{"webhookFailurePolicy": "Fail"}]),
        "hami",
        "hami:\n        webhookFailurePolicy:",
    ),
    # --- backups (docs/backups.md)
    Mistake(
        "backup schedule with six fields",
        "lab",
        _set("tenants.0.backups", {"schedule": "0 17 */6 * * *"}),
        "tenants[0].backups.schedule",
        "five-field cron schedule",
    ),
    Mistake(
        "backup schedule at hour 24",
        "lab",
        _set("tenants.0.backups", {"schedule": "0 24 * * *"}),
        "tenants[0].backups.schedule",
        "outside 0-23",
    ),
    Mistake(
        "keep no backup",
        "lab",
        _set("tenants.0.backups", {"retention": 0}),
        "tenants[0].backups.retention",
        "use a larger value",
    ),
    Mistake(
        "backups of a NATS tenant",
        "lab",
        _all(
            _set(
                "dataStores",
                [{"name": "nats-a", "driver": "NATS", "endpoints": ["nats.example:4222"]}],
            ),
            _set("tenants.0.dataStore.name", "nats-a"),
        ),
        "tenants[0].backups",
        "set backups.enabled: false",
    ),
]

PROD = [
    Mistake(
        "kubeconfig in clear",
        "prod",
        _top("gpu-platform:managementKubeconfig", MOCK_KUBECONFIG),
        "managementKubeconfig",
        "pulumi config set --secret managementKubeconfig",
    ),
    Mistake(
        "kubeconfig key typo",
        "prod",
        _top("gpu-platform:managementKubeconfg", Secret(MOCK_KUBECONFIG)),
        "gpu-platform:managementKubeconfg",
        "did you mean gpu-platform:managementKubeconfig?",
    ),
    Mistake(
        "kubeconfig path, not content",
        "prod",
        _top("gpu-platform:managementKubeconfig", Secret("~/.kube/config")),
        "managementKubeconfig",
        "set the file's content",
    ),
    Mistake(
        "datastore password in clear",
        "prod",
        _top("gpu-platform:speechDatastoreCredentials", '{"password": "hunter2"}'),
        "speechDatastoreCredentials",
        "remove it from the stack file",
    ),
    Mistake(
        "kubeconfig key with a namespace",
        "prod",
        _set("management.existing.kubeconfigConfigKey", "gpu-platform:managementKubeconfig"),
        "management.existing.kubeconfigConfigKey",
        "no namespace",
    ),
    Mistake(
        "two tenants on one address",
        "prod",
        _set("tenants.1.controlPlane.address", "10.0.100.10"),
        "tenants[].controlPlane.address",
        "give every tenant its own control-plane address",
    ),
    Mistake(
        "shared datastore in prod",
        "prod",
        _all(
            _set("management.existing.kamajiEtcd", True),
            _set("tenants.0.dataStore", {"name": "default", "schema": "v", "username": "v"}),
            _set("tenants.1.dataStore", {"name": "default", "schema": "l", "username": "l"}),
        ),
        "DataStore 'default'",
        "dedicated DataStore per tenant",
    ),
    Mistake(
        "mock GPUs in prod",
        "prod",
        _set("tenants.0.workerPools.0.deviceMode", "mock"),
        "tenants[0].workerPools[0].deviceMode",
        "use nvidia in prod",
    ),
    Mistake(
        "pool without a machine",
        "prod",
        _drop("tenants.0.workerPools.0.machine"),
        "tenants[0].workerPools[0].machine",
        "need a Cluster API machine spec",
    ),
    Mistake(
        "storage size 16 GB",
        "prod",
        _set("tenants.0.dataStore.dedicated.storageSize", "16 GB"),
        "tenants[0].dataStore.dedicated.storageSize",
        "write it like 8Gi",
    ),
    Mistake(
        "storage size as a number",
        "prod",
        _set("tenants.0.dataStore.dedicated.storageSize", 16),
        "tenants[0].dataStore.dedicated.storageSize",
        "storageSize: 8Gi",
    ),
    Mistake(
        "etcd replicas true",
        "prod",
        _set("tenants.0.dataStore.dedicated.replicas", True),
        "tenants[0].dataStore.dedicated.replicas",
        "a whole number (unquoted",
    ),
    Mistake(
        "health check in words",
        "prod",
        _set("tenants.0.workerPools.0.machine.healthCheck.unhealthyAfter", "5 minutes"),
        "tenants[0].workerPools[0].machine.healthCheck.unhealthyAfter",
        "300s, 5m or 1h30m",
    ),
    Mistake(
        "rollout that never moves",
        "prod",
        _set("tenants.0.workerPools.0.machine.rollout", {"maxSurge": 0, "maxUnavailable": 0}),
        "tenants[0].workerPools[0].machine.rollout",
        "cannot both be 0",
    ),
    Mistake(
        "rollout 150%",
        "prod",
        _set("tenants.0.workerPools.0.machine.rollout.maxSurge", "150%"),
        "tenants[0].workerPools[0].machine.rollout.maxSurge",
        "percentage like 25%",
    ),
    Mistake(
        "rollout surge true",
        "prod",
        _set("tenants.0.workerPools.0.machine.rollout.maxSurge", True),
        "tenants[0].workerPools[0].machine.rollout.maxSurge",
        "or a string",
    ),
    Mistake(
        "Cluster API of the last line",
        "prod",
        _set("management.existing.clusterApi.core", "v1.12.3"),
        "management.existing.clusterApi.core",
        "needs Cluster API v1.13.x",
    ),
    Mistake(
        "docker machines with metal3 installed",
        "prod",
        _set("tenants.0.workerPools.0.machine.provider", "docker"),
        "tenants[0].workerPools[0].machine.provider",
        "use the same for both",
    ),
    Mistake(
        "worker image from the lab",
        "prod",
        _set("workerImage", "kindest/node:v1.35.0"),
        "workerImage",
        "remove workerImage",
    ),
    Mistake(
        "kind management from the lab",
        "prod",
        _set("management.kind", {"clusterName": "gpu-lab"}),
        "management",
        "mode prod needs management.existing",
    ),
    Mistake(
        "metal3 namespace not adopted",
        "prod",
        _drop("tenants.0.managementNamespace"),
        "tenants[0].managementNamespace.existing",
        "set existing: true",
    ),
    Mistake(
        "metal3 tenant without an address",
        "prod",
        _drop("tenants.2.controlPlane.address"),
        "tenants[2].controlPlane.address",
        "fixed control-plane endpoint",
    ),
    Mistake(
        "precompiled driver by full version",
        "prod",
        _set("gpuDriver", {"source": "precompiled", "version": "595.91.07"}),
        "gpuDriver",
        "give version as the driver branch",
    ),
    Mistake(
        "repository file without suffix",
        "prod",
        _set("gpuDriver.packageRepositories", {"mirror": "deb http://m.internal/u noble"}),
        "gpuDriver",
        "name it e.g. mirror.list",
    ),
    Mistake(
        "cert-manager installed",
        "prod",
        _set("management.existing.certManager", "installed"),
        "management.existing.certManager",
        "write 'existing' or 'install'",
    ),
    Mistake(
        "cluster domain with underscore",
        "prod",
        _set("management.existing.clusterDomain", "cluster_local"),
        "management.existing.clusterDomain",
        "like cluster.local",
    ),
    Mistake(
        "two split counts in a tenant",
        "prod",
        _second_prod_pool,
        "tenants[0].workerPools[].slotsPerCard",
        "give them one value",
    ),
    Mistake(
        "external postgres without endpoints",
        "prod",
        _drop("tenants.2.dataStore.dedicated.endpoints"),
        "tenants[2].dataStore.dedicated",
        "give its endpoints",
    ),
    Mistake(
        "endpoint with a scheme",
        "prod",
        _set("tenants.2.dataStore.dedicated.endpoints", ["postgres://speech-pg:5432"]),
        "tenants[2].dataStore.dedicated.endpoints",
        "like db.example.internal:5432",
    ),
    Mistake(
        "machine template as a list",
        "prod",
        _set("tenants.0.workerPools.0.machine.template", [{"hostSelector": {}}]),
        "tenants[0].workerPools[0].machine.template",
        "template:\n        hostSelector:",
    ),
    Mistake(
        "quota smaller than the workloads",
        "prod",
        _set(
            "tenants.0.workloads",
            [
                {
                    "name": "big",
                    "namespace": "training",
                    "replicas": 50,
                    "gpu": {"memoryMiB": 80000, "cores": 100},
                }
            ],
        ),
        "tenants[0].gpuQuotas[0]",
        "raise it to at least",
    ),
    Mistake(
        "unreleased patch in prod",
        "prod",
        _set("tenants.0.kubernetesVersion", "v1.35.9"),
        "tenants[0].kubernetesVersion",
        "pick v1.35.7 or v1.36.0",
    ),
    Mistake(
        "lab tenant pasted into prod",
        "prod",
        lambda c: _p(c)["tenants"].append(_lab_platform()["tenants"][0]),
        "tenants[3]",
        "Cluster API machine spec",
    ),
    Mistake(
        "prod tenant without a backup target",
        "prod",
        _drop("tenants.1.backups.targetConfigKey"),
        "tenants[1].backups.targetConfigKey",
        "pulumi config set --secret",
    ),
    Mistake(
        "backup target that is not JSON",
        "prod",
        _top("gpu-platform:llmBackupTarget", Secret("https://s3.example.internal")),
        "llmBackupTarget",
        "set it to a JSON object with endpoint, bucket",
    ),
    Mistake(
        "backup target without its secret key",
        "prod",
        _top(
            "gpu-platform:llmBackupTarget",
            Secret('{"endpoint": "https://s3.example", "bucket": "llm", "accessKeyId": "a"}'),
        ),
        "llmBackupTarget",
        "lacks secretAccessKey",
    ),
    Mistake(
        "backup target in clear text",
        "prod",
        _top(
            "gpu-platform:llmBackupTarget",
            '{"endpoint": "https://s3.example", "bucket": "llm", "accessKeyId": "a", '
            '"secretAccessKey": "hunter2"}',
        ),
        "llmBackupTarget",
        "remove it from the stack file",
    ),
]

MISTAKES = LAB + PROD


def test_the_table_is_large_and_covers_both_stacks() -> None:
    assert len(MISTAKES) >= 60
    assert {m.stack for m in MISTAKES} == {"lab", "prod"}
    assert len({m.id for m in MISTAKES}) == len(MISTAKES)


@pytest.mark.parametrize("mistake", MISTAKES, ids=[f"{m.stack}: {m.id}" for m in MISTAKES])
def test_a_mistake_registers_nothing_and_says_the_fix(mistake: Mistake) -> None:
    config = copy.deepcopy(load_stack_config(mistake.stack))
    mistake.make(config)
    recording = evaluate(mistake.stack, preview=False, config=config)
    assert recording.resources == [], f"registered {len(recording.resources)} before failing"
    assert recording.run_error, recording.error
    message = recording.error or ""
    assert mistake.key in message, message
    assert mistake.fix in message, message
    assert "Traceback" not in message
