"""The pack as a real analyzer process, queried over its gRPC interface, started the way the CLI
starts it.

The Pulumi CLI starts a Python policy pack through the language host with the interpreter of the
virtualenv ``PulumiPolicy.yaml`` names (``policies/.venv``, which the CLI never creates for a local
pack; ``make policy-venv`` does) as ``python -u -m pulumi.policy <engine address> <policy pack
dir>`` with the pack directory as working directory (pulumi/pulumi v3.259.0,
sdk/python/cmd/pulumi-language-python/main.go:1540,1612-1639), with the project, stack and dry-run
flag in ``PULUMI_PROJECT``, ``PULUMI_STACK``, ``PULUMI_DRY_RUN`` and config in ``PULUMI_CONFIG``.
pulumi-policy's ``PolicyPack`` starts a gRPC server on 127.0.0.1, prints the port as the first
line of stdout and serves until killed. The engine then calls Handshake (UNIMPLEMENTED is fine,
pkg/resource/plugin/analyzer_plugin.go:79-102), ConfigureStack (:225-262), GetAnalyzerInfo,
Configure (the reconciled policy config), Remediate then Analyze per resource (its inputs;
pkg/resource/deploy/step_generator.go:1401-1440) and AnalyzeStack once (every resource's outputs).

Running the pack from ``policies/.venv`` (only ``pulumi`` and ``pulumi-policy``) rather than the
test interpreter catches an import the pack's requirements do not provide. Both launch styles are
exercised: the CLI's, and ``python policies/__main__.py`` run directly.
"""

from __future__ import annotations

import os
import selectors
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from gpu_platform_policies.pack import POLICY_NAMES, build_policies
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel

from tests.policies.builders import container, deployment, gpu, pod_spec
from tests.policies.recorded import engine_value, load_policy_config, reconcile
from tests.policies.test_policy_recorded_stacks import lab_like
from tests.support.harness import Recording, Registration

REPO_ROOT = Path(__file__).resolve().parents[2]
POLICIES_DIR = REPO_ROOT / "policies"
# The interpreter PulumiPolicy.yaml's runtime options name (virtualenv .venv, relative to the pack).
POLICY_PYTHON = POLICIES_DIR / ".venv" / "bin" / "python"
STARTUP_SECONDS = 60.0
LEVELS = {
    EnforcementLevel.ADVISORY: analyzer_pb2.ADVISORY,
    EnforcementLevel.MANDATORY: analyzer_pb2.MANDATORY,
    EnforcementLevel.REMEDIATE: analyzer_pb2.REMEDIATE,
    EnforcementLevel.DISABLED: analyzer_pb2.DISABLED,
}
LAUNCHES = {
    "cli": (["-u", "-m", "pulumi.policy", "127.0.0.1:0", str(POLICIES_DIR)], POLICIES_DIR),
    "main": (["-u", str(POLICIES_DIR / "__main__.py")], POLICIES_DIR),
}


def policy_python() -> Path:
    """policies/.venv's interpreter; outside CI a missing venv skips (CI must have built it)."""
    if POLICY_PYTHON.exists():
        return POLICY_PYTHON
    message = "policies/.venv is missing: run `make policy-venv` (the CLI runs the pack from it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def analyzer_env(stack: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.pop("PYTHONPATH", None)  # the pack must find its own package
    env.update(
        PULUMI_PROJECT="gpu-platform",
        PULUMI_STACK=stack,
        PULUMI_DRY_RUN="true",
        PULUMI_CONFIG="{}",
        PULUMI_CONFIG_SECRET_KEYS="[]",
    )
    return env


def read_port(proc: subprocess.Popen[bytes]) -> int:
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    if not selector.select(timeout=STARTUP_SECONDS):
        raise AssertionError(f"the policy pack printed no port within {STARTUP_SECONDS} s")
    line = proc.stdout.readline().decode().strip()
    if not line.isdigit():
        stderr = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
        raise AssertionError(f"expected a port on stdout, got {line!r}\n{stderr}")
    return int(line)


