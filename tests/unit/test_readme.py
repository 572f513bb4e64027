"""The README stays true: its config reference equals the models, its make targets exist, its
YAML examples validate, and CI runs the test command it documents."""

from __future__ import annotations

import re

import yaml

from components.config import parse_platform
from components.config_reference import END, START, reference_rows, with_reference
from tests.support.harness import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
MAKEFILE = (REPO_ROOT / "Makefile").read_text()


def _documented_keys() -> set[str]:
    section = README.split(START, 1)[1].split(END, 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


def test_every_documented_config_key_exists_in_the_models() -> None:
    model_keys = {row[0] for row in reference_rows()}
    assert _documented_keys() - model_keys == set()


def test_every_model_key_is_documented() -> None:
    model_keys = {row[0] for row in reference_rows()}
    assert model_keys - _documented_keys() == set()


def test_reference_table_is_the_generated_one() -> None:
    assert with_reference(README) == README, "run `make docs`"


def test_documented_make_targets_exist() -> None:
    documented = set(re.findall(r"\bmake ([a-z][a-z-]*)", README))
    defined = set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, re.M))
    assert documented, "the README documents no make targets"
    assert documented - defined == set()


def test_ci_runs_the_documented_test_command() -> None:
    assert "make test    # the offline suite" in README
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make --no-print-directory test" in ci


def test_yaml_examples_in_the_readme_validate() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", README, re.S)
    for block in blocks:
        document = yaml.safe_load(block)
        platform = (document.get("config") or {}).get("gpu-platform:platform")
        if platform is not None:
            parse_platform(platform)
