"""tenant-webhook-path: the tenant API server can reach HAMi's webhook, and the webhook cannot be
silently skipped in production.

Why (platform.md §3, pitfalls 3 and 4): the tenant API server runs as a pod in the management
cluster, so without Konnectivity it cannot call the webhook inside the tenant; an
``admissionControllers`` override without ``MutatingAdmissionWebhook`` and
``ValidatingAdmissionWebhook`` turns all webhooks off; and HAMi's default ``failurePolicy: Ignore``
admits GPU pods on the default scheduler when the webhook is unreachable (they then fail on the
node). With ``Fail``, system namespaces must be excluded or the Konnectivity agent the webhook path
needs could never be created.
"""

from __future__ import annotations

from typing import Any, Final

from gpu_platform_policies.capacity import GpuPod, gpu_pods, is_inventory, parse_inventory
from gpu_platform_policies.common import Violation
from gpu_platform_policies.kube import control_plane, is_hami_release, pod_specs, release_values
from gpu_platform_policies.labels import (
    GPU_WORKER_POOL_TYPE,
    HAMI_WEBHOOK_IGNORE_LABEL,
    HAMI_WEBHOOK_IGNORE_VALUE,
    INVENTORY_KEY,
)
from gpu_platform_policies.model import Resource, Stack
from gpu_platform_policies.props import UNKNOWN, contains_unknown, get
from gpu_platform_policies.quota import namespace_of

WEBHOOK_PLUGINS: Final = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")
SYSTEM_NAMESPACES_KEY: Final = "systemNamespaces"
DEFAULT_SYSTEM_NAMESPACES: Final = ("kube-system",)
NAMESPACE_TYPES: Final = frozenset(
    {"kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch"}
)
NAME_LABEL: Final = "kubernetes.io/metadata.name"
WEBHOOK_VALUES: Final = "scheduler.admissionWebhook"


def gpu_tenants(stack: Stack) -> set[str]:
    """Tenants with GPU pools: a declared inventory, a GpuWorkerPool component or HAMi."""
    tenants: set[str] = set()
    for resource in stack:
        tenant: Any = None
        if is_inventory(resource):
            text = get(resource.props, "data", INVENTORY_KEY)
            if isinstance(text, str):
                try:
                    tenant = parse_inventory(text).tenant
                except ValueError:
                    tenant = None
            if tenant is None:
                tenant = stack.tenant_of(resource)
        elif resource.type == GPU_WORKER_POOL_TYPE or is_hami_release(resource):
            tenant = stack.tenant_of(resource)
        if isinstance(tenant, str):
            tenants.add(tenant)
    return tenants


def _excluded_by_values(webhook: dict[str, Any]) -> set[str] | None:
    """Namespaces the release's values exclude (None when that is unknown)."""
    excluded: set[str] = set()
    listed = webhook.get("whitelistNamespaces")
    if contains_unknown(listed):
        return None
    if isinstance(listed, list):
        excluded.update(v for v in listed if isinstance(v, str))
    expressions = get(webhook, "namespaceSelector", "matchExpressions")
    if contains_unknown(expressions):
        return None
    if isinstance(expressions, list):
        for expression in expressions:
            if (
                isinstance(expression, dict)
                and expression.get("key") == NAME_LABEL
                and expression.get("operator") == "NotIn"
                and isinstance(expression.get("values"), list)
            ):
                excluded.update(v for v in expression["values"] if isinstance(v, str))
    return excluded


def _excluded_by_labels(stack: Stack, tenant: Any) -> set[str] | None:
    """Namespaces of ``tenant`` labelled ``hami.io/webhook: ignore`` (None when unknown)."""
    excluded: set[str] = set()
    for resource in stack.of_type(*NAMESPACE_TYPES):
        if stack.tenant_of(resource) != tenant:
            continue
        label = resource.labels.get(HAMI_WEBHOOK_IGNORE_LABEL)
        name = resource.k8s_name
        labels = get(resource.props, "metadata", "labels")
        if UNKNOWN in (label, name, labels):
            return None
        if label == HAMI_WEBHOOK_IGNORE_VALUE and isinstance(name, str):
            excluded.add(name)
    return excluded


def _check_release(
    stack: Stack, release: Resource, system_namespaces: tuple[str, ...]
) -> list[Violation]:
    values = release_values(release)
    if values is UNKNOWN:
        return []
    tenant = stack.tenant_of(release)
    who = (
        f"{release.describe()} (HAMi of tenant {tenant})"
        if isinstance(tenant, str)
        else (f"{release.describe()} (HAMi)")
    )
    webhook = get(values, "scheduler", "admissionWebhook")
    if webhook is UNKNOWN:
        return []
    webhook = webhook if isinstance(webhook, dict) else {}
    violations: list[Violation] = []
    if webhook.get("enabled") is False:
        violations.append(
            Violation(
                f"{who} disables HAMi's admission webhook ({WEBHOOK_VALUES}.enabled: false); GPU "
                "pods are then never routed to hami-scheduler. Remove the override",
                release.urn,
            )
        )
        return violations
    policy = webhook.get("failurePolicy")
    if policy is not UNKNOWN and policy != "Fail":
        shown = "absent (chart default Ignore)" if policy is None else repr(policy)
        violations.append(
            Violation(
                f"{who}: {WEBHOOK_VALUES}.failurePolicy is {shown}; with Ignore an unreachable "
                "webhook silently admits GPU pods on the default scheduler, where they fail. Set "
                f"{WEBHOOK_VALUES}.failurePolicy: Fail in production",
                release.urn,
            )
        )
    from_values = _excluded_by_values(webhook)
    from_labels = _excluded_by_labels(stack, tenant)
    if from_values is None or from_labels is None:
        return violations
    missing = [ns for ns in system_namespaces if ns not in from_values | from_labels]
    if missing:
        violations.append(
            Violation(
                f"{who}: the webhook also gates {', '.join(missing)}; with failurePolicy Fail a "
                "down webhook would block system pods there (the Konnectivity agent the webhook "
                f"path needs among them). Add them to {WEBHOOK_VALUES}.whitelistNamespaces or "
                f"label the namespaces {HAMI_WEBHOOK_IGNORE_LABEL}={HAMI_WEBHOOK_IGNORE_VALUE}",
                release.urn,
            )
        )
    return violations


