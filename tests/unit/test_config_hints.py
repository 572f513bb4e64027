"""A fix hint is never refused next (newcomer review, ``../shared/reviews/newcomer.md`` section 3):
the version a hint names passes every check of that stack's environment, and a request no card
can hold is not sent to raise a quota first."""

from __future__ import annotations

import copy
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import ConfigError
from components.stack import parse_stack
from tests.support.harness import load_stack_config

P = "gpu-platform:platform"


def _platform(stack: str) -> Any:
    return copy.deepcopy(load_stack_config(stack)[P])


def _refusal(raw: Any) -> str | None:
    try:
        parse_stack(raw)
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("stack", ["lab", "prod"])
@pytest.mark.parametrize("wanted", ["v1.35.9", "v1.34.99", "v1.33.99", "v1.36.9", "v1.31.99"])
def test_every_version_a_hint_names_is_accepted(stack: str, wanted: str) -> None:
    raw = _platform(stack)
    raw["tenants"][0]["kubernetesVersion"] = wanted
    refusal = _refusal(raw)
    assert refusal is not None
    assert "tenants[0].kubernetesVersion" in refusal, refusal
    suggested = re.findall(r"v1\.\d+\.\d+", refusal.split("pick", 1)[1])
    assert suggested, refusal
    for version in suggested:
        raw["tenants"][0]["kubernetesVersion"] = version
        # The shipped tenants' workers run the stack's worker image where one is pinned.
        raw.pop("workerImage", None)
        assert _refusal(raw) is None, f"{wanted}: the hint's {version} is refused next"


def test_a_request_no_card_holds_is_not_sent_to_the_quota() -> None:
    raw = _platform("lab")
    tenant = next(t for t in raw["tenants"] if t.get("workloads"))
    tenant["workloads"][0]["gpu"]["memoryMiB"] = 10**6
    refusal = _refusal(raw)
    assert refusal is not None
    assert "no quota would let it run" in refusal, refusal
    assert "raise it" not in refusal, refusal


def test_the_add_a_tenant_recipe_validates() -> None:
    """docs/configuration.md's "Add a tenant" block, appended to the lab as the recipe says,
    passes every check of the config phase (the names, schema, username and ranges it picks do not
    collide with the shipped tenants)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    section = page.split("## Add a tenant", 1)[1]
    block = textwrap.dedent(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    (tenant,) = yaml.safe_load(block)
    raw = _platform("lab")
    raw["tenants"].append(tenant)
    assert _refusal(raw) is None
