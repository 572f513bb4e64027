"""The lab stack file carries the salt of the lab's passphrase, so the first `make lab` leaves
every tracked file as it was (the CLI writes ``encryptionsalt`` into the stack file only when it
has to make a new one: pulumi/pulumi v3.259.0, pkg/secrets/passphrase/manager.go:313-316 and
pkg/cmd/pulumi/stack/secrets.go:321-335).

The salt's format is the CLI's (manager.go:163-192): ``v1:<base64 8-byte salt>:v1:<base64 12-byte
nonce>:<base64 AES-256-GCM of "pulumi">``, the key PBKDF2-SHA256 of the passphrase, 1,000,000
rounds, 32 bytes (sdk/go/common/resource/config/crypt.go:165-169). Opening it needs AES-GCM,
which only the ``cryptography`` package offers here; without it that part is skipped.
"""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
import yaml

from tests.support.harness import REPO_ROOT

STATE = re.compile(r"^v1:([A-Za-z0-9+/=]+):v1:([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)$")
# pulumi/pulumi v3.259.0 pkg/secrets/passphrase/manager_test.go:29, the state of passphrase
# "password": proves the check below reads the CLI's format.
PULUMI_TEST_STATE = "v1:fozI5u6B030=:v1:F+6ZduKKd8G0/V7L:PGMFeIzwobWRKmEAzUdaQHqC5mMRIQ=="


def _salt() -> str:
    data = yaml.safe_load((REPO_ROOT / "Pulumi.lab.yaml").read_text())
    return str(data["encryptionsalt"])


def _lab_passphrase() -> str:
    match = re.search(r"^LAB_PASSPHRASE := (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.M)
    assert match is not None
    return match.group(1)


def _opens(passphrase: str, state: str) -> bool:
    aead = pytest.importorskip(
        "cryptography.hazmat.primitives.ciphers.aead",
        reason="the cryptography package is not installed (AES-GCM to open the salt)",
    )
    match = STATE.match(state)
    assert match is not None
    salt, nonce, sealed = (base64.b64decode(part) for part in match.groups())
    key = hashlib.pbkdf2_hmac("sha256", passphrase.encode(), salt, 1_000_000, 32)
    try:
        return bool(aead.AESGCM(key).decrypt(nonce, sealed, None) == b"pulumi")
    except Exception:  # cryptography.exceptions.InvalidTag: wrong passphrase
        return False


def test_the_lab_stack_file_has_a_salt_in_the_clis_format() -> None:
    match = STATE.match(_salt())
    assert match is not None
    salt, nonce, sealed = (base64.b64decode(part) for part in match.groups())
    assert len(salt) == 8
    assert len(nonce) == 12
    assert len(sealed) == len("pulumi") + 16  # the message and GCM's tag


def test_the_labs_passphrase_opens_the_salt() -> None:
    assert _opens("password", PULUMI_TEST_STATE)
    assert not _opens("not-the-password", PULUMI_TEST_STATE)
    assert _opens(_lab_passphrase(), _salt())
