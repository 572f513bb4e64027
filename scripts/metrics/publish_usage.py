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

import json
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

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
        query = usage_rows.http_query(
            environ["PROMETHEUS_URL"],
            end,
            environ.get("PROMETHEUS_USERNAME", ""),
            password,
            missing="no password mounted",
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
