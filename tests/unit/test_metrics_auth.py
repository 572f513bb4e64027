"""Issue 40 point 7: the central Prometheus' query API and remote-write receiver ask for a
password (components/metrics/auth.py), and everything that talks to it sends it, from a file.

The builders are checked here; ``test_a_real_prometheus_*`` starts the prometheus and promtool
binaries (Debian's package, which .ci/run installs) on 127.0.0.1 with the rendered web config."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import bcrypt
import pytest
import yaml

from components.metrics import auth, objects, scrape
from components.metrics.dashboards import platform_dashboard
from components.metrics.scrape import HAMI_SOURCES

PASSWORD = "5e" * 32  # what the fake new-secret.sh prints
OTHER = "a1" * 32
API = objects.tenant_api_server("tenant-a", "tenant-a", 6443)
CONFIG = objects.prometheus_config("30s", "kamaji-system")
PROVISIONING = objects.grafana_provisioning()
DASHBOARDS = objects.grafana_dashboards(platform_dashboard())
AGENT_CONFIG = objects.agent_config_map("tenant-a", "tenant-a", API, HAMI_SOURCES, "30s")


def _web(password: str = PASSWORD) -> dict[str, Any]:
    return objects.web_config(auth.password_hash(password))


def _central(password: str = PASSWORD) -> dict[str, Any]:
    return objects.prometheus_deployment("15d", {"emptyDir": {}}, CONFIG, _web(password))


def _grafana(password: str = PASSWORD) -> dict[str, Any]:
    return objects.grafana_deployment(PROVISIONING, DASHBOARDS, _web(password))


def _pod(deployment: Mapping[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def _digest(deployment: Mapping[str, Any]) -> str:
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    return str(annotations[objects.CONFIG_DIGEST_ANNOTATION])


def _source_of(deployment: Mapping[str, Any], path: str) -> tuple[str, str, str]:
    """(volume kind, object name, key) a file in the pod's first container comes from."""
    pod = _pod(deployment)
    file = PurePosixPath(path)
    [mount] = [
        m
        for m in pod["containers"][0]["volumeMounts"]
        if PurePosixPath(m["mountPath"]) == file.parent and "subPath" not in m
    ]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    if "secret" in volume:
        return "secret", volume["secret"]["secretName"], file.name
    return "configMap", volume["configMap"]["name"], file.name


# ------------------------------------------------------------------------------ the hash


def test_the_hash_is_bcrypt_of_the_password_and_the_same_on_every_run() -> None:
    """A random salt would change the web config, the pod template's digest, and so restart
    Prometheus (and Grafana) on every `pulumi up`."""
    hashed = auth.password_hash(PASSWORD)
    assert hashed.startswith(f"$2b${auth.COST:02d}$")
    assert bcrypt.checkpw(PASSWORD.encode(), hashed.encode())
    assert not bcrypt.checkpw(OTHER.encode(), hashed.encode())
    assert auth.password_hash(PASSWORD) == hashed
    assert auth.password_hash(OTHER) != hashed
    assert auth.bcrypt_salt(OTHER) != auth.bcrypt_salt(PASSWORD)
    with pytest.raises(ValueError, match="empty"):
        auth.password_hash("")


def test_the_same_password_keeps_the_pods_and_a_new_one_restarts_them() -> None:
    assert _digest(_central()) == _digest(_central())
    assert _digest(_grafana()) == _digest(_grafana())
    # Rotation: Prometheus (its web config) and Grafana (which reads the password at start).
    assert _digest(_central(OTHER)) != _digest(_central())
    assert _digest(_grafana(OTHER)) != _digest(_grafana())


# ------------------------------------------------------------------ the central Prometheus


def test_the_central_prometheus_serves_behind_the_web_config() -> None:
    deployment = _central()
    args = _pod(deployment)["containers"][0]["args"]
    [flag] = [a for a in args if a.startswith("--web.config.file=")]
    path = flag.removeprefix("--web.config.file=")
    kind, name, key = _source_of(deployment, path)
    web = _web()
    assert (kind, name) == ("configMap", web["metadata"]["name"])
    assert yaml.safe_load(web["data"][key]) == {
        "basic_auth_users": {auth.USERNAME: auth.password_hash(PASSWORD)}
    }


def test_the_readiness_probe_authenticates_without_the_password_in_the_pod_spec() -> None:
    """No path is exempt from the web config's basic auth (exporter-toolkit v0.14.0
    web/handler.go:88-143), so an httpGet of /-/ready would always fail; a header in the probe
    would put the password in the pod spec."""
    deployment = _central()
    probe = _pod(deployment)["containers"][0]["readinessProbe"]
    assert "httpGet" not in probe
    command = probe["exec"]["command"]
    assert command[:3] == ["promtool", "check", "ready"]
    [flag] = [c for c in command if c.startswith("--http.config.file=")]
    kind, name, key = _source_of(deployment, flag.removeprefix("--http.config.file="))
    assert (kind, name) == ("configMap", objects.WEB_CONFIG)
    client = yaml.safe_load(_web()["data"][key])
    kind, name, key = _source_of(deployment, client["basic_auth"]["password_file"])
    assert (kind, name, key) == ("secret", objects.AUTH_SECRET, auth.PASSWORD_KEY)


