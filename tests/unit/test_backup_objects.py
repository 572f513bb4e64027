"""A tenant's backup objects (components.backups.objects) and the lab's store
(components.lab.backup_store): valid for the clusters' Kubernetes version, every variable the
scripts need is set in the container that runs them, the restore's steps in their order, the
least privilege of each ServiceAccount, and one bucket-scoped identity per tenant."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import pytest

from components.backups import objects
from components.backups.target import target_environment
from components.config import ConfigError
from components.lab import backup_store
from components.metrics import backup_alerts
from components.scripts import SCRIPTS_ROOT
from tests.support.backup_plans import LAB_PLAN, PROD_PLAN
from tests.support.kube_schemas import builtin_violations

VERSION = "v1.35.0"
LAB = LAB_PLAN
PROD = PROD_PLAN


def _all(plan: objects.BackupPlan) -> list[dict[str, Any]]:
    return [
        objects.scripts_config_map(plan),
        objects.target_secret(plan),
        *objects.access(plan, restore=False),
        *objects.access(plan, restore=True),
        objects.backup_cron_job(plan),
        objects.restore_cron_job(plan),
    ]


def _store() -> list[dict[str, Any]]:
    return [
        backup_store.namespace(),
        backup_store.claim(),
        backup_store.config_secret(),
        backup_store.deployment("0" * 64),
        backup_store.service(),
        backup_store.network_policy(),
    ]


@pytest.mark.parametrize(
    "manifest",
    [*_all(LAB), *_all(PROD), *_store(), *backup_alerts.manifests("gpu-platform-metrics")],
    ids=lambda m: f"{m['kind']}-{m['metadata']['name']}",
)
def test_every_object_validates_against_the_clusters_openapi_schema(
    manifest: dict[str, Any],
) -> None:
    assert builtin_violations(VERSION, manifest) == []


def test_the_schema_check_can_fail() -> None:
    broken = objects.backup_cron_job(LAB)
    broken["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = 7
    assert builtin_violations(VERSION, broken)


def _pod(cron_job: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod


def _script_of(container: dict[str, Any]) -> str:
    """The script file a container runs (``sh|bash|python3 /scripts/<file> ...``)."""
    return str(container["command"][1]).removeprefix(f"{objects.SCRIPTS_DIR}/")


def _required_env(script: str, command: str) -> set[str]:
    """Variables a script refuses to run without: ``${NAME:?`` in shell; in the Python tool,
    ``_env("NAME")`` without a default in the subcommand's own function (``cmd_<command>``) and in
    the helpers every subcommand shares."""
    text = (SCRIPTS_ROOT / "backup" / script).read_text()
    if not script.endswith(".py"):
        required = set(re.findall(r"\$\{([A-Z_]+):\?", text))
        for sourced in re.findall(r"^source .*/([\w.-]+\.sh)\"?$", text, re.MULTILINE):
            required |= _required_env(sourced, command)
        return required
    required: set[str] = set()
    for node in ast.parse(text).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        own = node.name == f"cmd_{command.replace('-', '_')}"
        if node.name.startswith("cmd_") and not own:
            continue
        for call in ast.walk(node):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "_env"
                and len(call.args) == 1
                and isinstance(call.args[0], ast.Constant)
            ):
                required.add(str(call.args[0].value))
    return required


@pytest.mark.parametrize("plan", [LAB, PROD], ids=["lab", "prod"])
@pytest.mark.parametrize("build", [objects.backup_cron_job, objects.restore_cron_job])
def test_every_container_has_what_its_script_requires(plan: objects.BackupPlan, build: Any) -> None:
    pod = _pod(build(plan))
    for container in [*pod["initContainers"], *pod["containers"]]:
        names = {entry["name"] for entry in container["env"]}
        script = _script_of(container)
        assert (SCRIPTS_ROOT / "backup" / script).is_file(), script
        required = _required_env(script, str(container["command"][-1]))
        if script.endswith(".sh") and script.startswith("etcd-"):
            # The endpoints come from $WORK_DIR/endpoints, written by the endpoints step first.
            required.discard("ETCDCTL_ENDPOINTS")
        missing = required - names
        assert not missing, f"{container['name']} runs {script} without {sorted(missing)}"
        mounted = {mount["mountPath"] for mount in container["volumeMounts"]}
        for entry in container["env"]:
            value = entry.get("value", "")
            for root in (objects.CERTS_DIR, objects.TARGET_DIR):
                if value.startswith(root + "/"):
                    assert root in mounted, f"{container['name']}: {entry['name']} -> {value}"


def test_the_backup_checks_the_tenant_around_its_export() -> None:
    """The guard refuses a paused or restoring tenant before the export and again after it (a
    restore may begin during the export); the endpoints are read before the export."""
    pod = _pod(objects.backup_cron_job(LAB))
    steps = [c["name"] for c in [*pod["initContainers"], *pod["containers"]]]
    assert steps == ["guard", "endpoints", "export", "recheck", "upload"]
    assert [
        c["command"][-1] for c in pod["initContainers"] if c["name"] in ("guard", "recheck")
    ] == [
        "before",
        "after",
    ]
    # Left to the restore: the program never sets it, so `pulumi up` does not resume backups.
    assert "suspend" not in objects.backup_cron_job(LAB)["spec"]


def test_the_restore_verifies_before_it_stops_and_starts_only_after_the_check() -> None:
    pod = _pod(objects.restore_cron_job(PROD))
    steps = [c["name"] for c in pod["initContainers"]]
    assert steps == ["endpoints", "fetch", "stop", "import", "export", "check", "pki"]
    assert [c["name"] for c in pod["containers"]] == ["start"]
    check = pod["initContainers"][-2]
    assert {"name": "EXPORT_FILE", "value": "restored.json"} in check["env"]
    assert check["command"][-1] == "check-restored"


def test_the_restore_never_runs_by_itself() -> None:
    job = objects.restore_cron_job(LAB)
    assert job["spec"]["suspend"] is True
    assert job["spec"]["jobTemplate"]["spec"]["backoffLimit"] == 0
    assert objects.backup_cron_job(LAB)["spec"].get("suspend") is not True


def test_credentials_come_from_the_secret_never_from_the_manifest() -> None:
    for build in (objects.backup_cron_job, objects.restore_cron_job):
        text = json.dumps(build(LAB))
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert f'"name": "{key}", "valueFrom"' in text
    assert "data" not in objects.target_secret(LAB)
    assert "stringData" not in objects.target_secret(LAB)


def _rules(plan: objects.BackupPlan, restore: bool) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = objects.access(plan, restore)[1]["rules"]
    return rules


def test_the_backup_may_only_read_its_own_control_plane() -> None:
    assert _rules(LAB, restore=False) == [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments"],
            "resourceNames": ["tenant-a"],
            "verbs": ["get"],
        },
        {
            "apiGroups": ["kamaji.clastix.io"],
            "resources": ["tenantcontrolplanes"],
            "resourceNames": ["tenant-a"],
            "verbs": ["get"],
        },
    ]


def test_only_the_prod_restore_may_pause_the_cluster() -> None:
    def groups(plan: objects.BackupPlan) -> set[str]:
        return {group for rule in _rules(plan, restore=True) for group in rule["apiGroups"]}

    assert "cluster.x-k8s.io" in groups(PROD)
    assert "cluster.x-k8s.io" not in groups(LAB)
    start = _pod(objects.restore_cron_job(PROD))["containers"][0]
    assert {"name": "PAUSE_OWNER", "value": "clusters.cluster.x-k8s.io"} in start["env"]
    for rule in _rules(PROD, restore=True):
        if rule["resources"] == ["cronjobs"]:
            assert rule["resourceNames"] == [objects.BACKUP], rule
        elif rule["resources"] == ["secrets"]:
            # Kamaji's root-key Secrets of this tenant only, and never create.
            assert rule["resourceNames"] == [
                "team-vision-ca",
                "team-vision-sa-certificate",
                "team-vision-front-proxy-ca-certificate",
            ], rule
            assert rule["verbs"] == ["get", "patch"]
        elif rule["resources"] not in (["pods"], ["jobs"]):
            assert rule["resourceNames"] == ["team-vision"], rule


def test_the_etcd_steps_authenticate_with_kamajis_certificate_for_the_tenant() -> None:
    volumes = _pod(objects.backup_cron_job(LAB))["volumes"]
    certs = next(v for v in volumes if v["name"] == "etcd-certs")
    assert certs["secret"]["secretName"] == "tenant-a-datastore-certificate"
    export = next(
        c for c in _pod(objects.backup_cron_job(LAB))["initContainers"] if c["name"] == "export"
    )
    env = {e["name"]: e.get("value") for e in export["env"]}
    assert env["ETCDCTL_CERT"].endswith("/server.crt")
    assert env["BACKUP_PREFIX"] == "/tenant_a/"


# --------------------------------------------------------------------------- the lab's store


def test_each_tenant_may_only_touch_its_own_bucket() -> None:
    config = backup_store.identities("r" * 64, ["tenant-a", "tenant-b"])
    by_name = {i["name"]: i for i in config["identities"]}
    assert set(by_name) == {"tenant-tenant-a", "tenant-tenant-b"}
    for tenant in ("tenant-a", "tenant-b"):
        actions = by_name[f"tenant-{tenant}"]["actions"]
        bucket = backup_store.bucket_name(tenant)
        assert sorted(actions) == sorted([f"Read:{bucket}", f"Write:{bucket}", f"List:{bucket}"])
        assert not [a for a in actions if ":" not in a], "an unscoped action reaches every bucket"
    keys = [i["credentials"][0]["secretKey"] for i in config["identities"]]
    assert len(set(keys)) == 2


def test_a_tenants_target_holds_only_its_own_key() -> None:
    root = "ab" * 32
    a = backup_store.tenant_target(root, "tenant-a", "1a" * 32)
    b = backup_store.tenant_target(root, "tenant-b", "1b" * 32)
    assert a["AWS_SECRET_ACCESS_KEY"] != b["AWS_SECRET_ACCESS_KEY"]
    assert a["S3_BUCKET"] != b["S3_BUCKET"]
    assert b["AWS_SECRET_ACCESS_KEY"] not in json.dumps(a)
    assert a[objects.TARGET_KEY_KEY] == "1a" * 32
    assert "1b" * 32 not in json.dumps(a)
    # Another root secret gives other credentials.
    assert backup_store.tenant_target("cd" * 32, "tenant-a", "1a" * 32) != a


def test_bucket_names_follow_s3_rules_for_every_tenant_name_length() -> None:
    seen = set()
    for length in range(1, 64):
        name = ("t" * length)[:length]
        bucket = backup_store.bucket_name(name)
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket), bucket
        seen.add(bucket)
    assert len(seen) == 63


def test_the_store_reads_the_identities_it_is_given() -> None:
    spec = backup_store.deployment("d" * 64)["spec"]["template"]
    container = spec["spec"]["containers"][0]
    config_arg = next(a for a in container["args"] if a.startswith("-s3.config="))
    path = config_arg.split("=", 1)[1]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "identities")
    assert path.startswith(mount["mountPath"] + "/")
    assert spec["metadata"]["annotations"]["gpu-platform.io/identities-sha256"] == "d" * 64


# ---------------------------------------------------------------------------- the S3 target


def test_a_configured_target_becomes_the_secrets_data() -> None:
    raw = json.dumps(
        {
            "endpoint": "https://s3.example.internal:9000/",
            "bucket": "vision-backups",
            "accessKeyId": "AK",
            "secretAccessKey": "SK",
            "encryptionKey": "AB" * 32,
            "prefix": "prod/team-vision",
        }
    )
    env = target_environment(raw, "visionBackupTarget")
    assert env["S3_ENDPOINT"] == "https://s3.example.internal:9000"
    assert env["S3_PREFIX"] == "prod/team-vision/"
    assert env["S3_REGION"] == "us-east-1"
    assert set(env) == {*objects.TARGET_ENV, objects.TARGET_CA_KEY, objects.TARGET_KEY_KEY}
    assert env[objects.TARGET_KEY_KEY] == "ab" * 32


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("not json", "is not JSON"),
        ("[]", "is not a JSON object"),
        (
            '{"endpoint": "https://s3", "bucket": "ab-c"}',
            "lacks accessKeyId, secretAccessKey, encryptionKey",
        ),
        (
            '{"endpoint": "https://s3", "bucket": "abc", "accessKeyId": "k", '
            '"secretAccessKey": "k", "encryptionKey": "hunter2"}',
            "encryptionKey is not 64 hex digits",
        ),
        (
            '{"endpoint": "s3.example", "bucket": "abc", "accessKeyId": "k", '
            '"secretAccessKey": "hunter2", "encryptionKey": "' + "0" * 64 + '"}',
            "endpoint is not an http(s)",
        ),
        (
            '{"endpoint": "https://s3", "bucket": "Bad_Bucket", "accessKeyId": "k", '
            '"secretAccessKey": "hunter2", "encryptionKey": "' + "0" * 64 + '"}',
            "bucket is not an S3 bucket name",
        ),
        (
            '{"endpoint": "https://s3", "bucket": "abc", "accessKeyId": "k", '
            '"secretAccessKey": "hunter2", "sessionToken": "x"}',
            "unknown keys sessionToken",
        ),
    ],
)
def test_a_malformed_target_is_one_line_naming_the_key_never_the_value(
    raw: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        target_environment(raw, "visionBackupTarget")
    message = str(caught.value)
    assert message.startswith("visionBackupTarget: ")
    assert words in message
    assert "\n" not in message
    assert "hunter2" not in message


@pytest.mark.parametrize("build", [objects.backup_cron_job, objects.restore_cron_job])
def test_the_tool_reads_the_archive_key_the_target_secret_holds(build: Any) -> None:
    """Every archive is encrypted with the tenant's key: the Python steps read it from the
    target Secret's file, never from the manifest."""
    pod = _pod(build(LAB))
    python = [c for c in [*pod["initContainers"], *pod["containers"]] if "python3" in c["command"]]
    assert python
    for container in python:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["BACKUP_KEY_FILE"] == f"{objects.TARGET_DIR}/{objects.TARGET_KEY_KEY}"
    assert objects.TARGET_KEY_KEY in backup_store.tenant_target("ab" * 32, "t", "1a" * 32)


# ------------------------------------------------------------------- the lab store's exposure


def _admits(policy: dict[str, Any], labels: dict[str, str], port: int) -> bool:
    """NetworkPolicy ingress semantics for a peer pod in any namespace (the peers here use an
    empty namespaceSelector): some rule lists ``port`` and a ``from`` entry whose podSelector
    matches ``labels``."""

    def matches(selector: dict[str, Any]) -> bool:
        if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
            return False
        for expression in selector.get("matchExpressions", []):
            assert expression["operator"] == "In"
            if labels.get(expression["key"]) not in expression["values"]:
                return False
        return True

    for rule in policy["spec"]["ingress"]:
        ports = {p["port"] for p in rule["ports"] if p["protocol"] == "TCP"}
        if port in ports and any(
            peer.get("namespaceSelector") == {} and matches(peer["podSelector"])
            for peer in rule["from"]
        ):
            return True
    return False


def test_only_the_backup_jobs_reach_the_store_and_only_its_s3_port() -> None:
    """The filer, master, volume and gRPC ports skip the per-bucket credentials: the policy
    admits the S3 port alone, from the pods of the tenants' backup and restore Jobs as the
    program builds them, and nothing else."""
    policy = backup_store.network_policy()
    store_labels = backup_store.deployment("0" * 64)["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= store_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    for build in (objects.backup_cron_job, objects.restore_cron_job):
        for plan in (LAB, PROD):
            labels = _pod_labels(build(plan))
            assert _admits(policy, labels, backup_store.S3_PORT)
            for port in (backup_store.FILER_PORT, 9333, 8080, 18333, 18888, 8181, 9101):
                assert not _admits(policy, labels, port), port
    # Any other pod, e.g. a tenant's control plane next to its backups, is refused.
    assert not _admits(policy, {"app.kubernetes.io/name": "tenant-a"}, backup_store.S3_PORT)
    assert not _admits(policy, {}, backup_store.S3_PORT)


def test_the_store_declares_and_probes_no_port_the_policy_closes() -> None:
    container = backup_store.deployment("0" * 64)["spec"]["template"]["spec"]["containers"][0]
    assert [p["containerPort"] for p in container["ports"]] == [backup_store.S3_PORT]
    for probe in ("readinessProbe", "livenessProbe"):
        # Run inside the container: no probe traffic for the policy to drop.
        assert set(container[probe]) <= {"exec", "initialDelaySeconds"}
        assert container[probe]["exec"]["command"][0] == "curl"
    readiness = container["readinessProbe"]["exec"]["command"][-1]
    assert readiness == f"http://127.0.0.1:{backup_store.FILER_PORT}/healthz"


def _pod_labels(cron_job: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = cron_job["spec"]["jobTemplate"]["spec"]["template"]["metadata"][
        "labels"
    ]
    return labels


def test_the_backup_reads_the_tenants_root_keys_and_the_restore_writes_them_back() -> None:
    """The upload step mounts Kamaji's CA, service-account and front-proxy CA Secrets where the
    tool reads them; the restore writes them back after the check, before the start."""
    for plan, tcp in ((LAB, "tenant-a"), (PROD, "team-vision")):
        pod = _pod(objects.backup_cron_job(plan))
        upload = pod["containers"][0]
        env = {e["name"]: e.get("value") for e in upload["env"]}
        names = env["BACKUP_PKI_SECRETS"].split(",")
        assert names == list(objects.PKI_SECRETS)
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in upload["volumeMounts"]}
        for name in names:
            volume = volumes[mounts[f"{env['BACKUP_PKI_DIR']}/{name}"]]
            assert volume["secret"]["secretName"] == f"{tcp}-{name}"
        # No other step sees them.
        for container in pod["initContainers"]:
            assert not [m for m in container["volumeMounts"] if m["name"].startswith("pki-")]
        restore = _pod(objects.restore_cron_job(plan))
        pki = restore["initContainers"][-1]
        assert pki["command"][-1].endswith("/tenant-pki.sh")
        assert {"name": "CONTROL_PLANE", "value": tcp} in pki["env"]
        assert not [v for v in restore["volumes"] if v["name"].startswith("pki-")]
