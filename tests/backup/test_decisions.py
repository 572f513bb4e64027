"""The pure decisions of scripts/backup/tenant_backup.py, without etcd or S3."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
from pathlib import Path
from typing import Any

import pytest

from tests.backup.conftest import load_tool

tool = load_tool()


@pytest.mark.parametrize(
    ("keys", "revision", "previous", "words"),
    [
        (100, 50, None, None),
        (100, 50, {"keyCount": 100, "revision": 40}, None),
        (50, 50, {"keyCount": 100, "revision": 40}, None),
        (49, 50, {"keyCount": 100, "revision": 40}, "key count fell from 100 to 49"),
        (1000, 39, {"keyCount": 100, "revision": 40}, "revision went back from 40 to 39"),
        (100, 50, {"revision": 40}, "has no keyCount"),
    ],
)
def test_suspect_backups(
    keys: int, revision: int, previous: dict[str, int] | None, words: str | None
) -> None:
    reason = tool.suspect_reason(keys, revision, previous)
    if words is None:
        assert reason is None
    else:
        assert reason is not None
        assert words in reason


@pytest.mark.parametrize(
    ("taken", "running", "refused", "warned"),
    [
        ("v1.33.4", "v1.33.4", False, False),
        ("v1.33.4", "", False, False),
        ("v1.33.4", "v1.33.5", False, True),
        ("v1.32.9", "v1.33.4", False, True),
        ("v1.35.0", "v1.33.4", True, False),
        ("v1.34.0", "v1.33.9", True, False),
        ("v2.0.0", "v1.35.0", True, False),
        ("not-a-version", "v1.33.4", False, True),
    ],
)
def test_a_backup_of_a_newer_minor_is_refused(
    taken: str, running: str, refused: bool, warned: bool
) -> None:
    refusal, warning = tool.version_refusal(taken, running)
    assert (refusal is not None) is refused
    assert (warning is not None) is warned


NAME = "p/tenant_a-20260102T030405Z-rev42.json.gz"


def _manifest(name: str = NAME, time: str = "2026-01-02T03:04:05Z", rev: int = 42) -> dict:
    return {"archive": {"name": name}, "metadata": {"time": time, "revision": rev}}


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        (_manifest(), None),
        (_manifest(name="p/tenant_a-20250101T000000Z-rev7.json.gz"), "was written for"),
        (_manifest(time="2025-01-01T00:00:00Z"), "its manifest says time"),
        (_manifest(rev=41), "revision 41"),
        (_manifest(time="yesterday"), "is not a time"),
    ],
)
def test_the_name_must_be_the_manifests_own(manifest: dict, words: str | None) -> None:
    reason = tool.name_mismatch(NAME, manifest, "p/", "tenant_a")
    if words is None:
        assert reason is None
    else:
        assert reason is not None
        assert words in reason


KVS = [
    tool.KV(b"/t/a", b"\x00\n", False),
    tool.KV(b"/t/b", b"", True),
    tool.KV(b"/t/c\xff", bytes(range(256)) * 50, False),
]
WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def _streamed(path: Path, kvs: list) -> dict:
    writer = tool.ArchiveWriter(path)
    for kv in kvs:
        writer.add(kv)
    metadata, size, sha = writer.finish(
        {
            "tenant": "t",
            "prefix": "/t/",
            "kubernetesVersion": "v1.33.4",
            "revision": 9,
            "time": "2026-01-02T03:04:05Z",
        }
    )
    assert size == path.stat().st_size
    assert sha == hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(metadata)


def test_the_streamed_archive_is_the_in_memory_one(tmp_path: Path) -> None:
    """Archives written a key at a time read back as build_archive's, and the other way round:
    backups taken before the streaming packing stay restorable."""
    metadata = _streamed(tmp_path / "a.gz", KVS)
    expected, blob = tool.build_archive(
        tenant="t", prefix="/t/", kubernetes_version="v1.33.4", revision=9, when=WHEN, kvs=KVS
    )
    assert metadata == expected
    assert gzip.decompress((tmp_path / "a.gz").read_bytes()) == gzip.decompress(blob)
    (tmp_path / "b.gz").write_bytes(blob)
    reader = tool.ArchiveReader(tmp_path / "b.gz")
    assert list(reader) == KVS
    assert reader.metadata == expected


def test_an_empty_archive_streams(tmp_path: Path) -> None:
    metadata = _streamed(tmp_path / "a.gz", [])
    reader = tool.ArchiveReader(tmp_path / "a.gz")
    assert list(reader) == []
    assert reader.metadata == metadata


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda raw: raw[: len(raw) // 2], "truncated"),
        (lambda raw: raw + b" ", "data after its end"),
        (lambda raw: raw.replace(b'"keyCount":3', b'"keyCount":4'), "its metadata says 4"),
        (lambda raw: b"[" + raw, "expected"),
    ],
    ids=["truncated", "trailing", "count", "not-ours"],
)
def test_the_streaming_reader_refuses_a_damaged_document(
    tmp_path: Path, damage: Any, words: str
) -> None:
    _streamed(tmp_path / "a.gz", KVS)
    raw = gzip.decompress((tmp_path / "a.gz").read_bytes())
    (tmp_path / "b.gz").write_bytes(gzip.compress(damage(raw)))
    with pytest.raises(tool.BackupError, match=words):
        list(tool.ArchiveReader(tmp_path / "b.gz"))


def test_the_writer_refuses_keys_out_of_order(tmp_path: Path) -> None:
    writer = tool.ArchiveWriter(tmp_path / "a.gz")
    writer.add(KVS[1])
    with pytest.raises(tool.BackupError, match="out of order"):
        writer.add(KVS[0])
    writer.abandon()
    assert not (tmp_path / "a.gz").exists()


@pytest.mark.parametrize(
    ("expected", "actual", "result"),
    [
        ({b"a": b"1", b"b": b"2"}, {b"a": b"1", b"b": b"2"}, (2, 0, 0, 0, None)),
        ({b"a": b"1", b"b": b"2"}, {b"b": b"2"}, (2, 1, 0, 0, b"a")),
        ({b"b": b"2"}, {b"a": b"1", b"b": b"2"}, (1, 0, 1, 0, b"a")),
        ({b"a": b"1", b"b": b"2"}, {b"a": b"1", b"b": b"3"}, (2, 0, 0, 1, b"b")),
        ({}, {b"z": b""}, (0, 0, 1, 0, b"z")),
        ({b"z": b""}, {}, (1, 1, 0, 0, b"z")),
    ],
)
def test_compare_merges_two_sorted_streams(
    expected: dict[bytes, bytes], actual: dict[bytes, bytes], result: tuple
) -> None:
    got = tool.compare(
        iter(sorted(expected.items())),
        iter(tool.KV(k, v, False) for k, v in sorted(actual.items())),
    )
    assert got == result


# ------------------------------------------------------------------------ archive encryption


def test_an_archive_decrypts_only_with_its_key_and_under_its_own_name() -> None:
    key, other = bytes(range(32)), bytes(range(1, 33))
    name = "p/tenant_a-20260101T000000Z-rev7.json.gz"
    plain = gzip.compress(b'{"kvs":[],"metadata":{"password":"hunter2"}}')
    sealed = tool.encrypt_bytes(plain, key, name)
    assert b"hunter2" not in sealed
    assert plain not in sealed
    assert tool.decrypt_bytes(sealed, key, name) == plain
    # Two encryptions of the same archive differ (a fresh nonce each time).
    assert tool.encrypt_bytes(plain, key, name) != sealed
    for wrong_key, wrong_name in ((other, name), (key, name.replace("rev7", "rev8"))):
        with pytest.raises(tool.BackupError, match="does not decrypt with this tenant's key"):
            tool.decrypt_bytes(sealed, wrong_key, wrong_name)
    # The S3 prefix is not bound: a bucket copied under another prefix still restores.
    assert tool.decrypt_bytes(sealed, key, "other/" + name.split("/")[-1]) == plain
    flipped = sealed[:-20] + bytes([sealed[-20] ^ 1]) + sealed[-19:]
    with pytest.raises(tool.BackupError, match="does not decrypt"):
        tool.decrypt_bytes(flipped, key, name)
    with pytest.raises(tool.BackupError, match="is not encrypted"):
        tool.decrypt_bytes(plain, key, name)


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        ({}, "is not encrypted"),
        ({"encryption": {"cipher": "none"}}, "is encrypted with 'none'"),
        ({"encryption": {"cipher": "AES-256-GCM", "keyId": "0" * 16}}, "was encrypted with key"),
    ],
)
def test_a_backup_the_tenants_key_cannot_open_is_refused(
    manifest: dict[str, Any], words: str
) -> None:
    refusal = tool.encryption_refusal(manifest, bytes(32))
    assert refusal is not None
    assert words in refusal
    good = {"encryption": {"cipher": "AES-256-GCM", "keyId": tool.key_id(bytes(32))}}
    assert tool.encryption_refusal(good, bytes(32)) is None
    assert tool.key_id(bytes(32)) != tool.key_id(bytes(31) + b"\x01")


@pytest.mark.parametrize("text", ["", "ab" * 31, "zz" * 32, "ab" * 33])
def test_an_archive_key_must_be_64_hex_digits(text: str) -> None:
    with pytest.raises(tool.BackupError, match="not 64 hex digits") as caught:
        tool.parse_key(text)
    assert text not in str(caught.value) or not text
    assert tool.parse_key("AB" * 32 + "\n") == bytes([0xAB]) * 32


def test_the_archived_root_keys_are_checked_against_the_metadata() -> None:
    pki = {"ca": {"ca.key": "a2V5", "ca.crt": "Y3J0"}}
    metadata, blob = tool.build_archive(
        tenant="t",
        prefix="/t/",
        kubernetes_version="v1.35.0",
        revision=3,
        when=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        kvs=[tool.KV(b"/t/a", b"1", False)],
        pki=pki,
    )
    assert metadata["pkiSecrets"] == ["ca"]
    tool.parse_archive(blob)
    swapped = gzip.compress(gzip.decompress(blob).replace(b"a2V5", b"b3Ro"))
    with pytest.raises(tool.BackupError, match="pki does not match its metadata"):
        tool.parse_archive(swapped)


def test_root_keys_are_read_as_the_kubelet_mounts_them(tmp_path: Path) -> None:
    real = tmp_path / "ca" / "..2026"
    real.mkdir(parents=True)
    (real / "ca.key").write_bytes(b"\x00key\n")
    (tmp_path / "ca" / "..data").symlink_to("..2026")
    (tmp_path / "ca" / "ca.key").symlink_to("..data/ca.key")
    assert tool.read_pki(tmp_path, ["ca"]) == {"ca": {"ca.key": "AGtleQo="}}
    with pytest.raises(tool.BackupError, match="sa-certificate Secret is not readable"):
        tool.read_pki(tmp_path, ["ca", "sa-certificate"])
