"""The GitHub workflows do what a first real run needs: a pinned CLI, a policy pack venv, a lab
backend that exists, the prod stack's secrets, a checked kind binary, the inotify limits, one test
run per pull request; a PR comment that tells the preview's real outcome (its scripts are run here
as the runner runs them, the comment script under node with a fake GitHub client); actions pinned
by commit; a nightly lab run that fits a standard runner and previews what it deployed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.lab.preflight import Requirements
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


def _preview_step(steps: list[dict[str, Any]]) -> int:
    return _index(steps, lambda s: "pulumi preview" in s.get("run", ""))


def test_pr_previews_prepare_the_policy_venv_and_the_lab_backend_first() -> None:
    steps = _load("preview.yml")["jobs"]["preview"]["steps"]
    venv = _index(steps, lambda s: "make policy-venv" in s.get("run", ""))
    preview = _preview_step(steps)
    assert venv < preview
    script = steps[preview]["run"]
    lab_first = script.index('if [ "$STACK" = lab ]; then')
    state = script.index("mkdir -p .pulumi-state && pulumi stack select --non-interactive --create")
    assert lab_first < state < script.index("pulumi preview")
    backend = steps[preview]["env"]["PULUMI_BACKEND_URL"]
    assert (
        "matrix.stack == 'lab' && format('file://{0}/.pulumi-state', github.workspace)" in backend
    )


def test_the_prod_preview_gets_its_secret_config_first() -> None:
    steps = _load("preview.yml")["jobs"]["preview"]["steps"]
    install = _index(
        steps,
        lambda s: s.get("uses", "").startswith("pulumi/actions@") and "command" not in s["with"],
    )
    secrets = _index(steps, lambda s: "set_secret_config.py prod" in s.get("run", ""))
    preview = _preview_step(steps)
    assert install < secrets < preview, "CLI, then `pulumi config set --secret`, then the preview"
    env = steps[secrets]["env"]
    assert env["PULUMI_SECRET_CONFIG"] == "${{ secrets.PULUMI_PROD_SECRET_CONFIG }}"
    assert env["PULUMI_BACKEND_URL"] == "${{ secrets.PULUMI_PROD_BACKEND_URL }}"
    assert steps[install]["if"] == steps[preview]["if"]
    assert steps[secrets]["if"] == "matrix.stack == 'prod' && env.PROD_BACKEND_URL != ''"
    assert "secrets.PULUMI_PROD_BACKEND_URL" in steps[preview]["env"]["PULUMI_BACKEND_URL"]


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
    """The program refuses to start without every pinned chart it installs in the project's
    .charts/ (components/chart_cache.py), where ``--project .`` puts them (the action runs in
    ``./``); ``--only kamaji`` would leave the other archives out."""
    steps = _steps(_load("preview.yml"))
    fetch = _index(
        steps,
        lambda s: str(s.get("run", "")).strip().endswith("scripts/fetch_charts.py --project ."),
    )
    assert fetch < _preview_step(steps)


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


# ------------------------------------------- the PR comment carries the preview's real outcome

# A policy violation as the CLI prints it (pulumi/pulumi v3.259.0 pkg/backend/display/
# progress.go:874 "Policies:", the "[mandatory]" line of pkg/engine/lifecycletest/testdata/output/
# TestSimpleAnalyzeResourceFailure/progress.stdout.txt).
VIOLATION = """Previewing update (lab):
Policies:
    gpu-platform-policies@v0.1.0 (local: policies)
        - [mandatory] [severity: high]  hami-capacity-fit  (pulumi:pulumi:Stack: gpu-platform-lab)
          tenant-a asks for more than its cards hold
