"""``make fetch-upstream``'s chart download: index lookup, digest check, Kamaji assembly.

The downloads go through an injected ``get`` serving a fake repository from memory, so the logic
runs here without a network; the charts in it are tiny synthetic ones made by the test."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from components import chart_cache
from components.versions import HelmChart
from tests.support.archives import tgz

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fetch_charts() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fetch_charts", REPO_ROOT / "scripts" / "fetch_charts.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHART = HelmChart("https://charts.example.invalid/repo", "demo", "1.2.3")
ARCHIVE = tgz("demo", {"Chart.yaml": b"apiVersion: v2\nname: demo\nversion: 1.2.3\n"})


def _served(pages: dict[str, bytes], log: list[str]) -> Callable[[str], bytes]:
    def get(url: str) -> bytes:
        log.append(url)
        if url not in pages:
            raise KeyError(url)
        return pages[url]

    return get


def _index(url: str, digest: str) -> bytes:
    entry = {"name": "demo", "version": "1.2.3", "urls": [url], "digest": digest}
    return yaml.safe_dump({"apiVersion": "v1", "entries": {"demo": [entry]}}).encode()


def test_downloads_the_pinned_version_checked_against_the_published_digest(
    fetch_charts: ModuleType, tmp_path: Path
) -> None:
    log: list[str] = []
    digest = hashlib.sha256(ARCHIVE).hexdigest()
    pages = {
        f"{CHART.repo}/index.yaml": _index("charts/demo-1.2.3.tgz", digest),
        f"{CHART.repo}/charts/demo-1.2.3.tgz": ARCHIVE,  # a relative URL, resolved
    }
    path = fetch_charts.fetch_archive(CHART, tmp_path, _served(pages, log))
    assert path == tmp_path / "demo-1.2.3.tgz"
    assert path.read_bytes() == ARCHIVE
    assert (tmp_path / "demo-1.2.3.tgz.sha256").read_text().strip() == digest
    # Idempotent and offline: a second run finds the archive with its checked digest and asks
    # no repository at all.
    log.clear()
    fetch_charts.fetch_archive(CHART, tmp_path, _served(pages, log))
    assert log == []
    # An archive that no longer matches its recorded digest is fetched and checked again.
    path.write_bytes(b"damaged")
    fetch_charts.fetch_archive(CHART, tmp_path, _served(pages, log))
    assert path.read_bytes() == ARCHIVE
    assert log == [f"{CHART.repo}/index.yaml", f"{CHART.repo}/charts/demo-1.2.3.tgz"]


def test_an_archive_that_is_not_the_published_one_is_refused(
    fetch_charts: ModuleType, tmp_path: Path
) -> None:
    pages = {
        f"{CHART.repo}/index.yaml": _index("https://cdn.invalid/demo.tgz", "0" * 64),
        "https://cdn.invalid/demo.tgz": ARCHIVE,
    }
    with pytest.raises(fetch_charts.FetchError, match="is not the published "):
        fetch_charts.fetch_archive(CHART, tmp_path, _served(pages, []))
    assert not (tmp_path / "demo-1.2.3.tgz").exists()


def test_a_version_missing_from_the_index_is_an_error(fetch_charts: ModuleType) -> None:
    with pytest.raises(fetch_charts.FetchError, match=r"has no demo 9\.9\.9"):
        fetch_charts.index_entry({"entries": {"demo": [{"version": "1.2.3"}]}}, "demo", "9.9.9")


def test_every_repository_chart_pinned_in_versions_is_fetched(fetch_charts: ModuleType) -> None:
    names = {chart.chart for chart in fetch_charts.pinned_charts()}
    assert {"hami", "tigera-operator", "cert-manager", "metallb", "kamaji-etcd"} <= names
    assert "kamaji" not in names  # pinned by content instead (components/chart_cache.py)


def test_kamaji_is_assembled_from_the_tags_files_and_refused_when_one_differs(
    fetch_charts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kamaji_files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji\n", "templates/c.yaml": b"c"}
    etcd_files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji-etcd\n", "values.yaml": b"v"}

    def pinned(repo: str, tag: str, files: dict[str, bytes]) -> chart_cache.PinnedFiles:
        return chart_cache.PinnedFiles(
            repo=repo,
            tag=tag,
            commit="0" * 40,
            path="charts/x",
            files={n: chart_cache.file_digest(n, d) for n, d in files.items()},
        )

    kamaji = pinned("clastix/kamaji", "26.8.2-edge", kamaji_files)
    etcd = pinned("clastix/kamaji-etcd", "v0.17.0", etcd_files)
    monkeypatch.setattr(chart_cache, "kamaji_pins", lambda: (kamaji, etcd))
    etcd_archive = tmp_path / "kamaji-etcd-0.17.0.tgz"
    etcd_archive.write_bytes(tgz("kamaji-etcd", etcd_files))
    pages = {kamaji.raw_url(name): data for name, data in kamaji_files.items()}

    target = fetch_charts.assemble_kamaji(tmp_path, etcd_archive, _served(pages, []))
    assert target == tmp_path / "kamaji-26.8.2-edge"
    assert chart_cache.verify_kamaji_chart(target) == []
    assert (target / "charts" / "kamaji-etcd-0.17.0.tgz").read_bytes() == etcd_archive.read_bytes()

    # A served file that is not the tag's is refused and leaves the verified chart alone.
    pages[kamaji.raw_url("templates/c.yaml")] = b"tampered"
    (target / "templates" / "c.yaml").write_bytes(b"changed locally")
    with pytest.raises(fetch_charts.FetchError, match=r"is not the pinned 26\.8\.2-edge file"):
        fetch_charts.assemble_kamaji(tmp_path, etcd_archive, _served(pages, []))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".kamaji-")]


def test_make_kamaji_chart_copies_the_verified_chart_into_the_project_offline(
    fetch_charts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--only kamaji --project DIR`` (make kamaji-chart) puts the cache's verified chart at
    ``DIR/.charts/kamaji-<tag>``, the path the program's Release names; a copy that no longer
    verifies is replaced, and nothing asks a repository once the cache holds the chart."""
    kamaji_files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji\n", "templates/c.yaml": b"c"}
    etcd_files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji-etcd\n", "values.yaml": b"v"}

    def pinned(repo: str, tag: str, files: dict[str, bytes]) -> chart_cache.PinnedFiles:
        return chart_cache.PinnedFiles(
            repo=repo,
            tag=tag,
            commit="0" * 40,
            path="charts/x",
            files={n: chart_cache.file_digest(n, d) for n, d in files.items()},
        )

    kamaji = pinned("clastix/kamaji", "26.8.2-edge", kamaji_files)
    etcd = pinned("clastix/kamaji-etcd", "v0.17.0", etcd_files)
    monkeypatch.setattr(chart_cache, "kamaji_pins", lambda: (kamaji, etcd))
    cache, project = tmp_path / "cache", tmp_path / "project"
    cache.mkdir()
    etcd_archive = cache / "kamaji-etcd-0.17.0.tgz"
    etcd_archive.write_bytes(tgz("kamaji-etcd", etcd_files))
    pages = {kamaji.raw_url(name): data for name, data in kamaji_files.items()}
    fetch_charts.assemble_kamaji(cache, etcd_archive, _served(pages, []))

    def offline(url: str, *args: object, **kwargs: object) -> bytes:
        raise AssertionError(f"asked {url}")

    monkeypatch.setattr(fetch_charts, "http_get", offline)
    monkeypatch.setattr(fetch_charts, "fetch_archive", offline)
    argv = ["--dest", str(cache), "--only", "kamaji", "--project", str(project)]
    assert fetch_charts.main(argv) == 0
    copy = project / ".charts" / "kamaji-26.8.2-edge"
    assert chart_cache.verify_kamaji_chart(copy) == []
    assert chart_cache.project_kamaji_chart(project) == copy

    (copy / "templates" / "c.yaml").write_bytes(b"changed locally")
    assert chart_cache.verify_kamaji_chart(copy) != []
    assert fetch_charts.main(argv) == 0
    assert chart_cache.verify_kamaji_chart(copy) == []
    assert sorted(p.name for p in (project / ".charts").iterdir()) == ["kamaji-26.8.2-edge"]


