#!/usr/bin/env python3
"""Per-tenant datastore backups: archive a tenant's etcd keys to S3 and plan their restore.

Runs in ``python:3.12.8-alpine3.21`` with the standard library only (no pip at runtime), between
two etcdctl steps that run in the etcd image (``etcd-export.sh``, ``etcd-import.sh``). The
etcdctl steps authenticate as the tenant's own etcd user, whose role Kamaji limits to the key
range of ``/<schema>/`` (clastix/kamaji 26.8.2-edge internal/datastore/etcd.go:60-75), so etcd
itself refuses other tenants' keys; this program refuses them a second time.

Subcommands (environment only, no arguments): ``backup``, ``list``, ``fetch``,
``check-restored``. Each prints JSON lines on stdout; on any problem it prints one line starting
with ``error:`` on stderr and exits 1. Credentials are never printed.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import gzip
import hashlib
import hmac
import http.client
import json
import os
import re
import shutil
import ssl
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# 2: the archive also carries the tenant's root keys (``pki``, see read_pki) after its metadata.
FORMAT_VERSION = 2
ARCHIVE_SUFFIX = ".json.gz"
MANIFEST_SUFFIX = ".manifest.json"
PLAN_DIR = "restore"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
COPY_CHUNK = 1 << 20
# A backup holding fewer than this share of the previous good backup's keys is refused (unless
# accepted, BACKUP_ACCEPT_SUSPECT): a restore interrupted after its delete, or a datastore
# re-created empty, leaves the prefix with a fraction of its keys, and such a backup would become
# `latest` and push the good ones out of retention. Half: a tenant rarely loses half of all its
# API objects between two scheduled backups on purpose, and when it does, one accepted backup
# (make backup ... ACCEPT_SUSPECT=1) is the new reference.
MIN_KEPT_SHARE = 0.5


class BackupError(Exception):
    """A refusal: its message is the one line the Job prints before exiting non-zero."""


# --------------------------------------------------------------------------------------------
# Environment


def _env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None or value == "":
        raise BackupError(f"{name} is not set")
    return value


def _kubernetes_version() -> str:
    """The tenant's Kubernetes version: BACKUP_KUBERNETES_VERSION, else what
    api-server-endpoints.sh read off the running API server into $WORK_DIR/kubernetes-version;
    empty when neither is known."""
    given = os.environ.get("BACKUP_KUBERNETES_VERSION", "")
    if given:
        return given
    work = os.environ.get("WORK_DIR", "")
    path = Path(work) / "kubernetes-version" if work else None
    if path is not None and path.is_file():
        return path.read_text().strip()
    return ""


def _ca_file(env: Mapping[str, str]) -> str | None:
    """S3_CA_FILE when it names a non-empty file: the Job always mounts the target Secret's
    ``ca.crt``, which is empty for a target whose certificate the system trusts."""
    path = env.get("S3_CA_FILE") or ""
    if path and Path(path).is_file() and Path(path).stat().st_size > 0:
        return path
    return None


def _prefix() -> str:
    """BACKUP_PREFIX, the tenant's key range: ``/<schema>/`` as Kamaji grants it. A prefix that
    does not end in ``/`` would also cover ``/<schema>x/``, another tenant's range."""
    prefix = _env("BACKUP_PREFIX")
    if not (prefix.startswith("/") and prefix.endswith("/") and len(prefix) > 2):
        raise BackupError(f"BACKUP_PREFIX must look like /<schema>/, got {prefix!r}")
    return prefix


def _tenant() -> str:
    tenant = _env("BACKUP_TENANT")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", tenant):
        raise BackupError(f"BACKUP_TENANT has characters not allowed in an object name: {tenant!r}")
    return tenant


def _work_dir() -> Path:
    return Path(_env("WORK_DIR"))


def _export_path() -> Path:
    return _work_dir() / _env("EXPORT_FILE", "export.json")


# --------------------------------------------------------------------------------------------
# S3: path-style requests signed with AWS Signature Version 4


def _quote(value: str, safe: str = "-_.~") -> str:
    """SigV4 URI encoding: every byte but the unreserved characters, as %XX (upper case)."""
    return urllib.parse.quote(value, safe=safe)


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def sigv4_headers(
    *,
    method: str,
    host: str,
    path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    payload_sha256: str,
    access_key: str,
    secret_key: str,
    region: str,
    now: dt.datetime,
    service: str = "s3",
) -> dict[str, str]:
    """The headers to send: ``headers`` plus Host, x-amz-date, x-amz-content-sha256 and the
    Authorization header. ``path`` is already URI-encoded (S3 encodes the object key once,
    ``/`` kept). All headers given are signed."""
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    all_headers = {
        **headers,
        "Host": host,
        "x-amz-content-sha256": payload_sha256,
        "x-amz-date": amz_date,
    }
    canonical = sorted((k.lower(), " ".join(str(v).split())) for k, v in all_headers.items())
    signed_headers = ";".join(k for k, _ in canonical)
    canonical_query = "&".join(
        f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items(), key=lambda kv: kv[0])
    )
    canonical_request = "\n".join(
        [
            method,
            path,
            canonical_query,
            "".join(f"{k}:{v}\n" for k, v in canonical),
            signed_headers,
            payload_sha256,
        ]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            amz_date,
            scope,
            hashlib.sha256(canonical_request.encode("utf-8")).hexdigest(),
        ]
    )
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    all_headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope},"
        f"SignedHeaders={signed_headers},Signature={signature}"
    )
    return all_headers


@dataclass(frozen=True)
class S3Object:
    key: str
    size: int