"""


def _preview_steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _load("preview.yml")["jobs"]["preview"]["steps"]
    return steps


def _comment_step(steps: list[dict[str, Any]]) -> int:
    return _index(steps, lambda s: s.get("uses", "").startswith("actions/github-script@"))


def test_the_outcome_is_commented_by_a_step_that_always_runs_after_the_preview() -> None:
    steps = _preview_steps()
    preview, comment = _preview_step(steps), _comment_step(steps)
    assert preview < comment
    condition = steps[comment]["if"]
    assert condition.startswith("always() && "), "a failed preview must still be commented"
    assert "env.COMMENT == 'true'" in condition  # forks: read-only token
    assert (
        steps[comment]["env"]["PREVIEW_OUTCOME"]
        == f"${{{{ steps.{steps[preview]['id']}.outcome }}}}"
    )
    assert not any(s.get("with", {}).get("command") == "preview" for s in steps), (
        "pulumi/actions' own preview comments only on success (src/main.ts:110-161 at v7.0.0)"
    )


def test_scripts_run_verbatim_with_no_expressions_inside() -> None:
    """Values reach the scripts through env: nothing of a pull request is pasted into shell or
    JavaScript, and the tests below run exactly what the runner runs."""
    steps = _preview_steps()
    for step in (steps[_preview_step(steps)], steps[_comment_step(steps)]):
        script = step.get("run") or step["with"]["script"]
        assert "${{" not in script


def _fake_pulumi(bin_dir: Path, output: str, status: int) -> None:
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "pulumi"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'echo "pulumi $*" >> "$FAKE_LOG"\n'
        # As the kubernetes provider does: a kubeconfig left in the temp dir.
        'if [ "$1" = preview ]; then echo "$TMPDIR" > "$FAKE_LOG.tmpdir"; '
        'touch "${TMPDIR:-/tmp}/kubeconfig-left"; fi\n'
        f"if [ \"$1\" = preview ]; then cat <<'EOF'\n{output}EOF\n  exit {status}\nfi\n"
    )
    fake.chmod(0o755)


def _run_preview_step(
    tmp_path: Path, stack: str, output: str, status: int
) -> subprocess.CompletedProcess[str]:
    step = _preview_steps()[_preview_step(_preview_steps())]
    assert step["shell"] == "bash"  # GitHub runs it as: bash --noprofile --norc -eo pipefail {0}
    _fake_pulumi(tmp_path / "bin", output, status)
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO_ROOT / "scripts" / "with-private-tmpdir.sh", tmp_path / "scripts")
    (tmp_path / "temp").mkdir()
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "STACK": stack,
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "TMPDIR": str(tmp_path / "temp"),
    }
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("status", [0, 1, 5, 255])
def test_the_preview_step_keeps_the_output_and_fails_with_the_clis_exit_code(
    tmp_path: Path, status: int
) -> None:
    ran = _run_preview_step(tmp_path, "lab", VIOLATION if status else "no changes\n", status)
    assert ran.returncode == status, ran.stderr
    assert (tmp_path / ".preview" / "exit-code").read_text().strip() == str(status)
    kept = (tmp_path / ".preview" / "output.txt").read_text()
    assert ("[mandatory]" in kept) == bool(status)
    assert "[mandatory]" in ran.stdout or not status  # still in the job log
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls[0] == "pulumi stack select --non-interactive --create lab"
    assert calls[1].startswith("pulumi preview --non-interactive --color never --stack lab")
    assert "--policy-pack policies --policy-pack-config policies/config/lab.json" in calls[1]
    assert (tmp_path / ".pulumi-state").is_dir()
    # The preview ran in a private temp dir, gone with what the provider left there.
    private = Path((tmp_path / "calls.log.tmpdir").read_text().strip())
    assert private.parent == tmp_path / "temp"
    assert list((tmp_path / "temp").iterdir()) == []


def test_the_prod_preview_step_uses_its_own_stack_and_policy_config(tmp_path: Path) -> None:
    ran = _run_preview_step(tmp_path, "prod", "ok\n", 0)
    assert ran.returncode == 0
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 1  # no lab stack created against the prod backend
    assert (
        "--stack prod --policy-pack policies --policy-pack-config policies/config/prod.json"
        in (calls[0])
    )


# Runs actions/github-script's script the way v8.0.0 does, as the body of an async function of
# (require, github, context, core) (actions/github-script v8.0.0 src/async-function.ts:24-28),
# with a fake Octokit that records what it is asked to do.
JS_HARNESS = r"""
const fs = require('fs');
const script = fs.readFileSync(process.argv[2], 'utf8');
const comments = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const calls = [];
const listComments = async () => { throw new Error('listComments unpaginated'); };
const github = {
  rest: {issues: {
    listComments,
    updateComment: async (p) => { calls.push({op: 'update', ...p}); },
    createComment: async (p) => { calls.push({op: 'create', ...p}); },
  }},
  paginate: async (fn, params) => {
    if (fn !== listComments) throw new Error('paginate of something else');
    calls.push({op: 'list', ...params});
    return comments;
  },
};
const context = {repo: {owner: 'o', repo: 'r'}, issue: {number: 7}};
const core = {info: () => {}, warning: () => {}};
const AsyncFunction = Object.getPrototypeOf(async () => null).constructor;
new AsyncFunction('require', 'github', 'context', 'core', script)(require, github, context, core)
  .then(() => process.stdout.write(JSON.stringify(calls)))
  .catch((e) => { console.error(e); process.exit(1); });
