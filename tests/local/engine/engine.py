"""The real Pulumi CLI on the prod stack, for the real-engine tier (``tests/local/engine``).

``EngineTools`` are the binaries ``scripts/local_e2e/build-pulumi-tools.sh`` built into the
per-user cache; ``Project`` is a working directory for one stack (a local file backend, a
passphrase secrets provider, the test PULUMI_HOME); ``Project.run`` runs one operation in a child
process (``tests.local.engine.driver``) and returns an ``Outcome``: the engine's events and the
state the stack was left in.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.harness import run_child

REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "local_e2e" / "build-pulumi-tools.sh"
POLICY_PACK = REPO_ROOT / "policies"
# The pack as an executable analyzer plugin (its own comment says why).
POLICY_PACK_LAUNCHER = Path(__file__).resolve().parent / "bin" / "policy-pack"
PROJECT = "gpu-platform"
PASSPHRASE = "gpu-platform-local-e2e-only"
# The Python SDK packages pin the plugin version they ask the engine for (pulumi-plugin.json in
# each package): requirements.txt's pins.
PINNED_PLUGINS = {"kubernetes": "4.34.2", "command": "1.2.1"}


@dataclass(frozen=True)
class EngineTools:
    """The cache directory the build script filled."""

    root: Path

    @property
    def cli(self) -> Path:
        return self.root / "bin" / "pulumi"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def versions(self) -> dict[str, str]:
        data: dict[str, str] = json.loads((self.root / "versions.json").read_text())
        return data

    def installed_plugin_dir(self, name: str) -> Path:
        return self.home / "plugins" / f"resource-{name}-v{self.versions[name]}"


@dataclass
class Outcome:
    """What one operation did."""

    op: str
    error: str | None
    events: list[dict[str, Any]]
    state: list[dict[str, Any]]
    stdout: str = ""
    stderr: str = ""
    change_summary: dict[str, int] = field(default_factory=dict)

    def pre(self) -> list[dict[str, Any]]:
        """The steps the engine started, in order (``resourcePreEvent``)."""
        return [e for e in self.events if e["kind"] == "pre"]

    def stepped_urns(self) -> set[str]:
        return {e["urn"] for e in self.pre()}

    def ops(self) -> dict[str, str]:
        """URN -> the operation the engine planned for it."""
        return {e["urn"]: e["op"] for e in self.pre()}

    def errors(self) -> list[str]:
        return [
            e["message"] for e in self.events if e["kind"] == "diag" and e["severity"] == "error"
        ]

    def policy_events(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "policy"]

    def summary(self) -> dict[str, Any]:
        found = [e for e in self.events if e["kind"] == "summary"]
        return found[-1] if found else {}

    def state_urns(self) -> set[str]:
        return {r["urn"] for r in self.state}


@dataclass
class Project:
    """One stack of the project in its own working directory."""

    tools: EngineTools
    directory: Path
    stack: str
    environment: dict[str, str]

    @classmethod
    def create(
        cls, tools: EngineTools, directory: Path, stack: str, environment: dict[str, str]
    ) -> Project:
        """The project file, with the provider override (below), the stack file, a state
        directory and a PULUMI_HOME of the session whose plugins are the cache's."""
        directory.mkdir(parents=True, exist_ok=True)
        project = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())
        # The kubernetes provider built here is v4.25.0, the program asks for 4.34.2 (the pinned
        # SDK's pulumi-plugin.json). A project plugin with a path and no version answers every
        # version the program asks for (pulumi/pulumi v3.274.0,
        # sdk/go/common/workspace/plugins.go:2181-2208), so the override is in this test copy of
        # Pulumi.yaml, visible, and the plugin is installed under its own version, never under
        # the pin. The engine records the version the program asked for in the provider's inputs.
        project["plugins"] = {
            "providers": [
                {"name": "kubernetes", "path": str(tools.installed_plugin_dir("kubernetes"))}
            ]
        }
        # The program's directory is the repository, as when `pulumi up` runs there: the engine
        # starts the providers in it (the plugin context's working directory is the project's
        # `main`), and the program's Helm releases name their charts relative to it
        # (`.charts/...`, components.chart_cache).
        project["main"] = str(REPO_ROOT)
        (directory / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
        shutil.copyfile(REPO_ROOT / f"Pulumi.{stack}.yaml", directory / f"Pulumi.{stack}.yaml")
        state = directory / "state"
        state.mkdir(exist_ok=True)
        home = directory / "home"
        (home / "plugins").mkdir(parents=True, exist_ok=True)
        for plugin in (tools.home / "plugins").iterdir():
            target = home / "plugins" / plugin.name
            if not target.exists():
                target.symlink_to(plugin)
        # The kubernetes provider writes every explicit kubeconfig it is given to a temp file
        # for Helm and never removes it (pulumi-kubernetes v4.25.0
        # provider/pkg/provider/util.go:125-132, provider.go:774-778; still so on its main
        # branch of 2026-07-01): keep those secrets in this stack's directory (under pytest's
        # tmp_path_factory), not the session's temp dir.
        scratch = directory / "tmp"
        scratch.mkdir(exist_ok=True)
        env = {
            **environment,
            "TMPDIR": str(scratch),
            "PULUMI_BACKEND_URL": f"file://{state}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_HOME": str(home),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            # Nothing may be downloaded: a plugin that is not here is an error, not a fetch.
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
            "PATH": os.pathsep.join([str(tools.cli.parent), os.environ["PATH"]]),
        }
        return cls(tools, directory, stack, env)

    def run(self, op: str, timeout: float = 600.0, **options: Any) -> Outcome:
        request = {
            "op": op,
            "work_dir": str(self.directory),
            "stack": self.stack,
            "pulumi_home": self.environment["PULUMI_HOME"],
            "cli_root": str(self.tools.root),
            "env": self.environment,
            **options,
        }
        data = run_child(
            "tests.local.engine.driver",
            request,
            timeout,
            environment=self.environment,
            import_paths=(REPO_ROOT,),  # not policies/: the CLI runs the pack itself
        )
        return Outcome(
            op=op,
            error=data["error"],
            events=data["events"],
            state=data["state"],
            stdout=data.get("stdout", ""),
            stderr=data.get("stderr", ""),
            change_summary=data.get("change_summary", {}),
        )
