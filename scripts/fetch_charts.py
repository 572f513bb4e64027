"""Download the pinned, published chart archives into the per-user charts cache.

``make fetch-upstream`` runs this. For every chart pinned in ``components/versions.py`` it reads
the chart repository's ``index.yaml``, downloads the archive of the pinned version and checks it
against the sha256 digest the index publishes, then stores it as ``<chart>-<version>.tgz`` (the
name ``helm pull`` writes) in ``components.chart_cache.charts_dir()``. Kamaji, whose repository
only serves a moving ``0.0.0+latest``, is assembled from the published files of its release tag
(GitHub's raw files of ``charts/kamaji`` at that tag) plus the published kamaji-etcd archive, each
checked against ``components/pins/kamaji-chart.json``.

Idempotent and offline once done: a downloaded archive is kept with its checked digest beside it
(``<archive>.sha256``), so a later run that finds the two agreeing asks no repository; a Kamaji
directory that verifies is kept. Nothing outside the charts cache is written, except with
``--project DIR`` (``make charts``): every archive a stack installs is then also copied, with its
recorded digest, to ``DIR/.charts/<chart>-<version>.tgz`` and the verified Kamaji chart to
``DIR/.charts/kamaji-<tag>``, the project-relative paths the program installs them from
(``chart_cache.chart_input``, ``chart_cache.kamaji_chart_input``); when the project's copies
already verify, nothing is asked of anyone.
Usage: ``python scripts/fetch_charts.py [--dest DIR] [--only kamaji] [--project DIR]``
(``--only kamaji``: just the Kamaji chart and the kamaji-etcd archive it bundles).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components import chart_cache
from components.versions import PINNED, HelmChart

Fetch = Callable[[str], bytes]
KAMAJI_PUBLISHED_VERSION = chart_cache.KAMAJI_PUBLISHED_VERSION


class FetchError(Exception):
    """A download failed or did not match its published digest."""


def http_get(url: str, attempts: int = 3, timeout: float = 60.0) -> bytes:
    """GET with a few retries (transient CDN errors are common on chart repositories)."""
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                data: bytes = response.read()
                return data
        except (OSError, http.client.HTTPException) as error:  # URLError, resets, IncompleteRead
            last = error
            time.sleep(2**attempt)
    raise FetchError(f"{url}: {last}")


def index_entry(index: dict[str, Any], chart: str, version: str) -> dict[str, Any]:
    """The ``index.yaml`` entry of ``chart`` at ``version``."""
    for entry in (index.get("entries") or {}).get(chart) or []:
        if str(entry.get("version")) == version:
            return dict(entry)
    raise FetchError(f"the repository index has no {chart} {version}")


def archive_url(repo: str, entry: dict[str, Any]) -> str:
    """The entry's first URL, resolved against the repository (URLs may be relative)."""
    urls = entry.get("urls") or []
    if not urls:
        raise FetchError(f"index entry {entry.get('name')} {entry.get('version')} has no urls")
    return urllib.parse.urljoin(repo.rstrip("/") + "/", str(urls[0]))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def fetch_archive(chart: HelmChart, dest: Path, get: Fetch | None = None) -> Path:
    """The pinned archive of ``chart`` in ``dest``: kept when it matches the digest checked when
    it was downloaded (no repository asked), else downloaded and checked against the digest the
    repository index publishes (Helm's ``pkg/repo/index.go`` ``ChartVersion.Digest``)."""
    target = dest / chart_cache.archive_name(chart)
    checked = chart_cache.digest_record(target)
    if (
        target.is_file()
        and checked.is_file()
        and checked.read_text().strip() == sha256(target.read_bytes())
    ):
        return target
    get = get or http_get
    index_text = get(chart.repo.rstrip("/") + "/index.yaml")
    index = yaml.load(index_text, Loader=_LOADER) or {}
    entry = index_entry(index, chart.chart, chart.version)
    digest = str(entry.get("digest") or "")
    if not digest:
        raise FetchError(f"the index publishes no digest for {chart.chart} {chart.version}")
    data = target.read_bytes() if target.is_file() else b""
    if sha256(data) != digest:
        data = get(archive_url(chart.repo, entry))
    if sha256(data) != digest:
        raise FetchError(
            f"{chart.chart} {chart.version}: sha256 {sha256(data)} is not the published {digest}"
        )
    _write_atomically(target, data)
    _write_atomically(checked, (digest + "\n").encode())
    return target


