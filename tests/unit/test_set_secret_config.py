"""scripts/set_secret_config.py: the prod PR preview's secret config, from one repository secret.

A stand-in ``pulumi`` on PATH records each call and its stdin, so the script runs here as in CI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from components.config import required_secret_keys
from components.stack import parse_platform
from tests.support.harness import REPO_ROOT, load_stack_config

SCRIPT = REPO_ROOT / "scripts" / "set_secret_config.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("set_secret_config", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


script = _module()


def _prod_keys() -> list[str]:
    keys: list[str] = required_secret_keys(
        parse_platform(load_stack_config("prod")["gpu-platform:platform"])
    )
    return keys


def test_the_prod_stack_file_holds_none_of_its_secrets() -> None:
    """Why CI needs this: the committed file has no `secure:` value for any key it names."""
    assert _prod_keys() == [
        "llmBackupTarget",
        "managementKubeconfig",
        "speechDatastoreCredentials",
        "visionBackupTarget",
    ]
    assert script.committed_secrets(load_stack_config("prod")) == set()


def test_plan_sets_what_is_given_and_names_what_is_missing() -> None:
    result = script.plan(["a", "b", "c"], {"a": "1", "x": "9"}, committed={"c"})
    assert result.to_set == {"a": "1"}
    assert result.missing == ["b"]
    assert result.unused == ["x"]


def test_committed_secrets_are_read_from_the_stack_file() -> None:
    config = {"gpu-platform:a": {"secure": "v1:abc"}, "b": {"secure": "v1:d"}, "c": "plain"}
    assert script.committed_secrets(config) == {"a", "b"}


@pytest.fixture
def fake_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "calls.jsonl"
    tool = tmp_path / "pulumi"
    tool.write_text(
        "#!/usr/bin/env python3\n"
        "import json, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps({'args': sys.argv[1:], 'stdin': sys.stdin.read()}) + '\\n')\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return log


def test_every_secret_the_stack_names_is_set_from_stdin(
    fake_pulumi: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    values = {key: f"value of {key}\nsecond line" for key in _prod_keys()}
    monkeypatch.setenv("PULUMI_SECRET_CONFIG", json.dumps(values))
    assert script.main(["set_secret_config.py", "prod"]) == 0
    calls = [json.loads(line) for line in fake_pulumi.read_text().splitlines()]
    assert [call["args"] for call in calls] == [
        ["config", "set", "--secret", "--stack", "prod", key] for key in _prod_keys()
    ]
    assert [call["stdin"] for call in calls] == [values[key] for key in _prod_keys()]
    assert "second line" not in capsys.readouterr().out  # values never echoed


def test_a_missing_secret_fails_naming_it_and_sets_nothing(
    fake_pulumi: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULUMI_SECRET_CONFIG", json.dumps({"managementKubeconfig": "k"}))
    assert script.main(["set_secret_config.py", "prod"]) == 1
    assert not fake_pulumi.exists()
    err = capsys.readouterr().err
    assert "speechDatastoreCredentials" in err
    assert "PULUMI_SECRET_CONFIG" in err


def test_not_json_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_SECRET_CONFIG", "managementKubeconfig=abc")
    assert script.main(["set_secret_config.py", "prod"]) == 1
