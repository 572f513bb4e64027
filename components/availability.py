"""How the management cluster's own workloads survive a node's loss or drain, as plain data: the
PodDisruptionBudgets and the spreading across nodes (and zones) of Kamaji, of every tenant's
control-plane pods and of every kamaji-etcd (the default one and prod's dedicated ones).

Who creates what, traced at the pinned tags:

* Kamaji's chart renders no PodDisruptionBudget and no topology spread, only ``affinity``
  (clastix/kamaji 26.8.2-edge charts/kamaji/templates/controller.yaml:97-100, values.yaml
  ``affinity: {}``); it always starts the manager with ``--leader-elect``
  (templates/controller.yaml:29; the flag, default true, cmd/manager/cmd.go:333, lease
  ``kamaji.clastix.io`` in the release's namespace, :123-125), so a second replica waits as a
  standby and takes over the lease when the first goes. Its pods carry the chart's selector
  labels (templates/_helpers.tpl:48-51).
* Kamaji creates no PodDisruptionBudget for a TenantControlPlane (nothing in its source at
  26.8.2-edge names one); its Deployment selects the pods by ``kamaji.clastix.io/name: <tcp>``
  alone (internal/builders/controlplane/deployment.go:1075-1081), and it copies
  ``spec.controlPlane.deployment.topologySpreadConstraints`` onto the pods, filling a
  constraint's missing ``labelSelector`` with that selector (:1168-1178; the field,
  api/v1alpha1/tenantcontrolplane_types.go:299-303). Prod's KamajiControlPlane copies its
  ``spec.deployment.topologySpreadConstraints`` into the TenantControlPlane
  (clastix/cluster-api-control-plane-provider-kamaji v0.20.0
  controllers/kamajicontrolplane_controller_tcp.go:234-243).
* kamaji-etcd v0.17.0 ships no PodDisruptionBudget (no template in the chart, no value); it
  takes ``affinity`` and ``topologySpreadConstraints`` verbatim (templates/etcd_sts.yaml:125-133,
  values.yaml:111, 123) and labels its pods with ``app.kubernetes.io/name: kamaji-etcd`` (the
  chart's name: ``fullnameOverride`` does not change it) and ``app.kubernetes.io/instance:
  <release>`` (templates/_helpers.tpl:4-6, 67-70; the parent's release for Kamaji's bundled
  subchart).

A budget only where there is more than one pod: a budget over one pod either blocks every drain
(``minAvailable: 1``) or protects nothing. The lab runs one of each on its one kind node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The spread every replicated management workload gets: across nodes, hard (maxSkew 1: with
# three pods on two nodes, two and one), and across zones, soft (``ScheduleAnyway``), so a
# cluster whose nodes carry no zone label still schedules them. Tainted nodes that the pods do
# not tolerate (a management cluster's own control-plane nodes, say) are not counted as empty
# domains (``nodeTaintsPolicy: Honor``; with the default ``Ignore`` they would count as domains
# at zero and three replicas on two schedulable nodes would break maxSkew 1 and stay Pending).
# These scheduler semantics are the Kubernetes documentation's (concepts/scheduling-eviction/
# topology-spread-constraints); the scheduler's source was not traced here.
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"

KAMAJI_ETCD_CHART_NAME = "kamaji-etcd"
TCP_SELECTOR_KEY = "kamaji.clastix.io/name"
PDB_API_VERSION = "policy/v1"


def topology_spread(selector: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """Topology spread constraints for ``selector``'s pods; without a selector (a
    TenantControlPlane's) Kamaji fills in its Deployment's own."""

    def constraint(key: str, when: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "nodeTaintsPolicy": "Honor",
        }
        if selector is not None:
            out["labelSelector"] = {"matchLabels": dict(selector)}
        return out

    return [constraint(HOSTNAME_KEY, "DoNotSchedule"), constraint(ZONE_KEY, "ScheduleAnyway")]


def preferred_anti_affinity(selector: Mapping[str, str]) -> dict[str, Any]:
    """An ``affinity`` that prefers ``selector``'s pods on different nodes, then zones: for a
    chart that takes no topology spread (Kamaji's)."""

    def term(weight: int, key: str) -> dict[str, Any]:
        return {
            "weight": weight,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": dict(selector)},
                "topologyKey": key,
            },
        }

    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                term(100, HOSTNAME_KEY),
                term(50, ZONE_KEY),
            ]
        }
    }


def max_unavailable(replicas: int, quorum: bool) -> int | None:
    """How many of ``replicas`` pods a voluntary disruption may take at once; None: no budget
    (one pod). A quorum (etcd) keeps a majority: 3 -> 1, 5 -> 2; otherwise one at a time."""
    if replicas < 2:
        return None
    if quorum:
        return max(1, (replicas - 1) // 2) if replicas >= 3 else None
    return 1


def disruption_budget(
    name: str,
    namespace: str,
    selector: Mapping[str, str],
    replicas: int,
    *,
    quorum: bool = False,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """A PodDisruptionBudget over ``selector``'s ``replicas`` pods, or None where one pod runs
    (or a two-member quorum, which no budget can keep through a drain)."""
    allowed = max_unavailable(replicas, quorum)
    if allowed is None:
        return None
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": PDB_API_VERSION,
        "kind": "PodDisruptionBudget",
        "metadata": metadata,
        "spec": {"maxUnavailable": allowed, "selector": {"matchLabels": dict(selector)}},
    }


def control_plane_selector(tenant_name: str) -> dict[str, str]:
    """The pods of a tenant's control plane (Kamaji's Deployment selector; the TCP, and prod's
    KamajiControlPlane's TCP, are named after the tenant)."""
    return {TCP_SELECTOR_KEY: tenant_name}


def control_plane_budget(
    tenant_name: str, namespace: str, replicas: int, labels: Mapping[str, str]
) -> dict[str, Any] | None:
    """The budget of a tenant's control plane: one pod at a time."""
    return disruption_budget(
        f"{tenant_name}-control-plane",
        namespace,
        control_plane_selector(tenant_name),
        replicas,
        labels=labels,
    )


def etcd_selector(release: str) -> dict[str, str]:
    """The pods of the kamaji-etcd of Helm release ``release``."""
    return {"app.kubernetes.io/name": KAMAJI_ETCD_CHART_NAME, "app.kubernetes.io/instance": release}


def etcd_budget(
    name: str, namespace: str, release: str, members: int, labels: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """The budget of a kamaji-etcd of ``members`` members: its quorum kept."""
    return disruption_budget(
        name, namespace, etcd_selector(release), members, quorum=True, labels=labels
    )


def etcd_placement(release: str, members: int) -> dict[str, Any]:
    """kamaji-etcd values that spread its members (``topologySpreadConstraints``), where it has
    more than one."""
    if members < 2:
        return {}
    return {"topologySpreadConstraints": topology_spread(etcd_selector(release))}
