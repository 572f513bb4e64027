"""The stack: its validated configuration and the environment it runs in, chosen once.

``parse_platform`` is the one validation phase: the models (shapes, types, each model's rules),
then the checks every stack has and the environment's own (``Substrate.config_problems``), all
reported in one error, then the names the components would register (``components.name_plan``).
Every failure is a ``ConfigError`` (a ``pulumi.RunError``: the CLI prints it as its message
alone) raised before any resource is registered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from components.backups.target import target_environment
from components.config import (
    CONFIG_KEY,
    ConfigError,
    PlatformConfig,
    check_secrets_are_secret,
    check_secrets_present,
    platform_problems,
    problem_message,
    required_secret_keys,
    validate_models,
)
from components.config.keys import config_key_problems
from components.lab.substrate import LabSubstrate
from components.name_plan import name_problems
from components.prod.substrate import ProdSubstrate
from components.substrate import Substrate
from components.tenant_specs import datastore_secret_data
from components.tenant_values import webhook_excluded_namespaces


def substrate_for(platform: PlatformConfig) -> Substrate:
    """Every difference between the environments is asked of what this returns."""
    substrate = substrate_named(platform.mode)
    assert substrate is not None  # the model only admits the known modes
    return substrate


def substrate_named(mode: object) -> Substrate | None:
    """The one place that reads the stack's mode (None for one the schema refuses): also asked
    before the models are validated, so their hints name what this environment can run."""
    if mode == "lab":
        return LabSubstrate()
    if mode == "prod":
        return ProdSubstrate()
    return None


@dataclass(frozen=True)
class Stack:
    platform: PlatformConfig
    substrate: Substrate


def parse_platform(raw: Mapping[str, Any] | None) -> PlatformConfig:
    """Validate the raw ``platform`` object; raise ConfigError with one line per problem."""
    return parse_stack(raw).platform


def parse_stack(raw: Mapping[str, Any] | None) -> Stack:
    """``parse_platform``, with the environment the configuration chose."""
    declared = substrate_named(raw.get("mode")) if isinstance(raw, Mapping) else None
    platform = validate_models(
        raw, declared.tenant_kubernetes_versions() if declared is not None else None
    )
    substrate = substrate_for(platform)
    problems = [
        *platform_problems(
            platform, default_datastore=substrate.default_etcd(platform) is not None
        ),
        *substrate.config_problems(platform),
        *_ungated_workload_problems(platform, substrate),
    ]
    if not problems:
        problems = name_problems(platform, substrate)
    if problems:
        raise ConfigError(problem_message("invalid stack configuration", problems))
    return Stack(platform=platform, substrate=substrate)


def load_stack() -> Stack:
    """Read and validate ``<project>:platform`` and check that the secrets it names are set,
    before anything is registered, and pick the stack's environment."""
    import pulumi  # local import: reading config needs the program's runtime settings

    config = pulumi.Config()
    keys, project = engine_config_keys(), pulumi.get_project()
    raw = _platform_object(config)
    if raw is None:
        # A misspelled namespace or key is why the block is missing: name the key meant.
        misspelled = config_key_problems(keys, project, [CONFIG_KEY])
        if misspelled:
            raise ConfigError(problem_message("invalid stack configuration", misspelled))
    stack = parse_stack(raw)
    unread = config_key_problems(keys, project, [CONFIG_KEY, *required_secret_keys(stack.platform)])
    if unread:
        raise ConfigError(problem_message("invalid stack configuration", unread))
    check_secrets_present(stack.platform, lambda key: config.get_secret(key))
    check_secrets_are_secret(
        stack.platform,
        present=lambda key: config.get(key) is not None,
        secret=lambda key: pulumi.runtime.is_config_secret(config.full_key(key)),
    )
    # The plain value, read once here and never logged: a malformed one fails now, as one line,
    # rather than inside an apply after registration (where the SDK wraps it in a traceback).
    check_secret_shapes(stack.platform, config.get)
    return stack


