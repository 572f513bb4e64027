"""Every etcd the stacks run raises its NOSPACE alarm before its volume fills: the space quota a
rendered kamaji-etcd StatefulSet passes (--quota-backend-bytes, kamaji-etcd v0.17.0
templates/etcd_sts.yaml:102) leaves 1 GiB of its claim (:136-153) for the WAL and snapshots and
room for the second copy a defragmentation writes, and the nightly defragmentation judges the
same quota. The default etcd ran 8 GiB on 8 GiB (the chart's two defaults, values.yaml:64-69)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from components.config.base import storage_bytes
from components.management_values import (
    DEFAULT_ETCD_QUOTA_BYTES,
    KAMAJI_ETCD_NAME,
    DefaultEtcd,
    kamaji_values,
)
from tests.support.rendered_stack import RenderedStack

GIB = 2**30


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_each_etcds_quota_leaves_room_on_its_volume(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    objects = rendered(stack).objects
    statefulsets = [
        p.obj
        for p in objects
        if p.kind == "StatefulSet"
        and any(
            arg.startswith("--quota-backend-bytes=")
            for c in p.obj["spec"]["template"]["spec"]["containers"]
            for arg in (c.get("command") or []) + (c.get("args") or [])
        )
    ]
    assert statefulsets, f"{stack}: no etcd rendered"
    defrag_quota = {
        (p.obj["metadata"]["namespace"], p.obj["metadata"]["name"].removesuffix("-defrag")): next(
            int(e["value"])
            for e in p.obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0][
                "env"
            ]
            if e["name"] == "QUOTA_BACKEND_BYTES"
        )
        for p in objects
        if p.kind == "CronJob" and p.obj["metadata"]["name"].endswith("-defrag")
    }
    for sts in statefulsets:
        where = f"{stack}: {sts['metadata']['namespace']}/{sts['metadata']['name']}"
        (quota,) = {
            int(arg.split("=", 1)[1])
            for c in sts["spec"]["template"]["spec"]["containers"]
            for arg in (c.get("command") or []) + (c.get("args") or [])
            if arg.startswith("--quota-backend-bytes=")
        }
        (claim,) = sts["spec"]["volumeClaimTemplates"]
        volume = storage_bytes(claim["spec"]["resources"]["requests"]["storage"])
        assert 2 * quota + GIB <= volume, f"{where}: quota {quota} on a {volume}-byte volume"
        key = (sts["metadata"]["namespace"], sts["metadata"]["name"])
        assert defrag_quota.get(key) == quota, f"{where}: its defragmentation judges another quota"


def test_kamajis_bundled_etcd_gets_the_same_quota_as_the_labs_own() -> None:
    """A prod default etcd (``kamajiEtcd: true``) is Kamaji's bundled kamaji-etcd subchart,
    which these stacks do not render: its values carry the quota the lab's release runs."""
    values = kamaji_values(
        "v0", DefaultEtcd(members=3, cluster_domain="cluster.local", own_release=False)
    )
    bundled = values["kamaji-etcd"]
    assert bundled["fullnameOverride"] == KAMAJI_ETCD_NAME
    assert "persistentVolumeClaim" not in bundled  # the chart's 8Gi claim
    assert int(bundled["quotaBackendBytes"]) == DEFAULT_ETCD_QUOTA_BYTES
    assert storage_bytes("8Gi") >= 2 * DEFAULT_ETCD_QUOTA_BYTES + GIB