class S3:
    """The four calls the backup needs, path-style (``<endpoint>/<bucket>/<key>``), so any
    S3-compatible store works without DNS per bucket."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        endpoint = env.get("S3_ENDPOINT", "")
        parsed = urllib.parse.urlsplit(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BackupError("S3_ENDPOINT must be an http:// or https:// URL")
        self.scheme = parsed.scheme
        self.host = parsed.netloc
        self.base_path = parsed.path.rstrip("/")
        self.region = env.get("S3_REGION") or "us-east-1"
        self.bucket = env.get("S3_BUCKET", "")
        if not self.bucket:
            raise BackupError("S3_BUCKET is not set")
        self.prefix = env.get("S3_PREFIX", "")
        self._access_key = env.get("AWS_ACCESS_KEY_ID", "")
        self._secret_key = env.get("AWS_SECRET_ACCESS_KEY", "")
        if not self._access_key or not self._secret_key:
            raise BackupError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set")
        try:
            self.timeout = float(env.get("S3_TIMEOUT_SECONDS") or 60)
        except ValueError:
            raise BackupError("S3_TIMEOUT_SECONDS must be a number of seconds") from None
        self._context: ssl.SSLContext | None = None
        if self.scheme == "https":
            self._context = ssl.create_default_context(cafile=_ca_file(env))

    def request(
        self,
        method: str,
        key: str | None,
        *,
        query: Mapping[str, str] | None = None,
        body: bytes = b"",
        body_file: tuple[Path, int, str] | None = None,
        sink: Path | None = None,
        headers: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> tuple[int, bytes]:
        """One signed request; ``key=None`` addresses the bucket itself. A status outside
        ``ok`` raises BackupError with S3's error code (never the request's headers).
        ``body_file`` (path, size, sha256) streams the body from a file; ``sink`` streams a
        successful response's body into a file (the returned bytes are then empty), so an
        archive never has to fit in memory."""
        query = dict(query or {})
        headers = dict(headers or {})
        payload_sha = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
        if body_file is not None:
            headers["Content-Length"] = str(body_file[1])
            payload_sha = body_file[2]
        path = f"{self.base_path}/{_quote(self.bucket)}"
        if key is not None:
            path += "/" + _quote(key, safe="-_.~/")
        signed = sigv4_headers(
            method=method,
            host=self.host,
            path=path,
            query=query,
            headers=headers,
            payload_sha256=payload_sha,
            access_key=self._access_key,
            secret_key=self._secret_key,
            region=self.region,
            now=dt.datetime.now(dt.UTC),
        )
        url = f"{self.scheme}://{self.host}{path}"
        if query:
            url += "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
        what = f"S3 {method} {key if key is not None else self.bucket}"
        try:
            with contextlib.ExitStack() as stack:
                data: Any = body if method in ("PUT", "POST") else None
                if body_file is not None:
                    data = stack.enter_context(body_file[0].open("rb"))
                request = urllib.request.Request(url, data=data, method=method, headers=signed)
                response = stack.enter_context(
                    urllib.request.urlopen(request, context=self._context, timeout=self.timeout)
                )
                if sink is None:
                    return response.status, response.read()
                with sink.open("wb") as out:
                    shutil.copyfileobj(response, out, COPY_CHUNK)
                    length = response.headers.get("Content-Length")
                    if length is not None and out.tell() != int(length):
                        raise http.client.IncompleteRead(b"", int(length) - out.tell())
                return response.status, b""
        except urllib.error.HTTPError as err:
            status, payload = err.code, err.read()
            if status in ok:
                return status, payload
            code = _xml_text(payload, "Code") or err.reason
            raise BackupError(f"{what}: HTTP {status} {code}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise BackupError(f"{what}: {reason}") from None
        except http.client.HTTPException as err:
            # A connection cut mid-body (IncompleteRead) or a garbled response: not an OSError.
            raise BackupError(f"{what}: {type(err).__name__}: {err}") from None

    def put(self, key: str, body: bytes, content_type: str) -> None:
        self.request("PUT", key, body=body, headers={"Content-Type": content_type})

    def get(self, key: str) -> bytes:
        return self.request("GET", key)[1]

    def put_file(self, key: str, path: Path, sha256: str, content_type: str) -> None:
        size = path.stat().st_size
        self.request(
            "PUT", key, body_file=(path, size, sha256), headers={"Content-Type": content_type}
        )

    def get_file(self, key: str, path: Path) -> None:
        self.request("GET", key, sink=path)

    def delete(self, key: str) -> None:
        self.request("DELETE", key, ok=(200, 204))

    def list(self, prefix: str) -> list[S3Object]:
        """ListObjectsV2, every page."""
        found: list[S3Object] = []
        token: str | None = None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            payload = self.request("GET", None, query=query)[1]
            root = ET.fromstring(payload)
            for item in root.iter():
                if _local(item.tag) != "Contents":
                    continue
                fields = {_local(child.tag): child.text or "" for child in item}
                found.append(S3Object(fields.get("Key", ""), int(fields.get("Size", "0"))))
            truncated = _xml_text(payload, "IsTruncated") == "true"
            token = _xml_text(payload, "NextContinuationToken")
            if not truncated or not token:
                return found


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml_text(payload: bytes, name: str) -> str | None:
    try:
        root = ET.fromstring(payload)
    except ET.ParseError:
        return None
    for element in root.iter():
        if _local(element.tag) == name:
            return element.text
    return None


# --------------------------------------------------------------------------------------------
# Archive format


@dataclass(frozen=True)
class KV:
    key: bytes
    value: bytes
    leased: bool


def _payload_update(digest: Any, kv: KV) -> None:
    digest.update(len(kv.key).to_bytes(8, "big") + kv.key)
    digest.update(len(kv.value).to_bytes(8, "big") + kv.value)
    digest.update(b"\x01" if kv.leased else b"\x00")


def payload_sha256(kvs: list[KV]) -> str:
    """A digest of what a restore writes, independent of the JSON and gzip encodings: per key in
    byte order, length-prefixed key and value and the lease flag."""
    digest = hashlib.sha256()
    for kv in sorted(kvs, key=lambda kv: kv.key):
        _payload_update(digest, kv)
    return digest.hexdigest()


def _page(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except ValueError as err:
        raise BackupError(f"export page {path} is not etcdctl's JSON: {err}") from None
    if not isinstance(data, dict):
        raise BackupError(f"export page {path} is not etcdctl's JSON")
    return data


def _kvs_of(data: Mapping[str, Any]) -> list[KV]:
    return [
        KV(
            base64.b64decode(item["key"], validate=True),
            base64.b64decode(item.get("value", ""), validate=True),
            int(item.get("lease", 0)) != 0,
        )
        for item in data.get("kvs") or []
    ]


class Export:
    """etcd-export.sh's export, read as a stream: a directory with ``revision`` and
    ``page-NNNNNN.json``, each ``etcdctl get START END --limit N -w json``. etcdctl prints the
    RangeResponse with encoding/json, so keys and values are base64 and a zero lease, an empty
    value or a false ``more`` is omitted (etcd-io/etcd v3.5.6
    etcdctl/ctlv3/command/printer_json.go:51-58, api/mvccpb/kv.pb.go:54-68 and
    api/etcdserverpb/rpc.pb.go:528 ``omitempty`` tags). Pages are read one at a time, in key
    order; a page starts with the last key of the one before, which is dropped. The first page's
    ``count`` is every key of the range at that revision: iterating to the end checks that the
    pages held exactly that many and that the last does not say more follow. A single JSON file
    (one unpaginated get) is read the same way, as one page. Memory: one page."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path, self.prefix = path, prefix
        if not path.exists():
            raise BackupError(f"export {path} not found (did etcd-export.sh run?)")
        try:
            if path.is_dir():
                self.revision = int((path / "revision").read_text().strip())
                self.pages = sorted(path.glob("page-*.json"))
            else:
                self.revision = -1
                self.pages = [path]
            if not self.pages:
                raise BackupError(f"export {path} holds no page")
            first = _page(self.pages[0])
            self.total = int(first.get("count", 0))
            if self.revision < 0:
                self.revision = int(first["header"]["revision"])
        except OSError as err:
            raise BackupError(f"export {path} unreadable: {err}") from None
        except (ValueError, KeyError, TypeError) as err:
            raise BackupError(f"export {path} is not etcdctl's JSON: {err}") from None

    def __iter__(self) -> Iterator[KV]:
        path, wanted = self.path, self.prefix.encode("utf-8")
        last: bytes | None = None
        count = 0
        data: dict[str, Any] = {}
        for index, page in enumerate(self.pages):
            try:
                data = _page(page)
                page_kvs = _kvs_of(data)
            except OSError as err:
                raise BackupError(f"export {path} unreadable: {err}") from None
            except (ValueError, KeyError, TypeError) as err:
                raise BackupError(f"export {path} is not etcdctl's JSON: {err}") from None
            if index > 0:
                # A page starts where the page before ended: drop what was read already.
                while page_kvs and last is not None and page_kvs[0].key <= last:
                    page_kvs.pop(0)
            for kv in page_kvs:
                if last is not None and kv.key <= last:
                    raise BackupError(f"export {path} is not in key order at {kv.key!r}")
                if not kv.key.startswith(wanted):
                    raise BackupError(f"key {kv.key!r} is outside BACKUP_PREFIX {self.prefix}")
                last = kv.key
                count += 1
                yield kv
        if data.get("more"):
            raise BackupError(f"export {path} is incomplete (etcd says more keys follow)")
        if count != self.total:
            raise BackupError(f"export {path} holds {count} keys but etcd counted {self.total}")


def read_export(path: Path, prefix: str) -> tuple[int, list[KV]]:
    """The whole export in memory (small exports and tests; the subcommands stream it)."""
    export = Export(path, prefix)
    return export.revision, list(export)


