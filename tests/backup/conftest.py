"""A real etcd with TLS client-certificate auth set up as Kamaji sets up tenants, and a real S3
server (moto) that checks every request's signature.

etcd and etcdctl are Debian's ``etcd-server``/``etcd-client`` (3.4.23); moto and botocore live in
tests/backup/.venv (tests/backup/requirements-s3.txt). .ci/run installs both and sets CI, and in
CI a missing one fails the tests; elsewhere they skip with one line naming what is missing.

Tenants mirror clastix/kamaji 26.8.2-edge internal/datastore/etcd.go:60-75: a user and a role
per tenant, the role granted READWRITE on the prefix ``/<schema>/`` (``--prefix``), and a client
certificate whose CN is the user (internal/resources/datastore/datastore_certificate.go).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "backup"
S3_PYTHON = Path(os.environ.get("BACKUP_TEST_S3_PYTHON", ROOT / "tests/backup/.venv/bin/python"))
USERS = ("root", "tenant_a", "tenant_b")
BUCKET = "tenant-backups"


def require(ok: bool, reason: str) -> None:
    """Skip with one line, or fail under CI, where .ci/run installed everything."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI installs it: .ci/run)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_cert(
    directory: Path,
    name: str,
    common_name: str,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    server: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    cert = builder.sign(issuer[1] if issuer else key, hashes.SHA256())
    (directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{name}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


@dataclass
class Etcd:
    endpoint: str
    certs: Path

    def env(self, user: str) -> dict[str, str]:
        """etcdctl's own environment variables, as the Job sets them from the tenant's Secret."""
        return {
            "PATH": os.environ["PATH"],
            "ETCDCTL_API": "3",
            "ETCDCTL_ENDPOINTS": self.endpoint,
            "ETCDCTL_CACERT": str(self.certs / "ca.crt"),
            "ETCDCTL_CERT": str(self.certs / f"{user}.crt"),
            "ETCDCTL_KEY": str(self.certs / f"{user}.key"),
        }

    def ctl(
        self, *args: str, user: str = "root", stdin: bytes | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        result = subprocess.run(
            ["etcdctl", *args],
            env=self.env(user),
            input=stdin,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"etcdctl {args} failed: {result.stderr.decode()}")
        return result

    def dump(self, prefix: str) -> tuple[int, dict[bytes, dict[str, Any]]]:
        """Everything under ``prefix`` read as root: revision and, per key, value and etcd's
        bookkeeping (create/mod revision, version, lease)."""
        data = json.loads(self.ctl("get", "--prefix", prefix, "-w", "json").stdout)
        kvs = {}
        for item in data.get("kvs", []):
            kvs[base64.b64decode(item["key"])] = {
                "value": base64.b64decode(item.get("value", "")),
                "create_revision": item.get("create_revision"),
                "mod_revision": item.get("mod_revision"),
                "version": item.get("version"),
                "lease": item.get("lease", 0),
            }
        return int(data["header"]["revision"]), kvs

    def put(self, key: bytes | str, value: bytes, lease: str | None = None) -> None:
        """A put whose value travels on stdin, the path etcd-import.sh relies on; the seeds are
        read back through ``get -w json`` (base64), so a lossy stdin would show there."""
        key_text = key.decode() if isinstance(key, bytes) else key
        args = ["put", *(["--lease", lease] if lease else []), "--", key_text]
        if value:
            self.ctl(*args, stdin=value)
        else:
            self.ctl(*args, "")


class EtcdProcess:
    """One etcd server as a process that a test may kill and start again on the same data (the
    fault drill's etcd dying mid-import)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        certs = base / "certs"
        certs.mkdir()
        ca = _write_cert(certs, "ca", "test etcd CA", None)
        _write_cert(certs, "server", "etcd", ca, server=True)
        for user in USERS:
            _write_cert(certs, user, user, ca)
        client, self.peer = free_port(), free_port()
        self.server = Etcd(f"https://127.0.0.1:{client}", certs)
        self.process: subprocess.Popen[bytes] | None = None
        self.start()
        self.server.ctl("user", "add", "root", "--no-password")
        self.server.ctl("user", "grant-role", "root", "root")
        for tenant in ("tenant_a", "tenant_b"):
            self.server.ctl("user", "add", tenant, "--no-password")
            self.server.ctl("role", "add", tenant)
            self.server.ctl(
                "role", "grant-permission", tenant, "--prefix=true", "readwrite", f"/{tenant}/"
            )
            self.server.ctl("user", "grant-role", tenant, tenant)
        self.server.ctl("auth", "enable")

    def start(self) -> None:
        certs, endpoint, peer = self.server.certs, self.server.endpoint, self.peer
        log = (self.base / "etcd.log").open("ab")
        self.process = subprocess.Popen(
            [
                "etcd",
                "--name=test",
                f"--data-dir={self.base / 'data'}",
                f"--listen-client-urls={endpoint}",
                f"--advertise-client-urls={endpoint}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=test=http://127.0.0.1:{peer}",
                f"--cert-file={certs / 'server.crt'}",
                f"--key-file={certs / 'server.key'}",
                f"--trusted-ca-file={certs / 'ca.crt'}",
                "--client-cert-auth",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 30
        while self.server.ctl("endpoint", "health", check=False).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"etcd did not start: {(self.base / 'etcd.log').read_text()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL, as a crashed or OOM-killed member dies."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


def _require_etcd() -> None:
    require(
        shutil.which("etcd") is not None and shutil.which("etcdctl") is not None,
        "etcd/etcdctl not installed (Debian: apt-get install -y etcd-server etcd-client)",
    )


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    _require_etcd()
    member = EtcdProcess(tmp_path_factory.mktemp("etcd"))
    try:
        yield member.server
    finally:
        member.stop()


@pytest.fixture
def own_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    """An etcd of the test's own, which it may kill (the shared one serves the other tests)."""
    _require_etcd()
    member = EtcdProcess(tmp_path_factory.mktemp("own-etcd"))
    try:
        yield member
    finally:
        member.stop()


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    key_file: Path
    """The tenant's archive key, as the target Secret's ``archive.key`` (64 hex digits)."""

    def env(self, prefix: str) -> dict[str, str]:
        """The target Secret's environment: the store, the tenant's credential and its key."""
        return {
            "S3_ENDPOINT": self.endpoint,
            "S3_REGION": "us-east-1",
            "S3_BUCKET": BUCKET,
            "S3_PREFIX": prefix,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "BACKUP_KEY_FILE": str(self.key_file),
        }

    @property
    def key(self) -> bytes:
        return bytes.fromhex(self.key_file.read_text().strip())


@pytest.fixture(scope="session")
def s3_python() -> Path:
    require(
        S3_PYTHON.is_file(),
        f"{S3_PYTHON.relative_to(ROOT) if S3_PYTHON.is_relative_to(ROOT) else S3_PYTHON} missing "
        "(python3 -m venv tests/backup/.venv && tests/backup/.venv/bin/pip install "
        "-r tests/backup/requirements-s3.txt)",
    )
    return S3_PYTHON


@pytest.fixture(scope="session")
def s3(s3_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's server with IAM auth on: after the three set-up calls every request must carry a
    valid SigV4 signature of an existing key."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("moto") / "moto.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [str(s3_python), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"moto did not start: {log_path.read_text()}") from None
                time.sleep(0.2)
        out = subprocess.run(
            [
                str(s3_python),
                str(Path(__file__).with_name("s3_oracle.py")),
                "setup",
                endpoint,
                BUCKET,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        keys = json.loads(out.stdout)
        key_file = tmp_path_factory.mktemp("archive-key") / "archive.key"
        key_file.write_text(os.urandom(32).hex() + "\n")
        yield S3Server(endpoint, keys["access_key"], keys["secret_key"], key_file)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture
def s3_prefix(request: pytest.FixtureRequest) -> str:
    """Each test's own object prefix in the shared bucket."""
    return str(request.node.name).replace("[", "-").replace("]", "").replace("_", "-") + "/"


def run_script(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_tool(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "tenant_backup.py"), command],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def load_tool() -> Any:
    """scripts/backup/tenant_backup.py as a module (scripts/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tenant_backup", SCRIPTS / "tenant_backup.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tenant_backup"] = module
    spec.loader.exec_module(module)
    return module
