"""The design's load-bearing facts, judged on the objects Helm renders (not on the values).

Each judge takes a ``RenderedStack`` and the stack's raw ``gpu-platform:platform`` block and
returns one line per violation. Expectations come from the stack config and from upstream facts
(``../shared/design/platform.md`` §3), never from the program's own builders, so a wrong builder
cannot agree with itself here. ``tests/render/test_net_can_fail.py`` shows every judge failing on
a deliberately broken render.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from tests.support.charts import RenderedRelease
from tests.support.rendered_stack import Cluster, RenderedStack

Platform = Mapping[str, Any]

MOCK_PLUGIN_IMAGE = "projecthami/mock-device-plugin"
REAL_PLUGIN_COMMAND = "nvidia-device-plugin"
HAMI_SCHEDULER_DEPLOYMENT = "hami-scheduler"
# Namespaces HAMi's Fail webhook must never cover (platform.md §3 "HAMi"): the system namespace
# that runs the Konnectivity agent the webhook path needs, and the CNI's namespaces (Calico's
# operator creates calico-system itself). The tenant's chart namespaces are added per tenant.
ALWAYS_EXCLUDED = ("kube-system", "calico-system")
# Kamaji's benchmark (clastix/kamaji docs/content/reference/benchmark.md at 26.8.2-edge) saw
# about 600 MiB for 100 control planes; 512 MiB leaves a small lab and a modest prod room.
KAMAJI_MIN_MEMORY_LIMIT_MIB = 512
# Labels the kubelet always sets on its Node (kubelet well-known labels).
KUBELET_LABELS = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}


# --------------------------------------------------------------------------------- helpers


def tenant_clusters(stack: RenderedStack) -> Iterator[Cluster]:
    return (c for c in stack.clusters.values() if c.name != "management")


def releases_on(stack: RenderedStack, cluster: Cluster) -> list[RenderedRelease]:
    by_urn = stack.recording.by_urn()
    return [
        r for urn, r in stack.releases.items() if by_urn[urn].provider_urn == cluster.provider_urn
    ]


def rendered_of_chart(stack: RenderedStack, cluster: Cluster, chart: str) -> list[RenderedRelease]:
    return [r for r in releases_on(stack, cluster) if r.chart == chart]


def tenant_config(platform: Platform, name: str) -> Mapping[str, Any]:
    return next(t for t in platform["tenants"] if t["name"] == name)


def pool_modes(platform: Platform, tenant: Mapping[str, Any]) -> set[str]:
    default = "mock" if platform["mode"] == "lab" else "nvidia"
    return {pool.get("deviceMode") or default for pool in tenant["workerPools"]}


def pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(pod_spec(obj).get("containers") or [])


def image_tag(image: str) -> str:
    without_digest = image.split("@", 1)[0]
    name, _, tag = without_digest.rpartition(":")
    return tag if "/" not in tag and name else ""


def seconds(duration: str) -> float:
    """A Go duration (``30s``, ``5m``, ``1h30m``) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Go duration: {duration!r}")
    return sum(float(n) * units[u] for n, u in parts)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels + matchExpressions) against labels."""
    if selector is None:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, op = expression["key"], expression["operator"]
        values = set(expression.get("values") or [])
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[op]
        if not ok:
            return False
    return True


def namespace_labels(stack: RenderedStack, cluster: Cluster, name: str) -> dict[str, str]:
    """The labels a namespace would carry: the automatic name label, plus those of a Namespace
    object the stack creates on that cluster."""
    labels = {"kubernetes.io/metadata.name": name}
    for placed in stack.on_cluster(cluster):
        meta = placed.obj.get("metadata") or {}
        if placed.kind == "Namespace" and meta.get("name") == name:
            labels.update(meta.get("labels") or {})
    return labels


# ----------------------------------------------------------------------------------- judges


def hami_webhook(stack: RenderedStack, platform: Platform) -> list[str]:
    """HAMi's mutating webhook: the configured failurePolicy (``Fail`` by default, always in
    prod); it never covers kube-system, the CNI's or the tenant's chart namespaces; it always
    covers the namespaces where the tenant's declared GPU workloads and quotas live."""
    wanted = (platform.get("hami") or {}).get("webhookFailurePolicy") or "Fail"
    if platform["mode"] == "prod":
        wanted = "Fail"
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        tenant = tenant_config(platform, cluster.name)
        hooks = [
            hook
            for release in rendered_of_chart(stack, cluster, "hami")
            for config in release.of_kind("MutatingWebhookConfiguration")
            for hook in config.get("webhooks") or []
        ]
        if not hooks:
            problems.append(f"{cluster.name}: HAMi renders no mutating webhook")
        excluded = set(ALWAYS_EXCLUDED) | {r.namespace for r in releases_on(stack, cluster)}
        covered = {w.get("namespace", "default") for w in tenant.get("workloads") or []}
        covered |= {q["namespace"] for q in tenant.get("gpuQuotas") or []}
        for hook in hooks:
            name = hook.get("name")
            if hook.get("failurePolicy") != wanted:
                problems.append(
                    f"{cluster.name}: webhook {name} failurePolicy is "
                    f"{hook.get('failurePolicy')}, not {wanted}"
                )
            selector = hook.get("namespaceSelector")
            for namespace in sorted(excluded):
                if selector_matches(selector, namespace_labels(stack, cluster, namespace)):
                    problems.append(f"{cluster.name}: webhook {name} covers namespace {namespace}")
            for namespace in sorted(covered):
                if not selector_matches(selector, namespace_labels(stack, cluster, namespace)):
                    problems.append(
                        f"{cluster.name}: webhook {name} skips namespace {namespace}, where GPU "
                        "workloads or quotas are declared"
                    )
    return problems


