"""The GitHub workflows do what a first real run needs: a pinned CLI, a policy pack venv, a lab
backend that exists, the prod stack's secrets, a checked kind binary, the inotify limits, one test
run per pull request."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from components.preflight import Requirements
from components.versions import KIND_RELEASE
from tests.support.harness import REPO_ROOT

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
SHA = re.compile(r"^[0-9a-f]{40}$")


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return data


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def _env(workflow: dict[str, Any], value: str) -> str:
    """``${{ env.X }}`` resolved from the workflow's top-level env."""
    match = re.fullmatch(r"\$\{\{ env\.(\w+) \}\}", value)
    return str(workflow.get("env", {})[match.group(1)]) if match else value


def _sdk_version() -> str:
    for line in (REPO_ROOT / "requirements.txt").read_text().splitlines():
        if line.startswith("pulumi=="):
            return line.split("==", 1)[1]
    raise AssertionError("requirements.txt pins no pulumi")


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_pulumi_actions_are_pinned_with_the_sdks_cli_version(name: str) -> None:
    workflow = _load(name)
    for step in _steps(workflow):
        uses = step.get("uses", "")
        if not uses.startswith("pulumi/actions@"):
            continue
        assert SHA.match(uses.split("@", 1)[1]), f"{name}: pin pulumi/actions by commit: {uses}"
        version = _env(workflow, step["with"]["pulumi-version"])
        assert version == _sdk_version(), f"{name}: CLI {version}, SDK {_sdk_version()}"


def _index(steps: list[dict[str, Any]], predicate: Any) -> int:
    found = [i for i, step in enumerate(steps) if predicate(step)]
    assert found, "no such step"
    return found[0]


def test_pr_previews_prepare_the_policy_venv_and_the_lab_backend_first() -> None:
    steps = _load("preview.yml")["jobs"]["preview"]["steps"]
    venv = _index(steps, lambda s: "make policy-venv" in s.get("run", ""))
    state = _index(steps, lambda s: s.get("run", "").strip() == "mkdir -p .pulumi-state")
    lab = _index(steps, lambda s: s.get("with", {}).get("stack-name") == "lab")
    prod = _index(steps, lambda s: s.get("with", {}).get("stack-name") == "prod")
    assert venv < state < lab
    assert venv < prod
    cloud_url = steps[lab]["with"]["cloud-url"]
    assert cloud_url == "file://${{ github.workspace }}/.pulumi-state"
    assert steps[state].get("if") == steps[lab].get("if") == "matrix.stack == 'lab'"


def test_the_prod_preview_gets_its_secret_config_first() -> None:
    steps = _load("preview.yml")["jobs"]["preview"]["steps"]
    install = _index(
        steps,
        lambda s: s.get("uses", "").startswith("pulumi/actions@") and "command" not in s["with"],
    )
    secrets = _index(steps, lambda s: "set_secret_config.py prod" in s.get("run", ""))
    prod = _index(steps, lambda s: s.get("with", {}).get("stack-name") == "prod")
    assert install < secrets < prod, "CLI, then `pulumi config set --secret`, then the preview"
    env = steps[secrets]["env"]
    assert env["PULUMI_SECRET_CONFIG"] == "${{ secrets.PULUMI_PROD_SECRET_CONFIG }}"
    assert env["PULUMI_BACKEND_URL"] == "${{ secrets.PULUMI_PROD_BACKEND_URL }}"
    assert steps[install]["if"] == steps[secrets]["if"] == steps[prod]["if"]


def test_kind_is_the_pinned_release_checked_against_its_checksum() -> None:
    steps = _steps(_load("lab-e2e.yml"))
    install = steps[_index(steps, lambda s: "kind-linux-amd64" in s.get("run", ""))]["run"]
    assert f"https://kind.sigs.k8s.io/dl/{KIND_RELEASE}/kind-linux-amd64.sha256sum" in install
    lines = install.splitlines()
    check = next(i for i, line in enumerate(lines) if "sha256sum --check" in line)
    fetch_sum = next(i for i, line in enumerate(lines) if line.endswith("amd64.sha256sum"))
    place = next(i for i, line in enumerate(lines) if "install -m 0755" in line)
    assert fetch_sum < check < place


def test_the_nightly_e2e_raises_the_inotify_limit_before_make_lab() -> None:
    steps = _steps(_load("lab-e2e.yml"))
    sysctl = _index(steps, lambda s: "fs.inotify.max_user_instances" in s.get("run", ""))
    lab = _index(steps, lambda s: s.get("run", "").strip() == "make lab")
    assert sysctl < lab
    value = int(steps[sysctl]["run"].split("fs.inotify.max_user_instances=", 1)[1].split()[0])
    assert value >= Requirements().min_inotify_instances


def test_a_pull_request_branch_runs_the_tests_once() -> None:
    workflow = _load("test.yml")
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "pull_request" in triggers
    assert triggers["push"] == {"branches": ["main"]}


def test_ci_builds_the_policy_venv_with_the_same_target_as_make_preview() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make --no-print-directory venv policy-venv" in ci
    assert "virtualenv: .venv" in (REPO_ROOT / "policies" / "PulumiPolicy.yaml").read_text()


def test_the_test_workflow_fetches_the_chart_archives_before_the_suite() -> None:
    """Without the archives the rendered-chart suite skips; on GitHub it must run for real."""
    steps = _steps(_load("test.yml"))
    fetch = _index(steps, lambda s: "make fetch-upstream" in str(s.get("run", "")))
    suite = _index(steps, lambda s: "bash .ci/run" in str(s.get("run", "")))
    assert fetch < suite


def test_previews_fetch_the_charts_the_program_checks_before_it_registers() -> None:
    """The program refuses to start without the pinned Kamaji chart in the project's .charts/
    (components/chart_cache.py), where ``--project .`` puts it (the action runs in ``./``)."""
    steps = _steps(_load("preview.yml"))
    fetch = _index(
        steps,
        lambda s: "scripts/fetch_charts.py --only kamaji --project ." in str(s.get("run", "")),
    )
    previews = [i for i, s in enumerate(steps) if s.get("with", {}).get("command") == "preview"]
    assert previews
    assert all(fetch < i for i in previews)


def test_the_nightly_e2e_installs_a_kubectl_the_preflight_accepts_checked() -> None:
    """The runner's own kubectl is whatever its image ships; the preflight refuses one more
    than a minor away from the clusters."""
    steps = _steps(_load("lab-e2e.yml"))
    install = steps[_index(steps, lambda s: "bin/linux/amd64/kubectl" in s.get("run", ""))]["run"]
    minor = int(re.search(r"/release/v1\.(\d+)\.\d+/", install).group(1))  # type: ignore[union-attr]
    low, high = Requirements().kubectl_minors
    assert low <= minor <= high
    lines = install.splitlines()
    fetch_sum = next(i for i, line in enumerate(lines) if line.endswith("kubectl.sha256"))
    check = next(i for i, line in enumerate(lines) if "sha256sum --check" in line)
    place = next(i for i, line in enumerate(lines) if "install -m 0755" in line)
    assert fetch_sum < check < place
    lab = _index(steps, lambda s: s.get("run", "").strip() == "make lab")
    assert _index(steps, lambda s: "bin/linux/amd64/kubectl" in s.get("run", "")) < lab
