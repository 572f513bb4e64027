"""Print GPU usage per tenant for a time window: allocated, used, efficiency (``make usage``).

Reads the central Prometheus of the metrics stack (docs/metrics.md): with ``--prometheus URL``
directly, or — with ``--kubeconfig-stdin``, the management kubeconfig on stdin (``make usage``
pipes ``pulumi stack output --show-secrets managementKubeconfig``) — through ``kubectl
port-forward`` to the central Prometheus' Service, on 127.0.0.1 (the kubeconfig is written to a
private temporary file and removed; it is never printed). Not the API server's service proxy:
the metrics namespace admits no address from outside the pod network (docs/metrics.md).

The central Prometheus asks for basic auth (components/metrics/auth.py): through the management
kubeconfig the password is read from its Secret with ``kubectl get secret`` (captured, never on
argv or in a message); with ``--prometheus``, from ``--password-file``.

Usage: ``python scripts/usage.py (--prometheus URL [--password-file FILE] | --kubeconfig-stdin)
[--window 7d] [--tenant NAME] [--end 2026-12-01T00:00:00Z] [--format table|csv|json]
[--output FILE]``
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.metrics import auth, objects, usage, usage_rows
from components.metrics.scrape import PROMETHEUS_PORT

# kubectl's first line once the tunnel listens: "Forwarding from 127.0.0.1:40123 -> 9090".
FORWARDING = re.compile(r"^Forwarding from 127\.0\.0\.1:(\d+) ->")
FORWARD_START_SECONDS = 60.0
FORWARD_EXIT_SECONDS = 5.0

Query = usage_rows.Query


def http_query(base_url: str, end: datetime, password: str | None = None) -> Query:
    """Instant queries at ``end``; with ``password``, with the central Prometheus' basic auth."""
    return usage_rows.http_query(base_url, end, auth.USERNAME, password)


def read_password(kubeconfig: Path, kubectl: str = "kubectl") -> str:
    """The central Prometheus' password, from its Secret in the metrics namespace (kubectl's
    output is captured: the password is never printed nor on any command line)."""
    done = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "secret",
            "--namespace",
            objects.METRICS_NAMESPACE,
            objects.AUTH_SECRET,
            "--output",
            f"jsonpath={{.data.{auth.PASSWORD_KEY}}}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    where = f"{objects.METRICS_NAMESPACE}/{objects.AUTH_SECRET}"
    if done.returncode != 0:
        raise usage.UsageError(f"kubectl get secret {where}: {done.stderr.strip() or 'failed'}")
    try:
        password = base64.b64decode(done.stdout.strip(), validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        password = ""
    if not password:
        raise usage.UsageError(f"secret {where} holds no {auth.PASSWORD_KEY}")
    return password


def password_from_file(path: str | None) -> str | None:
    if path is None:
        return None
    password = Path(path).read_text().strip()
    if not password:
        raise usage.UsageError(f"--password-file {path}: empty")
    return password


@contextlib.contextmanager
def port_forward(kubeconfig: Path, kubectl: str = "kubectl") -> Iterator[str]:
    """``kubectl port-forward`` to the central Prometheus' Service on a free local port, for
    as long as the block runs: its base URL. A tunnel that does not come up within
    FORWARD_START_SECONDS is a UsageError with kubectl's own words."""
    command = [
        kubectl,
        "--kubeconfig",
        str(kubeconfig),
        "port-forward",
        "--namespace",
        objects.METRICS_NAMESPACE,
        f"service/{objects.PROMETHEUS}",
        f":{PROMETHEUS_PORT}",
        "--address",
        "127.0.0.1",
    ]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as forwarder:
        try:
            first = _first_line(forwarder, FORWARD_START_SECONDS)
            found = FORWARDING.match(first)
            if found is None:
                # kubectl exits once it has printed why the tunnel failed; give it the moment to
                # finish writing stderr before it is killed, or its reason is lost to a race.
                try:
                    _, err = forwarder.communicate(timeout=FORWARD_EXIT_SECONDS)
                except subprocess.TimeoutExpired:
                    forwarder.kill()
                    _, err = forwarder.communicate(timeout=10)
                raise usage.UsageError(
                    f"kubectl port-forward to {objects.METRICS_NAMESPACE}/{objects.PROMETHEUS}: "
                    f"{(err or first).strip() or 'no tunnel'}"
                )
            yield f"http://127.0.0.1:{found.group(1)}"
        finally:
            forwarder.terminate()
            try:
                forwarder.wait(timeout=10)
            except subprocess.TimeoutExpired:
                forwarder.kill()


def _first_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The process's first line of output, or '' when it ends or stays silent for ``timeout``."""
    stream = process.stdout
    assert stream is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""


def parse_end(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        end = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise usage.UsageError(f"--end {text!r}: write it like 2026-12-01T00:00:00Z") from error
    return end if end.tzinfo else end.replace(tzinfo=UTC)


def render(rows: list[usage.TenantUsage], fmt: str, window: str, end: datetime) -> str:
    if fmt == "csv":
        return usage.as_csv(rows)
    if fmt == "json":
        return usage.as_json(rows, window, end)
    return usage.as_table(rows, window, end)


def run(args: argparse.Namespace, query: Query, end: datetime) -> int:
    warning = usage.coverage_warning(args.window, end, usage.oldest_sample(query))
    if warning is not None:
        print(warning, file=sys.stderr)
    rows = usage.report(args.window, query, args.tenant)
    text = render(rows, args.format, args.window, end)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prometheus", help="the central Prometheus' base URL")
    source.add_argument(
        "--kubeconfig-stdin", action="store_true", help="the management kubeconfig on stdin"
    )
    parser.add_argument(
        "--password-file",
        help="with --prometheus: a file holding the central Prometheus' password "
        "(through the kubeconfig it is read from its Secret)",
    )
    parser.add_argument("--window", default="7d", help="e.g. 24h, 7d, 4w (default 7d)")
    parser.add_argument("--tenant", help="one tenant's usage only (every query selects it)")
    parser.add_argument("--end", help="the window's end, UTC (default: now)")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table")
    parser.add_argument("--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        usage.window_seconds(args.window)
        usage.checked_tenant(args.tenant)
        end = parse_end(args.end)
        if args.password_file and not args.prometheus:
            raise usage.UsageError(
                "--password-file goes with --prometheus: through the kubeconfig the password is "
                "read from its Secret"
            )
        if args.prometheus:
            password = password_from_file(args.password_file)
            return run(args, http_query(args.prometheus, end, password), end)
        kubeconfig = sys.stdin.read()
        if not kubeconfig.strip():
            raise usage.UsageError("no kubeconfig on stdin: deploy the stack first (make lab)")
        fd, name = tempfile.mkstemp(prefix="gpu-platform-usage-", suffix=".yaml")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(kubeconfig)
            password = read_password(Path(name))
            with port_forward(Path(name)) as base_url:
                return run(args, http_query(base_url, end, password), end)
        finally:
            os.unlink(name)
    except usage.UsageError as error:
        print(f"usage: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # no kubectl, or the query's connection through the tunnel
        print(f"usage: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
