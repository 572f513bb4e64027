"""The README and docs/ stay true: the config reference (docs/configuration.md) equals the
models, the make targets they name exist, their YAML examples validate, and CI runs the test
command the README documents."""

from __future__ import annotations

import re

import yaml

from components.config_reference import END, START, reference_rows, with_reference
from components.stack import parse_platform
from tests.support.harness import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
CONFIGURATION = (REPO_ROOT / "docs" / "configuration.md").read_text()
PAGES = {
    path.relative_to(REPO_ROOT).as_posix(): path.read_text()
    for path in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
}
MAKEFILE = (REPO_ROOT / "Makefile").read_text()


def _documented_keys() -> set[str]:
    section = CONFIGURATION.split(START, 1)[1].split(END, 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


def test_every_documented_config_key_exists_in_the_models() -> None:
    model_keys = {row[0] for row in reference_rows()}
    assert _documented_keys() - model_keys == set()


def test_every_model_key_is_documented() -> None:
    model_keys = {row[0] for row in reference_rows()}
    assert model_keys - _documented_keys() == set()


def test_reference_table_is_the_generated_one() -> None:
    assert with_reference(CONFIGURATION) == CONFIGURATION, "run `make docs`"


def test_make_docs_writes_the_reference_into_the_configuration_page() -> None:
    recipe = MAKEFILE.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "-m components.config_reference --write docs/configuration.md" in recipe


def test_documented_make_targets_exist() -> None:
    defined = set(re.findall(r"^([a-z][a-z0-9-]*):", MAKEFILE, re.M))
    for page, text in PAGES.items():
        documented = set(re.findall(r"\bmake ([a-z][a-z0-9-]*)", text))
        assert documented - defined == set(), page
    assert re.findall(r"\bmake ([a-z][a-z0-9-]*)", README), "the README documents no make targets"


def test_ci_runs_the_documented_test_command() -> None:
    assert "make test    # the offline suite" in README
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make --no-print-directory test" in ci


def test_yaml_examples_in_the_docs_validate() -> None:
    blocks = [b for text in PAGES.values() for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    for block in blocks:
        document = yaml.safe_load(block)
        if isinstance(document, list):
            # A tenant block (docs/configuration.md, "Add a tenant"): validated appended to the
            # lab stack by tests/unit/test_config_hints.py.
            continue
        platform = (document.get("config") or {}).get("gpu-platform:platform")
        if platform is not None:
            parse_platform(platform)
