"""The offline stand-in for ``pulumi preview --policy-pack policies``.

``to_policy_resources`` turns the harness's recorded registrations into the ``PolicyResource``
objects pulumi-policy builds for a stack policy (``AnalyzeStack``): properties are the resource's
outputs with unknowns as the engine's sentinel strings, wrapped in pulumi-policy's unknown-checking
proxy; ``parent`` links to the parent's object (the engine sends every registered resource,
components and the root stack included); ``provider`` carries the provider's type, URN, name and
inputs. ``resource_args`` builds what ``Analyze`` gets for one resource (its inputs).

``run_pack`` evaluates every policy of the pack on such a stack with a stack's policy config,
reconciled the way the CLI does it (schema defaults, then ``all``, then per-policy values), and
returns the findings with their enforcement levels.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_platform_policies.pack import build_policies
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from tests.support.harness import PROJECT, STACK_TYPE, UNKNOWN, Registration

POLICY_CONFIG_DIR = Path(__file__).resolve().parents[2] / "policies" / "config"
# How the harness writes a value that was unknown during preview: its UNKNOWN marker, or (for
# values the mocks echoed back) the repr of pulumi's Unknown object.
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
_HARNESS_UNKNOWN = re.compile(r"^(?:<unknown>|<pulumi\.output\.Unknown object at 0x[0-9a-fA-F]+>)$")


def engine_value(value: Any) -> Any:
    """A recorded value as the engine marshals it to an analyzer: unknowns become the sentinel."""
    if isinstance(value, dict):
        return {k: engine_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [engine_value(v) for v in value]
    if isinstance(value, str) and (value == UNKNOWN or _HARNESS_UNKNOWN.match(value)):
        return UNKNOWN_STRING_VALUE
    return value


def _urn_name(urn: str) -> str:
    return urn.split("::", 3)[3] if urn.count("::") >= 3 else ""


def _urn_type(urn: str) -> str:
    return urn.split("::", 3)[2].rsplit("$", 1)[-1] if urn.count("::") >= 3 else ""


def _options(reg: Registration) -> PolicyResourceOptions:
    options = reg.options or {}
    timeouts = options.get("custom_timeouts") or {}

    def seconds(value: Any) -> float:
        """A Go duration string ("30m", "1h30m", "90s") in seconds."""
        units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        parts = _DURATION.findall(str(value or ""))
        return sum(float(number) * units[unit] for number, unit in parts)

    return PolicyResourceOptions(
        protect=bool(options.get("protect", False)),
        ignore_changes=list(options.get("ignore_changes", [])),
        delete_before_replace=options.get("delete_before_replace"),
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(
            seconds(timeouts.get("create")),
            seconds(timeouts.get("update")),
            seconds(timeouts.get("delete")),
        ),
        additional_secret_outputs=list(options.get("additional_secret_outputs", [])),
        parent=reg.parent or None,
    )


def _provider(
    reg: Registration, by_urn: Mapping[str, Registration]
) -> PolicyProviderResource | None:
    urn = reg.provider_urn
    if not urn:
        return None
    provider = by_urn.get(urn)
    inputs = engine_value(provider.inputs) if provider is not None else {}
    return PolicyProviderResource(
        _urn_type(urn), unknown_checking_proxy(inputs), urn, _urn_name(urn)
    )


def _root_stack(resources: Iterable[Registration], known: set[str]) -> Registration | None:
    """The root stack resource the engine also sends (the harness does not record it)."""
    for reg in resources:
        if reg.parent and reg.parent not in known and _urn_type(reg.parent) == STACK_TYPE:
            return Registration(
                urn=reg.parent,
                type=STACK_TYPE,
                name=_urn_name(reg.parent),
                custom=False,
                inputs={},
                outputs={},
                secret_inputs=[],
                parent="",
                provider="",
                dependencies=[],
                property_dependencies={},
                options={},
            )
    return None


def to_policy_resources(resources: list[Registration]) -> list[PolicyResource]:
    """What ``AnalyzeStack`` hands a stack policy for these registrations (outputs as props)."""
    regs = list(resources)
    known = {r.urn for r in regs}
    root = _root_stack(regs, known)
    if root is not None:
        regs.insert(0, root)
    by_urn = {r.urn: r for r in regs}
    built: dict[str, PolicyResource] = {}
    for reg in regs:
        props = engine_value(reg.outputs if reg.outputs else reg.inputs)
        built[reg.urn] = PolicyResource(
            reg.type,
            unknown_checking_proxy(props),
            reg.urn,
            reg.name,
            _options(reg),
            _provider(reg, by_urn),
            None,
            [],
            {},
        )
    for reg in regs:
        resource = built[reg.urn]
        resource.parent = built.get(reg.parent) if reg.parent else None
        resource.dependencies = [built[d] for d in reg.dependencies if d in built]
        resource.property_dependencies = {
            key: [built[d] for d in deps if d in built]
            for key, deps in reg.property_dependencies.items()
        }
    return list(built.values())


def resource_args(
    reg: Registration, by_urn: Mapping[str, Registration], config: Mapping[str, Any] | None = None
) -> ResourceValidationArgs:
    """What ``Analyze`` hands a resource policy for one registration (inputs as props)."""
    return ResourceValidationArgs(
        reg.type,
        unknown_checking_proxy(engine_value(reg.inputs)),
        reg.urn,
        reg.name,
        _options(reg),
        _provider(reg, by_urn),
        config,
    )


# ----------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class PolicySettings:
    level: EnforcementLevel
    properties: dict[str, Any]


def load_policy_config(stack: str) -> dict[str, Any]:
    data = json.loads((POLICY_CONFIG_DIR / f"{stack}.json").read_text())
    assert isinstance(data, dict)
    return data


def reconcile(policies: list[Policy], config: Mapping[str, Any]) -> dict[str, PolicySettings]:
    """The CLI's ReconcilePolicyPackConfig: schema defaults, then ``all``, then each policy."""
    result: dict[str, PolicySettings] = {}
    for policy in policies:
        defaults = {
            key: schema["default"]
            for key, schema in (
                policy.config_schema.properties if policy.config_schema else {}
            ).items()
            if "default" in schema
        }
        level = policy.enforcement_level or EnforcementLevel.ADVISORY
        result[policy.name] = PolicySettings(level, defaults)
    everything = config.get("all")
    if isinstance(everything, str):
        for name, settings in result.items():
            result[name] = PolicySettings(EnforcementLevel(everything), settings.properties)
    for name, given in config.items():
        if name not in result:
            continue
        settings = result[name]
        if isinstance(given, str):
            result[name] = PolicySettings(EnforcementLevel(given), settings.properties)
        elif isinstance(given, dict):
            properties = dict(settings.properties)
            level = settings.level
            for key, value in given.items():
                if key == "enforcementLevel":
                    level = EnforcementLevel(value)
                else:
                    properties[key] = value
            result[name] = PolicySettings(level, properties)
    return result