def _hami_scheduler(stack: RenderedStack, cluster: Cluster) -> Mapping[str, Any] | None:
    for release in rendered_of_chart(stack, cluster, "hami"):
        for obj in release.of_kind("Deployment"):
            if obj["metadata"]["name"] == HAMI_SCHEDULER_DEPLOYMENT:
                return obj
    return None


def scheduler_version(stack: RenderedStack, platform: Platform) -> list[str]:
    """The kube-scheduler inside hami-scheduler runs the tenant's Kubernetes version."""
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        deployment = _hami_scheduler(stack, cluster)
        if deployment is None:
            problems.append(f"{cluster.name}: HAMi renders no {HAMI_SCHEDULER_DEPLOYMENT}")
            continue
        images = [c["image"] for c in containers(deployment) if "kube-scheduler" in c["image"]]
        wanted = next(
            (
                t.get("kubernetesVersion")
                for t in platform.get("tenants") or []
                if t.get("name") == cluster.name and t.get("kubernetesVersion")
            ),
            platform["kubernetesVersion"],
        )
        if len(images) != 1 or image_tag(images[0]) != wanted:
            problems.append(
                f"{cluster.name}: hami-scheduler's kube-scheduler image is {images}, not tag "
                f"{wanted}"
            )
    return problems


def node_lock_expiry(stack: RenderedStack, platform: Platform) -> list[str]:
    """The scheduler extender has one node-lock expiry, the configured one: a single
    ``--node-lock-timeout`` flag or ``HAMI_NODELOCK_EXPIRE`` variable (HAMi v2.10.0
    ``cmd/scheduler/main.go:114``: the flag silently overrides the variable, so two that differ
    leave the rendered Deployment saying two things)."""
    wanted = (platform.get("hami") or {}).get("nodeLockTimeout") or "30s"
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        deployment = _hami_scheduler(stack, cluster)
        extenders = [
            c for c in containers(deployment or {}) if (c.get("command") or [""])[0] == "scheduler"
        ]
        if len(extenders) != 1:
            problems.append(f"{cluster.name}: no single HAMi scheduler-extender container")
            continue
        extender = extenders[0]
        settings = [
            ("--node-lock-timeout", arg.split("=", 1)[1])
            for arg in [*(extender.get("command") or []), *(extender.get("args") or [])]
            if arg.startswith("--node-lock-timeout=")
        ]
        settings += [
            ("HAMI_NODELOCK_EXPIRE", str(env.get("value")))
            for env in extender.get("env") or []
            if env.get("name") == "HAMI_NODELOCK_EXPIRE"
        ]
        if len(settings) != 1:
            found = ", ".join(f"{source}={value}" for source, value in settings) or "none"
            problems.append(f"{cluster.name}: the extender must set one node-lock expiry ({found})")
        for source, value in settings:
            if seconds(value) != seconds(wanted):
                problems.append(
                    f"{cluster.name}: extender {source}={value}, but the configured node-lock "
                    f"expiry is {wanted}"
                )
    return problems


