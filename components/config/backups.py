"""A tenant's datastore backups: when they run, how many are kept, where they go.

Every tenant's whole cluster lives in its datastore (docs/backups.md). The program exports the
tenant's etcd key prefix on a schedule to S3-compatible storage: the lab's own object store, or
a target the user names as a secret config value (prod always names one).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from components.config.base import _config_key, _Model

# A standard five-field cron expression as a Kubernetes CronJob takes it (minute hour day month
# weekday): numbers, ranges, steps, lists and '*' per field, or one of the @-macros that
# robfig/cron (the parser kube-controller-manager uses) accepts.
_CRON_FIELD = r"(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*"
CRON_SCHEDULE = re.compile(
    rf"^({_CRON_FIELD}\s+){{4}}{_CRON_FIELD}$"
    r"|^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$"
)
# (field name, lowest, highest) of the five cron fields, for the range check.
_CRON_BOUNDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day", 1, 31),
    ("month", 1, 12),
    ("weekday", 0, 6),
)


def _cron_problem(value: str) -> str | None:
    """Why ``value`` is not a schedule a CronJob accepts, or None."""
    if not CRON_SCHEDULE.match(value):
        return "is not a five-field cron schedule (minute hour day month weekday)"
    if value.startswith("@"):
        return None
    for (what, low, high), field_text in zip(_CRON_BOUNDS, value.split(), strict=True):
        for number in re.findall(r"\d+", field_text.split("/")[0]):
            if not low <= int(number) <= high:
                return f"has {what} {number}, outside {low}-{high}"
    return None


class TenantBackups(_Model):
    """Scheduled exports of the tenant's datastore prefix, verified after each write."""

    enabled: bool = Field(
        default=True,
        description="false: no backups for this tenant (say why in the stack file; a tenant "
        "on a PostgreSQL, MySQL or NATS DataStore is backed up by that database's own tools)",
    )
    schedule: str = Field(
        default="17 */6 * * *",
        description="when a backup runs: a five-field cron schedule in the management "
        "cluster's time zone (default: every 6 hours, at minute 17)",
    )
    retention: int = Field(
        default=8,
        ge=1,
        le=1000,
        description="how many of the tenant's newest backups are kept (older ones are deleted "
        "after a verified write)",
    )
    target_config_key: str | None = Field(
        default=None,
        description="secret config key holding the S3 target as JSON (endpoint, bucket, "
        "accessKeyId, secretAccessKey, encryptionKey; optional region, prefix, caBundle): "
        "required in prod; "
        "the lab uses its own object store when unset",
    )

    @property
    def named_target(self) -> str | None:
        """The secret config key of the target this tenant's backups go to, when they run and
        name one (None: no backups, or the environment's own store)."""
        return self.target_config_key if self.enabled else None

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        problem = _cron_problem(value)
        if problem is not None:
            raise ValueError(f"{value!r} {problem}: write e.g. '17 */6 * * *' (every 6 hours)")
        return value

    @field_validator("target_config_key")
    @classmethod
    def _target(cls, value: str | None) -> str | None:
        return _config_key(value)