class ArchiveWriter:
    """Writes an archive as it goes, one key at a time, to a gzip file: the same document as
    ``build_archive`` (``{"kvs":[...],"metadata":{...}}``, keys sorted, no spaces; the metadata
    comes last, so its counts and payload digest are known when it is written). Memory: one
    key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("wb")
        self._gzip = gzip.GzipFile(filename="", mode="wb", fileobj=self._file, mtime=0)
        self._gzip.write(b'{"kvs":[')
        self._digest = hashlib.sha256()
        self.count = 0
        self.leased = 0
        self._last: bytes | None = None

    def add(self, kv: KV) -> None:
        if self._last is not None and kv.key <= self._last:
            raise BackupError(f"keys out of order at {kv.key!r}")
        self._last = kv.key
        _payload_update(self._digest, kv)
        item = {
            "key": base64.b64encode(kv.key).decode("ascii"),
            "leased": kv.leased,
            "value": base64.b64encode(kv.value).decode("ascii"),
        }
        text = json.dumps(item, sort_keys=True, separators=(",", ":"))
        self._gzip.write((b"," if self.count else b"") + text.encode("utf-8"))
        self.count += 1
        self.leased += kv.leased

    def finish(
        self, metadata: dict[str, Any], pki: Mapping[str, Mapping[str, str]] | None = None
    ) -> tuple[dict[str, Any], int, str]:
        """Complete ``metadata`` with the counts and digests, write ``pki`` (the tenant's root
        keys, read_pki) after it, close the archive; returns the metadata, the archive's size and
        sha256."""
        pki = dict(pki or {})
        metadata = {
            **metadata,
            "formatVersion": FORMAT_VERSION,
            "keyCount": self.count,
            "leasedKeyCount": self.leased,
            "payloadSha256": self._digest.hexdigest(),
            "pkiSecrets": sorted(pki),
            "pkiSha256": pki_sha256(pki),
        }
        tail = json.dumps(metadata, sort_keys=True, separators=(",", ":"))
        pki_text = json.dumps(pki, sort_keys=True, separators=(",", ":"))
        self._gzip.write(f'],"metadata":{tail},"pki":{pki_text}}}'.encode())
        self._gzip.close()
        self._file.close()
        return metadata, self.path.stat().st_size, _file_sha256(self.path)

    def abandon(self) -> None:
        self._gzip.close()
        self._file.close()
        self.path.unlink(missing_ok=True)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for chunk in iter(lambda: source.read(COPY_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


class ArchiveReader:
    """Reads an archive file as a stream of key-values, and checks it as ``parse_archive`` does
    once the stream ends: its format, key count, leased-key count and payload digest match its
    metadata, no key twice (keys strictly ascending). ``metadata`` is set after the last key.
    Memory: a chunk of the document and one key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.metadata: dict[str, Any] | None = None
        self.pki: dict[str, dict[str, str]] = {}

    def __iter__(self) -> Iterator[KV]:
        try:
            with gzip.open(self.path, "rt", encoding="utf-8") as text:
                yield from self._parse(text)
        except (OSError, EOFError, zlib.error) as err:
            raise BackupError(f"archive is not valid gzip: {err}") from None
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
            raise BackupError(f"archive is not a backup document: {err}") from None

    def _parse(self, text: Any) -> Iterator[KV]:
        decoder = json.JSONDecoder()
        buffer, position, ended = "", 0, False

        def more() -> bool:
            nonlocal buffer, position, ended
            chunk = text.read(COPY_CHUNK)
            if not chunk:
                ended = True
                return False
            buffer, position = buffer[position:] + chunk, 0
            return True

        def expect(literal: str) -> None:
            nonlocal position
            while len(buffer) - position < len(literal) and more():
                pass
            if buffer[position : position + len(literal)] != literal:
                raise BackupError(f"archive is not a backup document: expected {literal!r}")
            position += len(literal)

        def peek() -> str:
            while len(buffer) - position < 1 and more():
                pass
            return buffer[position : position + 1]

        def value() -> Any:
            nonlocal position
            while True:
                try:
                    found, end = decoder.raw_decode(buffer, position)
                    position = end
                    return found
                except json.JSONDecodeError:
                    if ended or not more():
                        raise BackupError("archive is not a backup document: truncated") from None

        digest = hashlib.sha256()
        count = leased = 0
        last: bytes | None = None
        expect('{"kvs":[')
        if peek() == "]":
            expect("]")
        else:
            while True:
                item = value()
                kv = KV(
                    base64.b64decode(item["key"], validate=True),
                    base64.b64decode(item["value"], validate=True),
                    bool(item["leased"]),
                )
                if last is not None and kv.key <= last:
                    raise BackupError("archive holds a key twice or out of order")
                last = kv.key
                _payload_update(digest, kv)
                count += 1
                leased += kv.leased
                yield kv
                if peek() == ",":
                    expect(",")
                    continue
                expect("]")
                break
        expect(',"metadata":')
        metadata = value()
        expect(',"pki":')
        pki = value()
        expect("}")
        if peek():
            raise BackupError("archive is not a backup document: data after its end")
        if not isinstance(metadata, dict):
            raise BackupError("archive is not a backup document: no metadata")
        if metadata.get("formatVersion") != FORMAT_VERSION:
            raise BackupError(f"archive format {metadata.get('formatVersion')!r} is not supported")
        if metadata.get("keyCount") != count:
            raise BackupError(
                f"archive holds {count} keys, its metadata says {metadata.get('keyCount')}"
            )
        if metadata.get("leasedKeyCount") != leased:
            raise BackupError("archive's leased-key count does not match its keys")
        if metadata.get("payloadSha256") != digest.hexdigest():
            raise BackupError("archive's payload sha256 does not match its keys and values")
        self.pki = _checked_pki(pki, metadata)
        self.metadata = metadata


def _refuse_outside(kvs: list[KV], prefix: str) -> None:
    wanted = prefix.encode("utf-8")
    for kv in kvs:
        if not kv.key.startswith(wanted):
            raise BackupError(f"key {kv.key!r} is outside BACKUP_PREFIX {prefix}")