def check_webhook_path(
    stack: Stack,
    prod: bool = False,
    system_namespaces: tuple[str, ...] = DEFAULT_SYSTEM_NAMESPACES,
) -> list[Violation]:
    """All tenant-webhook-path violations of a stack."""
    violations: list[Violation] = []
    with_gpus = gpu_tenants(stack)
    for resource in stack:
        cp = control_plane(resource)
        if cp is None:
            continue
        tenant = stack.tenant_of(resource)
        who = (
            f"{resource.describe()} (tenant {tenant})"
            if isinstance(tenant, str)
            else (resource.describe())
        )
        plugins = cp.admission_controllers
        if isinstance(plugins, list) and not contains_unknown(plugins):
            missing = [p for p in WEBHOOK_PLUGINS if p not in plugins]
            if missing:
                violations.append(
                    Violation(
                        f"{who} overrides {cp.admission_controllers_key} without "
                        f"{' and '.join(missing)}; the tenant API server then never calls HAMi's "
                        "webhook. Add them to the list (or drop the override to keep Kamaji's "
                        "default)",
                        resource.urn,
                    )
                )
        if isinstance(tenant, str) and tenant in with_gpus:
            konnectivity = cp.konnectivity
            if konnectivity is None or konnectivity is False:
                violations.append(
                    Violation(
                        f"{who} has GPU pools but no Konnectivity (spec.addons.konnectivity); the "
                        "hosted API server cannot reach HAMi's webhook inside the tenant, so GPU "
                        "pods bypass HAMi. Set spec.addons.konnectivity: {server: {port: 8132}, "
                        "agent: {mode: DaemonSet}}",
                        resource.urn,
                    )
                )
    if prod:
        for release in stack:
            if is_hami_release(release):
                violations.extend(_check_release(stack, release, system_namespaces))
    return violations


def _skipped_namespaces(stack: Stack) -> dict[Any, set[str] | None]:
    """Per tenant with a HAMi release: the namespaces its webhook skips (None: unknown)."""
    skipped: dict[Any, set[str] | None] = {}
    for release in stack:
        if not is_hami_release(release):
            continue
        tenant = stack.tenant_of(release)
        values = release_values(release)
        webhook = get(values, "scheduler", "admissionWebhook")
        if values is UNKNOWN or webhook is UNKNOWN:
            skipped[tenant] = None
            continue
        from_values = _excluded_by_values(webhook if isinstance(webhook, dict) else {})
        from_labels = _excluded_by_labels(stack, tenant)
        skipped[tenant] = (
            None if from_values is None or from_labels is None else from_values | from_labels
        )
    return skipped


def check_gpu_namespaces(stack: Stack) -> list[Violation]:
    """GPU pods where HAMi's webhook does not run: in a namespace it skips, or labelled to be
    skipped themselves.

    HAMi v2.10.0's chart renders the webhook's ``namespaceSelector`` as ``hami.io/webhook NotIn
    [ignore]`` plus ``kubernetes.io/metadata.name NotIn <whitelistNamespaces>`` and its
    ``objectSelector`` as ``hami.io/webhook NotIn [ignore]``
    (charts/hami/templates/scheduler/webhook.yaml:26-59). The API server calls no webhook for an
    object those exclude, so such a GPU pod keeps ``default-scheduler``: no card is allocated by
    hami-scheduler, HAMi's limits are never injected, and the quota HAMi enforces is skipped."""
    violations: list[Violation] = []
    skipped = _skipped_namespaces(stack)
    for resource, pod in gpu_pods(stack):
        if not isinstance(pod, GpuPod):
            continue
        tenant = stack.tenant_of(resource)
        namespace = namespace_of(resource)
        where = pod.describe()
        labels = next(
            (get(ref.metadata, "labels") for ref in pod_specs(resource) if ref.where == pod.where),
            None,
        )
        if isinstance(labels, dict) and labels.get(HAMI_WEBHOOK_IGNORE_LABEL) == (
            HAMI_WEBHOOK_IGNORE_VALUE
        ):
            violations.append(
                Violation(
                    f"{where} asks HAMi for GPUs but its pods are labelled "
                    f"{HAMI_WEBHOOK_IGNORE_LABEL}={HAMI_WEBHOOK_IGNORE_VALUE}, so HAMi's webhook "
                    "skips them: they keep default-scheduler, get no card from hami-scheduler and "
                    "no HAMi limits. Remove the label from the pod template",
                    resource.urn,
                )
            )
            continue
        if tenant not in skipped or not isinstance(namespace, str):
            continue
        excluded = skipped[tenant]
        if excluded is None or namespace not in excluded:
            continue
        violations.append(
            Violation(
                f"{where} asks HAMi for GPUs in namespace {namespace}, which HAMi's webhook "
                f"skips (tenant {tenant}: {WEBHOOK_VALUES}.whitelistNamespaces, or the label "
                f"{HAMI_WEBHOOK_IGNORE_LABEL}={HAMI_WEBHOOK_IGNORE_VALUE}); its pods would keep "
                "default-scheduler, get no card from hami-scheduler and escape HAMi's limits and "
                "quota. Move the workload to a namespace of its own (e.g. default or the team's)",
                resource.urn,
            )
        )
    return violations
