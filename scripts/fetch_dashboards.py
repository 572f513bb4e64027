"""Download HAMi's published Grafana dashboard at the pinned HAMi tag into the per-user cache.

``make dashboards`` (and ``make fetch-upstream``) run this. The file is the one HAMi publishes in
its repository at the tag (``components.versions.HAMI_DASHBOARD``: URL and sha256); it is checked
against the pinned digest and stored as ``<cache>/dashboards/hami-vgpu-dashboard-<tag>.json``
next to the charts cache (``components.chart_cache.charts_dir``'s parent). Nothing of HAMi's is
committed. Grafana in the cluster fetches the same pinned file itself (an init container checks
the same digest); this cache serves the offline test that HAMi's dashboard names only series
HAMi v2.10.0 declares (tests/unit/test_metrics_promql.py). Idempotent: a cached file whose
digest matches is kept and nothing is asked of the network.
Usage: ``python scripts/fetch_dashboards.py [--dest DIR]``
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components import chart_cache
from components.versions import HAMI_DASHBOARD, PublishedFile

Fetch = Callable[[str], bytes]


class FetchError(Exception):
    """A download failed or did not match its pinned digest."""


def dashboards_dir() -> Path:
    return chart_cache.charts_dir().parent / "dashboards"


def cached_path(pinned: PublishedFile, directory: Path | None = None) -> Path:
    """``hami-vgpu-dashboard-v2.10.0.json``: the file name with the tag from the URL."""
    parts = pinned.url.split("/")
    tag, name = parts[-3], parts[-1]
    stem, _, suffix = name.rpartition(".")
    return (directory or dashboards_dir()) / f"{stem}-{tag}.{suffix}"


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        data: bytes = response.read()
        return data


def fetch(pinned: PublishedFile, directory: Path, get: Fetch = http_get) -> Path:
    """The pinned file in ``directory``, downloaded unless a copy with its digest is there."""
    path = cached_path(pinned, directory)
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == pinned.sha256:
        return path
    try:
        data = get(pinned.url)
    except OSError as error:
        raise FetchError(f"{pinned.url}: {error}") from error
    digest = hashlib.sha256(data).hexdigest()
    if digest != pinned.sha256:
        raise FetchError(f"{pinned.url}: sha256 {digest}, pinned {pinned.sha256}")
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=None, help="default: the per-user cache")
    args = parser.parse_args(argv)
    try:
        path = fetch(HAMI_DASHBOARD, args.dest or dashboards_dir())
    except FetchError as error:
        print(f"fetch_dashboards: {error}", file=sys.stderr)
        return 1
    print(f"HAMi dashboard: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