"""


def _project() -> str:
    return str(yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())["name"])


def _heading(stack: str) -> str:
    # What pulumi/actions v7.0.0 writes (src/libs/pr.ts:75), so its old comments are replaced.
    return f"#### :tropical_drink: `preview` on {_project()}/{stack}"


def _comment(
    tmp_path: Path,
    comments: list[dict[str, Any]],
    exit_code: str | None,
    output: str = "",
    outcome: str = "failure",
) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (actions/github-script runs the comment script on it)")
    step = _preview_steps()[_comment_step(_preview_steps())]
    work = tmp_path / "workspace"
    (work / ".preview").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "Pulumi.yaml", work / "Pulumi.yaml")
    if exit_code is not None:
        (work / ".preview" / "exit-code").write_text(f"{exit_code}\n")
        (work / ".preview" / "output.txt").write_text(output)
    (tmp_path / "script.js").write_text(step["with"]["script"])
    (tmp_path / "harness.js").write_text(JS_HARNESS)
    (tmp_path / "comments.json").write_text(json.dumps(comments))
    env = {
        **os.environ,
        "STACK": "lab",
        "PREVIEW_OUTCOME": outcome,
        "RUN_URL": "https://github.com/o/r/actions/runs/42",
    }
    ran = subprocess.run(
        [node, str(tmp_path / "harness.js"), str(tmp_path / "script.js"), "../comments.json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    calls: list[dict[str, Any]] = json.loads(ran.stdout)
    assert calls[0]["op"] == "list"
    assert calls[0]["per_page"] == 100  # every page is read, not the first 30 comments
    return calls[1:]


def _bot(comment_id: int, body: str) -> dict[str, Any]:
    return {"id": comment_id, "user": {"login": "github-actions[bot]", "type": "Bot"}, "body": body}


def test_a_policy_violation_replaces_the_earlier_passing_comment(tmp_path: Path) -> None:
    green = f"{_heading('lab')}\n\n<details>\n<summary>Pulumi report</summary>\n<pre>ok</pre>"
    comments = [
        _bot(1, green),
        _bot(2, f"{_heading('prod')}\n\nthe other stack's"),
        {"id": 3, "user": {"login": "alice", "type": "User"}, "body": f"{_heading('lab')}\nquote"},
        _bot(4, green),  # a duplicate the action created past its first page of comments
    ]
    calls = _comment(tmp_path, comments, "1", VIOLATION)
    assert [(c["op"], c.get("comment_id")) for c in calls] == [("update", 1), ("update", 4)]
    body = calls[0]["body"]
    assert body.startswith(f"{_heading('lab')}\n")
    assert "The preview failed** (exit code 1)" in body
    assert "mandatory policy" in body
    assert "hami-capacity-fit" in body
    assert "https://github.com/o/r/actions/runs/42" in body
    assert "passed" not in body


def test_a_passing_preview_posts_a_comment_when_there_is_none(tmp_path: Path) -> None:
    (call,) = _comment(tmp_path, [], "0", "Resources:\n    + 42 to create\n", outcome="success")
    assert call["op"] == "create"
    assert call["issue_number"] == 7
    assert call["body"].startswith(f"{_heading('lab')}\n")
    assert "The preview passed** (exit code 0)" in call["body"]


def test_a_preview_that_never_ran_says_so(tmp_path: Path) -> None:
    green = f"{_heading('lab')}\n\npassed"
    (call,) = _comment(tmp_path, [_bot(9, green)], None, outcome="skipped")
    assert call["op"] == "update"
    assert call["comment_id"] == 9
    assert "The preview did not run** (step skipped)" in call["body"]


def test_the_output_is_escaped_and_its_end_kept(tmp_path: Path) -> None:
    long = "x" * 70000 + "\n<script>alert(1)</script>\nResources: 3 to create\n"
    (call,) = _comment(tmp_path, [], "0", long, outcome="success")
    assert len(call["body"]) < 65536
    assert "&lt;script&gt;" in call["body"]
    assert "<script>" not in call["body"]
    assert "Resources: 3 to create" in call["body"]


# ------------------------------------------------------------------------ hygiene and runners

USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_every_action_is_pinned_by_commit_with_its_release_tag_beside_it(name: str) -> None:
    """A tag can be moved; a commit cannot. The comment names the release the commit is (the
    newest release of each action's current major when pinned)."""
    found = [USES.match(line) for line in (WORKFLOWS / name).read_text().splitlines()]
    uses = [(m.group(1), m.group(2)) for m in found if m]
    assert uses, f"{name} uses no action"
    for action, rest in uses:
        ref = action.split("@", 1)[1]
        assert SHA.match(ref), f"{name}: {action} is not pinned by commit"
        assert re.match(r"\s+# v\d+\.\d+\.\d+\b", rest), f"{name}: {action} names no release tag"
    # Parsed workflows agree with the text scan (no `uses` hidden from it).
    assert len(uses) == sum(1 for s in _steps(_load(name)) if "uses" in s)


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_pip_downloads_are_cached_keyed_by_the_constraints(name: str) -> None:
    setups = [
        s for s in _steps(_load(name)) if s.get("uses", "").startswith("actions/setup-python@")
    ]
    assert setups
    for step in setups:
        assert step["with"]["cache"] == "pip"
        assert step["with"]["cache-dependency-path"] == "constraints.txt"
    assert (REPO_ROOT / "constraints.txt").is_file()


def test_a_new_push_cancels_the_previews_still_running_for_it() -> None:
    assert _load("preview.yml")["concurrency"] == {
        "group": "preview-${{ github.ref }}",
        "cancel-in-progress": True,
    }


def test_the_prod_preview_runs_where_a_repository_variable_says() -> None:
    """The prod preview reads the management cluster, so its runner must reach it: a variable
    (e.g. a self-hosted runner's label); the lab leg keeps the hosted runner."""
    runs_on = _load("preview.yml")["jobs"]["preview"]["runs-on"]
    match = re.fullmatch(
        r"\$\{\{ matrix\.stack == 'prod' && vars\.(\w+) \|\| 'ubuntu-24\.04' \}\}", runs_on
    )
    assert match, runs_on


def _lab_steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _load("lab-e2e.yml")["jobs"]["lab"]["steps"]
    return steps


def test_the_nightly_e2e_frees_disk_and_shows_it_before_the_preflight() -> None:
    steps = _lab_steps()
    free = _index(steps, lambda s: "docker system prune" in s.get("run", ""))
    lab = _index(steps, lambda s: s.get("run", "").strip() == "make lab")
    assert free < lab
    script = steps[free]["run"].splitlines()
    removed = next(i for i, line in enumerate(script) if line.startswith("sudo rm -rf "))
    assert "df -h /" in script[removed + 1 :], "print what is left after freeing"
    assert "/opt/hostedtoolcache " not in script[removed] + " ", "it holds setup-python's Python"


def test_the_nightly_e2e_lowers_the_disk_threshold_only_through_the_documented_variable() -> None:
    from components.lab import preflight

    env = _load("lab-e2e.yml")["jobs"]["lab"]["env"]
    assert re.fullmatch(r"\$\{\{ vars\.\w+ \}\}", env[preflight.MIN_FREE_DISK_ENV])
    assert env[preflight.MIN_FREE_DISK_REASON_ENV].strip()


def test_the_nightly_e2e_previews_the_deployed_lab_with_the_pack_expecting_no_changes() -> None:
    steps = _lab_steps()
    lab = _index(steps, lambda s: s.get("run", "").strip() == "make lab")
    check = _index(steps, lambda s: "pulumi preview" in s.get("run", ""))
    destroy = _index(steps, lambda s: "make destroy" in s.get("run", ""))
    assert lab < check < destroy
    assert "if" not in steps[check], "only after a successful make lab"
    script = steps[check]["run"]
    assert script.index("make policy-venv") < script.index("pulumi preview")
    command = " ".join(script.replace("\\\n", " ").split())
    assert (
        "pulumi preview --non-interactive --stack lab --policy-pack policies "
        "--policy-pack-config policies/config/lab.json --expect-no-changes"
    ) in command


def test_the_readme_names_the_prod_runner_variable_and_what_that_runner_must_reach() -> None:
    runs_on = _load("preview.yml")["jobs"]["preview"]["runs-on"]
    variable = re.search(r"vars\.(\w+)", runs_on).group(1)  # type: ignore[union-attr]
    testing = " ".join((REPO_ROOT / "docs" / "testing.md").read_text().split())
    at = testing.index(f"repository variable `{variable}`")
    nearby = testing[at : at + 600]
    assert "must reach the management cluster's API server" in nearby
    assert "read its Secrets" in nearby
    assert testing.index("PULUMI_PROD_BACKEND_URL") > at, "next to the secrets"


def test_the_nightly_e2e_records_and_compares_its_bring_up() -> None:
    """docs/benchmark.md's figures are checked against a measurement: make lab writes the engine's
    event log (the flag exists only with PULUMI_DEBUG_COMMANDS) and a step after it compares it
    with the model, keeping the JSON in the uploaded reports."""
    job = _load("lab-e2e.yml")["jobs"]["lab"]
    assert job["env"]["PULUMI_DEBUG_COMMANDS"] == "true"
    log = job["env"]["UP_EVENT_LOG"]
    assert log.startswith("reports/")
    names = [step.get("name", "") for step in job["steps"]]
    runs = [step.get("run", "") for step in job["steps"]]
    up = next(i for i, run in enumerate(runs) if run.strip() == "make lab")
    compare = next(i for i, run in enumerate(runs) if "make bringup-compare" in run)
    assert up < compare, names
    assert f"EVENTS={log}" in runs[compare]
    assert "JSON=reports/" in runs[compare]
    assert job["steps"][compare].get("if") == "always()"
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "$(if $(UP_EVENT_LOG),--event-log $(UP_EVENT_LOG))" in makefile
