"""No dead values: every values key the program sets changes what Helm renders.

A key is dead when removing it leaves the rendered objects unchanged. That happens for two
reasons: the chart never reads it (a typo, a key of another chart version — always a failure),
or the program sets it to the chart's own default. The second is allowed only for the keys
listed below, each with why it is kept, and only while the chart still reads the key (another
value must change the render), so a listed key that the chart stops reading fails too.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.dead_values import chart_reads, dead_keys
from tests.support.rendered_stack import RELEASE, RenderedStack

# (chart, key) -> why the program sets a key to the chart's default value.
KEPT_AT_DEFAULT: dict[tuple[str, str], str] = {
    ("hami", "scheduler.kubeScheduler.image.tag"): (
        "the chart derives the same tag from the tenant's reported version "
        "(charts/hami/templates/_helpers.tpl:118 at v2.10.0); set from kubernetesVersion so the "
        "scheduler/tenant pairing is explicit and checked by policy"
    ),
    ("hami", "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy"): (
        "stack config hami.nodeSchedulerPolicy; the shipped stacks keep HAMi's default binpack"
    ),
    ("hami", "scheduler.defaultSchedulerPolicy.gpuSchedulerPolicy"): (
        "stack config hami.gpuSchedulerPolicy; the shipped stacks keep HAMi's default spread"
    ),
    ("hami", "devicePlugin.deviceSplitCount"): (
        "a pool's slotsPerCard; 10 (tenant-a, prod's team-vision) is HAMi's default"
    ),
    ("hami", "devicePlugin.enabled"): (
        "one values builder for both stacks: prod keeps the chart's default true, the lab turns "
        "it off"
    ),
    ("tigera-operator", "kubernetesServiceEndpoint.port"): (
        "6443 is the default; set beside host so the endpoint Calico uses is complete in one place"
    ),
    ("kamaji", "resources.requests.cpu"): (
        "the controller's resources are stated whole (KAMAJI_RESOURCES); its CPU request equals "
        "the chart's 100m"
    ),
    ("kamaji", "defaultDatastoreName"): (
        "tenants without a DataStore of their own bind to it by this name; stated so the "
        "program's DEFAULT_DATASTORE and the chart cannot drift apart"
    ),
    ("kamaji-etcd", "fullnameOverride"): (
        "the default etcd's release is called what the chart would derive; stated because the "
        "readiness gate and the program's DataStore 'default' name its members and Secrets"
    ),
    **{
        ("kamaji-etcd", key): (
            "the etcd jobs' images are pinned to the ones the backups run (issue 39): the chart "
            "tags kubectl with the cluster's minor, equal to the pin only on a v1.35 cluster (as "
            "rendered here), and the etcd pin guards against a chart bump"
        )
        for key in ("jobs.kubectl.image", "jobs.kubectl.tag", "jobs.etcd.image", "jobs.etcd.tag")
    },
    ("kamaji-etcd", "quotaBackendBytes"): (
        "the space quota follows storageSize (management_values.etcd_quota_backend_bytes); from "
        "17Gi up it reaches etcd's suggested ceiling, 8 GiB, which is the chart's default"
    ),
    ("gpu-operator", "toolkit.enabled"): (
        "stated so the toolkit HAMi's device plugin waits for cannot be turned off by a chart "
        "default"
    ),
    ("gpu-operator", "driver.enabled"): (
        "gpuDriver.source: true unless the image has the driver preinstalled"
    ),
    ("gpu-operator", "operator.runtimeClass"): (
        "must name the RuntimeClass HAMi's devicePlugin.runtimeClassName uses; stated on both sides"
    ),
    ("kamaji-etcd", "replicas"): "dataStore.dedicated.replicas; 3 is the chart's default",
    ("kamaji-etcd", "clusterDomain"): (
        "management.existing.clusterDomain; cluster.local is the chart's default"
    ),
    ("kamaji-etcd", "datastore.enabled"): "the tenant's dedicated DataStore, stated",
    ("kamaji-etcd", "datastore.name"): (
        "the DataStore the tenant's KamajiControlPlane names; stated, not derived from the "
        "release name"
    ),
}


def test_every_values_key_changes_the_render(rendered: Callable[[str], RenderedStack]) -> None:
    problems = []
    used: set[tuple[str, str]] = set()
    for stack in ("lab", "prod"):
        result = rendered(stack)
        seen: set[tuple[str, str]] = set()
        for reg in result.recording.of_type(RELEASE):
            key = (
                str(reg.inputs.get("chart")),
                json.dumps(reg.inputs.get("values"), sort_keys=True),
            )
            if key in seen:
                continue  # the same chart with the same values (one per tenant)
            seen.add(key)
            chart = result.releases[reg.urn].chart
            for path in dead_keys(result, reg):
                dotted = ".".join(path)
                if (chart, dotted) not in KEPT_AT_DEFAULT:
                    problems.append(f"{stack} {reg.name} ({chart}): {dotted} changes nothing")
                elif not chart_reads(result, reg, path):
                    problems.append(
                        f"{stack} {reg.name} ({chart}): {dotted} is kept, but the chart ignores it"
                    )
                used.add((chart, dotted))
    assert problems == []
    stale = sorted(".".join(k) for k in set(KEPT_AT_DEFAULT) - used)
    assert stale == [], "listed as kept at the default, but no longer set to it"
