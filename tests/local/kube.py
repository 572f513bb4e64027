"""Real Kubernetes API servers on 127.0.0.1 for the local tier (``tests/local``).

One etcd (the release kube-apiserver v1.35.0 is tested with) and any number of kube-apiservers
on it, each on its own key prefix as Kamaji runs tenant control planes on a shared datastore
(``--etcd-prefix``), optionally with a kube-controller-manager running a chosen set of
controllers. Every server gets certificates made here: a cluster CA that signs the serving
certificate and the client certificates (``--client-ca-file``: the user is the certificate's CN,
its groups the O fields), an admin certificate in ``system:masters``, and a service-account
signing key. The flags are Kamaji's for a tenant where they matter to what is tested
(clastix/kamaji 26.8.2-edge internal/builders/controlplane/deployment.go:690-712, 739):
``--allow-privileged=true``, ``--authorization-mode=Node,RBAC``, the same
``--service-account-issuer``, ``--enable-admission-plugins`` from the TenantControlPlane
(``KAMAJI_ADMISSION_PLUGINS`` on a tenant's server) and ``--etcd-prefix=/<schema>``.

Flags relied on (k8s.io/kubernetes v1.35.0):
* ``--etcd-prefix``: staging/src/k8s.io/apiserver/pkg/server/options/etcd.go:174 (every key
  of the server under it, so two servers on one etcd never see each other's objects);
* ``--client-ca-file``: a client certificate's CN is the user and each O a group
  (staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go:279-296,
  CommonNameUserConversion);
* ``--allow-privileged``: without it a privileged container is refused by validation before
  any admission (pkg/apis/core/validation/validation.go:8367, ``disallowed by cluster policy``);
* ``--service-account-signing-key-file``/``--service-account-issuer``: required by
  pkg/controlplane/apiserver/options/validation.go:44.

Everything lives in a temporary directory that ``close()`` removes after stopping the processes
(SIGTERM, then SIGKILL after a bounded wait). A server that does not become ready in time fails
with one line and the tail of its log.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

READY_TIMEOUT_S = float(os.environ.get("GPU_PLATFORM_LOCAL_READY_TIMEOUT_S", "180"))
STOP_TIMEOUT_S = 15.0
LOG_TAIL_LINES = 25

# What Kamaji runs every tenant API server with when the TenantControlPlane names no admission
# controllers (the program names none): the CRD's default for spec.kubernetes.admissionControllers
# (clastix/kamaji 26.8.2-edge charts/kamaji/crds/kamaji.clastix.io_tenantcontrolplanes.yaml, the
# copy in ../shared/upstream/kamaji/crds, lines 8425-8442). --enable-admission-plugins adds to the
# plugins on by default, ValidatingAdmissionPolicy among them (k8s.io/kubernetes v1.35.0
# pkg/kubeapiserver/options/plugins.go:158-185, DefaultOffAdmissionPlugins).
KAMAJI_ADMISSION_PLUGINS = (
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "LimitRanger",
    "MutatingAdmissionWebhook",
    "NamespaceLifecycle",
    "PersistentVolumeClaimResize",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionWebhook",
)


class ServerStartError(RuntimeError):
    """A tool did not become ready in time (the message carries its log's tail)."""


class KubeError(RuntimeError):
    """A request the API server refused: its status code and Status message."""

    def __init__(self, status: int, body: Mapping[str, Any] | str, what: str) -> None:
        self.status = status
        self.body = body
        self.reason = body.get("reason", "") if isinstance(body, Mapping) else ""
        self.message = str(body.get("message", body)) if isinstance(body, Mapping) else body
        super().__init__(f"{what}: HTTP {status} {self.reason}: {self.message}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


# ------------------------------------------------------------------------------ certificates


@dataclass
class Authority:
    """A CA that signs the serving and client certificates of one directory."""

    directory: Path
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, directory: Path, name: str = "ca") -> Authority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-platform-local-e2e-ca")])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        authority = cls(directory, cert, key)
        authority._write(name, cert, key)
        return authority

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def _write(self, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        (self.directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path = self.directory / f"{name}.key"
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        key_path.chmod(0o600)

    def issue(
        self,
        name: str,
        common_name: str,
        groups: Sequence[str] = (),
        *,
        server: bool = False,
    ) -> tuple[Path, Path]:
        """A certificate for ``common_name`` in ``groups`` (O fields); with ``server`` also valid
        for 127.0.0.1 and localhost. Returns (certificate file, key file)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [
                *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )
        now = dt.datetime.now(dt.UTC)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        self._write(name, cert, key)
        return self.directory / f"{name}.crt", self.directory / f"{name}.key"


def write_kubeconfig(
    path: Path, server: str, ca_file: Path, cert_file: Path, key_file: Path, user: str
) -> Path:
    """A kubeconfig that names the certificate files (mode 600)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(cert_file), "client-key": str(key_file)},
            }
        ],
        "contexts": [{"name": user, "context": {"cluster": "local", "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)
    return path


# ------------------------------------------------------------------------------ processes


@dataclass
class Process:
    """A child process with its log file; ``stop()`` is bounded and idempotent."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, name: str, argv: Sequence[str], log: Path) -> Process:
        with log.open("wb") as out:
            popen = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return cls(name, popen, log)

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=STOP_TIMEOUT_S)

    def failure(self, what: str) -> ServerStartError:
        state = "exited" if self.popen.poll() is not None else "still running"
        return ServerStartError(
            f"{self.name} {what} ({state}, rc={self.popen.returncode}); log tail {self.log}:\n"
            f"{log_tail(self.log)}"
        )


def wait_until(check: Any, process: Process, what: str, timeout: float | None = None) -> None:
    timeout = READY_TIMEOUT_S if timeout is None else timeout
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not process.running():
            raise process.failure(f"exited before {what}")
        try:
            if check():
                return
        except (requests.RequestException, OSError) as error:
            last = f"; last error: {error}"
        time.sleep(0.3)
    raise process.failure(f"not {what} within {timeout:.0f} s{last}")


@dataclass
class Etcd:
    """One etcd member on 127.0.0.1 (plain HTTP: loopback only, a test tier)."""

    endpoint: str
    process: Process

    @classmethod
    def start(cls, binary: Path, directory: Path) -> Etcd:
        directory.mkdir(parents=True, exist_ok=True)
        client, peer = free_port(), free_port()
        endpoint = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        argv = [
            str(binary),
            "--name=local",
            f"--data-dir={directory / 'data'}",
            f"--listen-client-urls={endpoint}",
            f"--advertise-client-urls={endpoint}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=local={peer_url}",
            "--log-level=warn",
            # A test's data is thrown away: no fsync per write (etcd v3.6.6
            # server/embed/config.go UnsafeNoFsync, "--unsafe-no-fsync").
            "--unsafe-no-fsync=true",
        ]
        process = Process.start("etcd", argv, directory / "etcd.log")
        etcd = cls(endpoint, process)

        def healthy() -> bool:
            return bool(
                requests.get(f"{endpoint}/health", timeout=2).json().get("health") == "true"
            )

        try:
            wait_until(healthy, process, "healthy")
        except ServerStartError:
            process.stop()
            raise
        return etcd

    def stop(self) -> None:
        self.process.stop()


# ------------------------------------------------------------------------------ the client


@dataclass(frozen=True)
class ApiResource:
    group_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        where = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        tail = f"/{name}" if name else ""
        return f"{base}{where}/{self.plural}{tail}"


class Kube:
    """A small REST client for one server and one identity (no discovery cache across CRD
    changes: ``refresh()`` after installing CRDs)."""

    def __init__(self, server: str, ca_file: Path, cert_file: Path, key_file: Path) -> None:
        self.server = server
        self.session = requests.Session()
        # Passed with each request, not as session.verify: requests lets REQUESTS_CA_BUNDLE or
        # CURL_CA_BUNDLE from the environment override a session's verify (requests 2.x
        # Session.merge_environment_settings), and this server's CA is the only one to trust.
        self.ca_file = str(ca_file)
        self.session.cert = (str(cert_file), str(key_file))
        self._resources: dict[tuple[str, str], ApiResource] = {}
        # The Warning headers of the last response (RFC 7234 form: ``299 - "text"``).
        self.last_warnings: list[str] = []

    def close(self) -> None:
        self.session.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 60,
    ) -> requests.Response:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        return self.session.request(
            method,
            self.server + path,
            data=data,
            params=dict(params or {}),
            headers=headers,
            timeout=timeout,
            verify=self.ca_file,
        )

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> dict[str, Any]:
        response = self.request(method, path, body, **kwargs)
        self.last_warnings = _warnings(response)
        if response.status_code >= 400:
            try:
                payload: Mapping[str, Any] | str = response.json()
            except ValueError:
                payload = response.text
            raise KubeError(response.status_code, payload, f"{method} {path}")
        result: dict[str, Any] = response.json() if response.content else {}
        return result

    # discovery ------------------------------------------------------------------------------

    def refresh(self) -> None:
        self._resources.clear()

    def _discover(self, group_version: str) -> None:
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        listing = self.call("GET", path)
        for item in listing.get("resources", []):
            if "/" in item["name"]:
                continue  # subresources
            self._resources[(group_version, item["kind"])] = ApiResource(
                group_version, item["kind"], item["name"], bool(item["namespaced"])
            )

    def resource(self, api_version: str, kind: str) -> ApiResource:
        key = (api_version, kind)
        if key not in self._resources:
            self._discover(api_version)
        if key not in self._resources:
            raise KubeError(404, f"no kind {kind} in {api_version}", "discovery")
        return self._resources[key]

    # objects --------------------------------------------------------------------------------

    def _where(self, obj: Mapping[str, Any]) -> tuple[ApiResource, str | None, str]:
        resource = self.resource(str(obj["apiVersion"]), str(obj["kind"]))
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") if resource.namespaced else None
        return resource, namespace, str(meta.get("name", ""))

    def create(
        self, obj: Mapping[str, Any], *, dry_run: bool = False, field_validation: str = "Strict"
    ) -> dict[str, Any]:
        """POST ``obj``; ``dry_run`` asks for ``dryRun=All`` (every admission step and the
        storage's validation run, nothing is persisted)."""
        resource, namespace, _ = self._where(obj)
        params = {"fieldValidation": field_validation}
        if dry_run:
            params["dryRun"] = "All"
        return self.call("POST", resource.path(namespace), obj, params=params)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        resource = self.resource(api_version, kind)
        return self.call("GET", resource.path(namespace, name))

    def apply(self, obj: Mapping[str, Any], manager: str = "local-e2e") -> dict[str, Any]:
        """Server-side apply (force), the way pulumi-kubernetes writes objects by default."""
        resource, namespace, name = self._where(obj)
        return self.call(
            "PATCH",
            resource.path(namespace, name),
            obj,
            params={"fieldManager": manager, "force": "true", "fieldValidation": "Strict"},
            content_type="application/apply-patch+yaml",
        )

    def delete(self, obj: Mapping[str, Any]) -> None:
        resource, namespace, name = self._where(obj)
        response = self.request("DELETE", resource.path(namespace, name), {"gracePeriodSeconds": 0})
        if response.status_code not in (200, 202, 404):
            raise KubeError(response.status_code, response.text, f"DELETE {name}")


def _warnings(response: requests.Response) -> list[str]:
    """The API server's warnings: one ``Warning: 299 - "<text>"`` header each (k8s.io/apiserver
    v0.35.0 pkg/endpoints/filters/warning.go:102-110), read one by one from the raw headers
    (requests joins repeated headers with ", ")."""
    raw = response.raw.headers.getlist("Warning") if response.raw is not None else []
    found = []
    for header in raw:
        text = header.split(" ", 2)[-1] if header.startswith("299 ") else header
        found.append(text.strip().strip('"'))
    return found


# ------------------------------------------------------------------------------ servers


@dataclass
class APIServer:
    """A running kube-apiserver (and optionally kube-controller-manager) on 127.0.0.1.

    ``kubeconfig``: the admin kubeconfig (``system:masters``); ``server``: the URL;
    ``ca_file``: the CA that signs the serving and client certificates;
    ``user_kubeconfig(user, groups)``: a kubeconfig for any other identity;
    ``client(user, groups)``/``admin``: a ``Kube`` REST client."""

    name: str
    server: str
    directory: Path
    authority: Authority
    kubeconfig: Path
    process: Process
    controller_manager: Process | None = None
    _clients: list[Kube] = field(default_factory=list)

    @property
    def ca_file(self) -> Path:
        return self.authority.ca_file

    @property
    def log(self) -> Path:
        return self.process.log

    def _credentials(self, user: str, groups: Sequence[str]) -> tuple[Path, Path]:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        name = f"user-{safe}-{abs(hash((user, tuple(groups)))) % 10**8}"
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        if not cert.is_file():
            cert, key = self.authority.issue(name, user, groups)
        return cert, key

    def user_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for ``user`` in ``groups``, signed by this server's client CA."""
        cert, key = self._credentials(user, groups)
        return write_kubeconfig(
            cert.with_suffix(".kubeconfig"), self.server, self.ca_file, cert, key, user
        )

    def client(self, user: str = "kubernetes-admin", groups: Sequence[str] = ()) -> Kube:
        if user == "kubernetes-admin" and not groups:
            cert = self.directory / "admin.crt"
            key = self.directory / "admin.key"
        else:
            cert, key = self._credentials(user, groups)
        kube = Kube(self.server, self.ca_file, cert, key)
        self._clients.append(kube)
        return kube

    @property
    def admin(self) -> Kube:
        if not self._clients:
            self.client()
        return self._clients[0]

    def stop(self) -> None:
        for kube in self._clients:
            kube.close()
        if self.controller_manager is not None:
            self.controller_manager.stop()
        self.process.stop()


def start_apiserver(
    name: str,
    *,
    apiserver: Path,
    etcd: Etcd,
    directory: Path,
    controller_manager: Path | None = None,
    controllers: Sequence[str] = (),
    admission_plugins: Sequence[str] = (),
    extra_args: Sequence[str] = (),
) -> APIServer:
    """kube-apiserver ``name`` on its own etcd prefix ``/<name>``; with ``controllers`` also a
    kube-controller-manager running only those controllers."""
    directory.mkdir(parents=True, exist_ok=True)
    authority = Authority.create(directory)
    serving_cert, serving_key = authority.issue("apiserver", "kube-apiserver", server=True)
    admin_cert, admin_key = authority.issue("admin", "kubernetes-admin", ["system:masters"])
    sa_key = ec.generate_private_key(ec.SECP256R1())
    (directory / "sa.key").write_bytes(
        sa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    port = free_port()
    server = f"https://127.0.0.1:{port}"
    argv = [
        str(apiserver),
        f"--etcd-servers={etcd.endpoint}",
        f"--etcd-prefix=/{name}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={serving_cert}",
        f"--tls-private-key-file={serving_key}",
        f"--client-ca-file={authority.ca_file}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={directory / 'sa.pub'}",
        f"--service-account-signing-key-file={directory / 'sa.key'}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--profiling=false",
        # The "kubernetes" Service's endpoints would be 127.0.0.1, which Endpoints validation
        # refuses (pkg/apis/core/validation/validation.go:8325, "may not be in the loopback
        # range"), so the reconciler would log an error every 10 s; nothing here routes to it
        # (cmd/kube-apiserver/app/options/options.go:110).
        "--endpoint-reconciler-type=none",
        *(
            [f"--enable-admission-plugins={','.join(admission_plugins)}"]
            if admission_plugins
            else []
        ),
        *extra_args,
    ]
    process = Process.start(f"kube-apiserver {name}", argv, directory / "kube-apiserver.log")
    kubeconfig = write_kubeconfig(
        directory / "admin.kubeconfig",
        server,
        authority.ca_file,
        admin_cert,
        admin_key,
        "kubernetes-admin",
    )
    result = APIServer(name, server, directory, authority, kubeconfig, process)
    try:
        admin = result.admin

        def ready() -> bool:
            return admin.request("GET", "/readyz", timeout=5).status_code == 200

        wait_until(ready, process, "ready (/readyz)")
        if controllers:
            assert controller_manager is not None, "controllers need kube-controller-manager"
            result.controller_manager = Process.start(
                f"kube-controller-manager {name}",
                [
                    str(controller_manager),
                    f"--kubeconfig={kubeconfig}",
                    f"--controllers={','.join(controllers)}",
                    "--leader-elect=false",
                    # No HTTPS endpoint of its own: nothing here scrapes or probes it
                    # (cmd/kube-controller-manager/app/options: 0 serves nothing).
                    "--secure-port=0",
                    "--use-service-account-credentials=false",
                ],
                directory / "kube-controller-manager.log",
            )
    except BaseException:
        result.stop()
        raise
    return result


def wait_for(
    what: str, probe: Any, timeout: float = 60.0, interval: float = 0.3, log: Path | None = None
) -> Any:
    """``probe()`` until it returns a truthy value; a one-line error (with ``log``'s tail)
    after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    tail = f"; log tail {log}:\n{log_tail(log)}" if log is not None else ""
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last: {last!r}){tail}")


def remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
