"""The policies of the pack: each a thin adapter from pulumi-policy's arguments to a pure check.

Building the policy objects has no side effects; only ``PolicyPack(...)`` (in
``policies/__main__.py``) starts the analyzer's gRPC server.

Policy config (per stack, ``pulumi preview --policy-pack policies --policy-pack-config
policies/config/<stack>.json``): every policy takes ``enforcementLevel`` (default mandatory);
``tenant-datastore-separation`` takes ``requireDedicatedDataStore`` (default false);
``tenant-webhook-path`` takes ``environment`` (lab|prod, default lab) and ``systemNamespaces``
(default ["kube-system"]); ``lab-only-components`` takes ``environment``.
"""

from __future__ import annotations

from typing import Any, Final

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpu_platform_policies.admission import check_admission
from gpu_platform_policies.capacity import check_capacity
from gpu_platform_policies.common import (
    ENVIRONMENT_KEY,
    ENVIRONMENT_SCHEMA,
    Violation,
    flag,
    is_prod,
    string_list,
)
from gpu_platform_policies.datastores import REQUIRE_DEDICATED_KEY, check_datastores
from gpu_platform_policies.dra_claims import check_dra
from gpu_platform_policies.gpu_requests import REMEDIATION as GPU_REQUESTS_REMEDIATION
from gpu_platform_policies.gpu_requests import check_workload
from gpu_platform_policies.kube import may_hold_pod_specs
from gpu_platform_policies.lab_only import check_lab_only
from gpu_platform_policies.model import Stack, from_policy_resource, from_validation_args
from gpu_platform_policies.quota import check_quota
from gpu_platform_policies.scheduler_version import check_scheduler_version
from gpu_platform_policies.webhook_path import (
    DEFAULT_SYSTEM_NAMESPACES,
    SYSTEM_NAMESPACES_KEY,
    check_gpu_namespaces,
    check_webhook_path,
)

PACK_NAME: Final = "gpu-platform-policies"
PACK_DESCRIPTION: Final = (
    "Multi-tenant GPU platform: HAMi requests and capacity, tenant datastore separation, the "
    "webhook path, lab-only parts and version pairing, checked at preview."
)

HAMI_GPU_REQUESTS: Final = "hami-gpu-requests"
HAMI_CAPACITY_FIT: Final = "hami-capacity-fit"
TENANT_DATASTORE_SEPARATION: Final = "tenant-datastore-separation"
TENANT_WEBHOOK_PATH: Final = "tenant-webhook-path"
LAB_ONLY_COMPONENTS: Final = "lab-only-components"
HAMI_SCHEDULER_VERSION: Final = "hami-scheduler-version"
HAMI_QUOTA_FIT: Final = "hami-quota-fit"
HAMI_ADMISSION_RULES: Final = "hami-admission-rules"
HAMI_WEBHOOK_COVERAGE: Final = "hami-webhook-coverage"
DRA_CLAIMS: Final = "dra-claims"
POLICY_NAMES: Final = (
    HAMI_GPU_REQUESTS,
    HAMI_CAPACITY_FIT,
    DRA_CLAIMS,
    HAMI_QUOTA_FIT,
    HAMI_WEBHOOK_COVERAGE,
    HAMI_ADMISSION_RULES,
    TENANT_DATASTORE_SEPARATION,
    TENANT_WEBHOOK_PATH,
    LAB_ONLY_COMPONENTS,
    HAMI_SCHEDULER_VERSION,
)


def _report_all(violations: list[Violation] | None, report: ReportViolation) -> None:
    for violation in violations or []:
        report(violation.message, violation.urn)


def _stack(args: StackValidationArgs) -> Stack:
    return Stack(from_policy_resource(resource) for resource in args.resources)


# ---------------------------------------------------------------------------- validations