def _no_network(monkeypatch: pytest.MonkeyPatch, fetch_charts: ModuleType) -> list[str]:
    """The real downloader on a host without a network: every urlopen fails as name resolution
    does, and the retries do not sleep."""
    import urllib.error

    asked: list[str] = []

    def urlopen(url: str, *args: object, **kwargs: object) -> object:
        asked.append(url)
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(fetch_charts.urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(fetch_charts.time, "sleep", lambda seconds: None)
    return asked


@pytest.mark.parametrize(
    ("argv", "target"),
    [(["--only", "kamaji", "--project", "PROJECT"], "make kamaji-chart"), ([], "make charts")],
)
def test_a_fetch_without_network_names_the_target_the_network_once_and_the_charts_directory(
    fetch_charts: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    target: str,
) -> None:
    asked = _no_network(monkeypatch, fetch_charts)
    cache = tmp_path / "cache"
    args = ["--dest", str(cache), *(str(tmp_path / "p") if a == "PROJECT" else a for a in argv)]
    assert fetch_charts.main(args) == 1
    assert asked, "the downloader was never called"
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"{target}: could not fetch ")
    assert "Temporary failure in name resolution" in line
    assert "needs the network once" in line
    assert f"set {chart_cache.CHARTS_DIR_ENV} (or --dest) to a charts directory" in line
    assert f"run `{target}` again" in line
    assert "fetch-upstream" not in line


