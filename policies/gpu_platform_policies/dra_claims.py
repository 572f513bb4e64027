"""dra-claims: a ``gpuSharing: dra`` tenant's ResourceClaimTemplates ask what the tenants' API
can grant, and the Deployments that use them fit the cards the tenant declares.

* **Shapes.** Every request is an ``exactly`` request in ``ExactCount`` mode naming a
  DeviceClass the tenant registers (or its GPU Operator's GPUCluster creates), with no
  ``capacity`` and no ``distinctAttribute``: both need
  ``DRAConsumableCapacity``, alpha and off at kubernetes v1.35.0
  (pkg/features/kube_features.go:1232-1234), and with the gate off the API server drops them
  without a word (pkg/api/resourceclaimspec/util.go:131-150), so the claim would silently ask
  for a whole card. No tenant the platform builds enables the gate (docs/dra.md).
* **Fit at preview.** Each Deployment's pods (replicas, in stack order) get their claims
  allocated on the tenant's declared nodes, one node at a time, by the DRA allocation model
  (``dra_fit``): a card goes to one claim, and a CEL selector on its ``memory`` capacity (the
  form ``components.dra`` writes) keeps a claim off cards too small. A selector in another form
  cannot be judged here, and its pod is left to the scheduler.

Nothing here applies to a stack without ResourceClaimTemplates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpu_platform_policies.capacity import PoolInventory, _inventories
from gpu_platform_policies.common import Violation
from gpu_platform_policies.dra_fit import (
    Capacity,
    ClaimRequest,
    Device,
    Usage,
    allocate,
    fresh_usage,
)
from gpu_platform_policies.kube import HELM_RELEASE_TYPES, release_values
from gpu_platform_policies.model import Resource, Stack
from gpu_platform_policies.props import UNKNOWN, get

TEMPLATE_TYPE: Final = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
DEVICE_CLASS_TYPE: Final = "kubernetes:resource.k8s.io/v1:DeviceClass"
DEPLOYMENT_TYPE: Final = "kubernetes:apps/v1:Deployment"
_MEMORY_SELECTOR = re.compile(
    r"^device\.capacity\['[^']+'\]\.memory\.compareTo\(quantity\('(\d+)Mi'\)\) >= 0$"
)
_GATE = "DRAConsumableCapacity"
# The DeviceClasses the GPU Operator's GPUCluster creates for NVIDIA's DRA driver (gpu-operator
# v26.7.0 manifests/state-dra-driver/0400_deviceclass-gpu.yaml:4, 0410_deviceclass-mig.yaml:4).
GPU_CLUSTER_CLASSES: Final = frozenset({"gpu.nvidia.com", "mig.nvidia.com"})
# The chart as the program names it (``.charts/gpu-operator-v26.7.0.tgz``) or by its name.
_GPU_OPERATOR_CHART = re.compile(r"gpu-operator(-v?\d[\w.+-]*\.tgz)?")


@dataclass(frozen=True)
class _Template:
    resource: Resource
    claims: tuple[ClaimRequest, ...] | None  # None: a shape the model cannot judge


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if float(value) == int(value) else None


def _template(resource: Resource, classes: set[str]) -> tuple[_Template, list[Violation]]:
    """The template's claim requests, and what is wrong with its shape."""
    where = resource.describe()
    problems: list[Violation] = []
    spec = get(resource.props, "spec", "spec", "devices")
    requests = get(spec, "requests")
    if spec is UNKNOWN or requests is UNKNOWN or not isinstance(requests, list):
        return _Template(resource, None), []
    for constraint in get(spec, "constraints") or []:
        if isinstance(constraint, dict) and get(constraint, "distinctAttribute") is not None:
            problems.append(
                Violation(
                    f"{where}: a distinctAttribute constraint needs the {_GATE} feature gate, off "
                    "in every tenant, and the API server drops it; remove it (whole cards are "
                    "distinct devices already)",
                    resource.urn,
                )
            )
    claims: list[ClaimRequest] = []
    judged = True
    for index, request in enumerate(requests):
        exactly = get(request, "exactly")
        name = get(request, "name")
        label = f"{where}: request {name if isinstance(name, str) else index}"
        if not isinstance(exactly, dict):
            problems.append(
                Violation(
                    f"{label} is not an exactly request: ask for whole cards with exactly "
                    "(deviceClassName, allocationMode: ExactCount, count)",
                    resource.urn,
                )
            )
            judged = False
            continue
        mode = get(exactly, "allocationMode")
        if mode not in (None, "ExactCount"):
            problems.append(
                Violation(
                    f"{label} asks allocationMode {mode}: every card of the node; ask for "
                    "allocationMode: ExactCount with a count",
                    resource.urn,
                )
            )
            judged = False
        if get(exactly, "capacity") is not None:
            problems.append(
                Violation(
                    f"{label} asks capacity (a share of a card), which needs the {_GATE} feature "
                    "gate, off in every tenant: the API server would drop it and the claim take "
                    "a whole card. Ask for whole cards, or keep the tenant on gpuSharing: hami "
                    "to share cards",
                    resource.urn,
                )
            )
        device_class = get(exactly, "deviceClassName")
        if device_class is not UNKNOWN and classes is not None and device_class not in classes:
            problems.append(
                Violation(
                    f"{label} names DeviceClass {device_class!r}, which the tenant does not "
                    f"register ({', '.join(sorted(classes)) or 'none'}): its pods would stay "
                    "Pending; name the tenant's DeviceClass",
                    resource.urn,
                )
            )
        count = _int(get(exactly, "count") if get(exactly, "count") is not None else 1)
        memory: int | None = None
        for selector in get(exactly, "selectors") or []:
            expression = get(selector, "cel", "expression")
            match = _MEMORY_SELECTOR.match(expression) if isinstance(expression, str) else None
            if match is None:
                judged = False
            else:
                memory = int(match.group(1))
        if count is None or count < 1:
            judged = False
            continue
        claims.append(ClaimRequest(count=count, min_memory_mib=memory))
    return _Template(resource, tuple(claims) if judged else None), problems


