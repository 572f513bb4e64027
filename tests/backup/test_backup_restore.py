"""The backup Job's steps for real: etcd-export.sh and etcd-import.sh with Debian's etcdctl
against a TLS etcd whose tenants are set up as Kamaji sets them up, tenant_backup.py against
moto's S3 (which checks every signature), each step a subprocess with the Job's environment.

Seeds hold protobuf-like values (NUL bytes, 0xff, trailing newlines), an empty value, a large
value and a key bound to a lease. etcd is shared by the tests; each test seeds both tenants
afresh and uses its own S3 prefix.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.backup.conftest import SCRIPTS, Etcd, S3Server, load_tool, run_script, run_tool

tool = load_tool()

A_SECRET_KEY = b"/tenant_a/registry/secrets/default/db-password"
A_SECRET_VALUE = base64.b64encode(b"correct horse battery staple 4711")
A_SEEDS: dict[bytes, bytes] = {
    b"/tenant_a/registry/pods/default/web-0": b"k8s\x00\n\x02v1\x12\x03Pod\x1a\x00\xff\xfe\n\n",
    b"/tenant_a/registry/configmaps/kube-system/\xc3\xbcml": b"\x00\x00\x00",
    b"/tenant_a/registry/secrets/default/with space": b"\n",
    b"/tenant_a/registry/empty": b"",
    b"/tenant_a/registry/big": bytes(range(256)) * 400,
    A_SECRET_KEY: b'k8s\x00{"data":{"password":"' + A_SECRET_VALUE + b'"}}',
}
A_LEASED = b"/tenant_a/registry/events/default/web-0.1"
B_SEEDS: dict[bytes, bytes] = {
    b"/tenant_b/registry/pods/default/db-0": b"k8s\x00tenant b\x00",
    b"/tenant_b/registry/leases/x": b"\x01\x02",
}


def seed(etcd: Etcd) -> None:
    etcd.ctl("del", "--prefix", "/tenant_a/")
    etcd.ctl("del", "--prefix", "/tenant_b/")
    for key, value in {**A_SEEDS, **B_SEEDS}.items():
        etcd.put(key, value)
    lease = etcd.ctl("lease", "grant", "3600").stdout.decode().split()[1]
    etcd.put(A_LEASED, b"event\x00", lease=lease)
    # The seeds themselves, read back through base64 JSON: the stdin path of put is lossless.
    _, a = etcd.dump("/tenant_a/")
    assert {k: v["value"] for k, v in a.items()} == {**A_SEEDS, A_LEASED: b"event\x00"}
    assert a[A_LEASED]["lease"] != 0


@pytest.fixture
def job(etcd: Etcd, s3: S3Server, s3_prefix: str, tmp_path: Path) -> dict[str, str]:
    """tenant_a's backup Job environment: its own etcd user, its own S3 prefix."""
    seed(etcd)
    return {
        **etcd.env("tenant_a"),
        **s3.env(s3_prefix),
        "BACKUP_TENANT": "tenant_a",
        "BACKUP_PREFIX": "/tenant_a/",
        "BACKUP_KUBERNETES_VERSION": "v1.33.4",
        "BACKUP_RETENTION": "3",
        "WORK_DIR": str(tmp_path / "work"),
        "EXPORT_FILE": "export.json",
    }


def ok(result: Any) -> Any:
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def refused(result: Any) -> str:
    """A refusal: non-zero, nothing on stdout, exactly one line on stderr, starting "error:"."""
    assert result.returncode != 0, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return str(lines[0])


def backup(job: dict[str, str]) -> dict[str, Any]:
    ok(run_script("etcd-export.sh", job))
    out = ok(run_tool("backup", job)).stdout.splitlines()
    assert len(out) == 1
    return dict(json.loads(out[0]))


def restore(job: dict[str, str], name: str = "latest") -> dict[str, Any]:
    env = {**job, "BACKUP_NAME": name}
    ok(run_tool("fetch", env))
    ok(run_script("etcd-import.sh", env))
    ok(run_script("etcd-export.sh", env))
    return dict(json.loads(ok(run_tool("check-restored", env)).stdout))