@pytest.fixture(scope="module", params=sorted(LAUNCHES))
def analyzer(request: pytest.FixtureRequest) -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    args, cwd = LAUNCHES[request.param]
    proc = subprocess.Popen(
        [str(policy_python()), *args],
        cwd=cwd,
        env=analyzer_env("lab"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        port = read_port(proc)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=STARTUP_SECONDS)
        stub = analyzer_pb2_grpc.AnalyzerStub(channel)
        engine_start(stub, "lab")
        yield stub
        channel.close()
        assert proc.poll() is None, "the analyzer exited while serving"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def engine_start(stub: analyzer_pb2_grpc.AnalyzerStub, stack: str) -> None:
    """What the engine sends once the pack has printed its port: Handshake (a pack that does not
    implement it answers UNIMPLEMENTED, which the engine accepts), then ConfigureStack."""
    try:
        stub.Handshake(
            analyzer_pb2.AnalyzerHandshakeRequest(
                engine_address="127.0.0.1:0",
                root_directory=str(POLICIES_DIR),
                program_directory=str(POLICIES_DIR),
            )
        )
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise
    stub.ConfigureStack(
        analyzer_pb2.AnalyzerStackConfigureRequest(
            stack=stack, project="gpu-platform", dry_run=True, config={}, config_secret_keys=[]
        )
    )


def engine_analyze(stub: analyzer_pb2_grpc.AnalyzerStub, request: Any) -> Any:
    """One resource as the engine checks it: Remediate first, then Analyze. The pack has no
    remediations, so Remediate must hand nothing back."""
    remediated = stub.Remediate(request)
    assert list(remediated.remediations) == []
    return stub.Analyze(request)


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    result = struct_pb2.Struct()
    result.update(value)
    return result


def configure(stub: analyzer_pb2_grpc.AnalyzerStub, stack: str) -> None:
    """What the engine sends after reconciling the stack's policy config file."""
    settings = reconcile(build_policies(), load_policy_config(stack))
    request = analyzer_pb2.ConfigureAnalyzerRequest(
        policyConfig={
            name: analyzer_pb2.PolicyConfig(
                enforcementLevel=LEVELS[value.level], properties=struct(value.properties)
            )
            for name, value in settings.items()
        }
    )
    stub.Configure(request)


def provider_message(reg: Registration, by_urn: dict[str, Registration]) -> Any:
    urn = reg.provider_urn
    if not urn:
        return None
    provider = by_urn.get(urn)
    return analyzer_pb2.AnalyzerProviderResource(
        type="pulumi:providers:kubernetes",
        properties=struct(engine_value(provider.inputs) if provider else {}),
        urn=urn,
        name=urn.split("::", 3)[3],
    )


def analyze_request(reg: Registration, by_urn: dict[str, Registration]) -> Any:
    return analyzer_pb2.AnalyzeRequest(
        type=reg.type,
        properties=struct(engine_value(reg.inputs)),
        urn=reg.urn,
        name=reg.name,
        options=analyzer_pb2.AnalyzerResourceOptions(parent=reg.parent),
        provider=provider_message(reg, by_urn),
    )


def stack_request(resources: list[Registration]) -> Any:
    by_urn = {r.urn: r for r in resources}
    return analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(
                type=reg.type,
                properties=struct(engine_value(reg.outputs or reg.inputs)),
                urn=reg.urn,
                name=reg.name,
                options=analyzer_pb2.AnalyzerResourceOptions(parent=reg.parent),
                provider=provider_message(reg, by_urn),
                parent=reg.parent,
                dependencies=reg.dependencies,
            )
            for reg in resources
        ]
    )


def deployment_reg(name: str, props: dict[str, Any]) -> Registration:
    return Registration(
        urn=f"urn:pulumi:lab::gpu-platform::kubernetes:apps/v1:Deployment::{name}",
        type="kubernetes:apps/v1:Deployment",
        name=name,
        custom=True,
        inputs=props,
        outputs=props,
        secret_inputs=[],
        parent="urn:pulumi:lab::gpu-platform::pulumi:pulumi:Stack::gpu-platform-lab",
        provider="",
        dependencies=[],
        property_dependencies={},
        options={},
    )