def build_archive(
    *,
    tenant: str,
    prefix: str,
    kubernetes_version: str,
    revision: int,
    when: dt.datetime,
    kvs: list[KV],
    pki: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[dict[str, Any], bytes]:
    """The metadata and the gzip'd archive bytes (deterministic: gzip mtime 0)."""
    kvs = sorted(kvs, key=lambda kv: kv.key)
    pki = {name: dict(data) for name, data in (pki or {}).items()}
    metadata = {
        "formatVersion": FORMAT_VERSION,
        "tenant": tenant,
        "prefix": prefix,
        "kubernetesVersion": kubernetes_version,
        "revision": revision,
        "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "keyCount": len(kvs),
        "leasedKeyCount": sum(kv.leased for kv in kvs),
        "payloadSha256": payload_sha256(kvs),
        "pkiSecrets": sorted(pki),
        "pkiSha256": pki_sha256(pki),
    }
    document = {
        "metadata": metadata,
        "pki": pki,
        "kvs": [
            {
                "key": base64.b64encode(kv.key).decode("ascii"),
                "value": base64.b64encode(kv.value).decode("ascii"),
                "leased": kv.leased,
            }
            for kv in kvs
        ],
    }
    raw = json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return metadata, gzip.compress(raw, mtime=0)


def parse_archive(blob: bytes) -> tuple[dict[str, Any], list[KV]]:
    """Unzip, parse and self-check an archive: the count and payload digest in its metadata must
    match its key-values."""
    try:
        raw = gzip.decompress(blob)
    except (OSError, EOFError, zlib.error) as err:
        raise BackupError(f"archive is not valid gzip: {err}") from None
    try:
        document = json.loads(raw)
        metadata = document["metadata"]
        kvs = [
            KV(
                base64.b64decode(item["key"], validate=True),
                base64.b64decode(item["value"], validate=True),
                bool(item["leased"]),
            )
            for item in document["kvs"]
        ]
    except (ValueError, KeyError, TypeError) as err:
        raise BackupError(f"archive is not a backup document: {err}") from None
    if metadata.get("formatVersion") != FORMAT_VERSION:
        raise BackupError(f"archive format {metadata.get('formatVersion')!r} is not supported")
    if metadata.get("keyCount") != len(kvs):
        raise BackupError(
            f"archive holds {len(kvs)} keys, its metadata says {metadata.get('keyCount')}"
        )
    if metadata.get("leasedKeyCount") != sum(kv.leased for kv in kvs):
        raise BackupError("archive's leased-key count does not match its keys")
    if len({kv.key for kv in kvs}) != len(kvs):
        raise BackupError("archive holds a key twice")
    if metadata.get("payloadSha256") != payload_sha256(kvs):
        raise BackupError("archive's payload sha256 does not match its keys and values")
    _checked_pki(document.get("pki"), metadata)
    return metadata, kvs


# --------------------------------------------------------------------------------------------
# The tenant's root keys
#
# Kamaji keeps a tenant's CA, service-account key pair and front-proxy CA in Secrets
# ``<tcp>-ca``, ``<tcp>-sa-certificate`` and ``<tcp>-front-proxy-ca-certificate`` of its namespace
# (clastix/kamaji 26.8.2-edge internal/resources/ca_certificate.go:66-67,82-84,
# sa_certificate.go:62-63,78-79, front_proxy_ca_certificate.go:62-63,78-79,
# internal/utilities/utilities.go:43-44) and generates new ones when they are absent
# (ca_certificate.go:139-154). Every other certificate and kubeconfig of the tenant derives from
# them. A datastore restored without them, after the management cluster was lost, would pair the
# tenant's objects with a new CA and service-account key: kubelets' certificates and
# service-account tokens would no longer verify.


def pki_sha256(pki: Mapping[str, Mapping[str, str]]) -> str:
    """A digest of the root keys as the archive holds them (names, data keys, base64 values)."""
    text = json.dumps(pki, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checked_pki(pki: Any, metadata: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    if not isinstance(pki, dict) or not all(
        isinstance(data, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items())
        for data in pki.values()
    ):
        raise BackupError("archive is not a backup document: its pki is not Secrets' data")
    if metadata.get("pkiSecrets") != sorted(pki) or metadata.get("pkiSha256") != pki_sha256(pki):
        raise BackupError("archive's pki does not match its metadata")
    for data in pki.values():
        for value in data.values():
            base64.b64decode(value, validate=True)
    return pki


def read_pki(directory: Path, names: list[str]) -> dict[str, dict[str, str]]:
    """The Secrets ``names`` as the Job mounts them, ``directory/<name>/<key>`` (a Secret
    volume: one file per data key, beside the kubelet's own ``..data`` links), base64."""
    pki: dict[str, dict[str, str]] = {}
    for name in names:
        folder = directory / name
        try:
            files = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
            data = {p.name: base64.b64encode(p.read_bytes()).decode("ascii") for p in files}
        except OSError as err:
            raise BackupError(f"the tenant's {name} Secret is not readable: {err}") from None
        if not data:
            raise BackupError(f"the tenant's {name} Secret is empty")
        pki[name] = data
    return pki


def _job_pki() -> dict[str, dict[str, str]]:
    """BACKUP_PKI_SECRETS (comma-separated names) read from BACKUP_PKI_DIR; none when unset."""
    names = [n for n in os.environ.get("BACKUP_PKI_SECRETS", "").split(",") if n]
    if not names:
        return {}
    directory = os.environ.get("BACKUP_PKI_DIR", "")
    if not directory:
        raise BackupError("BACKUP_PKI_SECRETS is set but BACKUP_PKI_DIR is not")
    return read_pki(Path(directory), names)


# --------------------------------------------------------------------------------------------
# Encryption: every archive is stored encrypted with the tenant's own key (AES-256-GCM)
#
# The Python image has no cryptography package and no openssl command, but its own _ssl and
# _hashlib modules link OpenSSL's libcrypto.so.3, which is therefore in the image
# (docker-library/python 3.12/alpine3.21/Dockerfile: the rundeps are every `so:` the built
# modules need, via scanelf); the cipher is OpenSSL's EVP AES-256-GCM through ctypes.
#
# Stored form: MAGIC, a 12-byte random nonce, the ciphertext of the gzip'd archive, the 16-byte
# GCM tag. The associated data (authenticated, not encrypted) is MAGIC + nonce + the archive's
# base name (``<tenant>-<time>-rev<N>.json.gz``): an archive copied under another backup's name
# no longer decrypts. A wrong key, any changed byte or a cut tail fails the tag.

CIPHER = "AES-256-GCM"
MAGIC = b"gpu-platform-backup/aes-256-gcm/1\n"
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_BYTES = 32
_GCM_GET_TAG, _GCM_SET_TAG = 0x10, 0x11  # EVP_CTRL_GCM_GET_TAG / SET_TAG (openssl evp.h)


def _libcrypto() -> Any:
    import ctypes

    for name in ("libcrypto.so.3", "libcrypto.so"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        raise BackupError("OpenSSL's libcrypto.so.3 not found: archives cannot be encrypted")
    lib.EVP_CIPHER_CTX_new.restype = ctypes.c_void_p
    lib.EVP_aes_256_gcm.restype = ctypes.c_void_p
    lib.EVP_CIPHER_CTX_free.argtypes = [ctypes.c_void_p]
    for init in ("EVP_EncryptInit_ex", "EVP_DecryptInit_ex"):
        getattr(lib, init).argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_void_p] * 3
    for update in ("EVP_EncryptUpdate", "EVP_DecryptUpdate"):
        getattr(lib, update).argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_char_p,
            ctypes.c_int,
        ]
    for final in ("EVP_EncryptFinal_ex", "EVP_DecryptFinal_ex"):
        getattr(lib, final).argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
        ]
    lib.EVP_CIPHER_CTX_ctrl.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
    ]
    return lib


class _Gcm:
    """One AES-256-GCM pass (encrypt or decrypt) over a stream, in chunks."""

    def __init__(self, key: bytes, nonce: bytes, aad: bytes, *, encrypt: bool) -> None:
        import ctypes

        self._ctypes = ctypes
        self._lib = _libcrypto()
        self._encrypt = encrypt
        self._ctx = self._lib.EVP_CIPHER_CTX_new()
        if not self._ctx:
            raise BackupError("OpenSSL: no cipher context")
        init = self._lib.EVP_EncryptInit_ex if encrypt else self._lib.EVP_DecryptInit_ex
        # AES-256-GCM's default IV length is 12 bytes.
        if init(self._ctx, self._lib.EVP_aes_256_gcm(), None, key, nonce) != 1:
            self.close()
            raise BackupError("OpenSSL: AES-256-GCM init failed")
        self._update_fn = self._lib.EVP_EncryptUpdate if encrypt else self._lib.EVP_DecryptUpdate
        length = ctypes.c_int(0)
        if self._update_fn(self._ctx, None, ctypes.byref(length), aad, len(aad)) != 1:
            self.close()
            raise BackupError("OpenSSL: AES-256-GCM associated data failed")

    def update(self, data: bytes) -> bytes:
        ctypes = self._ctypes
        out = ctypes.create_string_buffer(len(data) + 32)
        length = ctypes.c_int(0)
        if self._update_fn(self._ctx, out, ctypes.byref(length), data, len(data)) != 1:
            raise BackupError("OpenSSL: AES-256-GCM update failed")
        return out.raw[: length.value]

    def finish(self, tag: bytes | None = None) -> bytes:
        """Encrypting: the tag. Decrypting: checks ``tag``; False tags raise BackupError."""
        ctypes = self._ctypes
        out = ctypes.create_string_buffer(32)
        length = ctypes.c_int(0)
        try:
            if self._encrypt:
                if self._lib.EVP_EncryptFinal_ex(self._ctx, out, ctypes.byref(length)) != 1:
                    raise BackupError("OpenSSL: AES-256-GCM final failed")
                tag_out = ctypes.create_string_buffer(TAG_BYTES)
                if self._lib.EVP_CIPHER_CTX_ctrl(self._ctx, _GCM_GET_TAG, TAG_BYTES, tag_out) != 1:
                    raise BackupError("OpenSSL: AES-256-GCM tag failed")
                return tag_out.raw
            assert tag is not None
            given = ctypes.create_string_buffer(tag, TAG_BYTES)
            if self._lib.EVP_CIPHER_CTX_ctrl(self._ctx, _GCM_SET_TAG, TAG_BYTES, given) != 1:
                raise BackupError("OpenSSL: AES-256-GCM tag failed")
            if self._lib.EVP_DecryptFinal_ex(self._ctx, out, ctypes.byref(length)) != 1:
                raise BackupError(
                    "the archive does not decrypt with this tenant's key (another key, or a "
                    "changed archive)"
                )
            return b""
        finally:
            self.close()

    def close(self) -> None:
        if self._ctx:
            self._lib.EVP_CIPHER_CTX_free(self._ctx)
            self._ctx = None