def test_the_charts_directory_the_failure_points_at_serves_make_kamaji_chart_offline(
    fetch_charts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the message advises works: with GPU_PLATFORM_CHARTS_DIR naming a directory that holds
    the verified kamaji-<tag>/, make kamaji-chart's command succeeds with no network at all."""
    files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji\n", "templates/c.yaml": b"c"}
    etcd_files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji-etcd\n"}
    digests = {n: chart_cache.file_digest(n, d) for n, d in files.items()}
    kamaji = chart_cache.PinnedFiles("clastix/kamaji", "26.8.2-edge", "0" * 40, "charts/k", digests)
    etcd = chart_cache.PinnedFiles(
        "clastix/kamaji-etcd",
        "v0.17.0",
        "0" * 40,
        "charts/e",
        {n: chart_cache.file_digest(n, d) for n, d in etcd_files.items()},
    )
    monkeypatch.setattr(chart_cache, "kamaji_pins", lambda: (kamaji, etcd))
    copied = tmp_path / "copied-charts"
    chart = copied / "kamaji-26.8.2-edge"
    for name, data in files.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_bytes(data)
    (chart / "charts").mkdir()
    (chart / "charts" / "kamaji-etcd-0.17.0.tgz").write_bytes(tgz("kamaji-etcd", etcd_files))
    assert chart_cache.verify_kamaji_chart(chart) == []
    asked = _no_network(monkeypatch, fetch_charts)
    monkeypatch.setenv(chart_cache.CHARTS_DIR_ENV, str(copied))
    project = tmp_path / "project"
    assert fetch_charts.main(["--only", "kamaji", "--project", str(project)]) == 0
    assert asked == []
    assert chart_cache.verify_kamaji_chart(chart_cache.project_kamaji_chart(project)) == []


def test_make_charts_puts_every_installed_archive_in_the_project_offline_once_cached(
    fetch_charts: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--project DIR`` (make charts) copies each verified archive with its recorded digest to
    ``DIR/.charts/<chart>-<version>.tgz``, the paths the program's releases name, so the
    program's own check passes; a tampered copy is replaced; with the cache filled nothing asks
    a repository."""
    kamaji_files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji\n", "templates/c.yaml": b"c"}
    # kamaji-etcd is bundled into Kamaji's chart and (prod) installed on its own: its archive
    # must name the pinned version like every other.
    etcd_files = {"Chart.yaml": b"apiVersion: v2\nname: kamaji-etcd\nversion: 0.17.0\n"}

    def pinned(repo: str, tag: str, files: dict[str, bytes]) -> chart_cache.PinnedFiles:
        digests = {n: chart_cache.file_digest(n, d) for n, d in files.items()}
        return chart_cache.PinnedFiles(repo, tag, "0" * 40, "charts/x", digests)

    kamaji = pinned("clastix/kamaji", "26.8.2-edge", kamaji_files)
    monkeypatch.setattr(
        chart_cache,
        "kamaji_pins",
        lambda: (kamaji, pinned("clastix/kamaji-etcd", "v0.17.0", etcd_files)),
    )
    cache, project = tmp_path / "cache", tmp_path / "project"
    cache.mkdir()
    for chart in chart_cache.pinned_archives():
        files = {"Chart.yaml": f"name: {chart.chart}\nversion: {chart.version}\n".encode()}
        if chart.chart == "kamaji-etcd":
            files = etcd_files
        data = tgz(chart.chart, files)
        (cache / chart_cache.archive_name(chart)).write_bytes(data)
        chart_cache.digest_record(cache / chart_cache.archive_name(chart)).write_text(
            hashlib.sha256(data).hexdigest() + "\n"
        )
    pages = {kamaji.raw_url(name): data for name, data in kamaji_files.items()}
    fetch_charts.assemble_kamaji(cache, cache / "kamaji-etcd-0.17.0.tgz", _served(pages, []))
    asked = _no_network(monkeypatch, fetch_charts)

    argv = ["--dest", str(cache), "--project", str(project)]
    assert fetch_charts.main(argv) == 0
    chart_cache.check_pinned_charts({}, project_dir=project)
    installed = sorted(p.name for p in (project / ".charts").iterdir() if p.suffix == ".tgz")
    assert installed == sorted(
        chart_cache.archive_name(c) for c in chart_cache.installed_archives()
    )

    hami = project / chart_cache.chart_input(
        next(c for c in chart_cache.pinned_archives() if c.chart == "hami")
    )
    hami.write_bytes(b"tampered")
    with pytest.raises(chart_cache.ChartPinError, match="make charts"):
        chart_cache.check_pinned_charts({}, project_dir=project)
    assert fetch_charts.main(argv) == 0
    chart_cache.check_pinned_charts({}, project_dir=project)
    assert asked == []
