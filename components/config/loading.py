"""Turning the raw ``platform`` object into models, and the secret config keys it names."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from components.config.base import (
    _FIXES,
    CONFIG_KEY,
    VERSIONS_CONTEXT,
    ConfigError,
    problem_message,
)
from components.config.messages import problem_lines
from components.config.platform import PlatformConfig


def validate_models(
    raw: Mapping[str, Any] | None, tenant_versions: Sequence[str] | None = None
) -> PlatformConfig:
    """The raw ``platform`` object as models: shapes, types and each model's own rules; raise
    ConfigError with one line per problem. ``components.stack.parse_platform`` adds the checks
    across the whole stack. ``tenant_versions``: the Kubernetes versions the stack's environment
    can run, which a version hint picks from (all released patches when not given)."""
    if raw is None:
        raise ConfigError(
            f"config key '{CONFIG_KEY}' is missing: copy Pulumi.lab.yaml's platform block "
            "into your stack file"
        )
    try:
        platform = PlatformConfig.model_validate(raw, context={VERSIONS_CONTEXT: tenant_versions})
    except ValidationError as exc:
        lines = problem_lines(PlatformConfig, exc.errors(), _FIXES)
        raise ConfigError(problem_message("invalid stack configuration", lines)) from None
    return platform


def required_secret_keys(platform: PlatformConfig) -> list[str]:
    """Config keys (besides ``platform``) that must hold secrets: the prod management kubeconfig,
    the Cluster API operator's GitHub token when one is named, the credentials of external
    DataStores and the backup targets tenants name. The program reads them with
    ``require_secret``."""
    keys: list[str] = []
    if platform.management.existing is not None:
        keys.append(platform.management.existing.kubeconfig_config_key)
        token_key = platform.management.existing.cluster_api.github_token_config_key
        if token_key is not None:
            keys.append(token_key)
    keys += [d.credentials_config_key for d in platform.data_stores if d.credentials_config_key]
    for tenant in platform.tenants:
        dedicated = tenant.data_store.dedicated
        if dedicated is not None and dedicated.credentials_config_key:
            keys.append(dedicated.credentials_config_key)
        if tenant.backups.named_target is not None:
            keys.append(tenant.backups.named_target)
    return sorted(set(keys))


def check_secrets_present(platform: PlatformConfig, lookup: Callable[[str], object | None]) -> None:
    """Fail early, naming the command, when a secret the stack refers to is not set."""
    missing = [key for key in required_secret_keys(platform) if lookup(key) is None]
    if missing:
        raise ConfigError(
            problem_message(
                "secret config values are missing",
                [
                    f"{key}: set it with `pulumi config set --secret {key} < <file>`"
                    for key in missing
                ],
            )
        )


def check_secrets_are_secret(
    platform: PlatformConfig,
    present: Callable[[str], bool],
    secret: Callable[[str], bool],
) -> None:
    """A kubeconfig or a database password written in clear into the stack file would be
    committed with it and shown by ``pulumi config``: refuse it, naming the key and the command
    that stores it encrypted (``present``/``secret`` say whether a key is set, and as a
    ``secure:`` value)."""
    clear = [key for key in required_secret_keys(platform) if present(key) and not secret(key)]
    if clear:
        raise ConfigError(
            problem_message(
                "secret config values are written in clear text",
                [
                    f"{key}: remove it from the stack file and set it with "
                    f"`pulumi config set --secret {key} < <file>`"
                    for key in clear
                ],
            )
        )