def key_id(key: bytes) -> str:
    """A name for a key that does not reveal it: the manifest records which key encrypted the
    archive, so a restore with another key is refused before the download. Pure."""
    return hashlib.sha256(b"gpu-platform backup key id\x00" + key).hexdigest()[:16]


def parse_key(text: str) -> bytes:
    """The tenant's archive key from its file: 64 hex digits (``openssl rand -hex 32``). Pure."""
    value = text.strip()
    if not re.fullmatch(r"[0-9a-fA-F]{64}", value):
        raise BackupError(
            "the archive key is not 64 hex digits (32 random bytes: openssl rand -hex 32)"
        )
    return bytes.fromhex(value)


def _archive_key() -> bytes:
    """BACKUP_KEY_FILE's key: the tenant's target Secret mounts it (docs/backups.md)."""
    path = Path(_env("BACKUP_KEY_FILE"))
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as err:
        raise BackupError(f"the archive key file {path} is unreadable: {err}") from None
    return parse_key(text)


def _aad(name: str, nonce: bytes) -> bytes:
    return MAGIC + nonce + name.rsplit("/", 1)[-1].encode("utf-8")


def encrypt_file(source: Path, target: Path, key: bytes, name: str) -> None:
    """``source`` encrypted for the object ``name`` into ``target``. Memory: one chunk."""
    nonce = os.urandom(NONCE_BYTES)
    gcm = _Gcm(key, nonce, _aad(name, nonce), encrypt=True)
    try:
        with source.open("rb") as plain, target.open("wb") as out:
            out.write(MAGIC + nonce)
            for chunk in iter(lambda: plain.read(COPY_CHUNK), b""):
                out.write(gcm.update(chunk))
            out.write(gcm.finish())
    finally:
        gcm.close()


def decrypt_file(source: Path, target: Path, key: bytes, name: str) -> None:
    """``source`` (stored as the object ``name``) decrypted into ``target``; refuses a wrong key
    or any change before the caller reads ``target`` (the tag is checked at the end, and
    ``target`` is removed on a refusal). Memory: one chunk."""
    size = source.stat().st_size
    header = len(MAGIC) + NONCE_BYTES
    try:
        with source.open("rb") as sealed, target.open("wb") as out:
            if size < header + TAG_BYTES or sealed.read(len(MAGIC)) != MAGIC:
                raise BackupError(
                    "the archive is not encrypted (a backup from before archives were "
                    "encrypted, or not written by the backup Job)"
                )
            nonce = sealed.read(NONCE_BYTES)
            gcm = _Gcm(key, nonce, _aad(name, nonce), encrypt=False)
            try:
                remaining = size - header - TAG_BYTES
                while remaining:
                    chunk = sealed.read(min(COPY_CHUNK, remaining))
                    if not chunk:
                        raise BackupError("the archive is cut short")
                    remaining -= len(chunk)
                    out.write(gcm.update(chunk))
                gcm.finish(sealed.read(TAG_BYTES))
            finally:
                gcm.close()
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def encrypt_bytes(blob: bytes, key: bytes, name: str) -> bytes:
    """In memory (tests and small data): what ``encrypt_file`` stores."""
    nonce = os.urandom(NONCE_BYTES)
    gcm = _Gcm(key, nonce, _aad(name, nonce), encrypt=True)
    body = gcm.update(blob)
    return MAGIC + nonce + body + gcm.finish()


def decrypt_bytes(blob: bytes, key: bytes, name: str) -> bytes:
    """In memory (tests and small data): what ``decrypt_file`` writes."""
    with tempfile.TemporaryDirectory() as scratch:
        source, target = Path(scratch) / "sealed", Path(scratch) / "plain"
        source.write_bytes(blob)
        decrypt_file(source, target, key, name)
        return target.read_bytes()


# --------------------------------------------------------------------------------------------
# Names


def _name_pattern(s3_prefix: str, tenant: str) -> re.Pattern[str]:
    return re.compile(
        re.escape(s3_prefix + tenant)
        + r"-(?P<time>\d{8}T\d{6}Z)-rev(?P<revision>\d+)"
        + re.escape(ARCHIVE_SUFFIX)
    )


def archive_name(s3_prefix: str, tenant: str, when: dt.datetime, revision: int) -> str:
    return f"{s3_prefix}{tenant}-{when.strftime('%Y%m%dT%H%M%SZ')}-rev{revision}{ARCHIVE_SUFFIX}"


def manifest_name(archive: str) -> str:
    return archive[: -len(ARCHIVE_SUFFIX)] + MANIFEST_SUFFIX


@dataclass(frozen=True)
class Listed:
    name: str
    time: str
    revision: int
    size: int
    complete: bool

    def sort_key(self) -> tuple[str, int, str]:
        return (self.time, self.revision, self.name)


def list_backups(s3: S3, tenant: str) -> list[Listed]:
    """The tenant's archives, newest first. ``complete`` means its manifest exists: the manifest
    is written last, after the archive was read back and verified."""
    pattern = _name_pattern(s3.prefix, tenant)
    objects = s3.list(s3.prefix + tenant + "-")
    keys = {obj.key for obj in objects}
    found = []
    for obj in objects:
        match = pattern.fullmatch(obj.key)
        if match:
            found.append(
                Listed(
                    obj.key,
                    match["time"],
                    int(match["revision"]),
                    obj.size,
                    manifest_name(obj.key) in keys,
                )
            )
    return sorted(found, key=Listed.sort_key, reverse=True)


# --------------------------------------------------------------------------------------------
# Subcommands


def _print(document: Mapping[str, Any]) -> None:
    print(json.dumps(document, sort_keys=True), flush=True)


