"""Basic auth on the central Prometheus' listener: its query API, its remote-write receiver and
every other path (docs/metrics.md, "Who reads and writes").

One password per stack, random, made once by a ``local.Command`` and kept as a secret in the
stack's state (``deploy.register_central``); user ``USERNAME``. Prometheus reads
``--web.config.file`` (prometheus/prometheus v3.5.0 cmd/prometheus/main.go:372-375), served by
prometheus/exporter-toolkit v0.14.0 (go.mod:55 at that tag): every request on the listener goes
through its ``webHandler`` (web/tls_config.go:369), which answers 401 unless the basic-auth pair
matches a ``basic_auth_users`` bcrypt hash (web/handler.go:88-143). No path is exempt, so the
kubelet's probe of ``/-/ready`` needs the credential too (an exec probe with a client file:
``objects``, ``promtool check ready``). The handler
re-reads the file on every request (handler.go:89) and caches each verified pair
(handler.go:117-132), so bcrypt's cost is paid once per client, not per request.

The hash's salt is derived from the password (HMAC), so the same password gives the same web
config on every ``pulumi up``: a random salt would change the ConfigMap, its digest on the pod
template (``objects.CONFIG_DIGEST_ANNOTATION``) and so restart Prometheus on every run. The hash
is no secret only because the password is 256 random bits: with the salt derived from the
password, checking a guess against the hash costs one HMAC rather than a bcrypt run, so the
hash protects nothing a guessable password would need; never configure a chosen password.

Clients read the password from a file (a mounted Secret), never from a ConfigMap or argv:
Prometheus' ``basic_auth.password_file`` is read on every request (prometheus/common v0.65.0,
pinned by prometheus v3.5.0 go.mod, config/http_config.go:745-751, 851-873), so a rotated
password reaches the agents once the kubelet updates the mounted Secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import bcrypt

USERNAME = "gpu-platform"
# The Secret (metrics namespace; and a key of each agent's token Secret) holding the password.
PASSWORD_KEY = "password"
# bcrypt's work factor: exporter-toolkit accepts any (web/handler.go:47 only parses it); 10 is
# bcrypt.DefaultCost, paid once per client and password (the handler's cache).
COST = 10
_SALT_PURPOSE = b"gpu-platform prometheus web-config bcrypt salt"
# bcrypt's radix-64 alphabet, in the bit order of standard base64.
_BCRYPT_ALPHABET = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
)


def bcrypt_salt(password: str) -> bytes:
    """``$2b$<cost>$`` and 22 characters: 16 bytes of HMAC-SHA256 keyed by the password."""
    raw = hmac.new(password.encode(), _SALT_PURPOSE, hashlib.sha256).digest()[:16]
    encoded = base64.b64encode(raw)[:22].translate(_BCRYPT_ALPHABET)
    return b"$2b$%02d$" % COST + encoded


def password_hash(password: str) -> str:
    """The bcrypt hash of ``password``, the same for the same password."""
    if not password:
        raise ValueError("an empty password")
    return bcrypt.hashpw(password.encode(), bcrypt_salt(password)).decode()


def web_config(hashed: str) -> dict[str, Any]:
    """Prometheus' ``--web.config.file``: one user (exporter-toolkit v0.14.0
    web/tls_config.go:45, ``basic_auth_users``)."""
    return {"basic_auth_users": {USERNAME: hashed}}


def client_basic_auth(password_file: str) -> dict[str, Any]:
    """A Prometheus client's ``basic_auth`` (remote_write, a scrape job, promtool's
    ``--http.config.file``) reading the password from ``password_file``."""
    return {"basic_auth": {"username": USERNAME, "password_file": password_file}}
