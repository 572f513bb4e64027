"""The tenant API server's side: a rendered ValidatingAdmissionPolicy + Binding evaluated on a pod.

An offline stand-in for kube-apiserver's ``validating`` admission plugin
(k8s.io/apiserver pkg/admission/plugin/policy/validating), with cel-python 0.5.0 as the CEL
implementation and the same shims ``tests/support/crd_schemas.py`` uses for cel-go's equality
(``_==_``, ``_!=_``, ``_in_``), plus Kubernetes' quantity library (``gpu_platform_policies.cel``).
It reads only the rendered objects (never the rules file), so it checks what the program deploys:

1. the policy's ``matchConstraints`` (pods, the operation) and the binding's
   ``matchResources.namespaceSelector`` (``In``/``NotIn``/``Exists``/``DoesNotExist`` on the
   namespace's labels, ``kubernetes.io/metadata.name`` included) decide whether the pod is judged;
2. the binding's ``paramRef`` names the params object; when it is missing,
   ``parameterNotFoundAction: Deny`` is a configuration error that refuses the request in
   **every** mode (k8s.io/apiserver v0.35.7 pkg/admission/plugin/policy/generic/
   policy_dispatcher.go:337-343, :377-378: ``addConfigError`` goes to the denied decisions;
   validating/dispatcher.go:232-252 applies ``validationActions`` to CEL decisions only);
3. ``variables`` in order, then every ``validation``; a false result, or an expression that does
   not evaluate (``failurePolicy: Fail``), fails with the validation's message (its
   ``messageExpression`` when that evaluates);
4. ``validationActions``: ``Deny`` refuses, ``Warn`` admits.

And the pod the API server hands the policy: quantities canonical, ``schedulerName`` defaulted,
extended-resource requests equal to limits; optionally after HAMi v2.10.0's mutating webhook
(``hami_webhook``: what it refuses itself, and what it writes: the scheduler name,
``nvidia.com/gpu`` defaulted to 1, an exclusive card's ``gpucores: 100``,
``NVIDIA_VISIBLE_DEVICES=none``, the runtime class).
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes
from gpu_platform_policies.cel import QUANTITY_FUNCTIONS, canonical_quantity

from tests.support.crd_schemas import _FUNCTIONS as K8S_EQUALITY

FUNCTIONS = {**K8S_EQUALITY, **QUANTITY_FUNCTIONS}
NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass
class Verdict:
    """What the API server answers: admitted or not, and the failed validations' messages."""

    admitted: bool
    judged: bool
    messages: list[str] = field(default_factory=list)

    @property
    def rule_ids(self) -> set[str]:
        return {m.split(":", 1)[0] for m in self.messages}


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _rule_matches(policy: Mapping[str, Any], operation: str, obj: Mapping[str, Any]) -> bool:
    group, _, version = str(obj.get("apiVersion", "v1")).rpartition("/")
    plural = {
        "Pod": "pods",
        "ResourceClaim": "resourceclaims",
        "ResourceClaimTemplate": "resourceclaimtemplates",
    }.get(str(obj.get("kind", "Pod")))
    for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
        if (
            group in rule["apiGroups"]
            and version in rule["apiVersions"]
            and plural in rule["resources"]
            and (operation in rule["operations"] or "*" in rule["operations"])
        ):
            return True
    return False


@functools.lru_cache(maxsize=512)
def _program(text: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(text), functions=FUNCTIONS)


def _run(text: str, activation: Mapping[str, Any]) -> Any:
    result = _program(text).evaluate(dict(activation))
    if isinstance(result, celpy.evaluation.CELEvalError):
        raise result
    return result


