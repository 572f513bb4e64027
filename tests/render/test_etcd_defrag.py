"""The scheduled defragmentation of every kamaji-etcd (issue 39) talks to that etcd the way the
chart's own post-install Job does: the same root client and CA Secrets at the same paths, the
same etcd image, and every member the chart runs (kamaji-etcd v0.17.0
templates/etcd_job_preinstall_2.yaml, rendered here with the program's values; Kamaji's bundled
kamaji-etcd for a prod default etcd is not rendered by these stacks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.rendered_stack import RenderedStack

SETUP_JOB_SUFFIX = "-etcd-setup-2"


def _secrets(pod: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """volume name -> (Secret, mount path) of a pod spec's first container that mounts it."""
    volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    found: dict[str, tuple[str, str]] = {}
    for container in pod["containers"]:
        for mount in container.get("volumeMounts") or []:
            if mount["name"] in volumes:
                found.setdefault(mount["name"], (volumes[mount["name"]], mount["mountPath"]))
    return found


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_each_defrag_cron_job_reaches_its_etcd_as_the_charts_job_does(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    objects = rendered(stack).objects
    jobs = {
        (p.obj["metadata"]["namespace"], p.obj["metadata"]["name"]): p.obj
        for p in objects
        if p.kind == "Job" and p.obj["metadata"]["name"].endswith(SETUP_JOB_SUFFIX)
    }
    crons = [
        p.obj
        for p in objects
        if p.kind == "CronJob" and p.obj["metadata"]["name"].endswith("-defrag")
    ]
    statefulsets = {
        (p.obj["metadata"]["namespace"], p.obj["metadata"]["name"]): p.obj
        for p in objects
        if p.kind == "StatefulSet"
    }
    assert jobs, f"{stack}: no kamaji-etcd rendered"
    assert len(crons) == len(jobs), f"{stack}: a kamaji-etcd without its defragmentation"
    for cron in crons:
        namespace = cron["metadata"]["namespace"]
        etcd = cron["metadata"]["name"].removesuffix("-defrag")
        job = jobs[(namespace, f"{etcd}{SETUP_JOB_SUFFIX}")]["spec"]["template"]["spec"]
        pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert _secrets(pod) == _secrets(job)
        (container,) = pod["containers"]
        charts = next(c for c in job["containers"] if c["name"] == "etcd-client")
        assert container["image"] == charts["image"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        chart_env = {e["name"]: e.get("value") for e in charts["env"]}
        for key in ("ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY"):
            assert env[key] == chart_env[key]
        # Every member, named as the chart's Job names the first one.
        sts = statefulsets[(namespace, etcd)]
        members = env["ETCD_ENDPOINTS"].split()
        assert len(members) == sts["spec"]["replicas"]
        assert members[0] == chart_env["ETCDCTL_ENDPOINTS"]
        # The quota the members run with.
        args = " ".join(sts["spec"]["template"]["spec"]["containers"][0].get("args") or [])
        command = " ".join(sts["spec"]["template"]["spec"]["containers"][0].get("command") or [])
        assert f"--quota-backend-bytes={env['QUOTA_BACKEND_BYTES']}" in f"{command} {args}"
