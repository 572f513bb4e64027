"""What a tenant's API server answers a pod the suite sends, offline: the built-in RuntimeClass
plugin, HAMi v2.10.0's mutating webhook, then the tenant's ValidatingAdmissionPolicy as the
program renders it (ResourceQuota runs after all of them and is not modelled).

TC-17 picks its cases and judges the live answers with it, and
``tests/policies/test_acceptance_pods_through_admission.py`` sends every pod the suite creates
through it. The models are ``tests.policies.vap_eval``'s (``hami_webhook``, ``evaluate_policy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.admission_policies import (
    admission_binding,
    admission_params,
    admission_policy,
    device_sharing,
    rule_definitions,
)
from components.config import PlatformConfig, Tenant
from components.lab.dra_driver import DEVICE_CLASS
from components.tenant_specs import tenant_labels
from components.tenant_values import NVIDIA_RUNTIME_CLASS, webhook_excluded_namespaces
from tests.acceptance.stack import uses_mock
from tests.policies.vap_eval import WEBHOOK, TenantAnswer, tenant_answer

DRA_CLASSES = (DEVICE_CLASS,)  # the lab's (components.lab.dra_driver)


def dra_classes(platform: PlatformConfig) -> tuple[str, ...]:
    """The DeviceClasses a dra tenant's claims may name where ``platform`` runs (the seam's
    ``dra_device_classes``: the lab's fake driver's, prod's GPUCluster's)."""
    from components.stack import substrate_for

    return tuple(substrate_for(platform).dra_device_classes)


@dataclass(frozen=True)
class HamiOptions:
    """What the tenant's HAMi chart is given (components.tenant_values.hami_values): with a
    real device plugin, ``overwriteEnv`` and the ``nvidia`` RuntimeClass; with the mock, neither."""

    overwrite_env: bool
    runtime_class: str | None


def hami_options(platform: PlatformConfig, tenant: Tenant) -> HamiOptions:
    real = any(not uses_mock(platform, pool) for pool in tenant.worker_pools)
    return HamiOptions(True, NVIDIA_RUNTIME_CLASS) if real else HamiOptions(False, None)


def runtime_classes(platform: PlatformConfig, tenant: Tenant) -> frozenset[str]:
    """The RuntimeClasses a tenant has, which the API server's RuntimeClass plugin checks every
    pod's ``runtimeClassName`` against: the GPU Operator's ``nvidia`` where a pool has real
    cards (``operator.runtimeClass``, components/prod/tenant_values.py); none with the mock
    (kind creates none, the program none, and HAMi's chart only with ``createRuntimeClass``,
    default false: Project-HAMi/HAMi v2.10.0 charts/hami/values.yaml:384-387)."""
    options = hami_options(platform, tenant)
    return frozenset({options.runtime_class}) if options.runtime_class else frozenset()


def expected_answer(
    platform: PlatformConfig,
    tenant: Tenant,
    pod: Mapping[str, Any],
    namespace: str,
    *,
    namespace_labels: Mapping[str, str] | None = None,
    excluded_namespaces: Sequence[str] | None = None,
    quota_left: Mapping[str, int] | None = None,
) -> TenantAnswer:
    """The tenant's answer to ``pod`` created in ``namespace``."""
    rules = rule_definitions()
    labels = tenant_labels(tenant.name)
    excluded = list(excluded_namespaces or webhook_excluded_namespaces())
    options = hami_options(platform, tenant)
    body = {**pod, "metadata": {**pod["metadata"], "namespace": namespace}}
    return tenant_answer(
        admission_policy(rules, labels),
        admission_binding(rules, tenant.admission.mode, excluded, labels),
        # The tenant's gpuSharing too, with the DeviceClasses its environment's driver registers.
        [
            admission_params(
                rules, tenant.admission, labels, device_sharing(tenant, dra_classes(platform))
            )
        ],
        body,
        {"metadata": {"name": namespace, "labels": dict(namespace_labels or {})}},
        overwrite_env=options.overwrite_env,
        runtime_class=options.runtime_class,
        runtime_classes=runtime_classes(platform, tenant),
        excluded_namespaces=excluded,
        quota_left=quota_left,
    )


def refusal_problem(expected: TenantAnswer, message: str | None) -> str | None:
    """TC-17's judge: None when the live answer ``message`` (None: admitted) is the expected
    one, else what is wrong.

    * refused by the policy: the API server names only the first failed validation, as
      ``denied request: <id>: <message>`` (k8s.io/apiserver v0.35.7 validating/dispatcher.go
      :289-306). A rule with a ``messageExpression`` is matched by its ``"<id>: "`` prefix and the
      computed text (the static ``message`` is then not what the server says), any other rule by
      its prefix and its static message;
    * refused by the built-in RuntimeClass plugin (a class the tenant does not have): its own
      text, ``pod rejected: RuntimeClass "<name>" not found``, which names no rule;
    * refused by HAMi's webhook: its own text (``admission webhook "vgpu.hami.io" denied the
      request: ...``), which names no rule;
    * admitted: HAMi rewrote the pod into one the rules allow."""
    if expected.admitted:
        return (
            None
            if message is None
            else f"refused, expected admitted as HAMi rewrites it: {message}"
        )
    if message is None:
        return "admitted"
    if expected.refused_by == "runtimeclass":
        if "pod rejected: RuntimeClass" in message and "not found" in message:
            return None
        return f"expected the RuntimeClass plugin to refuse it ({expected.message}), got: {message}"
    if expected.refused_by == "hami":
        hami_text = expected.message.removeprefix(f"{WEBHOOK}: ")
        if WEBHOOK in message and hami_text in message:
            return None
        return f"expected HAMi's webhook to refuse it ({hami_text}), got: {message}"
    first = expected.rule_ids[0]
    computed = expected.message.split("denied request: ", 1)[1]
    definition = {r["id"]: r for r in rule_definitions().rules}[first]
    if f"denied request: {first}: " not in message:
        return f"refused without {first}'s id (the first rule it breaks): {message}"
    if definition.get("messageExpression"):
        if computed not in message:
            return f"refused by {first}, but not with its computed message ({computed}): {message}"
    elif definition["message"] not in message:
        return f"refused by {first}, but without its message: {message}"
    return None