def evaluate_policy(
    policy: Mapping[str, Any],
    binding: Mapping[str, Any],
    pod: Mapping[str, Any],
    namespace: Mapping[str, Any],
    config_maps: Sequence[Mapping[str, Any]],
    operation: str = "CREATE",
) -> Verdict:
    """The API server's answer for ``pod`` (see the module docstring)."""
    if binding["spec"]["policyName"] != policy["metadata"]["name"]:
        return Verdict(True, False)
    labels = {NAME_LABEL: namespace["metadata"]["name"], **namespace["metadata"].get("labels", {})}
    if not _rule_matches(policy, operation, pod):
        return Verdict(True, False)
    if not _selector_matches(
        binding["spec"].get("matchResources", {}).get("namespaceSelector"), labels
    ):
        return Verdict(True, False)
    actions = binding["spec"]["validationActions"]
    denies = "Deny" in actions
    params: Any = None
    ref = binding["spec"].get("paramRef")
    if ref is not None:
        params = next(
            (
                cm
                for cm in config_maps
                if cm["metadata"]["name"] == ref["name"]
                and cm["metadata"].get("namespace") == ref["namespace"]
            ),
            None,
        )
        if params is None and ref.get("parameterNotFoundAction") == "Deny":
            # A configuration error: refused whatever validationActions say.
            return Verdict(False, True, ["params not found"])
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(copy.deepcopy(dict(pod))),
        "oldObject": None,
        "namespaceObject": celpy.json_to_cel(
            {**namespace, "metadata": {**namespace["metadata"], "labels": labels}}
        ),
        "params": celpy.json_to_cel(params),
        "request": celpy.json_to_cel({"operation": operation}),
    }
    variables: dict[Any, Any] = {}
    messages: list[str] = []
    for variable in policy["spec"].get("variables") or []:
        activation["variables"] = celtypes.MapType(variables)
        try:
            variables[celtypes.StringType(variable["name"])] = _run(
                variable["expression"], activation
            )
        except Exception as error:  # any evaluation error fails closed
            return Verdict(not denies, True, [f"variable {variable['name']}: {error}"])
    activation["variables"] = celtypes.MapType(variables)
    for validation in policy["spec"]["validations"]:
        try:
            passed = bool(_run(validation["expression"], activation))
        except Exception as error:  # failurePolicy: Fail
            assert policy["spec"]["failurePolicy"] == "Fail"
            messages.append(f"{validation['message']} (error: {error})")
            continue
        if passed:
            continue
        message = validation.get("message", "")
        if validation.get("messageExpression"):
            # The API server falls back to ``message`` when the expression fails.
            with contextlib.suppress(Exception):
                message = str(_run(validation["messageExpression"], activation))
        messages.append(message)
    return Verdict(not (messages and denies), True, messages)


# ---------------------------------------------------------------- the pod the API server sees


