"""The real-engine tier's tools are what docs/testing.md says they are: the CLI at the release its
pinned module names, the kubernetes provider installed under its own version and never under the
program's pin, and no plugin that could be fetched at run time."""

from __future__ import annotations

import json
import re
import subprocess

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime.proto import provider_pb2_grpc

from tests.local.engine.engine import PINNED_PLUGINS, REPO_ROOT, EngineTools


def go_mod_version(path: str, module: str) -> str:
    text = (REPO_ROOT / path).read_text()
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", text, re.MULTILINE)
    assert match, f"{path} does not require {module}"
    return match.group(1)


def test_the_cli_is_the_release_its_module_pins(engine_tools: EngineTools) -> None:
    pinned = go_mod_version("tests/local/tools/pulumi/go.mod", "github.com/pulumi/pulumi/pkg/v3")
    reported = subprocess.run(
        [str(engine_tools.cli), "version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert reported == pinned
    assert engine_tools.versions["cli"] == pinned.removeprefix("v")


def test_the_kubernetes_provider_is_installed_under_its_own_version_only(
    engine_tools: EngineTools,
) -> None:
    listed = subprocess.run(
        [str(engine_tools.cli), "plugin", "ls", "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={"PULUMI_HOME": str(engine_tools.home), "PULUMI_SKIP_UPDATE_CHECK": "true"},
    )
    plugins = {(p["name"], p["kind"], p["version"]) for p in json.loads(listed.stdout)}
    built = engine_tools.versions["kubernetes"]
    assert plugins == {("kubernetes", "resource", built)}
    # Never under the program's pin: the engine would then take the v4.25.0 build for 4.34.2.
    assert built != PINNED_PLUGINS["kubernetes"]
    module = go_mod_version(
        "tests/local/tools/pulumi/kubernetes/go.mod",
        "github.com/pulumi/pulumi-kubernetes/provider/v4",
    )
    assert engine_tools.versions["kubernetesModule"] == module


def test_the_provider_reports_the_version_it_is_installed_under(engine_tools: EngineTools) -> None:
    """The version is linked in at build time (pkg/version.Version) and the engine records what
    the provider reports (GetPluginInfo): a binary that reported another version would be
    recorded in state under it."""
    binary = engine_tools.installed_plugin_dir("kubernetes") / "pulumi-resource-kubernetes"
    proc = subprocess.Popen([str(binary)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            info = provider_pb2_grpc.ResourceProviderStub(channel).GetPluginInfo(
                empty_pb2.Empty(), timeout=30
            )
        assert info.version == engine_tools.versions["kubernetes"]
    finally:
        proc.kill()
        proc.wait()