def engine_config_keys() -> list[str]:
    """Every config key the engine handed the program, fully qualified. The language host puts
    the stack's whole config into ``pulumi.runtime.config.CONFIG`` before the program runs
    (pulumi/pulumi v3.259.0 sdk/python/cmd/pulumi-language-python-exec:102-114, from
    ``PULUMI_CONFIG``), as the mocks' ``set_all_config`` does; ``get_config_env`` is the same
    ``PULUMI_CONFIG`` bag, read when nothing was set (sdk/python/lib/pulumi/runtime/config.py,
    ``get_config`` falls back to it)."""
    from pulumi.runtime import config as runtime_config

    return sorted({*runtime_config.CONFIG.get(), *runtime_config.get_config_env()})


def _platform_object(config: Any) -> Any:
    """``<project>:platform`` as the engine passed it: the structured value, or the text itself
    when it is not JSON (a stack file giving the whole block as a plain string), so that the
    models say which shape to write instead of the SDK's ``not a valid JSON object``."""
    text = config.get(CONFIG_KEY)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def check_secret_shapes(platform: PlatformConfig, lookup: Callable[[str], str | None]) -> None:
    """External DataStore credentials and backup targets must be the JSON objects they are read
    as; the error names the key and the expected keys, never the value."""
    drivers = {d.credentials_config_key: d.driver for d in platform.data_stores}
    for tenant in platform.tenants:
        dedicated = tenant.data_store.dedicated
        if dedicated is not None and dedicated.credentials_config_key:
            drivers[dedicated.credentials_config_key] = dedicated.driver
    problems = []
    if platform.management.existing is not None:
        key = platform.management.existing.kubeconfig_config_key
        problem = kubeconfig_problem(key, lookup(key))
        if problem is not None:
            problems.append(problem)
    for key, driver in sorted((k, v) for k, v in drivers.items() if k):
        raw = lookup(key)
        if raw is None:
            continue
        try:
            datastore_secret_data(driver, raw, key)
        except ConfigError as error:
            problems.append(str(error))
    targets = {t.backups.named_target for t in platform.tenants}
    for key in sorted(k for k in targets if k):
        raw = lookup(key)
        if raw is None:
            continue
        try:
            target_environment(raw, key)
        except ConfigError as error:
            problems.append(str(error))
    if problems:
        raise ConfigError(problem_message("invalid secret config", problems))


def kubeconfig_problem(key: str, text: str | None) -> str | None:
    """The management kubeconfig must be a kubeconfig's content (the adopted-namespace check
    hands it to kubectl as a file's content, components/prod/cluster_checks.py): YAML with a
    ``clusters`` list. Else the providers fail only once ``up`` reaches them. The message names
    the key, never the value."""
    if text is None:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("clusters"), list) and data["clusters"]:
        return None
    return (
        f"{key}: is not a kubeconfig (YAML with clusters, users and contexts, as `kind get "
        f"kubeconfig` or your cluster's admin tooling writes it): set the file's content with "
        f"`pulumi config set --secret {key} < management.kubeconfig`"
    )


def _ungated_workload_problems(platform: PlatformConfig, substrate: Substrate) -> list[str]:
    """A declared GPU workload in a namespace HAMi's webhook skips would never be routed to
    hami-scheduler: kube-scheduler would place it on ``nvidia.com/gpu`` alone, with no share."""
    skipped = set(webhook_excluded_namespaces(substrate.tenant_system_namespaces))
    return [
        f"tenants[{t_index}].workloads[{w_index}].namespace: HAMi's webhook skips "
        f"{workload.namespace!r} (a system, CNI or HAMi namespace), so the workload would bypass "
        "hami-scheduler; declare it in a namespace of its own"
        for t_index, tenant in enumerate(platform.tenants)
        for w_index, workload in enumerate(tenant.workloads)
        if workload.namespace in skipped
    ]
