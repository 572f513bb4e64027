"""Where a tenant's backups go: the S3 target as the backup Job's environment (pure).

A target the user names (``tenants[].backups.targetConfigKey``) is a secret config value holding
JSON; ``target_environment`` turns it into the ``datastore-backup-target`` Secret's data, and its
errors name the config key and the keys expected, never the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from components.backups.objects import TARGET_CA_KEY, TARGET_KEY_KEY
from components.config import ConfigError

REQUIRED_KEYS = ("endpoint", "bucket", "accessKeyId", "secretAccessKey", "encryptionKey")
OPTIONAL_KEYS = ("region", "prefix", "caBundle")
DEFAULT_REGION = "us-east-1"
# S3 bucket naming rules (3-63 lower-case letters, digits, '.', '-'; starting and ending with a
# letter or digit).
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
ENDPOINT = re.compile(r"^https?://[^/\s]+(:\d+)?/?$")
# The tenant's archive key: 32 random bytes as 64 hex digits (`openssl rand -hex 32`), what
# scripts/backup/tenant_backup.py parse_key reads.
ARCHIVE_KEY = re.compile(r"^[0-9a-fA-F]{64}$")


def environment(
    *,
    endpoint: str,
    bucket: str,
    access_key_id: str,
    secret_access_key: str,
    archive_key: str,
    region: str = DEFAULT_REGION,
    prefix: str = "",
    ca_bundle: str = "",
) -> dict[str, str]:
    """The Secret's data: what ``scripts/backup/tenant_backup.py`` reads, the CA file and the
    tenant's archive key file (every archive is encrypted with it, docs/backups.md)."""
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return {
        "S3_ENDPOINT": endpoint.rstrip("/"),
        "S3_REGION": region,
        "S3_BUCKET": bucket,
        "S3_PREFIX": prefix,
        "AWS_ACCESS_KEY_ID": access_key_id,
        "AWS_SECRET_ACCESS_KEY": secret_access_key,
        TARGET_CA_KEY: ca_bundle,
        TARGET_KEY_KEY: archive_key.lower(),
    }


def target_environment(raw: str, config_key: str) -> dict[str, str]:
    """The configured target's Secret data; ConfigError (one line, no value) when malformed."""

    def refuse(problem: str) -> ConfigError:
        return ConfigError(
            f"{config_key}: {problem}: set it to a JSON object with "
            f"{', '.join(REQUIRED_KEYS)} (optional {', '.join(OPTIONAL_KEYS)}) with `pulumi "
            f"config set --secret {config_key} < target.json` (docs/backups.md)"
        )

    try:
        data = json.loads(raw)
    except ValueError:
        raise refuse("is not JSON") from None
    if not isinstance(data, Mapping):
        raise refuse("is not a JSON object")
    unknown = sorted(set(data) - {*REQUIRED_KEYS, *OPTIONAL_KEYS})
    if unknown:
        raise refuse(f"has unknown keys {', '.join(unknown)}")
    missing = [key for key in REQUIRED_KEYS if not data.get(key)]
    if missing:
        raise refuse(f"lacks {', '.join(missing)}")
    if not all(isinstance(value, str) for value in data.values()):
        raise refuse("has a value that is not a string")
    if not ENDPOINT.match(data["endpoint"]):
        raise refuse("endpoint is not an http(s)://host[:port] URL")
    if not BUCKET.match(data["bucket"]):
        raise refuse("bucket is not an S3 bucket name (3-63 lower-case letters, digits, '.', '-')")
    if not ARCHIVE_KEY.match(data["encryptionKey"]):
        raise refuse("encryptionKey is not 64 hex digits (32 random bytes: openssl rand -hex 32)")
    return environment(
        endpoint=data["endpoint"],
        bucket=data["bucket"],
        access_key_id=data["accessKeyId"],
        secret_access_key=data["secretAccessKey"],
        archive_key=data["encryptionKey"],
        region=data.get("region") or DEFAULT_REGION,
        prefix=data.get("prefix", ""),
        ca_bundle=data.get("caBundle", ""),
    )