def test_get_analyzer_info_lists_the_six_policies(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "gpu-platform-policies"
    assert info.supportsConfig
    policies = {p.name: p for p in info.policies}
    assert set(policies) == set(POLICY_NAMES)
    assert all(p.enforcementLevel == analyzer_pb2.MANDATORY for p in policies.values())
    assert policies["hami-capacity-fit"].policy_type == analyzer_pb2.POLICY_TYPE_STACK
    assert policies["hami-gpu-requests"].policy_type == analyzer_pb2.POLICY_TYPE_RESOURCE
    schema = policies["tenant-datastore-separation"].configSchema
    assert "requireDedicatedDataStore" in schema.properties


def test_analyze_reports_a_violating_resource_and_passes_a_clean_one(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
) -> None:
    configure(analyzer, "lab")
    bad = deployment_reg("bad", deployment("bad", pod_spec([container(gpu(memory="20Gi"))])))
    response = engine_analyze(analyzer, analyze_request(bad, {}))
    assert [d.policyName for d in response.diagnostics] == ["hami-gpu-requests"]
    diagnostic = response.diagnostics[0]
    assert diagnostic.enforcementLevel == analyzer_pb2.MANDATORY
    assert "nvidia.com/gpumem is '20Gi'" in diagnostic.message
    assert "20480" in diagnostic.message
    assert diagnostic.policyPackName == "gpu-platform-policies"

    good = deployment_reg("good", deployment("good", pod_spec([container(gpu())])))
    assert list(engine_analyze(analyzer, analyze_request(good, {})).diagnostics) == []


def test_analyze_during_preview_ignores_unknowns(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    configure(analyzer, "lab")
    props = deployment("u", pod_spec([container(gpu(memory="<unknown>"))]), replicas="<unknown>")
    response = engine_analyze(analyzer, analyze_request(deployment_reg("u", props), {}))
    assert list(response.diagnostics) == []


def test_lab_only_parts_depend_on_the_stacks_policy_config(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
) -> None:
    props = deployment("completer", pod_spec([container({"cpu": "100m"})]))
    props["metadata"]["labels"]["gpu-platform.io/lab-only"] = "true"
    request = analyze_request(deployment_reg("completer", props), {})
    configure(analyzer, "lab")
    assert list(engine_analyze(analyzer, request).diagnostics) == []
    configure(analyzer, "prod")
    response = engine_analyze(analyzer, request)
    assert [d.policyName for d in response.diagnostics] == ["lab-only-components"]
    configure(analyzer, "lab")


def test_analyze_stack_finds_the_capacity_violation(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
) -> None:
    configure(analyzer, "lab")
    clean = analyzer.AnalyzeStack(stack_request(lab_like().resources))
    assert list(clean.diagnostics) == []
    broken = analyzer.AnalyzeStack(stack_request(lab_like(workload_memory=30000.0).resources))
    assert [d.policyName for d in broken.diagnostics] == ["hami-capacity-fit"]
    diagnostic = broken.diagnostics[0]
    assert diagnostic.urn.endswith("::tenant-b-inference-sample")
    assert diagnostic.enforcementLevel == analyzer_pb2.MANDATORY
    assert (
        "CardInsufficientMemory — 30000 MiB requested, largest card 24576 MiB" in diagnostic.message
    )


def test_analyze_stack_on_the_recorded_lab_preview(
    analyzer: analyzer_pb2_grpc.AnalyzerStub, recordings: Callable[[str, bool], Recording]
) -> None:
    recording = recordings("lab", True)
    assert recording.error is None, recording.error
    configure(analyzer, "lab")
    response = analyzer.AnalyzeStack(stack_request(recording.resources))
    mandatory = [
        d.message for d in response.diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY
    ]
    assert mandatory == []
    assert not any("can't run policy" in d.message for d in response.diagnostics)


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_recorded_resource_passes_remediate_and_analyze(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
    recordings: Callable[[str, bool], Recording],
    stack: str,
) -> None:
    """The shipped stacks, resource by resource as the engine sends them at preview: no
    remediation, no mandatory violation, no policy that fails to run."""
    recording = recordings(stack, True)
    configure(analyzer, stack)
    by_urn = recording.by_urn()
    problems = []
    for reg in recording.resources:
        if not reg.custom:
            continue
        for diagnostic in engine_analyze(analyzer, analyze_request(reg, by_urn)).diagnostics:
            if diagnostic.enforcementLevel == analyzer_pb2.MANDATORY or "can't run" in (
                diagnostic.message
            ):
                problems.append(f"{reg.name}: {diagnostic.policyName}: {diagnostic.message}")
    configure(analyzer, "lab")
    assert problems == []
