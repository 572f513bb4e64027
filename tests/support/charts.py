"""Rendering the pinned charts offline with Helm's own engine (``helm_python``).

Some facts are visible only in what a chart renders (which kinds it creates, what a ConfigMap the
program never sees contains), so a few tests render the pinned chart archives. The archives are
read from ``$GPU_PLATFORM_CHART_CACHE`` or ``~/.cache/gpu-platform/charts/<chart>-<version>.tgz``;
a test whose archive is absent is skipped with one line naming it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.versions import HelmChart

CACHE_ENV = "GPU_PLATFORM_CHART_CACHE"


def chart_cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    return Path.home() / ".cache" / "gpu-platform" / "charts"


def archive_or_skip(chart: HelmChart) -> Path:
    """The pinned chart's archive, or skip the test naming it."""
    path = chart_cache_dir() / f"{chart.chart}-{chart.version}.tgz"
    if not path.is_file():
        pytest.skip(f"chart archive {path} is absent: run `make fetch-upstream`")
    return path


def render(
    chart: HelmChart, values: dict[str, Any], *, name: str, namespace: str
) -> list[dict[str, Any]]:
    """Every object the pinned chart renders for ``values`` (hooks included, as Helm installs
    them), in template order; skipped when the archive or ``helm_python`` is missing."""
    return render_local(archive_or_skip(chart), values, name=name, namespace=namespace)


def render_local(
    path: Path, values: dict[str, Any], *, name: str, namespace: str
) -> list[dict[str, Any]]:
    """``render`` for a chart archive or directory at ``path`` (skipped when it is absent)."""
    if not path.exists():
        pytest.skip(f"chart {path} is absent: run `make fetch-upstream`")
    helm = pytest.importorskip("helm_python")
    with helm.Chart.load(path) as loaded:
        rendered = loaded.render(values, name=name, namespace=namespace, is_install=True)
    objects: list[dict[str, Any]] = []
    for template in sorted(rendered):
        if not template.endswith((".yaml", ".yml")):
            continue
        for document in yaml.safe_load_all(rendered[template]):
            if isinstance(document, dict) and document.get("kind"):
                objects.append(document)
    return objects


def release_payload(chart: HelmChart, values: dict[str, Any], *, name: str, namespace: str) -> int:
    """An estimate of the bytes Helm v3 stores in its release Secret for this install.

    Helm's storage driver (``pkg/storage/driver/util.go`` ``encodeRelease``) writes
    base64(gzip(json(release))) under the Secret's ``release`` key; the release holds the chart
    (templates and files as base64, since they are ``[]byte``), the values and the rendered
    manifest. Python's zlib at level 9 stands in for Go's ``gzip.BestCompression``."""
    import base64
    import gzip
    import json

    archive = archive_or_skip(chart)
    helm = pytest.importorskip("helm_python")
    with helm.Chart.load(archive) as loaded:
        rendered = loaded.render(values, name=name, namespace=namespace, is_install=True)
        templates = loaded.templates
        files = loaded.files
        metadata = loaded.metadata
        defaults = loaded.values

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    manifest = "".join(
        f"---\n# Source: {path}\n{text}\n"
        for path, text in sorted(rendered.items())
        if text.strip()
    )
    release = {
        "name": name,
        "namespace": namespace,
        "version": 1,
        "info": {"status": "deployed"},
        "chart": {
            "metadata": metadata,
            "lock": None,
            "templates": [{"name": t["name"], "data": b64(t["data"])} for t in templates],
            "values": defaults,
            "schema": None,
            "files": [{"name": f["name"], "data": b64(f["data"])} for f in files],
        },
        "config": values,
        "manifest": manifest,
        "hooks": [],
    }
    raw = json.dumps(release, separators=(",", ":"), ensure_ascii=False).encode()
    return len(base64.b64encode(gzip.compress(raw, compresslevel=9)))
