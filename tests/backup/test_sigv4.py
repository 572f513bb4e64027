"""tenant_backup.py's AWS Signature V4 against two oracles it shares no code with: the example
AWS publishes for S3 (GET /test.txt with a Range header; "Signature Calculations for the
Authorization Header", docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html,
also pinned by cloudyr/aws.signature tests/testthat/test-v4.R), and botocore's S3SigV4Auth run
in its own interpreter (tests/backup/.venv) on the same requests at the same instant."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.backup.conftest import load_tool

tool = load_tool()
EXAMPLE_KEY = "AKIAIOSFODNN7EXAMPLE"
EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _parts(authorization: str) -> dict[str, str]:
    """Credential, SignedHeaders and Signature; AWS accepts ", " or "," between them."""
    algorithm, _, rest = authorization.partition(" ")
    assert algorithm == "AWS4-HMAC-SHA256"
    return dict(part.strip().split("=", 1) for part in rest.split(","))


def test_aws_published_example() -> None:
    headers = tool.sigv4_headers(
        method="GET",
        host="examplebucket.s3.amazonaws.com",
        path="/test.txt",
        query={},
        headers={"Range": "bytes=0-9"},
        payload_sha256=tool.EMPTY_SHA256,
        access_key=EXAMPLE_KEY,
        secret_key=EXAMPLE_SECRET,
        region="us-east-1",
        now=dt.datetime(2013, 5, 24, tzinfo=dt.UTC),
    )
    assert _parts(headers["Authorization"]) == {
        "Credential": "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request",
        "SignedHeaders": "host;range;x-amz-content-sha256;x-amz-date",
        "Signature": "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    }


REQUESTS = [
    ("PUT", "tenant-a/tenant_a-20260101T000000Z-rev42.json.gz", {}, b"\x1f\x8b\x00 body"),
    ("GET", "tenant-a/tenant_a-20260101T000000Z-rev42.manifest.json", {}, b""),
    ("DELETE", "a b/c+d~e=f.json.gz", {}, b""),
    ("GET", None, {"list-type": "2", "prefix": "tenant-a/tenant_a-"}, b""),
    ("GET", None, {"list-type": "2", "prefix": "x/", "continuation-token": "a+b/c=="}, b""),
]


@pytest.mark.parametrize(("method", "key", "query", "body"), REQUESTS)
def test_matches_botocore(
    s3_python: Path, method: str, key: str | None, query: dict[str, str], body: bytes
) -> None:
    import hashlib

    client = tool.S3(
        {
            "S3_ENDPOINT": "https://s3.example.test:9000",
            "S3_BUCKET": "backups",
            "S3_REGION": "eu-west-3",
            "AWS_ACCESS_KEY_ID": EXAMPLE_KEY,
            "AWS_SECRET_ACCESS_KEY": EXAMPLE_SECRET,
        }
    )
    path = "/backups" + ("/" + tool._quote(key, safe="-_.~/") if key else "")
    extra = {"Content-Type": "application/gzip"} if body else {}
    headers = tool.sigv4_headers(
        method=method,
        host=client.host,
        path=path,
        query=query,
        headers=extra,
        payload_sha256=hashlib.sha256(body).hexdigest(),
        access_key=EXAMPLE_KEY,
        secret_key=EXAMPLE_SECRET,
        region=client.region,
        now=dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC),
    )
    url = f"https://{client.host}{path}"
    if query:
        url += "?" + "&".join(f"{tool._quote(k)}={tool._quote(v)}" for k, v in query.items())
    request: dict[str, Any] = {
        "method": method,
        "url": url,
        "headers": {k: v for k, v in headers.items() if k != "Authorization"},
        "access_key": EXAMPLE_KEY,
        "secret_key": EXAMPLE_SECRET,
        "region": client.region,
    }
    oracle = subprocess.run(
        [str(s3_python), str(Path(__file__).with_name("s3_oracle.py")), "sign"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert _parts(headers["Authorization"]) == _parts(oracle.stdout.strip())


def test_a_wrong_secret_changes_the_signature() -> None:
    """The comparison above can fail: one character of the secret changes the signature."""
    common: dict[str, Any] = {
        "method": "GET",
        "host": "h",
        "path": "/b/k",
        "query": {},
        "headers": {},
        "payload_sha256": tool.EMPTY_SHA256,
        "access_key": EXAMPLE_KEY,
        "region": "us-east-1",
        "now": dt.datetime(2013, 5, 24, tzinfo=dt.UTC),
    }
    a = tool.sigv4_headers(secret_key=EXAMPLE_SECRET, **common)["Authorization"]
    b = tool.sigv4_headers(secret_key=EXAMPLE_SECRET[:-1] + "X", **common)["Authorization"]
    assert _parts(a)["Signature"] != _parts(b)["Signature"]