def _manifest_of(s3: S3, name: str) -> dict[str, Any]:
    try:
        manifest = json.loads(s3.get(manifest_name(name)))
        int(manifest["archive"]["size"])
        str(manifest["archive"]["sha256"])
        if not isinstance(manifest["metadata"], dict):
            raise TypeError("metadata is not an object")
    except BackupError as err:
        raise BackupError(f"manifest of {name} unreadable: {err}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise BackupError(f"manifest of {name} is not a backup manifest: {err}") from None
    return dict(manifest)


def _download(s3: S3, name: str, manifest: Mapping[str, Any], path: Path) -> None:
    """The archive into ``path``, its size and sha256 checked against the manifest."""
    s3.get_file(name, path)
    size, expected = path.stat().st_size, int(manifest["archive"]["size"])
    if size != expected:
        raise BackupError(f"{name}: {size} bytes, manifest says {expected}")
    if _file_sha256(path) != manifest["archive"]["sha256"]:
        raise BackupError(f"{name}: sha256 does not match its manifest")


def _check_manifest(
    s3: S3, name: str, manifest: Mapping[str, Any], tenant: str, prefix: str
) -> dict[str, Any]:
    metadata: dict[str, Any] = manifest["metadata"]
    if metadata.get("tenant") != tenant:
        raise BackupError(f"{name} belongs to tenant {metadata.get('tenant')!r}, not {tenant!r}")
    if metadata.get("prefix") != prefix:
        raise BackupError(f"{name} holds prefix {metadata.get('prefix')!r}, not {prefix!r}")
    named_as = name_mismatch(name, manifest, s3.prefix, tenant)
    if named_as:
        raise BackupError(f"{name}: {named_as} (a backup copied under another name?)")
    return metadata


def encryption_refusal(manifest: Mapping[str, Any], key: bytes) -> str | None:
    """Why ``key`` cannot open the backup ``manifest`` describes, or None. Pure."""
    encryption = manifest.get("encryption")
    if not isinstance(encryption, Mapping):
        return (
            "is not encrypted (taken before archives were encrypted, or not written by the "
            "backup Job): refusing it"
        )
    if encryption.get("cipher") != CIPHER:
        return f"is encrypted with {encryption.get('cipher')!r}, not {CIPHER}"
    if encryption.get("keyId") != key_id(key):
        return (
            f"was encrypted with key {encryption.get('keyId')}, this tenant's key is "
            f"{key_id(key)}: restore it with the key it was written with"
        )
    return None


def _check_encryption(name: str, manifest: Mapping[str, Any], key: bytes) -> None:
    refusal = encryption_refusal(manifest, key)
    if refusal:
        raise BackupError(f"{name} {refusal}")


def _verify_download(
    s3: S3, name: str, tenant: str, prefix: str
) -> tuple[dict[str, Any], list[KV], dict[str, Any]]:
    """Download a backup and its manifest and check everything a restore relies on (in
    memory: for tests and small backups; fetch streams the same checks)."""
    manifest = _manifest_of(s3, name)
    metadata = _check_manifest(s3, name, manifest, tenant, prefix)
    key = _archive_key()
    _check_encryption(name, manifest, key)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "archive"
        _download(s3, name, manifest, Path(scratch) / "sealed")
        decrypt_file(Path(scratch) / "sealed", path, key, name)
        reader = ArchiveReader(path)
        kvs = list(reader)
    if reader.metadata != metadata:
        raise BackupError(f"{name}: archive metadata differs from its manifest")
    _refuse_outside(kvs, prefix)
    return metadata, kvs, manifest


def suspect_reason(key_count: int, revision: int, previous: Mapping[str, Any] | None) -> str | None:
    """Why a backup of ``key_count`` keys at ``revision`` must not become a good backup, given
    the previous good backup's manifest metadata (None: there is none), or None when it may.
    Pure: the refusals of cmd_backup."""
    if previous is None:
        return None
    try:
        before_keys, before_revision = int(previous["keyCount"]), int(previous["revision"])
    except (KeyError, TypeError, ValueError):
        return "the previous backup's manifest has no keyCount and revision"
    if revision < before_revision:
        return (
            f"the datastore's revision went back from {before_revision} to {revision} "
            "(a re-created etcd?)"
        )
    if key_count < before_keys * MIN_KEPT_SHARE:
        return (
            f"the key count fell from {before_keys} to {key_count}, below "
            f"{MIN_KEPT_SHARE:.0%} of the previous backup (a half-restored tenant?)"
        )
    return None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _previous_good(s3: S3, backups: list[Listed]) -> tuple[str, dict[str, Any]] | None:
    """The newest complete backup's name and manifest metadata (None without one)."""
    complete = [b for b in backups if b.complete]
    if not complete:
        return None
    name = complete[0].name
    try:
        metadata = json.loads(s3.get(manifest_name(name)))["metadata"]
    except (ValueError, KeyError, TypeError) as err:
        raise BackupError(f"manifest of the previous backup {name} unreadable: {err}") from None
    if not isinstance(metadata, dict):
        raise BackupError(f"manifest of the previous backup {name} holds no metadata")
    return name, metadata


def name_mismatch(
    name: str, manifest: Mapping[str, Any], s3_prefix: str, tenant: str
) -> str | None:
    """Why the object ``name`` does not hold the backup its manifest describes, or None. `latest`
    is chosen by the names' time and revision, so an older backup copied under a newer name would
    otherwise be restored as the newest: the name must be the manifest's own archive name, and its
    time and revision the metadata's. Pure."""
    match = _name_pattern(s3_prefix, tenant).fullmatch(name)
    if match is None:
        return "not a backup name"
    archive = manifest.get("archive") or {}
    metadata = manifest.get("metadata") or {}
    if archive.get("name") != name:
        return f"its manifest was written for {archive.get('name')!r}"
    try:
        taken = dt.datetime.strptime(str(metadata.get("time")), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return f"its manifest's time {metadata.get('time')!r} is not a time"
    if taken.strftime("%Y%m%dT%H%M%SZ") != match["time"] or metadata.get("revision") != int(
        match["revision"]
    ):
        return (
            f"its manifest says time {metadata.get('time')} revision {metadata.get('revision')}, "
            f"its name {match['time']} revision {match['revision']}"
        )
    return None


def _minor(version: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", version or "")
    return (int(match[1]), int(match[2])) if match else None


def version_refusal(backup_version: str, running_version: str) -> tuple[str | None, str | None]:
    """(refusal, warning) for restoring a backup taken at ``backup_version`` into a control plane
    running ``running_version``. Kubernetes has no storage-version downgrade: objects stored by a
    newer API server may not decode in an older one, so a backup of a newer minor is refused; an
    older minor or another patch release is a warning (the API server converts what an older one
    stored). Unknown versions cannot be compared: a warning. Pure."""
    if not running_version or backup_version == running_version:
        return None, None
    taken, running = _minor(backup_version), _minor(running_version)
    if taken is not None and running is not None and taken > running:
        return (
            f"backup taken at Kubernetes {backup_version}, newer than the {running_version} the "
            "tenant runs: an older API server may not read what a newer one stored; upgrade the "
            "tenant first",
            None,
        )
    return None, f"backup taken at Kubernetes {backup_version}, tenant runs {running_version}"


def cmd_backup() -> None:
    tenant, prefix = _tenant(), _prefix()
    kubernetes_version = _kubernetes_version()
    if not kubernetes_version:
        raise BackupError(
            "the tenant's Kubernetes version is unknown: set BACKUP_KUBERNETES_VERSION or run "
            "api-server-endpoints.sh first"
        )
    try:
        retention = int(_env("BACKUP_RETENTION"))
    except ValueError:
        raise BackupError("BACKUP_RETENTION must be an integer") from None
    if retention < 1:
        raise BackupError("BACKUP_RETENTION must be at least 1")
    key = _archive_key()
    pki = _job_pki()
    s3 = S3()
    work = _work_dir()
    export = Export(_export_path(), prefix)
    revision = export.revision
    now = _now()
    archive = work / ".archive.json.gz"
    writer = ArchiveWriter(archive)
    try:
        for kv in export:
            if not kv.leased:
                # Refused here, loudly, rather than in every later restore (fetch refuses it too).
                _key_restorable(kv.key)
            writer.add(kv)
        metadata, _, _ = writer.finish(
            {
                "tenant": tenant,
                "prefix": prefix,
                "kubernetesVersion": kubernetes_version,
                "revision": revision,
                "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            pki,
        )
    except BaseException:
        writer.abandon()
        raise
    try:
        _publish(s3, tenant, retention, revision, now, archive, metadata, key)
    finally:
        archive.unlink(missing_ok=True)


def _publish(
    s3: S3,
    tenant: str,
    retention: int,
    revision: int,
    now: dt.datetime,
    archive: Path,
    metadata: dict[str, Any],
    key: bytes,
) -> None:
    """Refuse what must not become a good backup, encrypt, upload, read back, verify, write the
    manifest and prune."""
    if metadata["keyCount"] == 0:
        # A live Kubernetes prefix always holds keys (namespaces, RBAC bootstrap): restoring an
        # empty backup would wipe the tenant.
        raise BackupError(
            f"the export of {metadata['prefix']} holds no key: refusing an empty backup"
        )
    backups = list_backups(s3, tenant)
    previous = _previous_good(s3, backups)
    reason = suspect_reason(metadata["keyCount"], revision, previous[1] if previous else None)
    accepted = os.environ.get("BACKUP_ACCEPT_SUSPECT", "") not in ("", "0", "false")
    if reason and not accepted:
        raise BackupError(
            f"refusing the backup: {reason}; previous good backup {previous[0] if previous else ''}"
            " stays latest (if the change is intended: make backup ... ACCEPT_SUSPECT=1)"
        )
    name = archive_name(s3.prefix, tenant, now, revision)
    if any(b.name == name and b.complete for b in backups):
        # The same revision in the same second (a manual and a scheduled backup at once): that
        # backup already holds exactly this. Writing it again would risk it: a failed read-back
        # deletes the archive it wrote, which is the existing one's.
        _print({"action": "backup", "name": name, "unchanged": True, "pruned": []})
        return
    sealed = archive.with_name(".sealed")
    encrypt_file(archive, sealed, key, name)
    archive.unlink()
    size, sha = sealed.stat().st_size, _file_sha256(sealed)
    try:
        _upload_and_check(s3, name, sealed, size, sha, metadata, key, previous, reason)
    finally:
        sealed.unlink(missing_ok=True)
    pruned = prune(s3, tenant, retention, keep=name)
    _print(
        {
            "action": "backup",
            "name": name,
            "bucket": s3.bucket,
            "size": size,
            "sha256": sha,
            **{k: metadata[k] for k in ("tenant", "revision", "time", "keyCount")},
            "leasedKeyCount": metadata["leasedKeyCount"],
            "keyId": key_id(key),
            "pruned": pruned,
        }
    )


def _upload_and_check(
    s3: S3,
    name: str,
    sealed: Path,
    size: int,
    sha: str,
    metadata: dict[str, Any],
    key: bytes,
    previous: tuple[str, dict[str, Any]] | None,
    reason: str | None,
) -> None:
    """Upload the encrypted archive, read it back and decrypt and check what the store holds,
    and only then write the manifest that makes the backup complete."""
    manifest = {
        "metadata": metadata,
        "archive": {"name": name, "size": size, "sha256": sha},
        "encryption": {"cipher": CIPHER, "keyId": key_id(key)},
        "previous": (
            {k: previous[1].get(k) for k in ("revision", "keyCount")} | {"name": previous[0]}
            if previous
            else None
        ),
        **({"accepted": reason} if reason else {}),
    }
    s3.put_file(name, sealed, sha, "application/octet-stream")
    # Read back what the store holds before the manifest makes the backup visible as complete.
    echoed = sealed.with_name(".echoed")
    opened = sealed.with_name(".echoed.json.gz")
    try:
        s3.get_file(name, echoed)
        if _file_sha256(echoed) != sha:
            raise BackupError(f"{name}: the stored archive differs from the one uploaded")
        decrypt_file(echoed, opened, key, name)
        reader = ArchiveReader(opened)
        stored = sum(1 for _ in reader)
        if reader.metadata != metadata or stored != metadata["keyCount"]:
            raise BackupError(f"{name}: the stored archive does not hold what was exported")
    except BackupError as err:
        # Without its manifest it is never restored, and the next backup prunes it.
        with contextlib.suppress(BackupError):
            s3.delete(name)
        raise err from None
    finally:
        echoed.unlink(missing_ok=True)
        opened.unlink(missing_ok=True)
    s3.put(
        manifest_name(name),
        json.dumps(manifest, sort_keys=True, indent=1).encode("utf-8"),
        "application/json",
    )


def prune(s3: S3, tenant: str, retention: int, keep: str) -> list[str]:
    """Delete the tenant's complete backups beyond the ``retention`` newest, and archives left
    without a manifest (a failed run) older than ``keep``; never ``keep`` itself."""
    backups = list_backups(s3, tenant)
    complete = [b for b in backups if b.complete]
    doomed = [b for b in complete[retention:] if b.name != keep]
    kept = next((b for b in backups if b.name == keep), None)
    if kept is not None:
        doomed += [b for b in backups if not b.complete and b.sort_key() < kept.sort_key()]
    for backup in doomed:
        # The manifest first: a backup without one is no longer offered for restore.
        s3.delete(manifest_name(backup.name))
        s3.delete(backup.name)
    return [b.name for b in doomed]


def cmd_list() -> None:
    for backup in list_backups(S3(), _tenant()):
        _print(
            {
                "name": backup.name,
                "time": backup.time,
                "revision": backup.revision,
                "size": backup.size,
                "complete": backup.complete,
            }
        )


def _key_restorable(key: bytes) -> None:
    """etcd-import.sh passes each key as one argv word read from a file: no NUL (argv ends
    there) and no newline (bash's command substitution strips trailing ones)."""
    if b"\x00" in key or b"\n" in key:
        raise BackupError(f"key {key!r} holds a NUL or newline byte; etcdctl cannot restore it")


def clone_source(tenant: str, prefix: str, env: Mapping[str, str]) -> tuple[str, str]:
    """The tenant and key prefix whose backup a restore reads: this tenant's own, or, to restore
    another tenant's backup here (BACKUP_SOURCE_TENANT, BACKUP_SOURCE_PREFIX), that tenant's.
    Refuses a source that names a prefix overlapping this tenant's. Pure."""
    source = env.get("BACKUP_SOURCE_TENANT") or tenant
    if source == tenant:
        return tenant, prefix
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", source):
        raise BackupError(f"BACKUP_SOURCE_TENANT has characters not allowed in a name: {source!r}")
    source_prefix = env.get("BACKUP_SOURCE_PREFIX") or ""
    if not (
        source_prefix.startswith("/") and source_prefix.endswith("/") and len(source_prefix) > 2
    ):
        raise BackupError(
            f"BACKUP_SOURCE_PREFIX must be tenant {source}'s key prefix /<schema>/, got "
            f"{source_prefix!r}"
        )
    if source_prefix.startswith(prefix) or prefix.startswith(source_prefix):
        raise BackupError(
            f"tenant {source}'s prefix {source_prefix} overlaps {tenant}'s {prefix}: refusing to "
            "restore one into the other"
        )
    return source, source_prefix


def rewrite_key(key: bytes, source_prefix: str, prefix: str) -> bytes:
    """A key of the source tenant's backup under this tenant's prefix. Pure."""
    inside = source_prefix.encode("utf-8")
    if not key.startswith(inside):
        raise BackupError(f"key {key!r} is outside BACKUP_PREFIX {source_prefix}")
    return prefix.encode("utf-8") + key[len(inside) :]


# The import writes the plan in transactions (etcd-import.sh): at most TXN_OPS puts (etcd's
# --max-txn-ops defaults to 128, etcd-io/etcd v3.5.6 server/embed/config.go) and about TXN_BYTES
# of keys and values (its --max-request-bytes defaults to 1.5 MiB, config.go:58), one larger value
# alone.
TXN_OPS = 64
TXN_BYTES = 1 << 20


def txn_quote(data: bytes) -> str:
    """``data`` as a Go double-quoted string, every byte kept: etcdctl txn reads each request line
    with argify, which unquotes "..." words with fmt.Sscanf %q (etcd-io/etcd v3.5.6
    etcdctl/ctlv3/command/util.go:59-77, the same in v3.4.23), and a \\xHH escape in a Go string
    literal is that byte. Printable ASCII stays as it is. Pure."""
    out = []
    for byte in data:
        if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C):
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'


def _txn_ops() -> int:
    """BACKUP_TXN_OPS (1 to 128; the drill uses 1 to kill etcd in the middle of an import),
    else TXN_OPS."""
    text = os.environ.get("BACKUP_TXN_OPS") or str(TXN_OPS)
    if not text.isdigit() or not 1 <= int(text) <= 128:
        raise BackupError("BACKUP_TXN_OPS must be a number of puts from 1 to 128")
    return int(text)


class TxnWriter:
    """The plan's puts as ``etcdctl txn`` inputs, ``txn/NNNNNN``: no comparison, the puts as the
    success branch (``put -- "key" "value"``: ``--`` so that a word starting with ``-`` is never
    a flag), no failure branch."""

    def __init__(self, directory: Path, ops: int = TXN_OPS) -> None:
        self.directory, self.ops = directory, ops
        directory.mkdir()
        self.batches = 0
        self._lines: list[str] = []
        self._bytes = 0

    def add(self, key: bytes, value: bytes) -> None:
        size = len(key) + len(value)
        if self._lines and (len(self._lines) >= self.ops or self._bytes + size > TXN_BYTES):
            self.flush()
        self._lines.append(f"put -- {txn_quote(key)} {txn_quote(value)}")
        self._bytes += size

    def flush(self) -> None:
        if not self._lines:
            return
        text = "\n" + "\n".join(self._lines) + "\n\n\n"
        (self.directory / f"{self.batches:06d}").write_text(text, encoding="ascii")
        self.batches += 1
        self._lines, self._bytes = [], 0


def cmd_fetch() -> None:
    tenant, prefix = _tenant(), _prefix()
    source, source_prefix = clone_source(tenant, prefix, os.environ)
    work = _work_dir()
    plan = work / PLAN_DIR
    # A plan left by an earlier run must never be applied in place of this one.
    shutil.rmtree(plan, ignore_errors=True)
    s3 = S3()
    wanted = _env("BACKUP_NAME")
    backups = list_backups(s3, source)
    if wanted == "latest":
        complete = [b for b in backups if b.complete]
        if not complete:
            raise BackupError(f"no complete backup of tenant {source} under {s3.prefix!r}")
        name = complete[0].name
    else:
        name = wanted
        if not _name_pattern(s3.prefix, source).fullmatch(name):
            raise BackupError(
                f"BACKUP_NAME {name!r} is not a backup of tenant {source} under {s3.prefix!r}"
            )
    manifest = _manifest_of(s3, name)
    metadata = _check_manifest(s3, name, manifest, source, source_prefix)
    key = _archive_key()
    _check_encryption(name, manifest, key)
    refusal, warning = version_refusal(
        str(metadata.get("kubernetesVersion") or ""), _kubernetes_version()
    )
    if refusal:
        raise BackupError(f"{name}: {refusal}")
    work.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=work))
    try:
        archive = staging / "archive.json.gz"
        sealed = staging / "sealed"
        _download(s3, name, manifest, sealed)
        # The whole archive is authenticated before a byte of it is parsed.
        decrypt_file(sealed, archive, key, name)
        sealed.unlink()
        (staging / "keys").mkdir()
        (staging / "values").mkdir()
        txn = TxnWriter(staging / "txn", _txn_ops())
        restored, skipped = 0, []
        reader = ArchiveReader(archive)
        # One key at a time from the archive into the plan; the archive's own checks (counts,
        # payload digest) run when it ends, and the plan is only renamed into place after them.
        # Another tenant's keys move under this tenant's prefix (their order is kept: the same
        # byte prefix is replaced on every key).
        for kv in reader:
            key = rewrite_key(kv.key, source_prefix, prefix)
            if kv.leased:
                skipped.append(key.decode("utf-8", "backslashreplace"))
                continue
            _key_restorable(key)
            (staging / "keys" / f"{restored:08d}").write_bytes(key)
            (staging / "values" / f"{restored:08d}").write_bytes(kv.value)
            txn.add(key, kv.value)
            restored += 1
        txn.flush()
        if reader.metadata != metadata:
            raise BackupError(f"{name}: archive metadata differs from its manifest")
        archive.unlink()
        # The tenant's root keys, as merge patches of its Secrets (tenant-pki.sh applies them);
        # never another tenant's: two tenants sharing a CA and service-account key would accept
        # each other's credentials.
        (staging / "pki").mkdir()
        for secret, data in reader.pki.items() if source == tenant else ():
            if not re.fullmatch(r"[a-z0-9-]+", secret):
                raise BackupError(f"{name}: its pki names a Secret {secret!r}")
            (staging / "pki" / f"{secret}.json").write_text(json.dumps({"data": data}))
        (staging / "prefix").write_text(prefix, encoding="utf-8")
        summary = {
            "backupName": name,
            "prefix": prefix,
            "bucket": s3.bucket,
            "metadata": metadata,
            "keysToRestore": restored,
            "leasedKeysSkipped": skipped,
            "pkiSecrets": sorted(reader.pki) if source == tenant else [],
            "tenant": tenant,
            "sourceTenant": source,
        }
        (staging / "plan.json").write_text(json.dumps(summary, sort_keys=True, indent=1) + "\n")
        staging.rename(plan)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    _print(
        {
            "action": "fetch",
            "name": name,
            "tenant": tenant,
            "revision": metadata["revision"],
            "time": metadata["time"],
            "keysToRestore": restored,
            "leasedKeysSkipped": len(skipped),
            "pkiSecrets": metadata.get("pkiSecrets", []) if source == tenant else [],
            **({"from": source} if source != tenant else {}),
            "plan": str(plan),
            **({"warning": warning} if warning else {}),
        }
    )


def _plan_summary(plan: Path) -> dict[str, Any]:
    try:
        summary = json.loads((plan / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BackupError(f"restore plan {plan} unreadable: {err}") from None
    if not isinstance(summary, dict):
        raise BackupError(f"restore plan {plan} unreadable")
    return summary


def _plan_entries(plan: Path) -> Iterator[tuple[bytes, bytes]]:
    """The plan's keys and values in its own order (the archive's: keys ascending)."""
    try:
        for path in sorted((plan / "keys").iterdir()):
            yield path.read_bytes(), (plan / "values" / path.name).read_bytes()
    except OSError as err:
        raise BackupError(f"restore plan {plan} unreadable: {err}") from None


def read_plan(plan: Path) -> tuple[dict[str, Any], dict[bytes, bytes]]:
    return _plan_summary(plan), dict(_plan_entries(plan))


def compare(
    expected: Iterator[tuple[bytes, bytes]], actual: Iterator[KV]
) -> tuple[int, int, int, int, bytes | None]:
    """Merge two key-ascending streams: (expected keys, missing, unexpected, different, first
    difference). Pure; memory: one key of each."""
    missing = extra = differ = count = 0
    first: bytes | None = None
    want = next(expected, None)
    have = next(actual, None)
    while want is not None or have is not None:
        differs: bytes | None = None
        if want is not None and (have is None or want[0] < have.key):
            missing += 1
            count += 1
            differs = want[0]
            want = next(expected, None)
        elif have is not None and (want is None or have.key < want[0]):
            extra += 1
            differs = have.key
            have = next(actual, None)
        elif want is not None and have is not None:
            count += 1
            if want[1] != have.value:
                differ += 1
                differs = have.key
            want, have = next(expected, None), next(actual, None)
        if first is None:
            first = differs
    return count, missing, extra, differ, first


def cmd_check_restored() -> None:
    tenant, prefix = _tenant(), _prefix()
    plan = _work_dir() / PLAN_DIR
    summary = _plan_summary(plan)
    planned_for = summary.get("tenant", summary.get("metadata", {}).get("tenant"))
    if planned_for != tenant or summary.get("prefix") != prefix:
        raise BackupError(f"restore plan is not for tenant {tenant} and prefix {prefix}")
    expected = _plan_entries(plan)
    count, missing, extra, differ, first = compare(expected, iter(Export(_export_path(), prefix)))
    if missing or extra or differ:
        raise BackupError(
            f"restore incomplete: {missing} missing, {extra} unexpected, "
            f"{differ} different (first: {first!r})"
        )
    metadata = summary["metadata"]
    _print(
        {
            "action": "restored",
            "tenant": tenant,
            "name": summary["backupName"],
            "revision": metadata["revision"],
            "time": metadata["time"],
            "kubernetesVersion": metadata["kubernetesVersion"],
            "keysRestored": count,
            "leasedKeysSkipped": summary["leasedKeysSkipped"],
            **(
                {"from": summary["sourceTenant"]}
                if summary.get("sourceTenant", tenant) != tenant
                else {}
            ),
        }
    )


COMMANDS = {
    "backup": cmd_backup,
    "list": cmd_list,
    "fetch": cmd_fetch,
    "check-restored": cmd_check_restored,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in COMMANDS:
        print(f"usage: tenant_backup.py {{{','.join(COMMANDS)}}}", file=sys.stderr)
        return 2
    try:
        COMMANDS[args[0]]()
    except BackupError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