def _devices(pool: PoolInventory, replica: int) -> list[Device]:
    return [
        Device(
            f"{pool.pool}-{replica}/{kind_index}/{i}",
            Capacity(kind.memory_mib),
            Capacity(kind.core_units),
        )
        for kind_index, kind in enumerate(pool.cards)
        for i in range(kind.count)
    ]


def _describe_claims(claims: Sequence[ClaimRequest]) -> str:
    return ", ".join(
        f"{c.count} whole card(s)"
        + (f" of at least {c.min_memory_mib} MiB" if c.min_memory_mib else "")
        for c in claims
    )


def _runs_gpu_cluster(resource: Resource) -> bool:
    """A GPU Operator release whose values deploy the GPUCluster CR (``gpuCluster.deployCR``):
    its operator, not the program, creates the DRA driver's DeviceClasses."""
    if resource.type not in HELM_RELEASE_TYPES:
        return False
    chart = get(resource.props, "chart")
    if not isinstance(chart, str) or not _GPU_OPERATOR_CHART.fullmatch(
        chart.rstrip("/").rsplit("/", 1)[-1]
    ):
        return False
    return get(release_values(resource), "gpuCluster", "deployCR") is True


def check_dra(stack: Stack) -> list[Violation] | None:
    """All dra-claims violations; None when the stack registers no ResourceClaimTemplate."""
    templates = [r for r in stack if r.type == TEMPLATE_TYPE]
    if not templates:
        return None
    classes: dict[Any, set[str]] = {}
    for resource in stack:
        if resource.type == DEVICE_CLASS_TYPE and isinstance(resource.k8s_name, str):
            classes.setdefault(stack.tenant_of(resource), set()).add(resource.k8s_name)
        elif _runs_gpu_cluster(resource):
            classes.setdefault(stack.tenant_of(resource), set()).update(GPU_CLUSTER_CLASSES)
    violations: list[Violation] = []
    by_key: dict[tuple[Any, Any, Any], _Template] = {}
    for resource in templates:
        tenant = stack.tenant_of(resource)
        template, problems = _template(resource, classes.get(tenant, set()))
        violations.extend(problems)
        namespace = resource.namespace if resource.namespace is not None else "default"
        by_key[(tenant, namespace, resource.k8s_name)] = template
    inventories = _inventories(stack)
    nodes: dict[Any, list[list[Device]]] = {}
    for tenant, pools in inventories.pools.items():
        nodes[tenant] = [_devices(p, r) for p in pools for r in range(p.replicas)]
    usage: dict[tuple[Any, int], Usage] = {}
    for resource in stack:
        if resource.type != DEPLOYMENT_TYPE:
            continue
        refs = get(resource.props, "spec", "template", "spec", "resourceClaims")
        if not isinstance(refs, list) or not refs:
            continue
        tenant = stack.tenant_of(resource)
        namespace = resource.namespace if resource.namespace is not None else "default"
        claims: list[ClaimRequest] = []
        judged = True
        for ref in refs:
            name = get(ref, "resourceClaimTemplateName")
            if name is UNKNOWN or not isinstance(name, str):
                judged = False
                continue
            found = by_key.get((tenant, namespace, name))
            if found is None:
                violations.append(
                    Violation(
                        f"{resource.describe()} uses ResourceClaimTemplate {namespace}/{name}, "
                        "which the stack does not register in its tenant: its pods would stay "
                        "Pending; register the template or fix the name",
                        resource.urn,
                    )
                )
                judged = False
                continue
            if found.claims is None:
                judged = False
                continue
            claims.extend(found.claims)
        replicas = _int(get(resource.props, "spec", "replicas") or 1)
        if not judged or replicas is None or tenant in inventories.unknown_tenants:
            continue
        if inventories.unknown_anywhere:
            continue
        tenant_nodes = nodes.get(tenant, [])
        for replica in range(1, replicas + 1):
            placed = False
            for index, devices in enumerate(tenant_nodes):
                current = usage.get((tenant, index), fresh_usage())
                picks = allocate(devices, claims, current)
                if picks is None:
                    continue
                by_name = {d.name: d for d in devices}
                for names in picks:
                    for device_name in names:
                        current = current.book(by_name[device_name], (0, 0))
                usage[(tenant, index)] = current
                placed = True
                break
            if not placed:
                violations.append(
                    Violation(
                        f"{resource.describe()} (tenant {tenant}): replica {replica} of "
                        f"{replicas} would stay Pending: its ResourceClaims "
                        f"({_describe_claims(claims)}) cannot be allocated on any of the "
                        f"tenant's {len(tenant_nodes)} declared node(s) once the pods before it "
                        "hold their cards. Lower replicas or cards, or add cards to the tenant's "
                        "worker pools",
                        resource.urn,
                    )
                )
                break
    return violations
