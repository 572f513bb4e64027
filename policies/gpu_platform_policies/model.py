"""The pack's own view of a resource and of a stack, and which tenant a resource belongs to.

Policies convert pulumi-policy's arguments into :class:`Resource` (plain properties, see
``props``) once, and the checks work on those. That keeps the checks pure functions that tests call
with ordinary dicts.

Tenant of a resource (first that answers):

1. its label ``gpu-platform.io/tenant`` (``metadata.labels``);
2. the nearest ancestor of type ``gpu-platform:index:GpuTenant`` (the ancestor's name), walking
   ``parent``. The engine hands AnalyzeStack every registered resource, components included, with
   their parent URNs (``pkg/resource/deploy/step_generator.go``, ``AnalyzeResources``), and
   pulumi-policy links ``PolicyResource.parent``. When a parent is missing from the list, the
   parent URN still names the parent's type and name, so a direct GpuTenant parent is found even
   then;
3. its provider's name when that is ``<tenant>-provider`` (tenant providers are named so).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import PolicyResource, ResourceValidationArgs

from gpu_platform_policies.labels import GPU_TENANT_TYPE, TENANT_LABEL, TENANT_PROVIDER_SUFFIX
from gpu_platform_policies.props import UNKNOWN, Unknown, get, is_unknown, plain

Tenant = str | Unknown | None
"""A tenant name, :data:`UNKNOWN` (decided by a value unknown during preview) or None."""


@dataclass(frozen=True)
class Resource:
    """One resource as the checks see it: type, name, plain properties, parent and provider."""

    urn: str
    type: str
    name: str
    props: dict[str, Any] = field(default_factory=dict)
    parent_urn: str | None = None
    provider_name: str | None = None

    @property
    def labels(self) -> dict[str, Any]:
        """``metadata.labels`` (values may be :data:`UNKNOWN`), {} when absent or unknown."""
        value = get(self.props, "metadata", "labels")
        return value if isinstance(value, dict) else {}

    @property
    def annotations(self) -> dict[str, Any]:
        """``metadata.annotations``, {} when absent or unknown."""
        value = get(self.props, "metadata", "annotations")
        return value if isinstance(value, dict) else {}

    @property
    def k8s_name(self) -> Any:
        """``metadata.name`` (a str, :data:`UNKNOWN`, or None when the provider auto-names it)."""
        return get(self.props, "metadata", "name")

    @property
    def namespace(self) -> Any:
        return get(self.props, "metadata", "namespace")

    def describe(self) -> str:
        """A short human name: ``Deployment default/inference`` or the Pulumi name."""
        kind = self.type.rsplit(":", 1)[-1]
        name = self.k8s_name if isinstance(self.k8s_name, str) else self.name
        namespace = self.namespace
        return f"{kind} {namespace}/{name}" if isinstance(namespace, str) else f"{kind} {name}"


def urn_type(urn: str) -> str:
    """The resource's own type from a URN (the last ``$`` part of the qualified type)."""
    parts = urn.split("::", 3)
    return parts[2].rsplit("$", 1)[-1] if len(parts) == 4 else ""


def urn_name(urn: str) -> str:
    parts = urn.split("::", 3)
    return parts[3] if len(parts) == 4 else ""


def from_policy_resource(resource: PolicyResource) -> Resource:
    """A stack policy's resource (``props`` are its outputs)."""
    parent = resource.parent.urn if resource.parent is not None else resource.opts.parent
    provider = resource.provider.name if resource.provider is not None else None
    return Resource(
        urn=resource.urn,
        type=resource.resource_type,
        name=resource.name,
        props=plain(resource.props),
        parent_urn=parent or None,
        provider_name=provider or None,
    )


def from_validation_args(args: ResourceValidationArgs) -> Resource:
    """A resource policy's resource (``props`` are its inputs)."""
    provider = args.provider.name if args.provider is not None else None
    return Resource(
        urn=args.urn,
        type=args.resource_type,
        name=args.name,
        props=plain(args.props),
        parent_urn=args.opts.parent or None,
        provider_name=provider or None,
    )


class Stack:
    """All resources of a stack, indexed by URN, with tenant resolution."""

    def __init__(self, resources: Iterable[Resource]) -> None:
        self.resources: list[Resource] = list(resources)
        self.by_urn: dict[str, Resource] = {r.urn: r for r in self.resources}

    def __iter__(self) -> Iterator[Resource]:
        return iter(self.resources)

    def of_type(self, *types: str) -> list[Resource]:
        return [r for r in self.resources if r.type in types]

    def ancestors(self, resource: Resource) -> Iterator[tuple[str, str, str]]:
        """``(urn, type, name)`` of each ancestor, nearest first; an ancestor missing from the
        stack ends the walk after itself (its URN still gives its type and name)."""
        seen: set[str] = set()
        urn = resource.parent_urn
        while urn and urn not in seen:
            seen.add(urn)
            parent = self.by_urn.get(urn)
            if parent is None:
                yield urn, urn_type(urn), urn_name(urn)
                return
            yield urn, parent.type, parent.name
            urn = parent.parent_urn

    def tenant_of(self, resource: Resource) -> Tenant:
        """The tenant ``resource`` belongs to (see the module docstring), or None."""
        return tenant_of(resource, self)


def tenant_of(resource: Resource, stack: Stack | None = None) -> Tenant:
    """Label, else nearest GpuTenant ancestor, else ``<tenant>-provider``; None if none applies."""
    label: object = resource.labels.get(TENANT_LABEL)
    if label is UNKNOWN:
        return UNKNOWN
    if isinstance(label, str) and label:
        return label
    if is_unknown(get(resource.props, "metadata", "labels")):
        return UNKNOWN
    ancestors: Iterable[tuple[str, str, str]]
    if stack is not None:
        ancestors = stack.ancestors(resource)
    elif resource.parent_urn:
        parent = resource.parent_urn
        ancestors = [(parent, urn_type(parent), urn_name(parent))]
    else:
        ancestors = []
    for _urn, type_, name in ancestors:
        if type_ == GPU_TENANT_TYPE and name:
            return name
    provider = resource.provider_name or ""
    if provider.endswith(TENANT_PROVIDER_SUFFIX) and len(provider) > len(TENANT_PROVIDER_SUFFIX):
        return provider[: -len(TENANT_PROVIDER_SUFFIX)]
    return None


def group_by_tenant(stack: Stack, resources: Sequence[Resource]) -> dict[Tenant, list[Resource]]:
    """``resources`` grouped by tenant (keys may be None or :data:`UNKNOWN`)."""
    groups: dict[Tenant, list[Resource]] = {}
    for resource in resources:
        groups.setdefault(stack.tenant_of(resource), []).append(resource)
    return groups
