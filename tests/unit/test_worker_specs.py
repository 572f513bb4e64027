"""Worker specs: kind's node-container flags, and Cluster API objects valid for the pinned CRDs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from components.lab.node_container import worker_container_spec
from components.prod.machine_specs import (
    content_name,
    infrastructure_machine_template,
    kubeadm_config_template,
    machine_deployment,
    machine_health_check,
    parse_duration_seconds,
    rollout_strategy,
)
from components.resource_names import worker_node_name, worker_node_names
from tests.support.contracts import crd_violations

LABELS = {"gpu": "on", "gpu-platform.io/pool": "a100", "gpu-platform.io/gpu-model": "A100-80GB"}
METAL3_SPEC = {
    "hostSelector": {"matchLabels": {"gpu-model": "a100-80gb"}},
    "image": {
        "url": "http://images.example.internal/ubuntu.qcow2",
        "checksum": "http://images.example.internal/ubuntu.qcow2.sha256sum",
        "checksumType": "sha256",
        "diskFormat": "qcow2",
    },
}

# ------------------------------------------------------------------------------- lab nodes


def test_worker_names_follow_tenant_pool_index() -> None:
    assert worker_node_names("tenant-a", "a100", 3) == [
        "tenant-a-a100-0",
        "tenant-a-a100-1",
        "tenant-a-a100-2",
    ]


def test_a_worker_name_longer_than_a_hostname_is_refused() -> None:
    with pytest.raises(ValueError, match="63"):
        worker_node_name("t" * 40, "p" * 30, 0)


def test_container_spec_has_kinds_node_flags() -> None:
    spec = worker_container_spec("tenant-a", "a100", "tenant-a-a100-0")
    assert spec["name"] == "tenant-a-a100-0"
    assert spec["hostname"] == "tenant-a-a100-0"
    assert spec["privileged"] is True
    assert {"apparmor=unconfined", "seccomp=unconfined"} <= set(spec["security_opts"])
    assert set(spec["tmpfs"]) == {"/tmp", "/run"}
    assert spec["cgroupns_mode"] == "private"
    assert spec["init"] is False
    assert spec["tty"] is True
    volumes = {v["container_path"]: v for v in spec["volumes"]}
    # kind's anonymous /var (provision.go:236), removed with the container: a replaced worker
    # starts from its new image's /var, not the old node's.
    assert volumes["/var"] == {"container_path": "/var"}
    assert spec["remove_volumes"] is True
    assert volumes["/lib/modules"]["host_path"] == "/lib/modules"
    assert volumes["/lib/modules"]["read_only"] is True
    labels = {item["label"]: item["value"] for item in spec["labels"]}
    assert labels == {
        "gpu-platform.io/tenant": "tenant-a",
        "gpu-platform.io/pool": "a100",
        "gpu-platform.io/lab-only": "true",
    }


def docker_security_opts(declared: list[str], privileged: bool) -> list[str]:
    """``HostConfig.SecurityOpt`` as Docker stores it (moby docker-v29.7.2 daemon/create.go
    generateSecurityOpt + daemon_unix.go:361-365): a caller's ``label=`` option is kept as is;
    otherwise a privileged container (or one sharing the host's IPC/PID) gets
    ``label=disable`` appended (``selinux.DisableSecOpt()`` is ``["disable"]`` on every host)."""
    if any(opt.split("=", 1)[0] == "label" for opt in declared):
        return list(declared)
    return [*declared, "label=disable"] if privileged else list(declared)


def test_the_container_declares_what_docker_reports_so_no_up_replaces_it() -> None:
    """The provider reads security_opts back into a ForceNew set: a difference between what
    was declared and what Docker reports replaces the worker on every `pulumi up`."""
    spec = worker_container_spec("tenant-a", "a100", "tenant-a-a100-0")
    reported = docker_security_opts(spec["security_opts"], spec["privileged"])
    assert set(reported) == set(spec["security_opts"])
    # kind's two options alone would not survive the round trip.
    assert set(docker_security_opts(["seccomp=unconfined"], True)) != {"seccomp=unconfined"}


# ------------------------------------------------------------------------------ durations


@pytest.mark.parametrize(
    ("text", "seconds"), [("300s", 300), ("5m", 300), ("1h30m", 5400), ("2h", 7200), ("0s", 0)]
)
def test_parse_duration_seconds(text: str, seconds: int) -> None:
    assert parse_duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "5 minutes", "1d", "s"])
def test_parse_duration_refuses_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_seconds(text)


def test_content_name_changes_with_content_only() -> None:
    first = content_name("tenant-a-a100", {"a": 1})
    assert first == content_name("tenant-a-a100", {"a": 1})
    assert first != content_name("tenant-a-a100", {"a": 2})
    assert first.startswith("tenant-a-a100-")
    assert len(content_name("x" * 80, {})) <= 63


# -------------------------------------------------------------------------- Cluster API


def _objects(provider: str = "metal3", template: dict[str, Any] | None = None) -> dict[str, Any]:
    bootstrap = kubeadm_config_template("team-a100", "team", "team", "a100", LABELS)
    infrastructure = infrastructure_machine_template(
        provider, "team-a100", "team", "team", "a100", METAL3_SPEC if template is None else template
    )
    deployment = machine_deployment(
        "team-a100",
        "team",
        "team",
        "a100",
        "team",
        2,
        "v1.35.0",
        bootstrap,
        infrastructure,
        rollout_strategy(provider),
    )
    health = machine_health_check("team-a100-health", "team", "team", "a100", "team", "300s", "40%")
    return {
        "bootstrap": bootstrap,
        "infrastructure": infrastructure,
        "deployment": deployment,
        "health": health,
    }


def test_kubeadm_config_template_sets_node_labels_as_a_v1beta2_arg_list() -> None:
    bootstrap = kubeadm_config_template("team-a100", "team", "team", "a100", LABELS, "docker")
    assert bootstrap["apiVersion"] == "bootstrap.cluster.x-k8s.io/v1beta2"
    registration = bootstrap["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]
    assert registration["kubeletExtraArgs"] == [
        {
            "name": "node-labels",
            "value": "gpu=on,gpu-platform.io/gpu-model=A100-80GB,gpu-platform.io/pool=a100",
        }
    ]


# The metadata keys the bare-metal operator always writes to a host's config drive when no
# Metal3DataTemplate renders more (metal3-io/baremetal-operator
# pkg/provisioner/ironic/ironic.go, the default metadata; CAPM3 adds ``providerid`` and others
# only through a Metal3Data, baremetal/metal3data_manager.go:1692-1693 at v1.13.2).
BMO_DEFAULT_METADATA = {"uuid", "metal3-namespace", "metal3-name", "local-hostname", "name"}


def test_metal3_nodes_carry_what_capm3_matches_without_a_cloud_provider() -> None:
    """The tenant's Metal3Cluster sets cloudProviderEnabled: false, so CAPM3 finds each Node by
    the metal3.io/uuid label and sets the Node's provider ID itself; a kubelet --provider-id would
    claim the field first (it is immutable) with whatever cloud-init rendered."""
    registration = _objects()["bootstrap"]["spec"]["template"]["spec"]["joinConfiguration"][
        "nodeRegistration"
    ]
    assert registration["kubeletExtraArgs"] == [
        {
            "name": "node-labels",
            "value": "gpu=on,gpu-platform.io/gpu-model=A100-80GB,gpu-platform.io/pool=a100,"
            "metal3.io/uuid={{ ds.meta_data.uuid }}",
        },
    ]


def test_metal3_bootstrap_uses_only_metadata_the_host_always_has() -> None:
    """Without a Metal3DataTemplate, a jinja key outside BMO's defaults renders as
    CI_MISSING_JINJA_VAR/<key> (cloud-init templater); none may appear in what the kubelet gets."""
    text = json.dumps(_objects()["bootstrap"]["spec"])
    used = set(re.findall(r"ds\.meta_data\.([A-Za-z0-9_-]+)", text))
    assert used, "the metal3.io/uuid label needs ds.meta_data.uuid"
    assert used <= BMO_DEFAULT_METADATA, used - BMO_DEFAULT_METADATA
    assert "provider-id" not in text


def test_machine_deployment_references_its_templates() -> None:
    objects = _objects()
    spec = objects["deployment"]["spec"]
    assert spec["replicas"] == 2
    assert spec["clusterName"] == "team"
    machine = spec["template"]["spec"]
    assert machine["version"] == "v1.35.0"
    assert machine["clusterName"] == "team"
    assert machine["bootstrap"]["configRef"] == {
        "apiGroup": "bootstrap.cluster.x-k8s.io",
        "kind": "KubeadmConfigTemplate",
        "name": objects["bootstrap"]["metadata"]["name"],
    }
    assert machine["infrastructureRef"] == {
        "apiGroup": "infrastructure.cluster.x-k8s.io",
        "kind": "Metal3MachineTemplate",
        "name": objects["infrastructure"]["metadata"]["name"],
    }
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()


def test_infrastructure_template_carries_the_pool_template_verbatim() -> None:
    infrastructure = _objects()["infrastructure"]
    assert infrastructure["kind"] == "Metal3MachineTemplate"
    assert infrastructure["spec"]["template"]["spec"] == METAL3_SPEC
    docker = _objects("docker", {})["infrastructure"]
    assert docker["kind"] == "DockerMachineTemplate"
    with pytest.raises(ValueError, match="provider"):
        infrastructure_machine_template("aws", "n", "ns", "t", "p", {})


def test_a_changed_template_gets_a_new_name() -> None:
    first = _objects()["infrastructure"]["metadata"]["name"]
    changed = copy.deepcopy(METAL3_SPEC)
    changed["image"]["url"] = "http://images.example.internal/other.qcow2"
    assert _objects(template=changed)["infrastructure"]["metadata"]["name"] != first


def test_health_check_uses_the_v1beta2_shape() -> None:
    spec = _objects()["health"]["spec"]
    assert spec["checks"]["unhealthyNodeConditions"] == [
        {"type": "Ready", "status": "False", "timeoutSeconds": 300},
        {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300},
    ]
    assert spec["remediation"] == {"triggerIf": {"unhealthyLessThanOrEqualTo": "40%"}}
    assert spec["selector"] == _objects()["deployment"]["spec"]["selector"]
    absolute = machine_health_check("n", "ns", "t", "p", "c", "5m", "2")
    assert absolute["spec"]["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"] == 2


def test_health_check_gives_bare_metal_time_to_provision() -> None:
    # Cluster API's default nodeStartupTimeoutSeconds is 600 s from the Machine's creation: a
    # GPU server still being cleaned, imaged and rebooted by Metal3 would be remediated.
    checks = _objects()["health"]["spec"]["checks"]
    assert checks["nodeStartupTimeoutSeconds"] == 3600
    custom = machine_health_check("n", "ns", "t", "p", "c", "5m", "2", node_startup_timeout="2h")
    assert custom["spec"]["checks"]["nodeStartupTimeoutSeconds"] == 7200


@pytest.mark.parametrize("provider", ["metal3", "docker"])
def test_every_object_validates_against_its_pinned_crd(provider: str, upstream_dir: Path) -> None:
    template = METAL3_SPEC if provider == "metal3" else {"customImage": "kindest/node:v1.35.0"}
    for key, obj in _objects(provider, template).items():
        assert crd_violations(upstream_dir, obj) == [], key


def test_the_crd_check_would_catch_the_v1beta1_kubelet_args_map(upstream_dir: Path) -> None:
    """v1beta1 wrote kubeletExtraArgs as a map; v1beta2 rejects it. Proves the check can fail."""
    bootstrap = copy.deepcopy(_objects()["bootstrap"])
    registration = bootstrap["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]
    registration["kubeletExtraArgs"] = {"node-labels": "gpu=on"}
    assert crd_violations(upstream_dir, bootstrap) != []
    health = copy.deepcopy(_objects()["health"])
    health["spec"]["maxUnhealthy"] = "40%"  # the v1beta1 field
    assert crd_violations(upstream_dir, health) != []


# ------------------------------------------------------------------------------- rollouts


def test_metal3_pools_replace_machines_without_surging_onto_hosts_that_do_not_exist() -> None:
    """Cluster API defaults to maxSurge 1 / maxUnavailable 0: on bare metal with no spare GPU
    host the surge machine never gets one and the rollout never finishes."""
    rollout = _objects("metal3")["deployment"]["spec"]["rollout"]
    assert rollout == {
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    }
    assert "rollout" not in _objects("docker", {"customImage": "x"})["deployment"]["spec"]


def test_a_configured_rollout_wins_over_the_provider_default() -> None:
    configured = {"maxSurge": "25%", "maxUnavailable": 0}
    assert rollout_strategy("metal3", configured) == {
        "strategy": {"type": "RollingUpdate", "rollingUpdate": configured}
    }
    assert rollout_strategy("docker", configured) == rollout_strategy("metal3", configured)
    assert rollout_strategy("docker") is None
