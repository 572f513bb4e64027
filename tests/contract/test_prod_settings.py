"""The prod settings added for bare metal produce only values keys and CR fields the pinned
upstream has: the stack evaluated with every one of them set (an adopted, renamed namespace, a
rollout, a kamaji-etcd StorageClass and cluster domain, each GPU driver source, docker
infrastructure) and checked like the stack files are."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.contracts import crd_violations, missing_values_keys, release_chart
from tests.support.harness import Recording, Secret, evaluate, load_stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
CREDENTIALS_KEY = "gpu-platform:speechDatastoreCredentials"
CAPI_GROUPS = ("cluster.x-k8s.io", "operator.cluster.x-k8s.io", "kamaji.clastix.io")

DRIVERS: dict[str, dict[str, Any]] = {
    "runtime-built": {
        "version": "595.91.07",
        "autoUpgrade": False,
        "packageRepositories": {"mirror.list": "deb http://mirror.internal/ubuntu noble main"},
    },
    "precompiled": {"source": "precompiled", "version": "595"},
    "preinstalled": {"source": "preinstalled"},
}


def _configured(driver: dict[str, Any], infrastructure: str) -> dict[str, Any]:
    config = copy.deepcopy(load_stack_config("prod"))
    config[CREDENTIALS_KEY] = Secret(json.dumps({"ca.crt": "x", "username": "u", "password": "p"}))
    platform = config["gpu-platform:platform"]
    platform["gpuDriver"] = driver
    existing = platform["management"]["existing"]
    existing["clusterDomain"] = "mgmt.example"
    vision = platform["tenants"][0]
    vision["managementNamespace"] = {"name": "metal3-vision", "existing": True}
    vision["dataStore"]["dedicated"]["storageClassName"] = "local-nvme"
    machine = vision["workerPools"][0]["machine"]
    machine["rollout"] = {"maxSurge": "25%", "maxUnavailable": 0}
    if infrastructure == "docker":
        existing["clusterApi"]["infrastructure"] = {"name": "docker", "version": "v1.13.5"}
        for tenant in platform["tenants"]:
            for pool in tenant["workerPools"]:
                pool["machine"]["provider"] = "docker"
                pool["machine"]["template"] = {"customImage": "kindest/node:v1.35.0"}
    return config


@pytest.fixture(
    scope="module", params=[(d, "metal3") for d in DRIVERS] + [("preinstalled", "docker")]
)
def configured(request: pytest.FixtureRequest) -> Recording:
    driver, infrastructure = request.param
    recording = evaluate("prod", False, config=_configured(DRIVERS[driver], infrastructure))
    assert recording.error is None, recording.error
    return recording


def test_every_values_key_exists_in_its_pinned_chart(
    configured: Recording, upstream_dir: Path
) -> None:
    problems = [
        f"{release.name}: {key}"
        for release in configured.of_type(RELEASE)
        for key in missing_values_keys(
            upstream_dir, release_chart(release.inputs), release.inputs.get("values") or {}
        )
    ]
    assert problems == []


def test_every_cluster_api_object_validates_against_its_pinned_crd(
    configured: Recording, upstream_dir: Path
) -> None:
    checked = 0
    problems: list[str] = []
    for reg in configured.resources:
        api_version = reg.inputs.get("apiVersion")
        if reg.read or not (
            isinstance(api_version, str) and api_version.split("/")[0].endswith(CAPI_GROUPS)
        ):
            continue
        checked += 1
        problems += [f"{reg.name}: {v}" for v in crd_violations(upstream_dir, reg.inputs)]
    assert checked > 0
    assert problems == []
