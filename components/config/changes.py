"""What a change of each configuration key does to a running stack (issue 39).

Every key of the schema (``components.config_reference.reference_rows``) is marked here, and the
reference table shows the mark beside the key (``tests/unit/test_config_changes.py`` fails on a
key without one):

* ``changeable``: ``pulumi up`` applies it in place, nothing is replaced;
  ``tests/program/test_day2_changes.py`` previews such an update of the deployed stack for each of
  these keys where the offline harness can show it (the exceptions are listed there, with why);
* ``with care``: applied, with a consequence the note names (a rollout, replaced workers, objects
  deleted);
* ``fixed at creation``: not supported on a running stack: refused at preview (the datastore
  keys), or it would re-create what a running tenant depends on; the note says what to do instead.

Pure data: the keys are the reference's paths (``tenants[].dataStore.schema``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

CHANGEABLE = "changeable"
WITH_CARE = "with care"
FIXED = "fixed at creation"
MARKS = (CHANGEABLE, WITH_CARE, FIXED)

_KIND = "replaces the kind cluster, and with it every tenant: make destroy, then make lab"
_CAPI_VERSION = "upgrades the provider through the operator; read its release notes first"
_CAPI_FETCH = "where the operator installs the provider from; it re-installs the provider"
_POOL_ROLL = "rolls the pool: lab workers are replaced one at a time, prod machines by rollout"
_DATASTORE = "refused at preview once the tenant runs (Fixed at creation, below)"
_TENANT_ID = "names everything of the tenant: a change is a new tenant and deletes the old"
_WORKLOAD_ID = "replaces the workload's Deployment (its pods restart)"
_NETWORK = "Calico's pool and the control plane's ranges are set up once: a new tenant"
_DRIVER = "the GPU Operator rebuilds or reloads the driver: GPU pods on each node restart"

CHANGES: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "mode": (FIXED, "lab and prod build different things: a new stack"),
        "kubernetesVersion": (WITH_CARE, "upgrades every tenant that sets none (skew rules below)"),
        "workerImage": (WITH_CARE, "replaces every lab worker, one at a time"),
        "management": (WITH_CARE, "see its keys"),
        "management.kind": (FIXED, _KIND),
        "management.kind.clusterName": (FIXED, _KIND),
        "management.kind.nodeImage": (FIXED, _KIND),
        "management.kind.dockerNetwork": (FIXED, _KIND),
        "management.kind.metallbPoolSize": (
            WITH_CARE,
            "growing it is safe; a smaller pool can leave a tenant's address outside it",
        ),
        "management.kind.podSubnet": (FIXED, _KIND),
        "management.kind.serviceSubnet": (FIXED, _KIND),
        "management.existing": (WITH_CARE, "see its keys"),
        "management.existing.kubeconfigConfigKey": (
            WITH_CARE,
            "must name the same cluster (the provider keeps its identity, nothing is re-created)",
        ),
        "management.existing.kamajiEtcd": (
            FIXED,
            "tenants on the DataStore 'default' keep it; turning it off deletes their etcd",
        ),
        "management.existing.certManager": (
            FIXED,
            "install -> existing uninstalls the cert-manager every etcd and webhook uses",
        ),
        "management.existing.clusterDomain": (
            FIXED,
            "every etcd member, certificate and DataStore endpoint name ends in it",
        ),
        "management.existing.clusterApi": (WITH_CARE, "see its keys"),
        "management.existing.clusterApi.core": (WITH_CARE, _CAPI_VERSION),
        "management.existing.clusterApi.bootstrapKubeadm": (WITH_CARE, _CAPI_VERSION),
        "management.existing.clusterApi.controlPlaneKamaji": (WITH_CARE, _CAPI_VERSION),
        "management.existing.clusterApi.infrastructure": (WITH_CARE, "see its keys"),
        "management.existing.clusterApi.infrastructure.name": (
            FIXED,
            "every pool's machines belong to that provider",
        ),
        "management.existing.clusterApi.infrastructure.version": (WITH_CARE, _CAPI_VERSION),
        "management.existing.clusterApi.githubTokenConfigKey": (
            CHANGEABLE,
            "a new token is a new Secret the provider objects move to",
        ),
        "management.existing.clusterApi.fetch": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.core": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.core.oci": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.core.configMapLabels": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.bootstrapKubeadm": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.bootstrapKubeadm.oci": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.bootstrapKubeadm.configMapLabels": (
            WITH_CARE,
            _CAPI_FETCH,
        ),
        "management.existing.clusterApi.fetch.controlPlaneKamaji": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.controlPlaneKamaji.oci": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.controlPlaneKamaji.configMapLabels": (
            WITH_CARE,
            _CAPI_FETCH,
        ),
        "management.existing.clusterApi.fetch.infrastructure": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.infrastructure.oci": (WITH_CARE, _CAPI_FETCH),
        "management.existing.clusterApi.fetch.infrastructure.configMapLabels": (
            WITH_CARE,
            _CAPI_FETCH,
        ),
        "hami": (CHANGEABLE, "see its keys"),
        "hami.webhookFailurePolicy": (CHANGEABLE, "HAMi's release in every tenant"),
        "hami.nodeLockTimeout": (CHANGEABLE, "HAMi's release in every tenant"),
        "hami.gpuSchedulerPolicy": (CHANGEABLE, "HAMi's release in every tenant"),
        "hami.nodeSchedulerPolicy": (CHANGEABLE, "HAMi's release in every tenant"),
        "metrics": (CHANGEABLE, "see its keys"),
        "metrics.enabled": (WITH_CARE, "false deletes Prometheus, Grafana and their samples"),
        "metrics.retention": (CHANGEABLE, "the central Prometheus restarts with it"),
        "metrics.scrapeInterval": (CHANGEABLE, "every tenant's agent"),
        "metrics.alertmanagers": (CHANGEABLE, "the central Prometheus' configuration"),
        "metrics.prometheusOperator": (
            WITH_CARE,
            "switching to it deletes the platform's Prometheus, Grafana and their samples; "
            "switching back creates them empty",
        ),
        "metrics.prometheusOperator.remoteWriteUrl": (
            WITH_CARE,
            "every agent writes there from then on; the old server keeps what it has, so a bill "
            "across the switch reads both",
        ),
        "metrics.prometheusOperator.labels": (
            WITH_CARE,
            "the operator's rule and scrape-config selectors must still match them, or its "
            "Prometheus drops the rules",
        ),
        "capacity": (CHANGEABLE, "see its keys"),
        "capacity.headroomPercent": (
            CHANGEABLE,
            "only where the preview warns: nothing deployed changes",
        ),
        "metrics.storageSize": (
            FIXED,
            "a claim's size grows only where its StorageClass allows expansion",
        ),
        "gpuDriver": (WITH_CARE, _DRIVER),
        "gpuDriver.source": (WITH_CARE, _DRIVER),
        "gpuDriver.version": (WITH_CARE, _DRIVER),
        "gpuDriver.packageRepositories": (WITH_CARE, _DRIVER),
        "gpuDriver.autoUpgrade": (CHANGEABLE, "the GPU Operator's upgrade policy"),
        "dataStores": (WITH_CARE, "a DataStore a tenant uses cannot go"),
        "dataStores[].name": (FIXED, "tenants are bound to it by name"),
        "dataStores[].driver": (FIXED, "Kamaji migrates nothing across drivers"),
        "dataStores[].endpoints": (CHANGEABLE, "another address of the same database"),
        "dataStores[].credentialsConfigKey": (
            WITH_CARE,
            "must hold working credentials of the same database",
        ),
        "tenants": (WITH_CARE, "adding one is safe; removing one deletes it and its data"),
        "tenants[].name": (FIXED, _TENANT_ID),
        "tenants[].gpuSharing": (
            WITH_CARE,
            "swaps HAMi's device plugin and the DRA driver and re-creates every declared workload "
            "on the other path; running GPU pods of the old path lose their cards; prod, dra "
            "back to hami: the chart keeps the GPUCluster, which stops the ClusterPolicy, so "
            "delete it in the tenant (kubectl delete gpucluster gpu-cluster; docs/dra.md)",
        ),
        "tenants[].kubernetesVersion": (
            WITH_CARE,
            "an upgrade: one minor at a time, no downgrade (checked at preview)",
        ),
        "tenants[].dataStore": (FIXED, _DATASTORE),
        "tenants[].dataStore.name": (FIXED, _DATASTORE),
        "tenants[].dataStore.dedicated": (FIXED, _DATASTORE),
        "tenants[].dataStore.dedicated.driver": (FIXED, _DATASTORE),
        "tenants[].dataStore.dedicated.replicas": (FIXED, _DATASTORE),
        "tenants[].dataStore.dedicated.storageSize": (FIXED, _DATASTORE),
        "tenants[].dataStore.dedicated.storageClassName": (FIXED, _DATASTORE),
        "tenants[].dataStore.dedicated.endpoints": (
            CHANGEABLE,
            "another address of the same datastore",
        ),
        "tenants[].dataStore.dedicated.credentialsConfigKey": (
            WITH_CARE,
            "must hold working credentials of the same datastore",
        ),
        "tenants[].dataStore.schema": (FIXED, _DATASTORE),
        "tenants[].dataStore.username": (FIXED, _DATASTORE),
        "tenants[].network": (FIXED, _NETWORK),
        "tenants[].network.podCidr": (FIXED, _NETWORK),
        "tenants[].network.serviceCidr": (FIXED, _NETWORK),
        "tenants[].controlPlane": (CHANGEABLE, "see its keys"),
        "tenants[].controlPlane.replicas": (CHANGEABLE, "Kamaji scales the control plane"),
        "tenants[].controlPlane.serviceType": (FIXED, "LoadBalancer is the only value"),
        "tenants[].controlPlane.address": (
            FIXED,
            "kubeconfigs, certificates and joined workers name the old address",
        ),
        "tenants[].controlPlane.resources": (CHANGEABLE, "a rolling update of its pods"),
        "tenants[].controlPlane.resources.apiServer": (CHANGEABLE, "a rolling update"),
        "tenants[].controlPlane.resources.apiServer.requests": (CHANGEABLE, "a rolling update"),
        "tenants[].controlPlane.resources.apiServer.limits": (CHANGEABLE, "a rolling update"),
        "tenants[].controlPlane.resources.controllerManager": (CHANGEABLE, "a rolling update"),
        "tenants[].controlPlane.resources.controllerManager.requests": (
            CHANGEABLE,
            "a rolling update",
        ),
        "tenants[].controlPlane.resources.controllerManager.limits": (
            CHANGEABLE,
            "a rolling update",
        ),
        "tenants[].controlPlane.resources.scheduler": (CHANGEABLE, "a rolling update"),
        "tenants[].controlPlane.resources.scheduler.requests": (CHANGEABLE, "a rolling update"),
        "tenants[].controlPlane.resources.scheduler.limits": (CHANGEABLE, "a rolling update"),
        "tenants[].controlPlane.admissionControllers": (
            WITH_CARE,
            "a rolling update; removing the GPU rules' plugins weakens them",
        ),
        "tenants[].gpuQuotas": (CHANGEABLE, "the namespaces' ResourceQuotas"),
        "tenants[].gpuQuotas[].namespace": (
            WITH_CARE,
            "the old namespace's quota is deleted",
        ),
        "tenants[].gpuQuotas[].gpuMemoryMiB": (CHANGEABLE, "a lower one admits no new pod over it"),
        "tenants[].gpuQuotas[].gpuCores": (CHANGEABLE, "a lower one admits no new pod over it"),
        "tenants[].gpuQuotas[].gpus": (CHANGEABLE, "a lower one admits no new pod over it"),
        "tenants[].deviceQuotas": (CHANGEABLE, "the namespaces' ResourceQuotas"),
        "tenants[].deviceQuotas[].namespace": (
            WITH_CARE,
            "the old namespace's quota is deleted",
        ),
        "tenants[].deviceQuotas[].devices": (
            CHANGEABLE,
            "a lower one admits no new claim over it",
        ),
        "tenants[].workerPools": (WITH_CARE, "removing a pool drains and deletes its nodes"),
        "tenants[].workerPools[].name": (FIXED, "names the pool's nodes: a new pool"),
        "tenants[].workerPools[].replicas": (
            CHANGEABLE,
            "scale; a scale-down drains the last nodes",
        ),
        "tenants[].workerPools[].cards": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].cards[].model": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].cards[].memoryMiB": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].cards[].coreUnits": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].cards[].product": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].cards[].count": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].slotsPerCard": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].deviceMode": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].machine": (WITH_CARE, "see its keys"),
        "tenants[].workerPools[].machine.provider": (
            FIXED,
            "the infrastructure provider's machines: a new pool",
        ),
        "tenants[].workerPools[].machine.template": (WITH_CARE, _POOL_ROLL),
        "tenants[].workerPools[].machine.healthCheck": (CHANGEABLE, "the MachineHealthCheck"),
        "tenants[].workerPools[].machine.healthCheck.enabled": (
            CHANGEABLE,
            "the MachineHealthCheck",
        ),
        "tenants[].workerPools[].machine.healthCheck.unhealthyAfter": (
            CHANGEABLE,
            "the MachineHealthCheck",
        ),
        "tenants[].workerPools[].machine.healthCheck.maxUnhealthy": (
            CHANGEABLE,
            "the MachineHealthCheck",
        ),
        "tenants[].workerPools[].machine.rollout": (CHANGEABLE, "the MachineDeployment's strategy"),
        "tenants[].workerPools[].machine.rollout.maxSurge": (
            CHANGEABLE,
            "the MachineDeployment's strategy",
        ),
        "tenants[].workerPools[].machine.rollout.maxUnavailable": (
            CHANGEABLE,
            "the MachineDeployment's strategy",
        ),
        "tenants[].workloads": (CHANGEABLE, "declared workloads are added or deleted"),
        "tenants[].workloads[].name": (WITH_CARE, _WORKLOAD_ID),
        "tenants[].workloads[].namespace": (WITH_CARE, _WORKLOAD_ID),
        "tenants[].workloads[].replicas": (CHANGEABLE, "the Deployment scales"),
        "tenants[].workloads[].image": (CHANGEABLE, "a rolling update"),
        "tenants[].workloads[].command": (CHANGEABLE, "a rolling update"),
        "tenants[].workloads[].gpu": (CHANGEABLE, "a rolling update; HAMi places the new pods"),
        "tenants[].workloads[].gpu.cards": (CHANGEABLE, "a rolling update"),
        "tenants[].workloads[].gpu.memoryMiB": (CHANGEABLE, "a rolling update"),
        "tenants[].workloads[].gpu.memoryPercentage": (CHANGEABLE, "a rolling update"),
        "tenants[].workloads[].gpu.cores": (CHANGEABLE, "a rolling update"),
        "tenants[].managementNamespace": (FIXED, "holds the tenant's control plane and etcd"),
        "tenants[].managementNamespace.name": (FIXED, "holds the tenant's control plane and etcd"),
        "tenants[].managementNamespace.existing": (
            FIXED,
            "adopted or created: Pulumi would delete or forget it",
        ),
        "tenants[].admission": (CHANGEABLE, "the tenant's admission policies"),
        "tenants[].admission.mode": (CHANGEABLE, "roll out with Warn, then Deny"),
        "tenants[].admission.maxGpuMemoryMiB": (CHANGEABLE, "applies to new pods"),
        "tenants[].admission.wholeCards": (CHANGEABLE, "applies to new pods"),
        "tenants[].admission.privilegedNamespaces": (CHANGEABLE, "applies to new pods"),
        "tenants[].backups": (CHANGEABLE, "the tenant's backup CronJobs"),
        "tenants[].backups.enabled": (
            WITH_CARE,
            "false deletes the CronJobs; the backups already written stay in the bucket",
        ),
        "tenants[].backups.schedule": (CHANGEABLE, "the backup CronJob"),
        "tenants[].backups.retention": (CHANGEABLE, "applies at the next backup"),
        "tenants[].backups.targetConfigKey": (
            WITH_CARE,
            "new backups go to the new target; older ones stay in the old",
        ),
    }
)
