"""Issue 37: every pod the program itself puts into a tenant (charts rendered by Helm's engine and
the program's own objects) passes that tenant's admission as a live tenant runs it: HAMi
v2.10.0's mutating webhook model first, then the tenant's ValidatingAdmissionPolicy, Binding and
params exactly as rendered on that cluster (``tests.policies.vap_eval``). A new rule that refused
the platform's own pods (a metrics agent, a validator, HAMi itself) would leave a tenant that
cannot run its own system: this is where such a rule meets them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from components.admission_policies import rule_definitions
from components.config import validate_models
from tests.acceptance.admission_model import hami_options, runtime_classes
from tests.policies.vap_eval import tenant_answer
from tests.support.harness import load_stack_config
from tests.support.rendered_stack import PlacedObject, RenderedStack

TEMPLATES = {"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"}


def _pods(objects: list[PlacedObject]) -> list[tuple[str, dict[str, Any]]]:
    """(what, pod) for every pod and pod template, as a pod in its namespace."""
    found = []
    for placed in objects:
        obj, kind = placed.obj, placed.kind
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        if kind == "Pod":
            template = {"metadata": meta, "spec": obj.get("spec") or {}}
        elif kind in TEMPLATES:
            template = (obj.get("spec") or {}).get("template") or {}
        elif kind == "CronJob":
            template = ((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec", {})
            template = template.get("template") or {}
        else:
            continue
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **(template.get("metadata") or {}),
                "name": str(meta.get("name")),
                "namespace": namespace,
            },
            "spec": template.get("spec") or {},
        }
        found.append((placed.describe(), pod))
    return found


def _one(objects: list[PlacedObject], kind: str, name: str) -> dict[str, Any]:
    matches = [o.obj for o in objects if o.kind == kind and o.obj["metadata"]["name"] == name]
    assert len(matches) == 1, f"{len(matches)} {kind} {name}"
    return matches[0]


def _judge(
    stack: str, result: RenderedStack, break_rule: str | None = None
) -> tuple[list[str], int]:
    """(refusals, pods the policies judged) over every tenant of ``stack``; ``break_rule``: that
    rule's expression replaced by ``false`` (to show the check can fail)."""
    platform = validate_models(load_stack_config(stack)["gpu-platform:platform"])
    rules = rule_definitions()
    problems: list[str] = []
    judged = 0
    for tenant in platform.tenants:
        cluster = next(c for c in result.clusters.values() if c.name == tenant.name)
        objects = list(result.on_cluster(cluster))
        policy = copy.deepcopy(_one(objects, "ValidatingAdmissionPolicy", rules.policy_name))
        if break_rule is not None:
            index = [r["id"] for r in rules.rules].index(break_rule)
            policy["spec"]["validations"][index]["expression"] = "false"
        binding = _one(objects, "ValidatingAdmissionPolicyBinding", rules.policy_name)
        params = _one(objects, "ConfigMap", rules.params_name)
        labels = {
            o.obj["metadata"]["name"]: o.obj["metadata"].get("labels") or {}
            for o in objects
            if o.kind == "Namespace"
        }
        excluded = next(
            e["values"]
            for e in binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        )
        options = hami_options(platform, tenant)
        for what, pod in _pods(objects):
            namespace = pod["metadata"]["namespace"]
            answer = tenant_answer(
                policy,
                binding,
                [params],
                pod,
                {"metadata": {"name": namespace, "labels": labels.get(namespace, {})}},
                overwrite_env=options.overwrite_env,
                runtime_class=options.runtime_class,
                runtime_classes=runtime_classes(platform, tenant),
                excluded_namespaces=excluded,
            )
            judged += namespace not in excluded
            if not answer.admitted:
                problems.append(f"{tenant.name}: {what}: {answer.message}")
    return problems, judged


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_pod_the_program_puts_in_a_tenant_passes_its_admission(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    problems, judged = _judge(stack, rendered(stack))
    assert problems == []
    # The lab's declared workload (inference-sample) and its mock completers run in namespaces
    # the binding judges; prod's tenants run only system pods, all in excluded namespaces.
    assert judged >= (2 if stack == "lab" else 0), f"{judged} pods reached a tenant's policy"


def test_the_check_can_fail(rendered: Callable[[str], RenderedStack]) -> None:
    problems, _ = _judge("lab", rendered("lab"), break_rule="hami-resource-names")
    assert any("inference-sample" in p and "hami-resource-names" in p for p in problems)
