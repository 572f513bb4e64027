"""The tenant-version catalogue: what Kamaji, kind's node images and HAMi's kube-scheduler
allow, and which control-plane upgrades Kubernetes' skew policy and Kamaji's webhook allow."""

from __future__ import annotations

import pytest

from components import kubernetes_versions as kv
from components.config import ConfigError
from components.stack import parse_platform
from tests.support.harness import load_stack_config


def _platform(stack: str) -> dict:
    return dict(load_stack_config(stack)["gpu-platform:platform"])


def test_kamaji_maximum_is_its_kubeadm_minor() -> None:
    # clastix/kamaji 26.8.2-edge internal/upgrade/kubeadm_version.go:7: KubeadmVersion v1.36.0.
    assert kv.kamaji_max_minor() == 36
    assert kv.released_versions()[-1] == "v1.36.3"
    assert not [v for v in kv.released_versions() if kv.Version.parse(v).minor > 36]


def test_every_kind_image_is_a_released_version() -> None:
    assert set(kv.kind_versions()) <= set(kv.released_versions())
    assert kv.kind_versions() == ["v1.31.14", "v1.32.11", "v1.33.7", "v1.34.3", "v1.35.0"]


def test_patches_are_consecutive_up_to_the_pinned_one() -> None:
    released = kv.released_versions()
    assert "v1.35.0" in released
    assert "v1.35.7" in released
    assert "v1.35.8" not in released
    assert "v1.30.14" not in released  # below the floor


@pytest.mark.parametrize(
    ("wanted", "words"),
    [
        ("v1.37.0", ["above what Kamaji accepts", "v1.36", "pick v1.36.2 or v1.36.3"]),
        ("v1.20.0", ["below the oldest supported minor (v1.31)", "pick v1.31.0 or v1.31.1"]),
        ("v1.35.99", ["not a released", "pick v1.35.7 or v1.36.0"]),
    ],
)
def test_a_version_outside_the_catalogue_names_the_nearest(wanted: str, words: list[str]) -> None:
    problem = kv.version_problem(wanted, kv.released_versions(), "a released Kubernetes patch")
    assert problem is not None
    for word in words:
        assert word in problem


@pytest.mark.parametrize(
    ("previous", "wanted"),
    [
        ("v1.35.0", "v1.35.0"),
        ("v1.35.0", "v1.35.7"),
        ("v1.34.3", "v1.35.0"),
        ("v1.35.7", "v1.36.0"),
    ],
)
def test_allowed_upgrades(previous: str, wanted: str) -> None:
    assert kv.upgrade_problem(previous, wanted, kv.released_versions()) is None


def test_a_downgrade_is_refused_with_the_allowed_next_versions() -> None:
    problem = kv.upgrade_problem("v1.35.0", "v1.34.3", kv.kind_versions())
    assert problem is not None
    assert "downgrade" in problem
    assert "keep v1.35.0" in problem
    assert "no later version is allowed yet" in problem  # kind v0.31.0 has nothing after 1.35.0
    patch = kv.upgrade_problem("v1.35.7", "v1.35.1", kv.released_versions())
    assert patch is not None
    assert "downgrade" in patch
    assert "v1.36.0" in patch


def test_a_jump_of_two_minors_is_refused_naming_the_next_minor() -> None:
    problem = kv.upgrade_problem("v1.33.7", "v1.35.0", kv.kind_versions())
    assert problem is not None
    assert "2 minors above" in problem
    assert problem.endswith("the allowed next versions are v1.34.3")


def test_worker_skew() -> None:
    assert kv.worker_skew_problem("v1.35.0", "v1.35.0") is None
    assert kv.worker_skew_problem("v1.35.0", "v1.32.11") is None
    newer = kv.worker_skew_problem("v1.34.3", "v1.35.0")
    assert newer is not None
    assert "newer than the control plane" in newer
    older = kv.worker_skew_problem("v1.35.0", "v1.31.14")
    assert older is not None
    assert "at most 3 minors older" in older


# ----------------------------------------------------------------- through the config models