def test_backup_and_restore_byte_for_byte(etcd: Etcd, s3: S3Server, job: dict[str, str]) -> None:
    revision_before, _ = etcd.dump("/")
    summary = backup(job)
    assert summary["tenant"] == "tenant_a"
    assert summary["keyCount"] == len(A_SEEDS) + 1
    assert summary["leasedKeyCount"] == 1
    assert summary["revision"] == revision_before
    assert re.fullmatch(
        re.escape(job["S3_PREFIX"]) + rf"tenant_a-\d{{8}}T\d{{6}}Z-rev{revision_before}\.json\.gz",
        summary["name"],
    )
    # The stored archive is encrypted: no key and no value is readable in what the store holds,
    # gzip'd or not; decrypted with the tenant's key and read with gzip/json here, it holds
    # exactly the exported bytes.
    client = tool.S3(job)
    blob = client.get(summary["name"])
    assert hashlib.sha256(blob).hexdigest() == summary["sha256"]
    assert blob.startswith(tool.MAGIC)
    assert summary["keyId"] == tool.key_id(s3.key)
    with pytest.raises(OSError, match="Not a gzipped file"):
        gzip.decompress(blob)
    plain = gzip.decompress(tool.decrypt_bytes(blob, s3.key, summary["name"]))
    # The Secret's value, as the archive holds it (base64 in the JSON) and as etcd does.
    for readable in (A_SECRET_VALUE, base64.b64encode(A_SEEDS[A_SECRET_KEY]), A_SECRET_KEY):
        assert readable not in blob
    assert base64.b64encode(A_SEEDS[A_SECRET_KEY]) in plain
    document = json.loads(plain)

    stored = {
        base64.b64decode(kv["key"]): (base64.b64decode(kv["value"]), kv["leased"])
        for kv in document["kvs"]
    }
    assert stored == {
        **{k: (v, False) for k, v in A_SEEDS.items()},
        A_LEASED: (b"event\x00", True),
    }
    manifest = json.loads(client.get(summary["name"][: -len(".json.gz")] + ".manifest.json"))
    assert manifest["archive"]["size"] == len(blob)
    assert manifest["metadata"] == document["metadata"]
    assert document["metadata"]["kubernetesVersion"] == "v1.33.4"

    _, b_before = etcd.dump("/tenant_b/")
    # Disaster: tenant_a's keys are gone and a stray key appeared.
    etcd.ctl("del", "--prefix", "/tenant_a/")
    etcd.put("/tenant_a/registry/stray", b"not in the backup")

    result = restore(job)
    assert result == {
        "action": "restored",
        "tenant": "tenant_a",
        "name": summary["name"],
        "revision": revision_before,
        "time": document["metadata"]["time"],
        "kubernetesVersion": "v1.33.4",
        "keysRestored": len(A_SEEDS),
        "leasedKeysSkipped": [A_LEASED.decode()],
    }
    _, a_after = etcd.dump("/tenant_a/")
    assert {k: v["value"] for k, v in a_after.items()} == A_SEEDS
    assert all(v["lease"] == 0 for v in a_after.values())
    _, b_after = etcd.dump("/tenant_b/")
    assert b_after == b_before  # values, create/mod revisions and versions untouched


def test_import_is_idempotent(etcd: Etcd, job: dict[str, str]) -> None:
    backup(job)
    restore(job)
    _, first = etcd.dump("/tenant_a/")
    ok(run_script("etcd-import.sh", {**job, "BACKUP_NAME": "latest"}))
    _, second = etcd.dump("/tenant_a/")
    assert {k: v["value"] for k, v in second.items()} == {k: v["value"] for k, v in first.items()}


def test_tenant_cannot_read_or_write_another_tenants_prefix(
    etcd: Etcd, job: dict[str, str]
) -> None:
    """etcd itself refuses: tenant_a's certificate has no permission on /tenant_b/."""
    stolen = {**job, "BACKUP_PREFIX": "/tenant_b/"}
    result = run_script("etcd-export.sh", stolen)
    assert result.returncode != 0
    assert "permission denied" in result.stderr
    assert not (Path(job["WORK_DIR"]) / "export.json").exists()
    # Nor can it wipe tenant_b's keys with a plan made for /tenant_b/.
    _, b_before = etcd.dump("/tenant_b/")
    plan = Path(job["WORK_DIR"]) / "restore"
    (plan / "keys").mkdir(parents=True)
    (plan / "values").mkdir()
    (plan / "prefix").write_text("/tenant_b/")
    (plan / "plan.json").write_text("{}")
    result = run_script("etcd-import.sh", stolen)
    assert result.returncode != 0
    assert "permission denied" in result.stderr
    assert etcd.dump("/tenant_b/")[1] == b_before


