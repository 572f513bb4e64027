"""Prod's management cluster: an existing cluster, and Cluster API installed on it.

A Provider for the existing cluster (its kubeconfig from a secret config value), and Cluster
API installed declaratively with the cluster-api-operator chart plus one provider object per
provider, with a config Secret holding the operator's GitHub token when one is configured.
Nothing here owns the cluster: destroy removes what the program created, one object at a time.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.config import PlatformConfig
from components.management_values import CAPI_OPERATOR_NAMESPACE
from components.prod.capi_providers import CapiProvider, capi_providers
from components.prod.cluster_api_values import (
    CAPI_GITHUB_TOKEN_KEY,
    CAPI_OPERATOR_RELEASE,
    capi_config_secret_name,
    capi_gate_env,
    capi_operator_gate_env,
    capi_operator_values,
)
from components.substrate import ClusterAccess, ManagementSite
from components.versions import PINNED

PROD_CLUSTER_IDENTIFIER = "gpu-platform-management"


def existing_cluster(
    name: str, platform: PlatformConfig, component: pulumi.Resource
) -> ClusterAccess:
    """The provider for the cluster the secret kubeconfig names."""
    kubeconfig = pulumi.Config().require_secret(platform.existing.kubeconfig_config_key)
    provider = k8s.Provider(
        f"{name}-provider",
        kubeconfig=kubeconfig,
        cluster_identifier=PROD_CLUSTER_IDENTIFIER,
        opts=pulumi.ResourceOptions(parent=component),
    )
    return ClusterAccess(
        kubeconfig=kubeconfig,
        provider=provider,
        teardown_root=None,
        lb_pool=pulumi.Output.from_input([]),
    )


def cluster_api(
    site: ManagementSite, cert_manager: pulumi.Resource, kamaji_ready: pulumi.Resource
) -> list[pulumi.Resource]:
    """The cluster-api-operator, one provider object per provider, and the gate that waits
    until Cluster API serves."""
    existing = site.platform.existing
    operator = site.release(
        CAPI_OPERATOR_RELEASE,
        PINNED.cluster_api_operator,
        CAPI_OPERATOR_NAMESPACE,
        capi_operator_values(),
        depends_on=[cert_manager],
    )
    providers = capi_providers(existing.cluster_api)
    token_key = existing.cluster_api.github_token_config_key
    token: pulumi.Output[str] | None = None
    if token_key is not None:
        token = pulumi.Output.secret(pulumi.Config().require_secret(token_key))
    namespaces = {spec.name: site.namespace(spec.namespace) for spec in providers}
    # The operator's webhooks answer (their CA injected) before any provider object goes
    # through them: the dry run needs the providers' namespaces.
    webhooks = site.gate(
        "capi-operator-webhooks",
        capi_operator_gate_env(providers),
        [operator, *namespaces.values()],
    )
    provider_objects: list[pulumi.Resource] = []
    for spec in providers:
        namespace = namespaces[spec.name]
        # The Kamaji control-plane provider reconciles TenantControlPlanes: Kamaji first.
        after: list[pulumi.Resource] = [operator, webhooks, namespace]
        if spec.kind == "ControlPlaneProvider":
            after.append(kamaji_ready)
        secret_name: pulumi.Output[str] | None = None
        if token is not None:
            secret, secret_name = _provider_config_secret(site, spec, token, namespace)
            after.append(secret)
        provider_objects.append(
            site.custom_resource(
                f"capi-{spec.name}", spec.manifest(config_secret=secret_name), after
            )
        )
    return [site.gate("capi-ready", capi_gate_env(providers), provider_objects)]


def _provider_config_secret(
    site: ManagementSite,
    spec: CapiProvider,
    token: pulumi.Output[str],
    namespace: k8s.core.v1.Namespace,
) -> tuple[k8s.core.v1.Secret, pulumi.Output[str]]:
    """The Secret a provider object's ``configSecret`` names, in the provider's namespace,
    and its name: the operator's GitHub token under clusterctl's variable ``github-token``.
    Immutable and named after the token (``capi_config_secret_name``), so a new token is a
    new Secret and the provider objects move to it, as the operator asks."""
    name = pulumi.Output.unsecret(token.apply(capi_config_secret_name))
    secret = k8s.core.v1.Secret(
        f"{site.name}-capi-config-{spec.name}",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace.metadata.name),
        type="Opaque",
        immutable=True,
        string_data=token.apply(lambda value: {CAPI_GITHUB_TOKEN_KEY: value}),
        opts=pulumi.ResourceOptions.merge(
            site.k8s_opts([namespace]),
            pulumi.ResourceOptions(additional_secret_outputs=["data", "stringData"]),
        ),
    )
    return secret, name


def pinned_tenant_address(platform: PlatformConfig, tenant_name: str) -> pulumi.Output[str] | None:
    """The configured ``controlPlane.address`` (Metal3 requires one), or None."""
    tenants = {tenant.name: tenant for tenant in platform.tenants}
    address = tenants[tenant_name].control_plane.address
    return pulumi.Output.from_input(address) if address is not None else None