def test_a_patch_that_does_not_exist_is_refused_before_registration() -> None:
    raw = _platform("prod")
    raw["kubernetesVersion"] = "v1.35.9"
    with pytest.raises(
        ConfigError, match=r"kubernetesVersion.*v1\.35\.9.*pick v1\.35\.7 or v1\.36\.0"
    ):
        parse_platform(raw)


def test_a_version_far_below_is_refused() -> None:
    raw = _platform("prod")
    raw["tenants"][0]["kubernetesVersion"] = "v1.18.0"
    with pytest.raises(ConfigError, match=r"tenants\[0\]\.kubernetesVersion.*oldest supported"):
        parse_platform(raw)


def test_lab_versions_need_a_kind_image() -> None:
    raw = _platform("lab")
    raw["tenants"][1]["kubernetesVersion"] = "v1.35.7"  # released, but kind v0.31.0 has no image
    with pytest.raises(
        ConfigError, match=r"tenants\[1\]\.kubernetesVersion: v1\.35\.7.*kind v0\.31\.0.*v1\.35\.0"
    ):
        parse_platform(raw)
    raw["tenants"][1]["kubernetesVersion"] = "v1.34.3"
    raw["tenants"][0].pop("kubernetesVersion", None)  # Pulumi.lab.yaml ships tenant-a's own
    platform = parse_platform(raw)
    assert platform.version_of(platform.tenants[1]) == "v1.34.3"
    assert platform.version_of(platform.tenants[0]) == platform.kubernetes_version
    assert platform.worker_image_of(platform.tenants[1]).startswith(
        "kindest/node:v1.34.3@sha256:08497"
    )


def test_prod_takes_a_released_version_kind_has_no_image_for() -> None:
    raw = _platform("prod")
    raw["tenants"][1]["kubernetesVersion"] = "v1.35.7"
    assert parse_platform(raw).tenants[1].kubernetes_version == "v1.35.7"


def test_a_worker_image_must_match_every_tenant_it_serves() -> None:
    raw = _platform("lab")
    raw["tenants"][1]["kubernetesVersion"] = "v1.34.3"
    raw["workerImage"] = "kindest/node:v1.35.0"
    with pytest.raises(
        ConfigError, match=r"workerImage kindest/node:v1\.35\.0 is not v1\.34\.3 \(tenants\[1\]"
    ):
        parse_platform(raw)


def test_a_prod_machine_image_of_another_version_is_named() -> None:
    from components.prod.machines import image_version_mismatch

    template = {"image": {"url": "http://images.example/ubuntu-24.04-k8s-v1.35.0.qcow2"}}
    assert image_version_mismatch(template, "v1.36.3") == "v1.35.0"
    assert image_version_mismatch(template, "v1.35.0") is None
    assert (
        image_version_mismatch({"image": {"url": "http://images.example/u.qcow2"}}, "v1.36.3")
        is None
    )


def test_kamajis_webhook_judges_the_spec_minor_not_the_running_version() -> None:
    """clastix/kamaji 26.8.2-edge internal/webhook/handlers/tcp_version.go:59-96: patches zeroed,
    a lower minor or a jump of more than one refused, against the old spec."""
    # A stuck upgrade (spec v1.35.0, running v1.34.3): back to the running version is refused.
    stuck = kv.kamaji_update_problem("v1.35.0", "v1.34.3", "v1.34.3")
    assert stuck is not None
    assert "would downgrade the control plane's spec, v1.35.0 (it still runs v1.34.3" in stuck
    assert "keep v1.35.0" in stuck
    # Patches do not count, either way; one minor up is fine; two are not.
    assert kv.kamaji_update_problem("v1.35.7", "v1.35.0", "v1.35.0") is None
    assert kv.kamaji_update_problem("v1.35.0", "v1.36.3", "v1.35.0") is None
    jump = kv.kamaji_update_problem("v1.34.3", "v1.36.0", None)
    assert jump is not None
    assert "2 minors above the control plane's spec, v1.34.3;" in jump