def test_backup_refuses_a_key_outside_the_prefix(job: dict[str, str]) -> None:
    ok(run_script("etcd-export.sh", job))
    export = Path(job["WORK_DIR"]) / "export.json" / "page-000000.json"
    data = json.loads(export.read_text())

    data["kvs"][-1]["key"] = base64.b64encode(b"/tenant_b/registry/x").decode()
    export.write_text(json.dumps(data))
    line = refused(run_tool("backup", job))
    assert "outside BACKUP_PREFIX" in line
    assert tool.S3(job).list(job["S3_PREFIX"]) == []


def test_wrong_s3_secret_is_refused_without_printing_it(job: dict[str, str]) -> None:
    ok(run_script("etcd-export.sh", job))
    secret = "not-the-secret-at-all"
    line = refused(run_tool("backup", {**job, "AWS_SECRET_ACCESS_KEY": secret}))
    assert "SignatureDoesNotMatch" in line
    assert secret not in line


def _tamper_archive(job: dict[str, str], name: str, change: str) -> None:
    """Rewrite the stored backup ``name`` the way ``change`` says."""
    client = tool.S3(job)
    manifest_key = tool.manifest_name(name)
    blob = client.get(name)
    manifest = json.loads(client.get(manifest_key))
    key = tool.parse_key(Path(job["BACKUP_KEY_FILE"]).read_text())

    def rehash(new_blob: bytes) -> None:
        manifest["archive"].update(size=len(new_blob), sha256=hashlib.sha256(new_blob).hexdigest())

    if change == "flipped byte":
        blob = blob[:100] + bytes([blob[100] ^ 0x01]) + blob[101:]
    elif change == "flipped byte, manifest rehashed":
        blob = blob[:100] + bytes([blob[100] ^ 0x01]) + blob[101:]
        rehash(blob)
    elif change == "truncated":
        blob = blob[: len(blob) // 2]
    elif change == "truncated, manifest rehashed":
        blob = blob[: len(blob) // 2]
        rehash(blob)
    elif change == "manifest mismatch":
        manifest["metadata"]["keyCount"] += 1
    elif change == "not encrypted":
        # A backup as written before archives were encrypted, or planted by the bucket's writer.
        blob = tool.decrypt_bytes(blob, key, name)
        del manifest["encryption"]
        rehash(blob)
    elif change == "encrypted with another key":
        other = os.urandom(32)
        blob = tool.encrypt_bytes(tool.decrypt_bytes(blob, key, name), other, name)
        manifest["encryption"]["keyId"] = tool.key_id(other)
        rehash(blob)
    elif change == "another key, its id forged":
        blob = tool.encrypt_bytes(tool.decrypt_bytes(blob, key, name), os.urandom(32), name)
        rehash(blob)
    elif change in ("wrong tenant", "key outside prefix"):
        # Written by someone holding the tenant's key: the checks inside the archive still hold.
        metadata, kvs = tool.parse_archive(tool.decrypt_bytes(blob, key, name))
        tenant = "tenant_b" if change == "wrong tenant" else metadata["tenant"]
        if change == "key outside prefix":
            kvs.append(tool.KV(b"/tenant_b/registry/pods/default/db-0", b"mine now", False))
        metadata, blob = tool.build_archive(
            tenant=tenant,
            prefix=metadata["prefix"],
            kubernetes_version=metadata["kubernetesVersion"],
            revision=metadata["revision"],
            when=dt.datetime.strptime(metadata["time"], "%Y-%m-%dT%H:%M:%SZ"),
            kvs=kvs,
        )
        manifest["metadata"] = metadata
        blob = tool.encrypt_bytes(blob, key, name)
        rehash(blob)
    else:
        raise AssertionError(change)
    client.put(name, blob, "application/gzip")
    client.put(manifest_key, json.dumps(manifest).encode(), "application/json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("flipped byte", "sha256 does not match its manifest"),
        ("flipped byte, manifest rehashed", "does not decrypt with this tenant's key"),
        ("truncated", "manifest says"),
        ("truncated, manifest rehashed", "does not decrypt with this tenant's key"),
        ("not encrypted", "is not encrypted"),
        ("encrypted with another key", "was encrypted with key"),
        ("another key, its id forged", "does not decrypt with this tenant's key"),
        ("manifest mismatch", "archive metadata differs from its manifest"),
        ("wrong tenant", "belongs to tenant 'tenant_b'"),
        ("key outside prefix", "outside BACKUP_PREFIX"),
    ],
)
def test_a_damaged_backup_is_refused_and_etcd_left_alone(
    etcd: Etcd, job: dict[str, str], change: str, message: str
) -> None:
    name = backup(job)["name"]
    etcd.put("/tenant_a/registry/after-backup", b"live\x00data")
    before = etcd.dump("/")
    _tamper_archive(job, name, change)
    env = {**job, "BACKUP_NAME": name}
    # A plan from an earlier run must not survive a refused fetch either.
    (Path(job["WORK_DIR"]) / "restore" / "keys").mkdir(parents=True)
    line = refused(run_tool("fetch", env))
    assert message in line, line
    assert not (Path(job["WORK_DIR"]) / "restore").exists()
    assert [p.name for p in Path(job["WORK_DIR"]).iterdir()] == ["export.json"]
    # The Job's next step finds no plan and changes nothing.
    result = run_script("etcd-import.sh", env)
    assert result.returncode != 0
    assert "no restore plan" in result.stderr
    assert etcd.dump("/") == before


def test_fetch_refuses_a_name_of_another_tenant(job: dict[str, str]) -> None:
    backup(job)
    env = {**job, "BACKUP_NAME": job["S3_PREFIX"] + "tenant_b-20260101T000000Z-rev1.json.gz"}
    assert "is not a backup of tenant tenant_a" in refused(run_tool("fetch", env))


def test_retention_prunes_the_oldest_and_latest_is_the_newest(
    etcd: Etcd, job: dict[str, str]
) -> None:
    env = {**job, "BACKUP_RETENTION": "2"}
    names = []
    for generation in range(3):
        etcd.put("/tenant_a/registry/generation", str(generation).encode())
        summary = backup(env)
        names.append(summary["name"])
        assert summary["pruned"] == ([names[0]] if generation == 2 else [])
    listed = [json.loads(line) for line in ok(run_tool("list", env)).stdout.splitlines()]
    assert [b["name"] for b in listed] == [names[2], names[1]]
    assert all(b["complete"] for b in listed)
    keys = {obj.key for obj in tool.S3(env).list(env["S3_PREFIX"])}
    assert names[0] not in keys
    assert tool.manifest_name(names[0]) not in keys
    assert tool.manifest_name(names[1]) in keys

    etcd.put("/tenant_a/registry/generation", b"after all backups")
    result = restore(env, "latest")
    assert result["name"] == names[2]
    assert etcd.dump("/tenant_a/")[1][b"/tenant_a/registry/generation"]["value"] == b"2"
    # An older one by name restores that one.
    assert restore(env, names[1])["name"] == names[1]
    assert etcd.dump("/tenant_a/")[1][b"/tenant_a/registry/generation"]["value"] == b"1"


def test_retention_one_keeps_the_backup_just_written(job: dict[str, str]) -> None:
    env = {**job, "BACKUP_RETENTION": "1"}
    first = backup(env)["name"]
    second = backup(env)
    assert second["pruned"] == ([first] if first != second["name"] else [])
    listed = [json.loads(line)["name"] for line in ok(run_tool("list", env)).stdout.splitlines()]
    assert listed == [second["name"]]


def test_check_restored_fails_on_any_difference(etcd: Etcd, job: dict[str, str]) -> None:
    """The final check can fail: a changed byte, a missing key, an extra key."""
    backup(job)
    restore(job)
    key = b"/tenant_a/registry/pods/default/web-0"
    for damage in ("changed", "missing", "extra"):
        restore(job)
        if damage == "changed":
            etcd.put(key, A_SEEDS[key][:-1] + b"\x00")
        elif damage == "missing":
            etcd.ctl("del", key.decode())
        else:
            etcd.put("/tenant_a/registry/new", b"x")
        ok(run_script("etcd-export.sh", job))
        line = refused(run_tool("check-restored", job))
        assert f"{1 if damage == 'missing' else 0} missing" in line, line
        assert f"{1 if damage == 'extra' else 0} unexpected" in line, line
        assert f"{1 if damage == 'changed' else 0} different" in line, line


def test_latest_without_any_backup_is_refused(job: dict[str, str]) -> None:
    line = refused(run_tool("fetch", {**job, "BACKUP_NAME": "latest"}))
    assert "no complete backup of tenant tenant_a" in line


def test_an_empty_export_is_refused_and_nothing_is_stored(etcd: Etcd, job: dict[str, str]) -> None:
    """Restoring an empty backup would wipe the tenant (review finding 2)."""
    etcd.ctl("del", "--prefix", "/tenant_a/")
    ok(run_script("etcd-export.sh", job))
    assert "holds no key" in refused(run_tool("backup", job))
    assert tool.S3(job).list(job["S3_PREFIX"]) == []


def test_a_half_restored_tenant_is_not_backed_up_over_the_good_backups(
    etcd: Etcd, job: dict[str, str]
) -> None:
    """A prefix left with a fraction of its keys (an import cut short after its delete) is
    refused: it never becomes `latest` and never pushes a good backup out of retention."""
    env = {**job, "BACKUP_RETENTION": "1"}
    for index in range(40):
        etcd.put(f"/tenant_a/registry/configmaps/default/cm-{index}", b"x")
    good = backup(env)
    keys = sorted(etcd.dump("/tenant_a/")[1])
    for key in keys[: len(keys) * 2 // 3]:
        etcd.ctl("del", key.decode())
    ok(run_script("etcd-export.sh", env))
    line = refused(run_tool("backup", env))
    assert f"key count fell from {good['keyCount']} to" in line, line
    assert good["name"] in line
    listed = [json.loads(x)["name"] for x in ok(run_tool("list", env)).stdout.splitlines()]
    assert listed == [good["name"]]
    # The operator who meant it accepts one backup; it records what it was accepted over.
    accepted = json.loads(
        ok(run_tool("backup", {**env, "BACKUP_ACCEPT_SUSPECT": "1"})).stdout.splitlines()[0]
    )
    manifest = json.loads(tool.S3(env).get(tool.manifest_name(accepted["name"])))
    assert "key count fell" in manifest["accepted"]
    assert manifest["previous"]["name"] == good["name"]
    assert manifest["previous"]["keyCount"] == good["keyCount"]


def test_a_datastore_whose_revision_went_back_is_refused(job: dict[str, str]) -> None:
    """A re-created etcd starts its revisions anew: its bootstrap-only prefix is not a backup of
    the tenant the earlier backups hold."""
    good = backup(job)
    ok(run_script("etcd-export.sh", job))
    (Path(job["WORK_DIR"]) / "export.json" / "revision").write_text(f"{good['revision'] - 1}\n")
    assert "revision went back" in refused(run_tool("backup", job))


def test_an_older_backup_copied_under_a_newer_name_is_refused(
    etcd: Etcd, job: dict[str, str]
) -> None:
    """`latest` goes by the name; the name must be the one the backup was written under (review
    finding 6). A tenant's own credential can copy objects."""
    etcd.put("/tenant_a/registry/generation", b"old")
    old = backup(job)["name"]
    etcd.put("/tenant_a/registry/generation", b"new")
    new = backup(job)
    client = tool.S3(job)
    forged = tool.archive_name(
        job["S3_PREFIX"],
        "tenant_a",
        dt.datetime.strptime(new["time"], "%Y-%m-%dT%H:%M:%SZ") + dt.timedelta(hours=1),
        new["revision"] + 1,
    )
    client.put(forged, client.get(old), "application/gzip")
    client.put(tool.manifest_name(forged), client.get(tool.manifest_name(old)), "application/json")
    before = etcd.dump("/")
    line = refused(run_tool("fetch", {**job, "BACKUP_NAME": "latest"}))
    assert "copied under another name" in line, line
    assert etcd.dump("/") == before
    assert not (Path(job["WORK_DIR"]) / "restore").exists()


def test_a_backup_of_a_newer_kubernetes_minor_is_refused(etcd: Etcd, job: dict[str, str]) -> None:
    """Kubernetes has no storage downgrade: refuse, not warn (review finding 5)."""
    name = backup({**job, "BACKUP_KUBERNETES_VERSION": "v1.35.0"})["name"]
    env = {**job, "BACKUP_NAME": name, "BACKUP_KUBERNETES_VERSION": "v1.33.4"}
    line = refused(run_tool("fetch", env))
    assert "newer than the v1.33.4 the tenant runs" in line, line
    assert not (Path(job["WORK_DIR"]) / "restore").exists()
    # An older minor restores, with a warning.
    older = ok(run_tool("fetch", {**env, "BACKUP_KUBERNETES_VERSION": "v1.36.1"}))
    assert "warning: backup taken at Kubernetes v1.35.0" in older.stderr


def test_a_key_the_restore_cannot_write_is_refused_at_backup_time(
    etcd: Etcd, job: dict[str, str]
) -> None:
    """etcdctl takes keys as argv words: a newline key passed backup and failed every restore
    (review finding 7)."""
    etcd.put("/tenant_a/registry/configmaps/default/two\nlines", b"v")
    ok(run_script("etcd-export.sh", job))
    line = refused(run_tool("backup", job))
    assert "NUL or newline" in line, line
    assert tool.S3(job).list(job["S3_PREFIX"]) == []


def test_a_second_backup_of_the_same_revision_and_second_leaves_the_first_alone(
    job: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manual and a scheduled backup at once get the same name: the second must not rewrite
    (and on a failed read-back delete) the first's archive."""
    ok(run_script("etcd-export.sh", job))
    for key, value in job.items():
        monkeypatch.setenv(key, value)
    fixed = dt.datetime(2026, 12, 5, 12, 0, 0, tzinfo=dt.UTC)
    monkeypatch.setattr(tool, "_now", lambda: fixed)
    assert tool.main(["backup"]) == 0
    first = json.loads(capsys.readouterr().out)
    client = tool.S3(job)
    puts: list[str] = []
    monkeypatch.setattr(client.__class__, "put", lambda self, key, *a: puts.append(key))
    assert tool.main(["backup"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second == {"action": "backup", "name": first["name"], "unchanged": True, "pruned": []}
    assert puts == []
    assert restore(job, first["name"])["name"] == first["name"]


def test_the_export_is_paged_at_one_revision(
    etcd: Etcd, job: dict[str, str], tmp_path: Path
) -> None:
    """Pages of EXPORT_PAGE_SIZE keys, every one at the first page's revision: a write between
    two pages is not in the backup, and the backup restores byte for byte (review finding 4: one
    unpaginated Range peaked near 1 GiB in etcdctl)."""
    for index in range(30):
        etcd.put(f"/tenant_a/registry/configmaps/default/cm-{index:02d}", bytes([index]) * 3)
    expected = {k: v["value"] for k, v in etcd.dump("/tenant_a/")[1].items()}
    # etcdctl as the export calls it, but after its first page another client writes a key.
    wrapper = tmp_path / "bin" / "etcdctl"
    wrapper.parent.mkdir()
    real = shutil.which("etcdctl")
    root = etcd.env("root")
    wrapper.write_text(
        "#!/bin/sh\n"
        f'"{real}" "$@" || exit $?\n'
        f'if [ ! -e "{tmp_path}/wrote" ]; then touch "{tmp_path}/wrote"; '
        f'ETCDCTL_CERT="{root["ETCDCTL_CERT"]}" ETCDCTL_KEY="{root["ETCDCTL_KEY"]}" '
        f'"{real}" put /tenant_a/registry/late "after the first page" >/dev/null; fi\n'
    )
    wrapper.chmod(0o755)
    env = {**job, "EXPORT_PAGE_SIZE": "4", "PATH": f"{wrapper.parent}:{job['PATH']}"}
    exported = ok(run_script("etcd-export.sh", env))
    pages = sorted((Path(job["WORK_DIR"]) / "export.json").glob("page-*.json"))
    assert len(pages) == -(-len(expected) // 4), exported.stderr  # 4 new keys a page
    assert b"/tenant_a/registry/late" in etcd.dump("/tenant_a/")[1]
    summary = json.loads(ok(run_tool("backup", job)).stdout)
    assert summary["keyCount"] == len(expected)
    etcd.ctl("del", "--prefix", "/tenant_a/")
    restore(job, summary["name"])
    assert {k: v["value"] for k, v in etcd.dump("/tenant_a/")[1].items()} == {
        k: v for k, v in expected.items() if k != A_LEASED
    }


def test_an_export_missing_a_page_is_refused(etcd: Etcd, job: dict[str, str]) -> None:
    for index in range(12):
        etcd.put(f"/tenant_a/registry/configmaps/default/cm-{index:02d}", b"v")
    ok(run_script("etcd-export.sh", {**job, "EXPORT_PAGE_SIZE": "5"}))
    (Path(job["WORK_DIR"]) / "export.json" / "page-000001.json").unlink()
    assert "but etcd counted" in refused(run_tool("backup", job))


_PEAK = """
import atexit, runpy, sys
target, script = sys.argv[1], sys.argv[2]
def report():
    with open("/proc/self/status") as status, open(target, "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM")))
atexit.register(report)
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def _peak_mib(tool_command: str, env: dict[str, str], out: Path) -> float:
    """Run a tool_backup.py subcommand; its own peak resident memory (VmHWM of its process,
    read at exit: a child's rusage would also count the test process it was forked from)."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(out), str(SCRIPTS / "tenant_backup.py"), tool_command],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(out.read_text()) / 1024


def test_a_tenant_is_packed_and_fetched_a_key_at_a_time(etcd: Etcd, job: dict[str, str]) -> None:
    """Memory does not grow with the tenant (review finding 4): 23 MiB of values, each step
    under 80 MiB. Held whole, the packing peaked at about 5.7 times the values (docs/backups.md,
    How large a tenant)."""
    etcd.ctl("del", "--prefix", "/tenant_a/")
    for start in range(0, 8000, 100):
        ops = "".join(
            f"put /tenant_a/registry/configmaps/default/cm-{i:05d} {f'{i:04x}' * 750}\n"
            for i in range(start, start + 100)
        )
        etcd.ctl("txn", stdin=f"\n{ops}\n\n".encode())
    ok(run_script("etcd-export.sh", job))
    out = Path(job["WORK_DIR"]).parent / "peak"
    for command in ("backup", "fetch"):
        peak = _peak_mib(command, {**job, "BACKUP_NAME": "latest"}, out)
        assert peak < 80, f"{command} peaked at {peak:.0f} MiB"
    ok(run_script("etcd-export.sh", {**job, "EXPORT_FILE": "restored.json"}))
    peak = _peak_mib("check-restored", {**job, "EXPORT_FILE": "restored.json"}, out)
    assert peak < 80, f"check-restored peaked at {peak:.0f} MiB"


def _into_b(job: dict[str, str], etcd: Etcd, **extra: str) -> dict[str, str]:
    """tenant_b's restore Job reading tenant_a's backup: tenant_b's own etcd user and prefix,
    tenant_a's target (make restore FROM_TENANT copies its Secret for the Job)."""
    return {
        **job,
        **etcd.env("tenant_b"),
        "BACKUP_TENANT": "tenant_b",
        "BACKUP_PREFIX": "/tenant_b/",
        "BACKUP_SOURCE_TENANT": "tenant_a",
        "BACKUP_SOURCE_PREFIX": "/tenant_a/",
        **extra,
    }


def test_a_backup_restores_into_another_tenant_under_its_prefix(
    etcd: Etcd, job: dict[str, str]
) -> None:
    """Issue 38 point 6: tenant_a's backup into tenant_b (a clone, or a tenant re-created under
    another name): every key moves from /tenant_a/ to /tenant_b/ with its exact bytes, what
    tenant_b held is replaced, tenant_a is not touched, and no root key travels."""
    name = backup(job)["name"]
    _, a_before = etcd.dump("/tenant_a/")
    etcd.put("/tenant_b/registry/stale", b"replaced by the clone")
    env = _into_b(job, etcd, BACKUP_NAME=name)
    fetched = json.loads(ok(run_tool("fetch", env)).stdout)
    assert fetched["from"] == "tenant_a"
    assert fetched["pkiSecrets"] == []
    ok(run_script("etcd-import.sh", env))
    ok(run_script("etcd-export.sh", {**env, "EXPORT_FILE": "restored.json"}))
    result = json.loads(
        ok(run_tool("check-restored", {**env, "EXPORT_FILE": "restored.json"})).stdout
    )
    assert result["tenant"] == "tenant_b"
    assert result["from"] == "tenant_a"
    assert result["keysRestored"] == len(A_SEEDS)
    _, b_after = etcd.dump("/tenant_b/")
    assert {k: v["value"] for k, v in b_after.items()} == {
        b"/tenant_b/" + k[len(b"/tenant_a/") :]: v for k, v in A_SEEDS.items()
    }
    assert etcd.dump("/tenant_a/")[1] == a_before


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"BACKUP_SOURCE_PREFIX": ""}, "BACKUP_SOURCE_PREFIX must be tenant tenant_a's key prefix"),
        ({"BACKUP_SOURCE_PREFIX": "/tenant_b/"}, "overlaps"),
        ({"BACKUP_SOURCE_PREFIX": "/tenant_b/x/"}, "overlaps"),
        # A backup is read with the tenant and prefix it was taken of, nothing else.
        ({"BACKUP_SOURCE_PREFIX": "/tenant_c/"}, "holds prefix '/tenant_a/', not '/tenant_c/'"),
        ({"BACKUP_SOURCE_TENANT": "tenant_c"}, "is not a backup of tenant tenant_c"),
    ],
)
def test_a_restore_from_another_tenant_refuses_what_it_cannot_do_safely(
    etcd: Etcd, job: dict[str, str], extra: dict[str, str], words: str
) -> None:
    name = backup(job)["name"]
    before = etcd.dump("/")
    line = refused(run_tool("fetch", _into_b(job, etcd, BACKUP_NAME=name, **extra)))
    assert words in line, line
    assert not (Path(job["WORK_DIR"]) / "restore").exists()
    assert etcd.dump("/") == before


def test_the_import_writes_in_transactions_with_every_byte_kept(
    etcd: Etcd, job: dict[str, str], tmp_path: Path
) -> None:
    """Issue 38: one etcdctl and TLS handshake per key made the import the restore's bottleneck.
    The plan goes in transactions of up to TXN_OPS puts, Go-quoted: quotes, backslashes, NUL,
    0xff, newlines, a leading dash and empty values come back exactly, and the import runs one
    etcdctl per transaction (plus the delete), not one per key."""
    many = {
        f"/tenant_a/registry/configmaps/default/cm-{i:04d}".encode(): bytes([i % 256]) * (i % 7)
        for i in range(300)
    }
    odd = {
        b'/tenant_a/registry/odd/"quoted" \\back': b'-- "x" \\y\n\x00\xff\n',
        b"/tenant_a/registry/odd/-dash": b"-n",
        b"/tenant_a/registry/odd/\xc3\xbc\x7f": bytes(range(256)),
    }
    for key, value in {**many, **odd}.items():
        etcd.put(key, value)
    _, expected = etcd.dump("/tenant_a/")
    name = backup(job)["name"]
    etcd.ctl("del", "--prefix", "/tenant_a/")
    etcd.put("/tenant_a/registry/stray", b"gone after the import")

    # etcdctl as the Job runs it, each invocation logged.
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    log = tmp_path / "etcdctl.log"
    real = shutil.which("etcdctl")
    assert real is not None
    (wrapper / "etcdctl").write_text(f'#!/bin/sh\necho "$1" >>"{log}"\nexec "{real}" "$@"\n')
    (wrapper / "etcdctl").chmod(0o755)
    env = {**job, "BACKUP_NAME": name, "PATH": f"{wrapper}:{job['PATH']}"}
    ok(run_tool("fetch", env))
    batches = sorted((Path(job["WORK_DIR"]) / "restore" / "txn").iterdir())
    keys = len(expected) - 1  # the leased key is not restored
    assert len(batches) == -(-keys // tool.TXN_OPS)
    ok(run_script("etcd-import.sh", env))
    assert log.read_text().split() == ["del"] + ["txn"] * len(batches)
    ok(run_script("etcd-export.sh", {**env, "EXPORT_FILE": "restored.json"}))
    ok(run_tool("check-restored", {**env, "EXPORT_FILE": "restored.json"}))
    _, after = etcd.dump("/tenant_a/")
    assert {k: v["value"] for k, v in after.items()} == {
        k: v["value"] for k, v in expected.items() if v["lease"] == 0
    }


@pytest.mark.parametrize(
    "data", [b"", b"plain", b'"', b"\\", b"\x00\xff\n\r\t", bytes(range(256)), "ü €".encode()]
)
def test_txn_quoting_is_what_go_unquotes(data: bytes) -> None:
    """txn_quote's output parsed back the way Go's strconv.Unquote reads a double-quoted string
    literal (\\xHH is one byte; printable ASCII is itself)."""
    quoted = tool.txn_quote(data)
    assert quoted.isascii()
    assert quoted.startswith('"')
    assert quoted.endswith('"')
    body = quoted[1:-1]
    assert '"' not in body.replace("\\x22", "")
    decoded = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m[1], 16)]), body.encode())
    assert decoded == data