def validate_gpu_requests(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if not may_hold_pod_specs(args.resource_type):
        return
    resource = from_validation_args(args)
    for message in check_workload(resource):
        report(f"{resource.describe()}: {message}", None)


def validate_capacity(args: StackValidationArgs, report: ReportViolation) -> None:
    _report_all(check_capacity(_stack(args)), report)


def validate_dra(args: StackValidationArgs, report: ReportViolation) -> None:
    _report_all(check_dra(_stack(args)), report)


def validate_datastores(args: StackValidationArgs, report: ReportViolation) -> None:
    config = args.get_config()
    _report_all(
        check_datastores(_stack(args), require_dedicated=flag(config, REQUIRE_DEDICATED_KEY)),
        report,
    )


def validate_webhook_path(args: StackValidationArgs, report: ReportViolation) -> None:
    config = args.get_config()
    _report_all(
        check_webhook_path(
            _stack(args),
            prod=is_prod(config),
            system_namespaces=string_list(config, SYSTEM_NAMESPACES_KEY, DEFAULT_SYSTEM_NAMESPACES),
        ),
        report,
    )


def validate_gpu_namespaces(args: StackValidationArgs, report: ReportViolation) -> None:
    _report_all(check_gpu_namespaces(_stack(args)), report)


def validate_quota(args: StackValidationArgs, report: ReportViolation) -> None:
    _report_all(check_quota(_stack(args)), report)


def validate_admission(args: StackValidationArgs, report: ReportViolation) -> None:
    _report_all(check_admission(_stack(args)), report)


def validate_lab_only(args: ResourceValidationArgs, report: ReportViolation) -> None:
    prod = is_prod(args.get_config())
    if not prod:
        return
    resource = from_validation_args(args)
    for message in check_lab_only(resource, prod=True):
        report(f"{resource.describe()}: {message}", None)


def validate_scheduler_version(args: StackValidationArgs, report: ReportViolation) -> None:
    _report_all(check_scheduler_version(_stack(args)), report)


# ------------------------------------------------------------------------------- policies

_ENVIRONMENT_ONLY: Final[dict[str, dict[str, Any]]] = {ENVIRONMENT_KEY: ENVIRONMENT_SCHEMA}


def build_policies() -> list[Policy]:
    """The pack's policies, mandatory unless the stack's policy config says otherwise."""
    mandatory = EnforcementLevel.MANDATORY
    return [
        ResourceValidationPolicy(
            name=HAMI_GPU_REQUESTS,
            description=(
                "GPU containers ask HAMi for integer nvidia.com/gpu, plain-MiB gpumem (or "
                "gpumem-percentage 1..100) and gpucores 1..100, unprivileged, scheduled by "
                "hami-scheduler."
            ),
            validate=validate_gpu_requests,
            enforcement_level=mandatory,
            severity=Severity.HIGH,
            remediation_steps=GPU_REQUESTS_REMEDIATION,
        ),
        StackValidationPolicy(
            name=HAMI_CAPACITY_FIT,
            description=(
                "GPU workloads fit the cards their tenant declares, alone and all replicas "
                "together (HAMi 2.10 fit model)."
            ),
            validate=validate_capacity,
            enforcement_level=mandatory,
            severity=Severity.HIGH,
            remediation_steps=(
                "Lower the workload's gpumem/gpucores/gpu or its replicas, or add cards to the "
                "tenant's worker pools (workerPools[].cards in the stack config)."
            ),
        ),
        StackValidationPolicy(
            name=DRA_CLAIMS,
            description=(
                "A gpuSharing: dra tenant's ResourceClaimTemplates ask whole cards of a "
                "DeviceClass it registers, and the Deployments using them fit its declared "
                "cards (DRA allocation model)."
            ),
            validate=validate_dra,
            enforcement_level=mandatory,
            severity=Severity.HIGH,
            remediation_steps=(
                "Ask for whole cards (no capacity, no distinctAttribute) of the tenant's "
                "DeviceClass, lower replicas or cards, or add cards to the tenant's worker pools."
            ),
        ),
        StackValidationPolicy(
            name=HAMI_QUOTA_FIT,
            description=(
                "The GPU workloads declared in a namespace fit the GPU ResourceQuota the stack "
                "registers there (every pod counted, as HAMi's webhook counts)."
            ),
            validate=validate_quota,
            enforcement_level=mandatory,
            severity=Severity.HIGH,
            remediation_steps=(
                "Raise tenants[].gpuQuotas[] (gpuMemoryMiB, gpuCores, gpus) for the namespace, or "
                "lower the workloads' replicas or GPU requests."
            ),
        ),
        StackValidationPolicy(
            name=HAMI_WEBHOOK_COVERAGE,
            description=(
                "No GPU workload where HAMi's webhook does not run: not in a namespace it skips, "
                "not with pods labelled hami.io/webhook=ignore."
            ),
            validate=validate_gpu_namespaces,
            enforcement_level=mandatory,
            severity=Severity.HIGH,
            remediation_steps=(
                "Put GPU workloads in a tenant namespace HAMi's webhook gates (not a system, "
                "CNI, HAMi or GPU Operator namespace); do not label their pods "
                "hami.io/webhook=ignore."
            ),
        ),
        StackValidationPolicy(
            name=HAMI_ADMISSION_RULES,
            description=(
                "The GPU rules every tenant's ValidatingAdmissionPolicy enforces (one CEL "
                "definition each, admission_rules.json), evaluated on every declared pod spec, "
                "ResourceClaim and ResourceClaimTemplate with the tenant's ceilings and "
                "gpuSharing."
            ),
            validate=validate_admission,
            enforcement_level=mandatory,
            severity=Severity.HIGH,
            remediation_steps=(
                "Follow the rule's message: HAMi quantities as plain numbers, no scheduler that "
                "bypasses hami-scheduler, no NVIDIA_VISIBLE_DEVICES or nvidia RuntimeClass outside "
                "GPU containers, and the tenant's ceilings (tenants[].admission)."
            ),
        ),
        StackValidationPolicy(
            name=TENANT_DATASTORE_SEPARATION,
            description=(
                "Every tenant control plane names its DataStore, schema and username; schema and "
                "username are unique; NATS (and, if configured, every) DataStore serves one tenant."
            ),
            validate=validate_datastores,
            enforcement_level=mandatory,
            severity=Severity.CRITICAL,
            config_schema=PolicyConfigSchema(
                properties={
                    REQUIRE_DEDICATED_KEY: {
                        "type": "boolean",
                        "default": False,
                        "description": "no two tenants may share a DataStore",
                    }
                }
            ),
            remediation_steps=(
                "Set tenants[].dataStore (name or dedicated, schema, username) in the stack "
                "config, with a schema and username of its own for every tenant."
            ),
        ),
        StackValidationPolicy(
            name=TENANT_WEBHOOK_PATH,
            description=(
                "Tenant API servers reach HAMi's webhook: Konnectivity on, webhook admission "
                "plugins kept; in prod failurePolicy Fail with system namespaces excluded."
            ),
            validate=validate_webhook_path,
            enforcement_level=mandatory,
            severity=Severity.HIGH,
            config_schema=PolicyConfigSchema(
                properties={
                    **_ENVIRONMENT_ONLY,
                    SYSTEM_NAMESPACES_KEY: {
                        "type": "array",
                        "items": {"type": "string"},
                        "default": list(DEFAULT_SYSTEM_NAMESPACES),
                        "description": "namespaces HAMi's webhook must not gate in prod",
                    },
                }
            ),
            remediation_steps=(
                "Enable spec.addons.konnectivity, keep MutatingAdmissionWebhook and "
                "ValidatingAdmissionWebhook in admission-controller overrides, and in prod set "
                "scheduler.admissionWebhook.failurePolicy: Fail with kube-system, the CNI's and "
                "HAMi's namespaces in scheduler.admissionWebhook.whitelistNamespaces."
            ),
        ),
        ResourceValidationPolicy(
            name=LAB_ONLY_COMPONENTS,
            description=(
                "The mock device plugin, the mock allocation completer and declared fake "
                "inventories stay out of prod."
            ),
            validate=validate_lab_only,
            enforcement_level=mandatory,
            severity=Severity.CRITICAL,
            config_schema=PolicyConfigSchema(properties=dict(_ENVIRONMENT_ONLY)),
            remediation_steps=(
                "Use deviceMode nvidia for prod pools: HAMi's device plugin registers the real "
                "cards; do not deploy the lab's simulation parts."
            ),
        ),
        StackValidationPolicy(
            name=HAMI_SCHEDULER_VERSION,
            description=("HAMi's kube-scheduler image tag equals the tenant's Kubernetes version."),
            validate=validate_scheduler_version,
            enforcement_level=mandatory,
            severity=Severity.MEDIUM,
            remediation_steps=(
                "Set scheduler.kubeScheduler.image.tag to the tenant's Kubernetes version "
                "(kubernetesVersion in the stack config)."
            ),
        ),
    ]
