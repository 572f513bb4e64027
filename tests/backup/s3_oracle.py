"""Runs in tests/backup/.venv (moto, boto3, botocore), never in the project's .venv.

``sign``: reads one request as JSON on stdin and prints the Authorization header botocore's own
SigV4Auth computes for it, the independent oracle for scripts/backup/tenant_backup.py's signer.
``setup ENDPOINT``: on a moto server started with INITIAL_NO_AUTH_ACTION_COUNT=3, creates an IAM
user with an access key and an allow-all policy (the three unauthenticated calls), then creates
the bucket with that key; prints the key as JSON. Every later request is signature-checked by moto
(moto 5.2.5 moto/iam/access_control.py recomputes it with botocore and raises
SignatureDoesNotMatch).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import boto3
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def sign(request: dict[str, Any]) -> str:
    """botocore's signature for the request, at the request's own x-amz-date (add_auth would
    read the clock; these are the steps it runs after that, botocore/auth.py SigV4Auth)."""
    headers = dict(request["headers"])
    aws = AWSRequest(method=request["method"], url=request["url"], headers=headers)
    aws.context["timestamp"] = headers["x-amz-date"]
    credentials = Credentials(request["access_key"], request["secret_key"])
    auth = S3SigV4Auth(credentials, "s3", request["region"])
    canonical_request = auth.canonical_request(aws)
    signature = auth.signature(auth.string_to_sign(aws, canonical_request), aws)
    auth._inject_signature_to_request(aws, signature)
    return str(aws.headers["Authorization"])


def setup(endpoint: str, bucket: str) -> dict[str, str]:
    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bootstrap",
        aws_secret_access_key="bootstrap",
    )
    iam.create_user(UserName="backup")
    key = iam.create_access_key(UserName="backup")["AccessKey"]
    iam.put_user_policy(
        UserName="backup",
        PolicyName="all",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }
        ),
    )
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
    )
    s3.create_bucket(Bucket=bucket)
    return {"access_key": key["AccessKeyId"], "secret_key": key["SecretAccessKey"]}


if __name__ == "__main__":
    if sys.argv[1] == "sign":
        print(sign(json.load(sys.stdin)))
    elif sys.argv[1] == "setup":
        print(json.dumps(setup(sys.argv[2], sys.argv[3])))
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
