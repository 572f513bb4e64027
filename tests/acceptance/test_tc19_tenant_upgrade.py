"""TC-19: upgrade one lab tenant's Kubernetes without the other tenant noticing (the drill).

The tenant TC-04 runs on moves one minor (``Pulumi.lab.yaml`` ships tenant-a at v1.34.3, one
below kind v0.31.0's newest image, v1.35.0; a deployed lab with nothing to move fails): its
version is set with ``pulumi config set --path`` (so ``Pulumi.<stack>.yaml`` then holds it, as an
operator's upgrade would) and ``pulumi up`` runs. Throughout, every 2 s, the other
tenant's API is asked for ``/version`` and its GPU pods are read (each must stay Running, same
pod, no restart), and the upgraded tenant's served version and kubelet versions are read to time
the control-plane phase (until its API serves the new version) and the worker phase (until every
kubelet runs it). Afterwards TC-04 runs again, in a child pytest, on the upgraded tenant: HAMi
must still allocate shares there.

Opt-in with ``GPU_PLATFORM_ACCEPTANCE_UPGRADE=1``: it cannot be undone (a control plane is never
downgraded; the next preview refuses the old version) and takes a quarter of an hour. Skipped
without a deployed stack, like every live test. Lab only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.kubernetes_versions import kind_versions
from tests.acceptance.kube import API_ERRORS, describe_error, list_raw
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence
from tests.acceptance.stack import plan_sharing
from tests.acceptance.upgrade_drill import (
    Sample,
    Sampler,
    gpu_pods,
    now,
    phases,
    plan_or_fail,
)

OPT_IN_ENV = "GPU_PLATFORM_ACCEPTANCE_UPGRADE"
UP_TIMEOUT_SECONDS = 50 * 60
REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.live, pytest.mark.timeout(UP_TIMEOUT_SECONDS + 15 * 60)]


def _pulumi(stack: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pulumi", *args, "--stack", stack, "--non-interactive"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.tc("TC-19")
def test_one_tenant_upgrades_while_the_other_keeps_running(
    live: LiveStack, evidence: Evidence, tmp_path: Path
) -> None:
    if os.environ.get(OPT_IN_ENV) != "1":
        pytest.skip(f"{OPT_IN_ENV}=1 not set (opt-in: upgrades a tenant for good, ~15 minutes)")
    if live.platform.mode != "lab":
        pytest.skip("the upgrade drill runs on the lab")
    sharing = plan_sharing(live.platform)
    # A lab with nothing to upgrade fails: the stack file ships tenant-a one minor behind.
    plan = plan_or_fail(live.platform, kind_versions(), sharing.tenant if sharing else None)
    index = [t.name for t in live.platform.tenants].index(plan.tenant)
    target, watched = live.tenant(plan.tenant), live.tenant(plan.watched)

    def read() -> Sample:
        sample = Sample(now(), None, None, None, None)
        try:
            sample.watched_version = watched.git_version()
            sample.watched_pods = gpu_pods(list_raw(watched.core.list_pod_for_all_namespaces))
        except API_ERRORS as exc:
            sample.error = f"{plan.watched}: {describe_error(exc)}"
        try:
            sample.target_version = target.git_version()
            nodes = target.core.list_node(_request_timeout=(5, 10)).items
            sample.target_kubelets = [n.status.node_info.kubelet_version for n in nodes]
        except API_ERRORS:
            pass  # the upgraded tenant may not answer for a moment; that is what is timed
        return sample

    before = read()
    if not before.watched_pods:
        pytest.fail(f"{plan.watched} runs no GPU pod to watch (Pulumi.lab.yaml declares workloads)")
    set_config = _pulumi(
        live.stack,
        "config",
        "set",
        "--path",
        f"gpu-platform:platform.tenants[{index}].kubernetesVersion",
        plan.target,
        timeout=60,
    )
    assert set_config.returncode == 0, set_config.stderr[-2000:]
    sampler = Sampler(read)
    started = now()
    sampler.start()
    try:
        up = _pulumi(live.stack, "up", "--yes", timeout=UP_TIMEOUT_SECONDS)
    finally:
        samples = sampler.stop()
    result = phases(samples, started, plan.target, before.watched_pods)
    evidence.record("plan", plan.__dict__)
    evidence.record("controlPlaneSeconds", result.control_plane_seconds)
    evidence.record("workersSeconds", result.workers_seconds)
    evidence.record("watchedApiGaps", result.api_gaps)
    evidence.record("watchedSamples", len(samples))
    problems = [f"pulumi up failed: {up.stderr[-1500:]}"] if up.returncode != 0 else []
    if result.control_plane_seconds is None:
        problems.append(f"{plan.tenant}'s API never served {plan.target}")
    if result.workers_seconds is None:
        problems.append(f"{plan.tenant}'s kubelets never all ran {plan.target}")
    if result.api_gaps:
        problems.append(f"{plan.watched}'s API failed {result.api_gaps} of {len(samples)} samples")
    problems += [f"{plan.watched}: {p}" for p in result.pod_problems]

    # TC-04 again, on the upgraded tenant (its plan picks the same tenant: plan_sharing).
    report = tmp_path / "tc04.json"
    tc04 = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "live",
            "tests/acceptance/test_tc04_05_sharing.py",
            "-k",
            "test_fractional_sharing",
        ],
        cwd=REPO,
        env={**os.environ, "GPU_PLATFORM_ACCEPTANCE_JSON": str(report)},
        capture_output=True,
        text=True,
        timeout=15 * 60,
        check=False,
    )
    evidence.record("tc04ReturnCode", tc04.returncode)
    if report.exists():
        evidence.record("tc04", json.loads(report.read_text()))
    if sharing is None or sharing.tenant != plan.tenant:
        problems.append("TC-04 does not run on the upgraded tenant (no sharing plan for it)")
    elif tc04.returncode != 0:
        problems.append(f"TC-04 on {plan.tenant} after the upgrade: {tc04.stdout[-1500:]}")
    cp = result.control_plane_seconds
    workers = result.workers_seconds
    evidence.summary(
        f"{plan.tenant} {plan.previous} -> {plan.target}: control plane "
        f"{'?' if cp is None else f'{cp:.0f} s'}, workers "
        f"{'?' if workers is None else f'{workers:.0f} s'}; {plan.watched}: "
        f"{result.api_gaps} API gaps, {len(result.pod_problems)} pod problems"
    )
    assert not problems, "; ".join(problems)