def test_the_central_prometheus_scrapes_itself_with_the_password_file() -> None:
    config = yaml.safe_load(CONFIG["data"]["prometheus.yml"])
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == scrape.CENTRAL_JOB]
    assert job["basic_auth"]["username"] == auth.USERNAME
    kind, name, key = _source_of(_central(), job["basic_auth"]["password_file"])
    assert (kind, name, key) == ("secret", objects.AUTH_SECRET, auth.PASSWORD_KEY)


def test_grafanas_datasource_sends_the_password_read_from_the_mounted_secret() -> None:
    datasources = yaml.safe_load(PROVISIONING["data"]["datasources.yaml"])
    [source] = datasources["datasources"]
    assert source["basicAuth"] is True
    assert source["basicAuthUser"] == auth.USERNAME
    reference = source["secureJsonData"]["basicAuthPassword"]
    assert reference.startswith("$__file{")
    assert reference.endswith("}")
    kind, name, key = _source_of(_grafana(), reference.removeprefix("$__file{").removesuffix("}"))
    assert (kind, name, key) == ("secret", objects.AUTH_SECRET, auth.PASSWORD_KEY)


def test_every_tenants_agent_sends_the_password_from_its_token_secret() -> None:
    config = yaml.safe_load(AGENT_CONFIG["data"]["prometheus.yml"])
    [remote] = config["remote_write"]
    assert remote["basic_auth"]["username"] == auth.USERNAME
    agent = objects.agent_deployment("tenant-a", AGENT_CONFIG)
    kind, name, key = _source_of(agent, remote["basic_auth"]["password_file"])
    assert (kind, name, key) == ("secret", objects.AGENT_TOKEN_SECRET, objects.AGENT_PASSWORD_KEY)
    # The agent's own listener has no web config: its self-scrape sends nothing.
    [own] = [j for j in config["scrape_configs"] if j["job_name"] == scrape.AGENT_JOB]
    assert "basic_auth" not in own


def test_an_agent_writing_to_the_operators_prometheus_sends_no_credential_of_ours() -> None:
    url = "http://prometheus-operated.monitoring.svc:9090/api/v1/write"
    config_map = objects.agent_config_map("tenant-a", "tenant-a", API, HAMI_SOURCES, "30s", url)
    [remote] = yaml.safe_load(config_map["data"]["prometheus.yml"])["remote_write"]
    assert remote == {"url": url}


def test_no_manifest_carries_the_password() -> None:
    """The builders see the hash only; the password reaches the cluster in Secrets whose data
    the program registers as Pulumi secrets (tests/program/test_metrics_stack.py)."""
    manifests = [
        *objects.network_policies(),
        CONFIG,
        _web(),
        objects.auth_secret(),
        _central(),
        PROVISIONING,
        _grafana(),
        AGENT_CONFIG,
        objects.agent_token_secret("tenant-a"),
        objects.agent_deployment("tenant-a", AGENT_CONFIG),
    ]
    text = yaml.safe_dump(manifests)
    assert PASSWORD not in text
    assert base64.b64encode(PASSWORD.encode()).decode() not in text


# ------------------------------------------------------------------------- for real

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def _checks_ready() -> bool:
    if PROMTOOL is None:
        return False
    done = subprocess.run(
        [PROMTOOL, "check", "ready", "--help"], capture_output=True, timeout=30, check=False
    )
    return done.returncode == 0


PROMTOOL_CHECKS_READY = _checks_ready()


