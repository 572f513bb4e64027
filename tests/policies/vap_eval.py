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
   ``parameterNotFoundAction: Deny`` refuses the request;
3. ``variables`` in order, then every ``validation``; a false result, or an expression that does
   not evaluate (``failurePolicy: Fail``), fails with the validation's message (its
   ``messageExpression`` when that evaluates);
4. ``validationActions``: ``Deny`` refuses, ``Warn`` and ``Audit`` admit.

And the pod the API server hands the policy: quantities canonical, ``schedulerName`` defaulted,
extended-resource requests equal to limits; optionally after HAMi v2.10.0's mutating webhook
(``hami_mutation``: the scheduler name, ``nvidia.com/gpu`` defaulted to 1, an exclusive card's
``gpucores: 100``, ``NVIDIA_VISIBLE_DEVICES=none`` and the runtime class).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
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


def _rule_matches(policy: Mapping[str, Any], operation: str) -> bool:
    for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
        if (
            "" in rule["apiGroups"]
            and "v1" in rule["apiVersions"]
            and "pods" in rule["resources"]
            and (operation in rule["operations"] or "*" in rule["operations"])
        ):
            return True
    return False


def _run(text: str, activation: Mapping[str, Any]) -> Any:
    env = celpy.Environment()
    program = env.program(env.compile(text), functions=FUNCTIONS)
    result = program.evaluate(dict(activation))
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
    if not _rule_matches(policy, operation):
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
            return Verdict(not denies, True, ["params not found"])
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


def hami_mutation(
    pod: Mapping[str, Any], overwrite_env: bool, runtime_class: str | None
) -> dict[str, Any]:
    """HAMi v2.10.0's webhook on an admitted pod (pkg/scheduler/webhook.go:53-123 and
    pkg/device/nvidia/device.go:347-450, chart defaults defaultGPUNum 1, schedulerName
    hami-scheduler): it runs only for pods without another scheduler."""
    result = copy.deepcopy(dict(pod))
    spec = result["spec"]
    if spec.get("schedulerName") not in ("", "default-scheduler", "hami-scheduler"):
        return result
    has_resource = False
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            limits = (container.get("resources") or {}).get("limits") or {}
            found = "nvidia.com/gpu" in limits
            if not found and any(
                k in limits
                for k in (
                    "nvidia.com/gpucores",
                    "nvidia.com/gpumem",
                    "nvidia.com/gpumem-percentage",
                )
            ):
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
            has_resource = has_resource or found
    if has_resource:
        spec["schedulerName"] = "hami-scheduler"
    return result
