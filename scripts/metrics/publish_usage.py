"""One tenant's GPU usage as the ConfigMap its users read (the usage publisher's first step,
``components.metrics.usage_publisher``; docs/metrics.md, "Your own usage, as a tenant").

Asks the central Prometheus (``PROMETHEUS_URL``) this tenant's queries (``QUERIES_FILE``: the
program's, as ``make usage TENANT=`` runs them) for each window ending now, and writes the
ConfigMap's manifest to ``USAGE_MANIFEST`` for ``apply-usage.sh``. With a non-empty
``PROMETHEUS_PASSWORD_FILE`` it sends basic auth as ``PROMETHEUS_USERNAME``. Standard library
only: in the pod it runs beside ``components/metrics/{usage_rows,self_view}.py`` from its
ConfigMap; in the repository, beside the repository's.

Environment: ``USAGE_TENANT``, ``PROMETHEUS_URL``, ``QUERIES_FILE``, ``USAGE_MANIFEST``,
``PROMETHEUS_USERNAME``, ``PROMETHEUS_PASSWORD_FILE``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The pod: the modules beside this file; the repository: its root (scripts/metrics/..).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from components.metrics import self_view, usage_rows


def _password(path: str) -> str | None:
    """The password in ``path``; None when the file is absent or empty (no credential yet)."""
    try:
        password = Path(path).read_text().strip()
    except FileNotFoundError:
        return None
    return password or None


def http_query(
    base_url: str, end: datetime, username: str, password: str | None
) -> Callable[[str], Mapping[str, Any]]:
    """Instant queries at ``end``; with ``password``, with basic auth."""
    headers = {}
    if password is not None:
        pair = base64.b64encode(f"{username}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {pair}"

    def query(expr: str) -> Mapping[str, Any]:
        params = urllib.parse.urlencode({"query": expr, "time": f"{end.timestamp():.3f}"})
        request = urllib.request.Request(
            f"{base_url.rstrip('/')}/api/v1/query?{params}", headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                result: Mapping[str, Any] = json.load(reply)
                return result
        except urllib.error.HTTPError as error:
            if error.code == 401:
                raise usage_rows.UsageError(
                    "the central Prometheus refused the credential (401): "
                    + ("a wrong password" if password is not None else "no password mounted")
                ) from None
            raise

    return query


def main(environ: Mapping[str, str]) -> int:
    tenant = environ["USAGE_TENANT"]
    output = Path(environ["USAGE_MANIFEST"])
    try:
        plan = json.loads(Path(environ["QUERIES_FILE"]).read_text())
        if plan.get("tenant") != tenant:
            raise usage_rows.UsageError(
                f"the queries are {plan.get('tenant')!r}'s, this publisher {tenant!r}'s"
            )
        end = datetime.now(UTC).replace(microsecond=0)
        password = _password(environ.get("PROMETHEUS_PASSWORD_FILE", ""))
        query = http_query(
            environ["PROMETHEUS_URL"], end, environ.get("PROMETHEUS_USERNAME", ""), password
        )
        manifest = self_view.publish(tenant, plan["queries"], query, end)
    except (usage_rows.UsageError, OSError, ValueError, KeyError) as error:
        print(f"publish_usage: {tenant}: {error}", file=sys.stderr)
        return 1
    partial = output.with_name(output.name + ".partial")
    partial.write_text(json.dumps(manifest, indent=1) + "\n")
    partial.replace(output)
    stamp = manifest["metadata"]["annotations"]["gpu-platform.io/generated"]
    print(f"publish_usage: {tenant}: usage ending {stamp} written to {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(os.environ))