def assemble_kamaji(dest: Path, etcd_archive: Path, get: Fetch | None = None) -> Path:
    """The pinned Kamaji chart directory in ``dest``: the release tag's files and the published
    kamaji-etcd archive in ``charts/``, each verified; kept when it already verifies."""
    kamaji, _ = chart_cache.kamaji_pins()
    target = chart_cache.kamaji_chart_dir(dest)
    if not chart_cache.verify_kamaji_chart(target):
        return target
    get = get or http_get
    scratch = Path(tempfile.mkdtemp(prefix=".kamaji-", dir=dest))
    try:
        for name, digest in sorted(kamaji.files.items()):
            data = get(kamaji.raw_url(name))
            if chart_cache.file_digest(name, data) != digest:
                raise FetchError(f"{kamaji.raw_url(name)} is not the pinned {kamaji.tag} file")
            path = scratch / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (scratch / "charts").mkdir(exist_ok=True)
        shutil.copyfile(etcd_archive, scratch / "charts" / chart_cache.bundled_etcd_archive_name())
        problems = chart_cache.verify_kamaji_chart(scratch)
        if problems:
            raise FetchError("assembled Kamaji chart does not verify: " + "; ".join(problems))
        _swap_in(scratch, target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    return target


def install_kamaji(source: Path, project: Path) -> Path:
    """The verified Kamaji chart ``source`` copied to the project's ``.charts/kamaji-<tag>`` (kept
    when it already verifies), the path the program's Release names."""
    target = chart_cache.project_kamaji_chart(project)
    if not chart_cache.verify_kamaji_chart(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".kamaji-", dir=target.parent))
    try:
        shutil.rmtree(scratch)
        shutil.copytree(source, scratch, symlinks=False)
        problems = chart_cache.verify_kamaji_chart(scratch)
        if problems:
            raise FetchError(f"{source} does not verify: " + "; ".join(problems))
        _swap_in(scratch, target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    return target


def install_archive(source: Path, chart: HelmChart, project: Path) -> Path:
    """The verified archive ``source`` (with the digest recorded beside it) copied to the
    project's ``.charts/<chart>-<version>.tgz``, where the program's release names it; kept when
    the project's copy already verifies. The copy is checked the way the program checks it
    (``chart_cache.verify_archive``) before it replaces anything."""
    target = project / chart_cache.chart_input(chart)
    if not chart_cache.verify_archive(target, chart):
        return target
    problems = chart_cache.verify_archive(source, chart)
    if problems:
        raise FetchError(f"{source}: " + "; ".join(problems))
    target.parent.mkdir(parents=True, exist_ok=True)
    # The record last: a copy interrupted in between leaves an archive that fails its check.
    _write_atomically(target, source.read_bytes())
    _write_atomically(
        chart_cache.digest_record(target), chart_cache.digest_record(source).read_bytes()
    )
    problems = chart_cache.verify_archive(target, chart)
    if problems:
        raise FetchError(f"{target}: " + "; ".join(problems))
    return target


def project_verifies(project: Path, charts: list[HelmChart]) -> bool:
    """Whether the project's ``.charts/`` already holds every chart the program installs, each
    verified (then ``--project`` has nothing to fetch or copy)."""
    return not chart_cache.verify_kamaji_chart(
        chart_cache.project_kamaji_chart(project)
    ) and not any(
        chart_cache.verify_archive(project / chart_cache.chart_input(chart), chart)
        for chart in charts
    )


def _swap_in(scratch: Path, target: Path) -> None:
    """Replace ``target`` by ``scratch``, the old directory set aside first, so there is never a
    moment without one."""
    retired = scratch.with_name(scratch.name + "-old")
    if target.exists():
        target.rename(retired)
    scratch.rename(target)
    if retired.exists():
        shutil.rmtree(retired)


def pinned_charts() -> list[HelmChart]:
    """Every chart pinned in ``components/versions.py`` that is installed from a repository."""
    return chart_cache.pinned_archives()


def _write_atomically(target: Path, data: bytes) -> None:
    """Write through a unique temporary file in the same directory, then rename (two runs at
    once never see, or leave, a half-written archive)."""
    with tempfile.NamedTemporaryFile(
        dir=target.parent, prefix=f".{target.name}.", delete=False
    ) as partial:
        partial.write(data)
    Path(partial.name).replace(target)


def failure_message(error: Exception, only_kamaji: bool, dest: Path) -> str:
    """The one line a failed fetch ends with: the make target that ran it, that it needs the
    network once, and how to run it without one (a charts directory that already holds them)."""
    target = "make kamaji-chart" if only_kamaji else "make charts"
    kamaji = chart_cache.kamaji_chart_dir(dest).name
    what = (
        f"the pinned Kamaji chart ({kamaji}/, assembled from GitHub's raw files of the release "
        "tag and the kamaji-etcd chart repository)"
        if only_kamaji
        else "the pinned chart archives (from each chart's Helm repository, and Kamaji's files "
        "from GitHub)"
    )
    return (
        f"{target}: could not fetch {what}: {error}. This needs the network once; afterwards "
        f"everything is served from {dest}. Without a network here, set "
        f"{chart_cache.CHARTS_DIR_ENV} (or --dest) to a charts directory that already holds them "
        f"(e.g. a copy of the cache ~/.cache/gpu-platform/charts from a machine that ran "
        f"`{target}`; {kamaji}/ alone is enough for make kamaji-chart) and run `{target}` again."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=chart_cache.charts_dir())
    parser.add_argument(
        "--only",
        choices=["kamaji"],
        help="only the Kamaji chart the program installs (and the kamaji-etcd archive it bundles)",
    )
    parser.add_argument(
        "--project",
        type=Path,
        help="also copy the verified charts the program installs (with --only kamaji: just "
        "Kamaji's) to PROJECT/.charts/, where the program reads them",
    )
    args = parser.parse_args(argv)
    dest: Path = args.dest
    project: Path | None = args.project
    if (
        args.only == "kamaji"
        and project is not None
        and not chart_cache.verify_kamaji_chart(chart_cache.project_kamaji_chart(project))
    ):
        return 0  # the project's copy is there and verified: nothing to ask anyone
    if (
        args.only is None
        and project is not None
        and project_verifies(project, chart_cache.installed_archives())
    ):
        return 0  # every chart the program installs is there, verified: nothing to ask anyone
    dest.mkdir(parents=True, exist_ok=True)
    _, etcd = chart_cache.kamaji_pins()
    if PINNED.kamaji_etcd.version != etcd.tag.lstrip("v"):
        print("fetch-upstream: the pinned kamaji-etcd must be the one Kamaji's pin bundles")
        return 1
    charts = pinned_charts()
    archives: dict[str, Path] = {}
    try:
        if args.only == "kamaji" and not chart_cache.verify_kamaji_chart(
            chart_cache.kamaji_chart_dir(dest)
        ):
            kamaji = chart_cache.kamaji_chart_dir(dest)  # verified: no repository asked
        else:
            if args.only == "kamaji":
                charts = [PINNED.kamaji_etcd]
            print(f"fetching pinned chart archives into {dest}")
            for chart in charts:
                archives[chart.chart] = fetch_archive(chart, dest)
                print(f"  {archives[chart.chart].name}")
            kamaji = assemble_kamaji(dest, archives["kamaji-etcd"])
            print(f"  {kamaji.name}/ (verified)")
        if project is not None:
            print(f"  {install_kamaji(kamaji, project)} (verified)")
            if args.only is None:
                for chart in chart_cache.installed_archives():
                    print(f"  {install_archive(archives[chart.chart], chart, project)} (verified)")
    except FetchError as error:
        print(failure_message(error, args.only == "kamaji", dest), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