# -------------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Finding:
    policy: str
    level: EnforcementLevel
    message: str
    urn: str


def _run(result: Any) -> None:
    if inspect.isawaitable(result):  # the pack's validations are synchronous
        raise AssertionError("unexpected asynchronous validation")


def run_pack(
    resources: list[Registration],
    config: Mapping[str, Any],
    policies: list[Policy] | None = None,
) -> list[Finding]:
    """Every policy of the pack over a recorded stack, as the engine would run them.

    A policy that trips over an unknown value is reported the way pulumi-policy reports it
    (an advisory "can't run policy during preview" finding), so tests can assert there is none.
    """
    chosen = policies if policies is not None else build_policies()
    settings = reconcile(chosen, config)
    by_urn = {r.urn: r for r in resources}
    stack_resources = to_policy_resources(resources)
    findings: list[Finding] = []
    for policy in chosen:
        level = settings[policy.name].level
        if level == EnforcementLevel.DISABLED:
            continue
        properties = settings[policy.name].properties

        def report(message: str, urn: str | None = None, _p: Policy = policy) -> None:
            findings.append(Finding(_p.name, settings[_p.name].level, message, urn or ""))

        try:
            if isinstance(policy, ResourceValidationPolicy):
                for reg in resources:
                    args = resource_args(reg, by_urn, properties)

                    def report_one(
                        message: str, urn: str | None = None, _urn: str = reg.urn
                    ) -> None:
                        report(message, _urn)

                    _run(policy.validate(args, report_one))
            elif isinstance(policy, StackValidationPolicy):
                _run(policy.validate(StackValidationArgs(stack_resources, properties), report))
        except UnknownValueError as exc:
            findings.append(
                Finding(policy.name, EnforcementLevel.ADVISORY, f"can't run: {exc.message}", "")
            )
    return findings


def blocking(findings: Iterable[Finding]) -> list[Finding]:
    """Findings that fail a preview (mandatory)."""
    return [f for f in findings if f.level == EnforcementLevel.MANDATORY]


def stack_urn(stack: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{STACK_TYPE}::{PROJECT}-{stack}"