def test_promtool_accepts_the_rendered_web_config(tmp_path: Path) -> None:
    if PROMTOOL is None:
        pytest.skip("promtool not installed (.ci/run installs Debian's prometheus package)")
    path = tmp_path / objects.WEB_CONFIG_FILE_NAME
    path.write_text(_web()["data"][objects.WEB_CONFIG_FILE_NAME])
    done = subprocess.run(
        [PROMTOOL, "check", "web-config", str(path)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status(url: str, password: str | None = None, data: bytes | None = None) -> int:
    request = urllib.request.Request(url, data=data)
    if password is not None:
        pair = base64.b64encode(f"{auth.USERNAME}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {pair}")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except urllib.error.URLError:
        return 0  # not listening yet


@contextlib.contextmanager
def _prometheus(
    directory: Path, port: int, config: Mapping[str, Any], extra: Sequence[str]
) -> Iterator[str]:
    directory.mkdir()
    (directory / "prometheus.yml").write_text(yaml.safe_dump(dict(config)))
    assert PROMETHEUS is not None
    log = (directory / "log").open("w")
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={directory / 'prometheus.yml'}",
            f"--web.listen-address=127.0.0.1:{port}",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def _query(base: str, expr: str) -> list[Any]:
    request = urllib.request.Request(
        f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    )
    pair = base64.b64encode(f"{auth.USERNAME}:{PASSWORD}".encode()).decode()
    request.add_header("Authorization", f"Basic {pair}")
    with urllib.request.urlopen(request, timeout=5) as reply:
        result: list[Any] = json.load(reply)["data"]["result"]
        return result


def _wait(condition: Any, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


def test_a_real_prometheus_refuses_queries_and_writes_without_the_password(
    tmp_path: Path,
) -> None:
    """The rendered web config, probe client file and basic_auth blocks on a real server and a
    real agent (Debian's prometheus 2.42 here; the cluster runs v3.5.0, whose exporter-toolkit
    v0.14.0 handler is the one cited in components/metrics/auth.py)."""
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("prometheus/promtool not installed (.ci/run installs Debian's package)")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    password_file = secrets / auth.PASSWORD_KEY
    password_file.write_text(PASSWORD + "\n")  # as a Secret key may end; both sides trim it
    web = _web()["data"]
    web_file = tmp_path / objects.WEB_CONFIG_FILE_NAME
    web_file.write_text(web[objects.WEB_CONFIG_FILE_NAME])
    # The probe client file as rendered, pointed at this host's copy of the password.
    client_file = yaml.safe_load(web[objects.PROBE_CLIENT_FILE_NAME])
    client_file["basic_auth"]["password_file"] = str(password_file)
    probe_file = tmp_path / objects.PROBE_CLIENT_FILE_NAME
    probe_file.write_text(yaml.safe_dump(client_file))

    central_port, agent_port = _free_port(), _free_port()
    own = scrape.self_job("central", ("up",), password_file=str(password_file))
    own["static_configs"][0]["targets"] = [f"127.0.0.1:{central_port}"]
    base = f"http://127.0.0.1:{central_port}"
    # A real agent remote-writes its own `up` with the rendered basic_auth block.
    agent_config = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [
            {"job_name": "agent", "static_configs": [{"targets": [f"127.0.0.1:{agent_port}"]}]}
        ],
        "remote_write": [
            {
                "url": f"{base}/api/v1/write",
                **auth.client_basic_auth(str(password_file)),
                "queue_config": {"batch_send_deadline": "1s"},
            }
        ],
    }
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            _prometheus(
                tmp_path / "central",
                central_port,
                {"global": {"scrape_interval": "1s"}, "scrape_configs": [own]},
                [
                    f"--web.config.file={web_file}",
                    "--web.enable-remote-write-receiver",
                    f"--storage.tsdb.path={tmp_path / 'central' / 'data'}",
                ],
            )
        )
        # Both start at once: each Prometheus takes ~5 s before its first scrape (the discovery
        # manager's update throttle), so the agent's wait overlaps the central server's.
        stack.enter_context(
            _prometheus(
                tmp_path / "agent",
                agent_port,
                agent_config,
                ["--enable-feature=agent", f"--storage.agent.path={tmp_path / 'agent' / 'wal'}"],
            )
        )

        def probe(with_client_file: bool) -> bool:
            """The pod's readiness probe: ``promtool check ready`` where this promtool has it
            (2.45 and later; the image's v3.5.0 does), else the request it makes (GET /-/ready
            with the client file's basic auth, prometheus v3.5.0 cmd/promtool/main.go:540-575)."""
            if PROMTOOL_CHECKS_READY:
                flags = [f"--http.config.file={probe_file}"] if with_client_file else []
                done = subprocess.run(
                    [str(PROMTOOL), "check", "ready", *flags, f"--url={base}"],
                    capture_output=True,
                    timeout=15,
                )
                return done.returncode == 0
            client = client_file["basic_auth"]
            password = Path(client["password_file"]).read_text().strip()
            return _status(f"{base}/-/ready", password if with_client_file else None) == 200

        _wait(lambda: probe(True), "the readiness probe with the probe client file")
        assert not probe(False)
        assert _status(f"{base}/-/ready") == 401
        query = f"{base}/api/v1/query?query=up"
        assert _status(query) == 401
        assert _status(query, OTHER) == 401
        assert _status(query, PASSWORD) == 200
        write = f"{base}/api/v1/write"
        assert _status(write, data=b"") == 401
        assert _status(write, OTHER, data=b"") == 401
        # Past the auth: an empty body is refused by the receiver itself, not with 401.
        assert _status(write, PASSWORD, data=b"") not in (401, 404)
        # Its own scrape, with the password file, through its own basic auth.
        _wait(lambda: _values(base, 'up{job="central"}') == ["1"], "the self-scrape's up == 1")
        _wait(lambda: _values(base, 'up{job="agent"}') == ["1"], "the agent's samples centrally")


def _values(base: str, expr: str) -> list[str]:
    return [str(sample["value"][1]) for sample in _query(base, expr)]
