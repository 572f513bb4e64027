"""Tenant backups under mocks, both stacks (docs/backups.md): every backed-up tenant's objects
in its management namespace, the lab's object store with one bucket per tenant, prod's targets
from the secret config each tenant names, credentials only as secrets, no restore Job on
``pulumi up``, and nothing for a tenant with ``backups.enabled: false``."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.backups import objects
from components.backups.deploy import TENANT_PARTS
from components.lab import backup_store
from tests.support.harness import (
    SECRET_PLACEHOLDER,
    Recording,
    evaluate,
    load_stack_config,
    shipped,
)

CONFIG_KEY = "gpu-platform:platform"
_CACHE: dict[tuple[str, str], Recording] = {}


def _evaluated(stack: str, variant: str = "as shipped") -> Recording:
    if variant == "as shipped":
        recording = shipped(stack)
        assert recording.error is None, recording.error
        return recording
    if (stack, variant) not in _CACHE:
        config = copy.deepcopy(load_stack_config(stack))
        if variant == "first tenant off":
            config[CONFIG_KEY]["tenants"][0]["backups"] = {"enabled": False}
        recording = evaluate(stack, False, config=config)
        assert recording.error is None, recording.error
        _CACHE[(stack, variant)] = recording
    return _CACHE[(stack, variant)]


def _backed_up(stack: str) -> list[dict[str, Any]]:
    tenants: list[dict[str, Any]] = load_stack_config(stack)[CONFIG_KEY]["tenants"]
    return [t for t in tenants if t.get("backups", {}).get("enabled", True)]


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_backed_up_tenant_registers_its_backups_in_its_namespace(stack: str) -> None:
    recording = _evaluated(stack)
    tenants = _backed_up(stack)
    assert tenants
    for tenant in tenants:
        name = tenant["name"]
        namespace = tenant.get("managementNamespace", {}).get("name") or name
        for part in TENANT_PARTS:
            reg = recording.named(f"{name}-{part}")
            assert reg.inputs["metadata"]["namespace"] == namespace, reg.name
            component = recording.component_of(reg, ":GpuTenant")
            assert component is not None
            assert component.name == name
        schedule = recording.named(f"{name}-backup").inputs["spec"]["schedule"]
        assert schedule == tenant.get("backups", {}).get("schedule", "17 */6 * * *")


def test_prod_registers_none_for_the_tenant_that_opted_out() -> None:
    recording = _evaluated("prod")
    assert not [r for r in recording.resources if r.name.startswith("team-speech-backup")]
    lab = _evaluated("lab", "first tenant off")
    assert not [r for r in lab.resources if r.name.startswith("tenant-a-backup")]
    assert lab.named("tenant-b-backup").type == "kubernetes:batch/v1:CronJob"


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_restore_is_a_suspended_template_never_a_job(stack: str) -> None:
    recording = _evaluated(stack)
    assert not recording.of_type("kubernetes:batch/v1:Job")
    for tenant in _backed_up(stack):
        spec = recording.named(f"{tenant['name']}-restore").inputs["spec"]
        assert spec["suspend"] is True


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_target_reaches_the_cluster_only_as_a_secret(stack: str) -> None:
    recording = _evaluated(stack)
    for tenant in _backed_up(stack):
        reg = recording.named(f"{tenant['name']}-backup-target")
        assert reg.input_is_secret("stringData"), reg.name
        data = reg.inputs["stringData"]
        assert set(data) >= {"S3_ENDPOINT", "S3_BUCKET", "AWS_ACCESS_KEY_ID"}


def test_prod_targets_are_the_configured_ones() -> None:
    recording = _evaluated("prod")
    for tenant in _backed_up("prod"):
        data = recording.named(f"{tenant['name']}-backup-target").inputs["stringData"]
        # The harness sets every named target to its placeholder (tests/support/harness.py).
        assert data["AWS_SECRET_ACCESS_KEY"] == SECRET_PLACEHOLDER
        assert data["S3_ENDPOINT"] == "https://s3.mock.invalid"
    assert not [r for r in recording.resources if r.name.startswith("management-backup-store")]


def test_the_lab_store_gives_each_tenant_its_own_bucket_and_key() -> None:
    recording = _evaluated("lab")
    targets = {
        t["name"]: recording.named(f"{t['name']}-backup-target").inputs["stringData"]
        for t in _backed_up("lab")
    }
    assert len({t["S3_BUCKET"] for t in targets.values()}) == len(targets)
    assert len({t["AWS_SECRET_ACCESS_KEY"] for t in targets.values()}) == len(targets)
    for name, target in targets.items():
        assert target["S3_BUCKET"] == backup_store.bucket_name(name)
        assert target["S3_ENDPOINT"] == backup_store.ENDPOINT
    identities = recording.named("management-backup-store-identities")
    assert identities.input_is_secret("stringData")
    config = json.loads(identities.inputs["stringData"]["identities.json"])
    keys = {i["credentials"][0]["secretKey"] for i in config["identities"]}
    assert keys == {t["AWS_SECRET_ACCESS_KEY"] for t in targets.values()}
    buckets = recording.named("management-backup-store-buckets")
    assert buckets.inputs["environment"]["BUCKETS"].split() == [
        f"{backup_store.bucket_name(n)}={backup_store.identity_name(n)}" for n in targets
    ]
    root = recording.named("management-backup-store-root-secret")
    assert root.type == "command:local:Command"
    # Each lab tenant's archive key: its own command, made once, kept secret, in its Secret.
    for name, target in targets.items():
        command = recording.named(backup_store.archive_key_resource("management", name))
        assert command.type == "command:local:Command"
        assert target[objects.TARGET_KEY_KEY] == "5e" * 32  # the fake new-secret.sh output
    policy = recording.named("management-backup-store-policy")
    assert policy.inputs["spec"] == backup_store.network_policy()["spec"]
