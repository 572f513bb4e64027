"""docs/tenant-users.md: the Deployment it tells tenant users to apply is admitted by every
tenant of both stacks (HAMi's webhook model, then the tenant's rendered policy), and two of the
mistakes its table lists are refused by the rule it names (issue 41: a tenant user goes from
nothing to a running GPU pod with one page)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.admission_policies import rule_definitions
from components.config import PlatformConfig, Tenant
from tests.acceptance.admission_model import expected_answer
from tests.acceptance.stack import load_platform

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tenant-users.md"
TENANTS = [
    (stack, platform, tenant)
    for stack in ("lab", "prod")
    for platform in (load_platform(stack),)
    for tenant in platform.tenants
]


def _deployment() -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), flags=re.S)
    documents = [yaml.safe_load(block) for block in blocks]
    (deployment,) = [d for d in documents if d.get("kind") == "Deployment"]
    return deployment


def _pod(limits: dict[str, Any] | None = None) -> dict[str, Any]:
    deployment = _deployment()
    template = copy.deepcopy(deployment["spec"]["template"])
    if limits is not None:
        template["spec"]["containers"][0]["resources"]["limits"].update(limits)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "my-inference-0", **template["metadata"]},
        "spec": template["spec"],
    }


@pytest.mark.parametrize(
    ("stack", "platform", "tenant"), TENANTS, ids=[f"{s}-{t.name}" for s, _, t in TENANTS]
)
def test_the_pages_deployment_is_admitted(
    stack: str, platform: PlatformConfig, tenant: Tenant
) -> None:
    namespace = _deployment()["metadata"]["namespace"]
    answer = expected_answer(platform, tenant, _pod(), namespace)
    assert answer.admitted, answer.message
    limits = _pod()["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2048, "nvidia.com/gpucores": 30}


@pytest.mark.parametrize(
    ("limits", "rule"),
    [
        ({"nvidia.com/gpumem": "2Gi"}, "hami-gpumem-mib"),
        ({"nvidia.com/gpucores": 150}, "hami-gpucores"),
    ],
)
def test_the_pages_mistakes_are_refused_by_the_rule_it_names(
    limits: dict[str, Any], rule: str
) -> None:
    platform = load_platform("lab")
    answer = expected_answer(platform, platform.tenants[0], _pod(limits), "ml")
    assert not answer.admitted
    assert answer.rule_ids[0] == rule, answer.message


def test_the_message_the_page_quotes_is_the_rules() -> None:
    quoted = re.search(r"denied request: hami-gpumem-mib: ([^`…]+)", PAGE.read_text())
    assert quoted is not None
    messages = {r["id"]: r["message"] for r in rule_definitions().rules}
    assert messages["hami-gpumem-mib"].startswith(quoted.group(1).strip())