def _device_plugin_daemonsets(
    stack: RenderedStack, cluster: Cluster
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """("mock"|"nvidia", DaemonSet) for every device-plugin DaemonSet on a tenant cluster, from
    any chart or the program."""
    for placed in stack.on_cluster(cluster):
        if placed.kind != "DaemonSet":
            continue
        for container in containers(placed.obj):
            command = " ".join(container.get("command") or [])
            if MOCK_PLUGIN_IMAGE in str(container.get("image", "")):
                yield "mock", placed.obj
            elif command.startswith(REAL_PLUGIN_COMMAND):
                yield "nvidia", placed.obj


def pool_node_labels(
    stack: RenderedStack, platform: Platform, tenant: str
) -> dict[str, dict[str, str]]:
    """The labels the program gives each pool's nodes: lab — the NodePatch of each node; prod —
    the kubelet's ``--node-labels`` in the pool's KubeadmConfigTemplate."""
    labels: dict[str, dict[str, str]] = {}
    recording = stack.recording
    for reg in recording.resources:
        pool = recording.component_of(reg, ":GpuWorkerPool")
        owner = recording.component_of(reg, ":GpuTenant")
        if pool is None or owner is None or owner.name != tenant:
            continue
        found: dict[str, str] = {}
        if reg.type == "kubernetes:core/v1:NodePatch":
            found = dict((reg.inputs.get("metadata") or {}).get("labels") or {})
        elif reg.inputs.get("kind") == "KubeadmConfigTemplate":
            spec = (reg.inputs.get("spec") or {}).get("template", {}).get("spec", {})
            registration = (spec.get("joinConfiguration") or {}).get("nodeRegistration") or {}
            for arg in registration.get("kubeletExtraArgs") or []:
                if arg.get("name") == "node-labels":
                    found = dict(p.split("=", 1) for p in str(arg["value"]).split(",") if p)
        if found:
            labels.setdefault(pool.name, dict(KUBELET_LABELS)).update(found)
    return labels


def device_plugins(stack: RenderedStack, platform: Platform) -> list[str]:
    """Mock pools get HAMi's mock device plugin and never the real one, NVIDIA pools the
    reverse; every device-plugin DaemonSet's nodeSelector matches its pools' node labels."""
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        tenant = tenant_config(platform, cluster.name)
        modes = pool_modes(platform, tenant)
        plugins = list(_device_plugin_daemonsets(stack, cluster))
        found = {mode for mode, _ in plugins}
        for mode in sorted(modes - found):
            problems.append(f"{cluster.name}: pools use deviceMode {mode} but no such plugin runs")
        for mode in sorted(found - modes):
            problems.append(f"{cluster.name}: a {mode} device plugin runs, but no pool uses it")
        node_labels = pool_node_labels(stack, platform, cluster.name)
        for mode, daemonset in plugins:
            selector = pod_spec(daemonset).get("nodeSelector") or {}
            for pool in tenant["workerPools"]:
                pool_mode = pool.get("deviceMode") or (
                    "mock" if platform["mode"] == "lab" else "nvidia"
                )
                if pool_mode != mode:
                    continue
                labels = node_labels.get(f"{cluster.name}-{pool['name']}", {})
                missing = {k: v for k, v in selector.items() if labels.get(k) != v}
                if missing:
                    problems.append(
                        f"{cluster.name}: {daemonset['metadata']['name']} selects nodes by "
                        f"{missing}, which pool {pool['name']}'s nodes do not carry"
                    )
    return problems


def hami_webhook_service(stack: RenderedStack, platform: Platform) -> list[str]:
    """HAMi's webhook/extender Service is reached in-cluster only: ClusterIP, no node port (the
    chart's default NodePort opens 31998 on every node for nothing)."""
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        for release in rendered_of_chart(stack, cluster, "hami"):
            for service in release.of_kind("Service"):
                if service["metadata"]["name"] != HAMI_SCHEDULER_DEPLOYMENT:
                    continue
                spec = service.get("spec") or {}
                ports = [p.get("nodePort") for p in spec.get("ports") or [] if p.get("nodePort")]
                if spec.get("type", "ClusterIP") != "ClusterIP" or ports:
                    problems.append(
                        f"{cluster.name}: Service {HAMI_SCHEDULER_DEPLOYMENT} is "
                        f"{spec.get('type')} with node ports {ports}"
                    )
    return problems


def calico_pool(stack: RenderedStack, platform: Platform) -> list[str]:
    """Calico's Installation has exactly one IP pool, the tenant's pod CIDR."""
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        wanted = tenant_config(platform, cluster.name)["network"]["podCidr"]
        installations = [
            obj
            for release in rendered_of_chart(stack, cluster, "tigera-operator")
            for obj in release.of_kind("Installation")
        ]
        pools = [
            pool.get("cidr")
            for obj in installations
            for pool in ((obj.get("spec") or {}).get("calicoNetwork") or {}).get("ipPools") or []
        ]
        if len(installations) != 1 or pools != [wanted]:
            problems.append(f"{cluster.name}: Calico IP pools {pools}, not [{wanted}]")
    return problems


# The CRD that the tigera-operator chart's Installation needs (projectcalico/calico v3.32.1
# charts/crd.projectcalico.org.v1/templates/operator.tigera.io_installations.yaml).
CALICO_INSTALLATION_CRD = "installations.operator.tigera.io"


def calico_crd_owner(stack: RenderedStack, platform: Platform) -> list[str]:
    """Calico's CRDs have one owner, the ``crd.projectcalico.org.v1`` release: that release
    renders them, and the tigera-operator Deployment neither manages (``-manage-crds=false``;
    the operator's flag defaults to false, tigera/operator v1.42.3 cmd/main.go:133) nor
    bootstraps (no ``-bootstrap-crds`` container) them."""
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        owners = sorted(
            release.name
            for release in releases_on(stack, cluster)
            for obj in release.of_kind("CustomResourceDefinition")
            if obj["metadata"].get("name") == CALICO_INSTALLATION_CRD
        )
        crd_releases = [
            r.name for r in rendered_of_chart(stack, cluster, "crd.projectcalico.org.v1")
        ]
        if len(owners) != 1 or owners != crd_releases:
            problems.append(
                f"{cluster.name}: {CALICO_INSTALLATION_CRD} rendered by {owners}, not by the one "
                f"crd.projectcalico.org.v1 release {crd_releases}"
            )
        for release in rendered_of_chart(stack, cluster, "tigera-operator"):
            for obj in release.of_kind("Deployment"):
                init = list(pod_spec(obj).get("initContainers") or [])
                for container in [*init, *containers(obj)]:
                    name = container.get("name")
                    args = [str(arg) for arg in container.get("args") or []]
                    manage = [arg for arg in args if arg.startswith("-manage-crds")]
                    if name == "tigera-operator" and manage != ["-manage-crds=false"]:
                        problems.append(
                            f"{cluster.name}: the tigera-operator runs with {manage}, not "
                            "-manage-crds=false: it would own the CRDs too"
                        )
                    if "-bootstrap-crds" in args:
                        problems.append(
                            f"{cluster.name}: the tigera-operator Deployment's container {name} "
                            "runs -bootstrap-crds: it would write the CRDs too"
                        )
    return problems


def gpu_operator(stack: RenderedStack, platform: Platform) -> list[str]:
    """Where pools use real GPUs: the GPU Operator's device plugin is off (HAMi's takes its
    place), the operator's CDI setting agrees with HAMi's device-list strategy (CDI on needs a
    ``cdi-*`` strategy; HAMi's default ``envvar`` needs CDI off), and the ``nvidia`` runtime is
    not every container's default. A ``gpuSharing: dra`` tenant's operator runs one GPUCluster
    (NVIDIA's DRA driver) and no ClusterPolicy: the operator refuses both at once (gpu-operator
    v26.7.0 controllers/gpucluster_controller.go:158-170)."""
    problems: list[str] = []
    for cluster in tenant_clusters(stack):
        tenant = tenant_config(platform, cluster.name)
        if "nvidia" not in pool_modes(platform, tenant):
            continue
        kinds = [
            obj["kind"]
            for release in rendered_of_chart(stack, cluster, "gpu-operator")
            for obj in release.all_objects()
            if obj.get("kind") in ("ClusterPolicy", "GPUCluster")
        ]
        if tenant.get("gpuSharing") == "dra":
            if kinds != ["GPUCluster"]:
                problems.append(f"{cluster.name}: dra tenant's GPU Operator renders {kinds}")
            continue
        policies = [
            obj
            for release in rendered_of_chart(stack, cluster, "gpu-operator")
            for obj in release.of_kind("ClusterPolicy")
        ]
        if len(policies) != 1:
            problems.append(f"{cluster.name}: {len(policies)} GPU Operator ClusterPolicies")
            continue
        spec = policies[0].get("spec") or {}
        if (spec.get("devicePlugin") or {}).get("enabled") is not False:
            problems.append(f"{cluster.name}: the GPU Operator's device plugin is not disabled")
        # An absent cdi.enabled counts as enabled in v26.7.0 (api/nvidia/v1 clusterpolicy_types.go).
        cdi = (spec.get("cdi") or {}).get("enabled") is not False
        strategies = {
            str(env.get("value"))
            for mode, daemonset in _device_plugin_daemonsets(stack, cluster)
            if mode == "nvidia"
            for container in containers(daemonset)
            for env in container.get("env") or []
            if env.get("name") == "DEVICE_LIST_STRATEGY"
        }
        for strategy in sorted(strategies) or ["envvar"]:
            if cdi != strategy.startswith("cdi"):
                problems.append(
                    f"{cluster.name}: GPU Operator CDI {'on' if cdi else 'off'} with HAMi's "
                    f"device-list strategy {strategy}"
                )
        # With CDI off the toolkit makes nvidia the default runtime unless told not to
        # (gpu-operator v26.7.0 controllers/object_controls.go:1264-1270): then every container
        # whose image sets NVIDIA_VISIBLE_DEVICES=all gets all GPUs, uncounted by HAMi.
        toolkit_env = {
            str(e.get("name")): str(e.get("value"))
            for e in (spec.get("toolkit") or {}).get("env") or []
        }
        if not cdi and toolkit_env.get("NVIDIA_RUNTIME_SET_AS_DEFAULT") != "false":
            problems.append(
                f"{cluster.name}: with CDI off the nvidia runtime becomes the default, so pods "
                "that ask HAMi for no GPU get every GPU (set NVIDIA_RUNTIME_SET_AS_DEFAULT=false)"
            )
    return problems


def kamaji_image(stack: RenderedStack, expected_tag: str) -> list[str]:
    """Kamaji's controller runs the pinned image release."""
    management = next(c for c in stack.clusters.values() if c.name == "management")
    images = [
        container["image"]
        for release in rendered_of_chart(stack, management, "kamaji")
        for obj in release.of_kind("Deployment")
        if obj["metadata"]["name"] == "kamaji"
        for container in containers(obj)
    ]
    if [image_tag(i) for i in images] != [expected_tag]:
        return [f"management: Kamaji's controller images {images}, not tag {expected_tag}"]
    return []


def kamaji_memory(stack: RenderedStack, platform: Platform) -> list[str]:
    """Kamaji's controller is not held to the chart's 100Mi: its memory limit is at least
    ``KAMAJI_MIN_MEMORY_LIMIT_MIB`` or absent (one process runs every reconciler, a cache per
    tenant and the Fail webhooks; Kamaji's own guides install with ``resources=null``)."""
    management = next(c for c in stack.clusters.values() if c.name == "management")
    problems = []
    for release in rendered_of_chart(stack, management, "kamaji"):
        for obj in release.of_kind("Deployment"):
            if obj["metadata"]["name"] != "kamaji":
                continue
            for container in containers(obj):
                limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
                if limit is not None and mebibytes(str(limit)) < KAMAJI_MIN_MEMORY_LIMIT_MIB:
                    problems.append(f"management: Kamaji's controller memory limit is {limit}")
    return problems


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity in MiB (binary and decimal suffixes)."""
    units = {
        "Ki": 1 / 1024,
        "Mi": 1.0,
        "Gi": 1024.0,
        "Ti": 1024.0**2,
        "k": 1e3 / 2**20,
        "M": 1e6 / 2**20,
        "G": 1e9 / 2**20,
    }
    for suffix, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor
    return float(quantity) / 2**20


def metallb_without_frr(stack: RenderedStack, platform: Platform) -> list[str]:
    """The lab's MetalLB speaks plain L2: nothing of the frr-k8s subchart is rendered."""
    if platform["mode"] != "lab":
        return []
    management = next(c for c in stack.clusters.values() if c.name == "management")
    problems = []
    for release in rendered_of_chart(stack, management, "metallb"):
        for obj in release.all_objects():
            names = [obj["metadata"].get("name", "")] + [c.get("name", "") for c in containers(obj)]
            if any("frr" in name for name in names):
                problems.append(f"management: MetalLB renders {obj['kind']} {names[0]} (frr)")
    return problems
