"""Registers one tenant's backups (children of its GpuTenant, on the management provider): the
scripts, the target Secret, the two ServiceAccounts with their Roles, the scheduled backup and
the suspended restore template (``components.backups.objects``). A tenant added or removed adds
or removes its own backups and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pulumi

from components.backups import objects
from components.backups.target import target_environment
from components.config import Tenant
from components.k8s_objects import typed_object

Opts = Callable[..., pulumi.ResourceOptions]

# The suffixes of a GpuTenant's backup children (components.name_plan).
TENANT_PARTS = (
    "backup-scripts",
    "backup-target",
    "backup-account",
    "backup-role",
    "backup-binding",
    "restore-account",
    "restore-role",
    "restore-binding",
    "backup",
    "restore",
)
_ACCESS_PARTS = ("account", "role", "binding")


def configured_target(config_key: str) -> pulumi.Output[dict[str, str]]:
    """A target the user names: the secret config value, as the target Secret's data (its shape
    was checked before registration, ``components.stack.check_secret_shapes``)."""
    raw = pulumi.Config().require_secret(config_key)
    return pulumi.Output.secret(raw.apply(lambda text: target_environment(text, config_key)))


def configured_targets(tenants: Sequence[Tenant]) -> dict[str, pulumi.Output[dict[str, str]]]:
    """The target of every tenant whose backups name one, by tenant name (the rest, if any, go
    to the environment's own store)."""
    return {
        tenant.name: configured_target(tenant.backups.named_target)
        for tenant in tenants
        if tenant.backups.named_target is not None
    }


def register_tenant(
    name: str,
    *,
    plan: objects.BackupPlan,
    target: pulumi.Input[dict[str, str]],
    on_management: Opts,
    namespace: pulumi.Resource,
    after: Sequence[pulumi.Resource],
) -> list[pulumi.Resource]:
    """One tenant's backups, in its management namespace (``namespace``, which every object
    waits for), the CronJobs also after ``after``; returns the backup CronJob and the restore
    template."""
    scripts = typed_object(
        f"{name}-backup-scripts",
        objects.scripts_config_map(plan),
        on_management(depends_on=[namespace]),
    )
    secret = typed_object(
        f"{name}-backup-target",
        objects.target_secret(plan),
        on_management(depends_on=[namespace], additional_secret_outputs=["stringData", "data"]),
        string_data=pulumi.Output.secret(target),
    )
    bindings: list[pulumi.Resource] = []
    for restore, kind in ((False, "backup"), (True, "restore")):
        manifests = objects.access(plan, restore)
        account: Any = None
        for part, manifest in zip(_ACCESS_PARTS, manifests, strict=True):
            depends = [namespace] if account is None else [namespace, account]
            resource = typed_object(
                f"{name}-{kind}-{part}", manifest, on_management(depends_on=depends)
            )
            account = account or resource
            if part == "binding":
                bindings.append(resource)
    needs = [scripts, secret, *after]
    backup = typed_object(
        f"{name}-backup",
        objects.backup_cron_job(plan),
        on_management(depends_on=[*needs, bindings[0]]),
    )
    restore = typed_object(
        f"{name}-restore",
        objects.restore_cron_job(plan),
        on_management(depends_on=[*needs, bindings[1]]),
    )
    return [backup, restore]
