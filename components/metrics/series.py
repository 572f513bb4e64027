"""Every upstream series the rules and dashboards name, with its labels and where it is defined.

Each entry cites the pinned upstream source (repository, tag, path:line) where the series' name
and label names are declared. ``tests/unit/test_metrics_promql.py`` parses every expression of
the rules and dashboards and refuses a metric or label name that is not listed here (or is not
one the platform adds, ``PLATFORM_LABELS``, or a recorded series of ``rules``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from components.metrics import dra_claims


@dataclass(frozen=True)
class Series:
    name: str
    labels: tuple[str, ...]
    source: str
    """``owner/repo tag path:line`` of the declaration."""


_HAMI = "Project-HAMi/HAMi v2.10.0"
SCHEDULER_SERIES = f"{_HAMI} cmd/scheduler/metrics.go"
MONITOR_SERIES = f"{_HAMI} cmd/vGPUmonitor/metrics.go"
_KAMAJI = "clastix/kamaji 26.8.2-edge internal/metrics/metrics.go"
# The GPU Operator v26.7.0 runs dcgm-exporter 4.6.0-4.8.3-distroless
# (deployments/gpu-operator/values.yaml:299-304) with DCGM_EXPORTER_COLLECTORS
# /etc/dcgm-exporter/dcp-metrics-included.csv
# (assets/state-dcgm-exporter/0800_daemonset.yaml:47-48).
# The newest dcgm-exporter tag this workspace holds is 4.5.3-4.8.2: the file is cited there.
DCGM_SERIES = "NVIDIA/dcgm-exporter 4.5.3-4.8.2 etc/dcp-metrics-included.csv"
_DCGM_LABELS = (
    "internal/pkg/collector/gpu_collector.go:167, internal/pkg/transformation/const.go:21-23"
)

PROMETHEUS_SERIES = "prometheus/prometheus v3.5.0"
DRA_SERIES = "gpu-platform components/metrics/dra_claims.py"
DRA_LABELS = dra_claims.LABELS

# The HAMi scheduler registers its collector under a constant ``zone="vGPU"`` label
# (cmd/scheduler/metrics.go:409, initMetrics :417).
_ZONE = ("zone",)
_NODE_DEVICE = ("node", "device_uuid", "device_index", "device_type", *_ZONE)
_CONTAINER_ALLOC = ("namespace", "node", "pod", "container_index", "device_uuid", *_ZONE)
_CONTAINER_USE = ("namespace", "pod", "container", "vdevice_index", "device_uuid")
_KSM = "kubernetes/kube-state-metrics v2.20.0 internal/store"
_KSM_CRONJOB = ("namespace", "cronjob")
_KSM_JOB = ("namespace", "job_name")
_KSM_POD = ("namespace", "pod", "uid")

TRACED: Mapping[str, Series] = MappingProxyType(
    {
        s.name: s
        for s in (
            # HAMi scheduler (the extender, :9395): what HAMi gave out.
            Series("hami_gpu_memory_limit_bytes", _NODE_DEVICE, f"{SCHEDULER_SERIES}:107-111"),
            Series("hami_gpu_core_limit_ratio", _NODE_DEVICE, f"{SCHEDULER_SERIES}:112-116"),
            Series(
                "hami_gpu_memory_allocated_bytes",
                (*_NODE_DEVICE, "device_cores"),
                f"{SCHEDULER_SERIES}:117-121",
            ),
            Series("hami_gpu_shared_count", _NODE_DEVICE, f"{SCHEDULER_SERIES}:122-126"),
            Series("hami_gpu_core_allocated_ratio", _NODE_DEVICE, f"{SCHEDULER_SERIES}:127-131"),
            Series(
                "hami_resource_quota_used",
                ("namespace", "quota_name", "limit", *_ZONE),
                f"{SCHEDULER_SERIES}:286-290",
            ),
            Series(
                "hami_resource_quota_limit",
                ("namespace", "quota_name", *_ZONE),
                f"{SCHEDULER_SERIES}:291-295",
            ),
            Series(
                "hami_vgpu_memory_allocated_bytes", _CONTAINER_ALLOC, f"{SCHEDULER_SERIES}:325-329"
            ),
            Series(
                "hami_vgpu_core_allocated_ratio", _CONTAINER_ALLOC, f"{SCHEDULER_SERIES}:330-334"
            ),
            # HAMi device plugin's vgpu-monitor container (:9394): what the containers used.
            Series("hami_vgpu_memory_used_bytes", _CONTAINER_USE, f"{MONITOR_SERIES}:76-80"),
            Series("hami_vgpu_memory_limit_bytes", _CONTAINER_USE, f"{MONITOR_SERIES}:82-86"),
            Series(
                "hami_container_device_utilization_ratio", _CONTAINER_USE, f"{MONITOR_SERIES}:92-96"
            ),
            Series(
                "hami_host_gpu_memory_used_bytes",
                ("node", "device_index", "device_uuid", "device_type"),
                f"{MONITOR_SERIES}:58-62",
            ),
            # The rest of HAMi's families (its own dashboard reads them; the platform's does not).
            Series(
                "hami_node_gpu_overview",
                (*_NODE_DEVICE, "device_cores", "device_memory_limit"),
                f"{SCHEDULER_SERIES}:132-136",
            ),
            Series(
                "hami_node_gpu_memory_allocated_ratio", _NODE_DEVICE, f"{SCHEDULER_SERIES}:137-141"
            ),
            Series(
                "hami_node_gpu_mig_instance_info",
                (
                    "node",
                    "device_uuid",
                    "device_index",
                    "mig_uuid",
                    "profile",
                    "gpu_instance_id",
                    "compute_instance_id",
                    "placement_start",
                    "placement_size",
                    *_ZONE,
                ),
                f"{SCHEDULER_SERIES}:142-146",
            ),
            Series(
                "hami_host_gpu_utilization_ratio",
                ("node", "device_index", "device_uuid", "device_type"),
                f"{MONITOR_SERIES}:64-68",
            ),
            Series(
                "hami_host_gpu_memory_controller_utilization_ratio",
                ("device_index", "device_uuid", "device_type"),
                f"{MONITOR_SERIES}:70-74",
            ),
            Series("hami_container_device_memory_bytes", _CONTAINER_USE, f"{MONITOR_SERIES}:87-91"),
            Series(
                "hami_container_last_kernel_elapsed_seconds",
                _CONTAINER_USE,
                f"{MONITOR_SERIES}:97-101",
            ),
            Series(
                "hami_mig_device_info",
                (*_CONTAINER_USE, "mig_uuid", "profile", "gpu_instance_id", "compute_instance_id"),
                f"{MONITOR_SERIES}:102-106",
            ),
            Series("hami_vgpu_memory_context_bytes", _CONTAINER_USE, f"{MONITOR_SERIES}:107-111"),
            Series("hami_vgpu_memory_module_bytes", _CONTAINER_USE, f"{MONITOR_SERIES}:113-117"),
            Series("hami_vgpu_memory_buffer_bytes", _CONTAINER_USE, f"{MONITOR_SERIES}:119-123"),
            # Kamaji's controller (:8080, kamaji-system/kamaji-metrics-service).
            Series(
                "kamaji_tenant_control_plane_status",
                ("tcp_namespace", "tcp_name", "status", "ready"),
                f"{_KAMAJI}:165-170",
            ),
            Series(
                "kamaji_datastore_status",
                ("datastore_name", "status", "ready"),
                f"{_KAMAJI}:177-182",
            ),
            Series("kamaji_tenant_control_planes_current", ("ready",), f"{_KAMAJI}:183-188"),
            Series(
                "kamaji_certificates_current",
                ("tcp_namespace", "tcp_name", "status", "strategy"),
                f"{_KAMAJI}:195-200",
            ),
            # Prometheus' own: a scrape's health, written for every target and left alone by
            # metric_relabel_configs (scrape/scrape.go:721-735); the central server's rules and
            # store (its ``prometheus`` job) and an agent's remote write (its
            # ``gpu-metrics-agent`` job), which the alerts read.
            Series("up", (), f"{PROMETHEUS_SERIES} scrape/scrape.go:2037-2038"),
            Series(
                "prometheus_rule_evaluation_failures_total",
                ("rule_group",),
                f"{PROMETHEUS_SERIES} rules/group.go:970-976",
            ),
            Series(
                "prometheus_tsdb_lowest_timestamp_seconds",
                (),
                f"{PROMETHEUS_SERIES} cmd/prometheus/main.go:1451-1453",
            ),
            Series(
                "prometheus_tsdb_retention_limit_seconds",
                (),
                f"{PROMETHEUS_SERIES} tsdb/db.go:381-384",
            ),
            Series(
                "prometheus_remote_storage_samples_failed_total",
                ("remote_name", "url"),
                f"{PROMETHEUS_SERIES} storage/remote/queue_manager.go:136-141 "
                "(labels storage/remote/storage.go:38-43)",
            ),
            # DCGM exporter (prod only, :9400): measured use of whole cards, per card. Never
            # per pod under HAMi: HAMi's device plugin advertises each card as
            # "<GPU-UUID>-<i>" sharing slots (Project-HAMi/HAMi v2.10.0
            # pkg/device-plugin/nvidiadevice/nvinternal/rm/devices.go:202-215), and
            # dcgm-exporter maps pods to cards by the kubelet's device IDs, looked up by the
            # bare UUID (internal/pkg/transformation/kubernetes.go:419-423, 900-909): no match,
            # so no pod, namespace or container label. (And with shares the kubelet's slot
            # says nothing of which card HAMi chose.) What a tenant used of a shared card is
            # HAMi-core's count, the vgpu-monitor series above.
            Series(
                "DCGM_FI_DEV_FB_USED",
                ("gpu", "UUID", "Hostname", "modelName"),
                f"{DCGM_SERIES}:39; labels {_DCGM_LABELS}",
            ),
            Series(
                "DCGM_FI_DEV_GPU_UTIL",
                ("gpu", "UUID", "Hostname", "modelName"),
                f"{DCGM_SERIES}:23; labels {_DCGM_LABELS}",
            ),
            # kube-state-metrics (management cluster, the backup alerts:
            # components.metrics.backup_alerts); default labels cronjob.go:48, job.go:42,
            # pod.go:41.
            *(
                Series(name, _KSM_CRONJOB, f"{_KSM}/cronjob.go:{line}")
                for name, line in (
                    ("kube_cronjob_created", 120),
                    ("kube_cronjob_status_last_schedule_time", 159),
                    ("kube_cronjob_status_last_successful_time", 181),
                    ("kube_cronjob_spec_suspend", 203),
                    ("kube_cronjob_next_schedule_time", 244),
                )
            ),
            Series("kube_job_failed", (*_KSM_JOB, "condition"), f"{_KSM}/job.go:314"),
            Series("kube_job_status_start_time", _KSM_JOB, f"{_KSM}/job.go:339"),
            Series("kube_pod_created", _KSM_POD, f"{_KSM}/pod.go:592"),
            Series(
                "kube_pod_container_status_terminated_reason",
                (*_KSM_POD, "container", "reason"),
                f"{_KSM}/pod.go:515-527",
            ),
            Series(
                "kube_pod_init_container_status_terminated_reason",
                (*_KSM_POD, "container", "reason"),
                f"{_KSM}/pod.go:1056-1067",
            ),
            # The platform's own DRA claims exporter (components.metrics.dra_claims): which
            # device each ResourceClaim of a gpuSharing: dra tenant holds; no upstream exporter
            # at the pinned tags writes it (that module's docstring says why).
            *(
                Series(name, DRA_LABELS, DRA_SERIES)
                for name in (dra_claims.CARDS, dra_claims.MEMORY)
            ),
        )
    }
)

# Labels every collected series carries, set by the platform's scrape configuration
# (components.metrics.scrape), never by the scraped process.
TENANT_LABEL = "tenant"
# On a ``gpuSharing: dra`` tenant's agent self-scrape only (``scrape.agent_config``): ``dra``,
# so an alert can tell which tenants must have a claims exporter scraped.
SHARING_LABEL = "gpu_sharing"
PLATFORM_LABELS = (TENANT_LABEL, "job", "instance", "source", SHARING_LABEL)