def _quantity(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return canonical_quantity(str(value))


def as_admitted(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A pod as decoded, defaulted and re-encoded by the API server, before admission."""
    result = copy.deepcopy(dict(pod))
    spec = result["spec"]
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            resources = container.get("resources")
            if not resources:
                continue
            limits = {k: _quantity(v) for k, v in (resources.get("limits") or {}).items()}
            requests = {k: _quantity(v) for k, v in (resources.get("requests") or {}).items()}
            for name, value in limits.items():
                requests.setdefault(name, value)  # requests default to limits
            resources["limits"], resources["requests"] = limits, requests
    return result


@dataclass(frozen=True)
class HamiAnswer:
    """HAMi's mutating webhook on one pod: not called (its selectors leave the pod out), refused
    with HAMi's own message, or the pod as it leaves the webhook."""

    called: bool
    pod: dict[str, Any] | None
    refusal: str | None = None


WEBHOOK = 'admission webhook "vgpu.hami.io" denied the request'
SKIP_LABEL = "hami.io/webhook"
COUNTED = ("nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage")


def _value(container: Mapping[str, Any], name: str) -> int | None:
    """HAMi's ``resourceValue``: the limit, else the request (device.go:452-463), as an integer
    (``Quantity.Value()`` rounds up)."""
    resources = container.get("resources") or {}
    for key in ("limits", "requests"):
        found = (resources.get(key) or {}).get(name)
        if found is not None:
            return int(-(-float(canonical_number(str(found))) // 1))
    return None


def canonical_number(text: str) -> float:
    """A Kubernetes quantity as a number (decimal and binary suffixes)."""
    suffixes = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3}
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    for suffix, factor in binary.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    if text and text[-1] in suffixes:
        return float(text[:-1]) * suffixes[text[-1]]
    return float(text)


def hami_webhook(
    pod: Mapping[str, Any],
    namespace_labels: Mapping[str, str],
    *,
    overwrite_env: bool,
    runtime_class: str | None,
    excluded_namespaces: Sequence[str] = (),
    quota_left: Mapping[str, int] | None = None,
) -> HamiAnswer:
    """HAMi v2.10.0's webhook (chart defaults: defaultGPUNum 1, schedulerName hami-scheduler):

    * not called for a pod or namespace labelled ``hami.io/webhook=ignore`` or a namespace of
      ``whitelistNamespaces`` (charts/hami/templates/scheduler/webhook.yaml: namespaceSelector and
      objectSelector ``NotIn [ignore]``);
    * refused: no containers (pkg/scheduler/webhook.go:58-61), a ``gpumem-percentage`` outside
      0..100 (device.go:349-351, 389-395, answered ``admission.Errored(500)``, webhook.go:75-97),
      a privileged container in a GPU pod (webhook.go:99-101), a GPU pod with ``nodeName``
      (:107-111), over the namespace's HAMi quota (``quota_left`` per resource, :114-115 and
      ``fitResourceQuota`` :145-190: Memreq x cards and Coresreq x cards of every container);
    * otherwise the pod as it writes it (device.go:347-450), ``CUDA_TASK_PRIORITY`` appended to
      a container that asks for ``nvidia.com/priority`` (:352-358) included."""
    namespace = str(pod.get("metadata", {}).get("namespace", ""))
    labels = pod.get("metadata", {}).get("labels") or {}
    if (
        labels.get(SKIP_LABEL) == "ignore"
        or namespace_labels.get(SKIP_LABEL) == "ignore"
        or namespace in excluded_namespaces
    ):
        return HamiAnswer(False, copy.deepcopy(dict(pod)))
    result = copy.deepcopy(dict(pod))
    spec = result["spec"]
    if not spec.get("containers"):
        return HamiAnswer(True, None, f"{WEBHOOK}: pod has no containers")
    if spec.get("schedulerName") not in ("", "default-scheduler", "hami-scheduler", None):
        return HamiAnswer(True, result)
    has_resource = False
    privileged = ""
    memory_asked = cores_asked = init_memory = init_cores = 0
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if (container.get("securityContext") or {}).get("privileged") is True:
                privileged = privileged or container["name"]
            percentage = _value(container, "nvidia.com/gpumem-percentage")
            if percentage is not None and not 0 <= percentage <= 100:
                return HamiAnswer(
                    True,
                    None,
                    f"{WEBHOOK}: invalid nvidia.com/gpumem-percentage value {percentage} in "
                    f"container {container['name']}: must be an integer between 0 and 100",
                )
            limits = container.setdefault("resources", {}).setdefault("limits", {})
            priority = _value(container, "nvidia.com/priority")
            if priority is not None:  # device.go:352-358, after the pod's own env
                container.setdefault("env", []).append(
                    {"name": "CUDA_TASK_PRIORITY", "value": str(priority)}
                )
            found = "nvidia.com/gpu" in limits
            if not found and any(k in limits for k in COUNTED):
                limits["nvidia.com/gpu"] = "1"  # defaultGPUNum: 1
                found = True
            exclusive = limits.get("nvidia.com/gpumem-percentage") == "100" or (
                "nvidia.com/gpumem-percentage" not in limits and "nvidia.com/gpumem" not in limits
            )
            if found and "nvidia.com/gpucores" not in limits and exclusive:
                limits["nvidia.com/gpucores"] = "100"
            if found and runtime_class and "runtimeClassName" not in spec:
                spec["runtimeClassName"] = runtime_class
            if not found and overwrite_env:
                container.setdefault("env", []).append(
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}
                )
            if not limits:
                del container["resources"]["limits"]
                if not container["resources"]:
                    del container["resources"]
            if found:
                cards = _value(container, "nvidia.com/gpu") or 0
                memory = (_value(container, "nvidia.com/gpumem") or 0) * cards
                cores = (_value(container, "nvidia.com/gpucores") or 0) * cards
                if key == "containers":
                    memory_asked, cores_asked = memory_asked + memory, cores_asked + cores
                else:  # init containers run one at a time: the pod needs their largest
                    init_memory, init_cores = max(init_memory, memory), max(init_cores, cores)
            has_resource = has_resource or found
    if privileged and has_resource:
        return HamiAnswer(True, None, f"{WEBHOOK}: container {privileged} is privileged")
    if has_resource:
        spec["schedulerName"] = "hami-scheduler"
        if spec.get("nodeName"):
            return HamiAnswer(True, None, f"{WEBHOOK}: pod has node assigned")
    memory_asked, cores_asked = max(memory_asked, init_memory), max(cores_asked, init_cores)
    left = quota_left or {}
    if memory_asked > left.get("nvidia.com/gpumem", memory_asked) or cores_asked > left.get(
        "nvidia.com/gpucores", cores_asked
    ):
        return HamiAnswer(True, None, f"{WEBHOOK}: exceeding resource quota")
    return HamiAnswer(True, result)


def hami_mutation(
    pod: Mapping[str, Any], overwrite_env: bool, runtime_class: str | None
) -> dict[str, Any]:
    """The pod as HAMi's webhook writes it, for a pod it lets through (``hami_webhook``)."""
    answer = hami_webhook(pod, {}, overwrite_env=overwrite_env, runtime_class=runtime_class)
    if answer.pod is None:
        raise ValueError(f"HAMi's webhook refuses this pod: {answer.refusal}")
    return answer.pod


# ------------------------------------------------------------ what a live tenant answers


@dataclass(frozen=True)
class TenantAnswer:
    """A tenant API server's answer to a pod CREATE: the built-in RuntimeClass plugin, HAMi's
    webhook, then the policy.

    ``refused_by`` is ``""`` (admitted), ``"runtimeclass"``, ``"hami"`` or ``"policy"``;
    ``message`` is the API
    error's text as a client reads it; ``rule_ids`` are the policy's failed validations in the
    policy's order (with ``Warn`` they come back as warnings and the pod is admitted)."""

    admitted: bool
    refused_by: str
    message: str
    rule_ids: tuple[str, ...]
    hami_called: bool
    pod: dict[str, Any] | None


def forbidden_message(
    pod_name: str, policy: str, binding: str, message: str, resource: str = "pods"
) -> str:
    """The API error a denying policy returns: only the first denied validation's message
    (k8s.io/apiserver v0.35.7 pkg/admission/plugin/policy/validating/dispatcher.go:289-306,
    wrapped by admission.NewForbidden as ``<resource> "<name>" is forbidden: ...``)."""
    return (
        f"{resource} \"{pod_name}\" is forbidden: ValidatingAdmissionPolicy '{policy}' with "
        f"binding '{binding}' denied request: {message}"
    )


def runtime_class_refusal(pod: Mapping[str, Any], runtime_classes: Collection[str]) -> str | None:
    """The built-in RuntimeClass admission plugin's answer: a pod naming a RuntimeClass the
    cluster does not have is refused, in its mutating phase, so before any webhook and policy
    (kubernetes v1.35.0 plugin/pkg/admission/runtimeclass/admission.go:95-103, 142-159: "pod
    rejected: RuntimeClass %q not found"; it is on by default and ordered before
    MutatingAdmissionWebhook and ValidatingAdmissionPolicy, pkg/kubeapiserver/options/
    plugins.go:70-110, 157-185; Kamaji's default --enable-admission-plugins lists it too,
    clastix/kamaji 26.8.2-edge api/v1alpha1/tenantcontrolplane_types.go:136)."""
    name = (pod.get("spec") or {}).get("runtimeClassName")
    if name is None or name in runtime_classes:
        return None
    return (
        f'pods "{pod["metadata"]["name"]}" is forbidden: pod rejected: '
        f'RuntimeClass "{name}" not found'
    )


def tenant_answer(
    policy: Mapping[str, Any],
    binding: Mapping[str, Any],
    config_maps: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any],
    namespace: Mapping[str, Any],
    *,
    overwrite_env: bool,
    runtime_class: str | None,
    runtime_classes: Collection[str],
    excluded_namespaces: Sequence[str],
    quota_left: Mapping[str, int] | None = None,
) -> TenantAnswer:
    """``pod`` (as sent) through the built-in RuntimeClass plugin (``runtime_classes``: the
    RuntimeClasses the tenant has), HAMi's webhook (mutating webhooks run before validating
    policies; ``runtime_class``: the class HAMi writes into GPU pods) and then the tenant's
    policy, as the tenant's API server would answer it. The plugin judges again after the
    webhooks (its validating phase), so a class HAMi writes must exist too."""
    refusal = runtime_class_refusal(pod, runtime_classes)
    if refusal is not None:
        return TenantAnswer(False, "runtimeclass", refusal, (), False, None)
    admitted_pod = as_admitted(pod)
    labels = namespace["metadata"].get("labels") or {}
    hami = hami_webhook(
        admitted_pod,
        labels,
        overwrite_env=overwrite_env,
        runtime_class=runtime_class,
        excluded_namespaces=excluded_namespaces,
        quota_left=quota_left,
    )
    if hami.pod is None:
        return TenantAnswer(False, "hami", hami.refusal or "", (), True, None)
    refusal = runtime_class_refusal(hami.pod, runtime_classes)
    if refusal is not None:
        return TenantAnswer(False, "runtimeclass", refusal, (), True, hami.pod)
    verdict = evaluate_policy(policy, binding, hami.pod, namespace, config_maps)
    ids = tuple(m.split(":", 1)[0] for m in verdict.messages)
    if verdict.admitted:
        return TenantAnswer(True, "", "", ids, hami.called, hami.pod)
    message = forbidden_message(
        str(pod["metadata"]["name"]),
        str(policy["metadata"]["name"]),
        str(binding["metadata"]["name"]),
        verdict.messages[0],
    )
    return TenantAnswer(False, "policy", message, ids, hami.called, hami.pod)
