"""scripts/preflight.py: what each make target needs on PATH, one line per missing tool with its
install command, and the Pulumi CLI against the SDK requirements.txt pins."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from components.lab import host_tools
from components.lab import preflight as lab_preflight
from tests.support.harness import REPO_ROOT


@pytest.fixture(scope="module")
def tools() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "tools_preflight", REPO_ROOT / "scripts" / "preflight.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_target_needs_the_cli_and_the_lab_also_docker_kind_kubectl(tools: ModuleType) -> None:
    assert tools.needed("preview", "lab") == ("pulumi",)
    assert tools.needed("preview", "prod") == ("pulumi",)
    assert set(tools.needed("lab", "lab")) == {"pulumi", "docker", "kind", "kubectl"}
    assert set(tools.needed("destroy", "lab")) == {"pulumi", "docker", "kind"}
    assert tools.needed("destroy", "prod") == ("pulumi",)


def test_one_line_per_missing_tool_each_with_its_install_command(tools: ModuleType) -> None:
    failed, notes = tools.problems(
        ("pulumi", "docker", "kind", "kubectl"), {"docker": None}, "3.272.0"
    )
    assert notes == []
    assert [line.split("`", 2)[1] for line in failed] == ["pulumi", "kind", "kubectl"]
    assert "get.pulumi.com | sh -s -- --version 3.272.0" in failed[0]
    assert "https://kind.sigs.k8s.io/dl/v0.31.0/kind-linux-amd64" in failed[1]
    assert "https://dl.k8s.io/release/v1.35.0/bin/linux/amd64/kubectl" in failed[2]
    assert all("\n" not in line for line in failed)


def test_the_cli_is_refused_below_the_minimum_and_noted_when_it_is_not_the_sdks(
    tools: ModuleType,
) -> None:
    old, _ = tools.problems(("pulumi",), {"pulumi": "v3.150.2\n"}, "3.272.0")
    assert len(old) == 1
    assert "v3.150.2, older than v3.200.0" in old[0]
    assert "--version 3.272.0" in old[0]
    other, notes = tools.problems(("pulumi",), {"pulumi": "v3.260.0\n"}, "3.272.0")
    assert other == []
    assert len(notes) == 1
    assert "v3.260.0" in notes[0]
    assert "3.272.0" in notes[0]
    assert tools.problems(("pulumi",), {"pulumi": "v3.272.0\n"}, "3.272.0") == ([], [])


def test_gather_asks_only_for_the_clis_version(tools: ModuleType) -> None:
    found = tools.gather(
        ("pulumi", "kind", "docker"),
        which=lambda tool: f"/usr/bin/{tool}" if tool != "docker" else None,
        pulumi_version=lambda: "v3.272.0",
    )
    assert found == {"pulumi": "v3.272.0", "kind": None}


def test_the_minimum_is_the_lab_host_preflights(tools: ModuleType) -> None:
    assert tools.MIN_PULUMI == lab_preflight.MIN_PULUMI


def test_the_hinted_cli_is_the_one_ci_installs() -> None:
    sdk = host_tools.pinned_sdk_version()
    for workflow in sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml")):
        pinned = re.findall(r'PULUMI_VERSION: "([^"]+)"', workflow.read_text())
        assert set(pinned) <= {sdk}, workflow.name
    assert f"--version {sdk}" in host_tools.install_hints()["pulumi"]


def test_the_lab_host_preflight_prints_the_same_hints() -> None:
    facts = lab_preflight.HostFacts(system="Linux", docker_reachable=False, cpus=8)
    problems = lab_preflight.failures(facts)
    for tool in ("docker", "kind", "kubectl", "pulumi"):
        assert host_tools.missing_tool(tool) in problems


def test_main_exits_non_zero_naming_the_target(
    tools: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tools.shutil, "which", lambda tool: None)
    assert tools.main(["--stack", "prod", "preview"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"preflight (make preview): {host_tools.missing_tool('pulumi')}"]


def test_the_script_runs_without_the_virtualenvs_packages() -> None:
    """It runs before `make venv`: only the standard library and components.versions."""
    source = (REPO_ROOT / "components" / "lab" / "host_tools.py").read_text()
    imported = set(re.findall(r"^(?:from|import) ([\w.]+)", source, re.M))
    assert imported <= {"__future__", "platform", "re", "pathlib", "types", "components.versions"}
    script = (REPO_ROOT / "scripts" / "preflight.py").read_text()
    imported = set(re.findall(r"^(?:from|import) ([\w.]+)", script, re.M))
    assert imported <= {
        "__future__",
        "argparse",
        "re",
        "shutil",
        "subprocess",
        "sys",
        "collections.abc",
        "pathlib",
        "components.lab",
    }
    assert not Path(REPO_ROOT / "components" / "lab" / "__init__.py").read_text().count("import")


@pytest.mark.parametrize(
    ("machine", "arch"), [("x86_64", "amd64"), ("aarch64", "arm64"), ("arm64", "arm64")]
)
def test_install_lines_pick_the_hosts_architecture(machine: str, arch: str) -> None:
    hints = host_tools.install_hints("3.200.0", machine=machine)
    assert f"kind-linux-{arch} " in hints["kind"]
    assert f"/bin/linux/{arch}/kubectl " in hints["kubectl"]
    other = "arm64" if arch == "amd64" else "amd64"
    assert other not in hints["kind"] + hints["kubectl"]
