"""Where pinned chart archives live on this machine, and the charts the program installs.

Every chart is installed from a local copy in the project's git-ignored ``.charts/``, never from
a repository at install time: pulumi-kubernetes resolves a ``chart`` with ``repositoryOpts`` by
downloading it again at every Check, also in preview (pulumi/pulumi-kubernetes v4.32.0
provider/pkg/provider/helm_release.go:377-392, 1578-1659), so a second ``make lab`` without the
internet would fail at its first release. ``make charts`` (``scripts/fetch_charts.py --project
.``) downloads each pinned archive once into the per-user charts cache, checks it against the
sha256 digest its repository's ``index.yaml`` publishes, records that digest beside it
(``<archive>.sha256``) and copies both to ``.charts/``; the program refuses an archive there that
is missing, differs from the recorded digest or is not the pinned chart and version
(``check_pinned_charts``), before anything is registered. The release's ``chart`` input is the
project-relative ``.charts/<chart>-<version>.tgz`` (``chart_input``), for the reason below.

Kamaji publishes its chart only as ``0.0.0+latest``, rebuilt on
every push to its master branch (clastix/kamaji 26.8.2-edge ``.github/workflows/helm.yaml``: job
``release`` publishes ``charts/`` with stefanprodan/helm-gh-pages on every push), so CRDs,
webhooks, RBAC and controller flags would change under the pinned image tag. The lab and prod
therefore install Kamaji from a local chart directory that ``make charts`` assembles
from published artefacts of the pinned releases — the files of ``charts/kamaji`` at the Kamaji
release tag and the published ``kamaji-etcd`` chart archive — and that this module verifies file
by file against ``pins/kamaji-chart.json`` before anything is registered.

The directory is assembled once in the per-user charts cache (``charts_dir``) and copied into the
project as ``.charts/kamaji-<tag>`` (git-ignored), and the Release's ``chart`` input is that
relative string, the same on every machine: an absolute cache path would differ with ``$HOME``,
and pulumi-kubernetes diffs the ``chart`` input as given (Check keeps it, ``locateChart`` only
makes it absolute to load it: pulumi/pulumi-kubernetes v4.32.0
provider/pkg/provider/helm_release.go:377-396, 1545-1596; Diff is a three-way merge of the inputs,
:795-895), so every other machine would see the Release changed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import pulumi
import yaml

from components.versions import PINNED, HelmChart

CHARTS_DIR_ENV = "GPU_PLATFORM_CHARTS_DIR"
# Set by the offline harness and benchmark, which evaluate the program under Pulumi mocks: they
# install nothing, so they need no chart. A real `pulumi preview`/`up` never sets it.
SKIP_CHECK_ENV = "GPU_PLATFORM_SKIP_CHART_CHECK"
PIN_FILE = Path(__file__).with_name("pins") / "kamaji-chart.json"
# Where the program's copy of the Kamaji chart lives, relative to the project directory.
PROJECT_CHARTS_DIR = ".charts"
# Files that cannot change what a chart installs (Helm neither renders nor reads them).
_DOC_NAMES = ("README", "LICENSE", "Makefile", "NOTICE", ".helmignore")
_DOC_SUFFIXES = (".md", ".gotmpl")


class ChartPinError(pulumi.RunError):
    """A pinned chart is missing or is not the pinned one (one line, with the fix)."""


def charts_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$GPU_PLATFORM_CHARTS_DIR``, else the per-user cache ``$XDG_CACHE_HOME/gpu-platform/charts``
    (``~/.cache/...``): outside any checkout, so what ``make fetch-upstream`` downloads once
    serves every clone and test run on the machine."""
    explicit = environ.get(CHARTS_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gpu-platform" / "charts"


@dataclass(frozen=True)
class PinnedFiles:
    """A chart directory of an upstream release tag, as sha256 per file."""

    repo: str
    tag: str
    commit: str
    path: str
    files: Mapping[str, str]

    def raw_url(self, file: str) -> str:
        """Where GitHub publishes the file of the release tag."""
        return f"https://raw.githubusercontent.com/{self.repo}/{self.tag}/{self.path}/{file}"


def _load_pins() -> tuple[PinnedFiles, PinnedFiles]:
    data = json.loads(PIN_FILE.read_text())

    def pinned(key: str) -> PinnedFiles:
        entry = data[key]
        return PinnedFiles(
            repo=entry["repo"],
            tag=entry["tag"],
            commit=entry["commit"],
            path=entry["path"],
            files=MappingProxyType(dict(entry["files"])),
        )

    return pinned("kamaji"), pinned("kamaji-etcd")


def kamaji_pins() -> tuple[PinnedFiles, PinnedFiles]:
    """The pinned Kamaji chart files and the pinned kamaji-etcd chart files it bundles."""
    return _load_pins()


def kamaji_chart_dir(root: Path | None = None) -> Path:
    """The assembled Kamaji chart in the charts cache: ``<charts dir>/kamaji-<tag>``."""
    kamaji, _ = kamaji_pins()
    return (root if root is not None else charts_dir()) / f"kamaji-{kamaji.tag}"


def kamaji_chart_input() -> str:
    """The Kamaji Release's ``chart`` input: ``.charts/kamaji-<tag>``, relative to the project
    directory, so the same string on every machine.

    The provider resolves it against its working directory (``os.Stat``/``filepath.Abs`` in
    pulumi/pulumi-kubernetes v4.32.0 provider/pkg/provider/helm_release.go:1545-1576), which is
    the project directory: the engine starts plugins in ``ctx.Pwd`` (pulumi/pulumi v3.259.0
    sdk/go/common/resource/plugin/plugin.go:597-599, provider_plugin.go:287), the project root
    when Pulumi.yaml names no ``main`` (pkg/engine/project.go:45-48,
    pkg/engine/deployment.go:57-68). The leading dot also makes a missing directory an error
    ("path not found") instead of a chart name looked up in repositories
    (helm_release.go:1594-1596)."""
    kamaji, _ = kamaji_pins()
    return f"{PROJECT_CHARTS_DIR}/kamaji-{kamaji.tag}"


def project_kamaji_chart(project_dir: Path | None = None) -> Path:
    """Where ``kamaji_chart_input`` points from ``project_dir`` (default: the working directory,
    which is the project directory under the CLI: the Python language host runs the program in
    it, pulumi/pulumi v3.259.0 sdk/python/cmd/pulumi-language-python-exec:146-149)."""
    return (project_dir if project_dir is not None else Path.cwd()) / kamaji_chart_input()


def bundled_etcd_archive_name() -> str:
    """The file name of the kamaji-etcd archive inside the Kamaji chart's ``charts/``."""
    _, etcd = kamaji_pins()
    return f"kamaji-etcd-{etcd.tag.lstrip('v')}.tgz"


def file_digest(name: str, data: bytes) -> str:
    """sha256 of a chart file; of the parsed content for ``Chart.yaml`` (``helm package``
    re-serialises it, so its bytes differ from the git file while its meaning does not)."""
    if name == "Chart.yaml":
        canonical = json.dumps(yaml.safe_load(data), sort_keys=True).encode()
        return "yaml:" + hashlib.sha256(canonical).hexdigest()
    return hashlib.sha256(data).hexdigest()


def _is_doc(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.startswith(_DOC_NAMES) or base.endswith(_DOC_SUFFIXES)


def differences(files: Mapping[str, bytes], pinned: PinnedFiles) -> list[str]:
    """How ``files`` (path relative to the chart root → content) differ from ``pinned``:
    changed files first, then missing ones, then extra files that could change what the chart
    installs."""
    changed = [
        f"{name} differs from {pinned.repo} {pinned.tag}"
        for name, digest in sorted(pinned.files.items())
        if name in files and file_digest(name, files[name]) != digest
    ]
    missing = [f"{name} is missing" for name in sorted(set(pinned.files) - set(files))]
    extra = [
        f"{name} is not part of {pinned.repo} {pinned.tag}"
        for name in sorted(set(files) - set(pinned.files))
        if not _is_doc(name)
    ]
    return changed + missing + extra


def archive_files(data: bytes) -> dict[str, bytes]:
    """The files of a chart archive, relative to its top directory (``<chart>/…``)."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            extracted = archive.extractfile(member)
            if extracted is None:
                continue
            _, _, relative = member.name.partition("/")
            files[relative] = extracted.read()
    return files


def verify_kamaji_chart(chart_dir: Path) -> list[str]:
    """Every way ``chart_dir`` differs from the pinned Kamaji chart with its bundled kamaji-etcd
    (empty when it is exactly the pinned one)."""
    kamaji, etcd = kamaji_pins()
    if not chart_dir.is_dir():
        return [f"{chart_dir} does not exist"]
    own: dict[str, bytes] = {}
    bundled: dict[str, bytes] = {}
    for path in sorted(p for p in chart_dir.rglob("*") if p.is_file()):
        relative = path.relative_to(chart_dir).as_posix()
        if relative.startswith("charts/"):
            bundled[relative.removeprefix("charts/")] = path.read_bytes()
        else:
            own[relative] = path.read_bytes()
    problems = differences(own, kamaji)
    archive = bundled_etcd_archive_name()
    if set(bundled) != {archive}:
        extra = sorted(set(bundled) - {archive})
        problems.append(f"charts/ must hold exactly {archive} (found: {', '.join(extra) or '-'})")
    if archive in bundled:
        problems.extend(
            f"charts/{archive}: {p}" for p in differences(archive_files(bundled[archive]), etcd)
        )
    return problems


# ------------------------------------------------------------------ archives from repositories

# The Kamaji chart's version in its repository: a moving build, never installed from there.
KAMAJI_PUBLISHED_VERSION = "0.0.0+latest"
MAKE_CHARTS = "make charts"


def pinned_archives() -> list[HelmChart]:
    """Every chart pinned in ``components/versions.py`` by repository and version, in pin order
    (what ``make charts`` downloads; kamaji-etcd only to bundle it into Kamaji's chart)."""
    return [
        value
        for value in vars(PINNED).values()
        if isinstance(value, HelmChart) and value.version != KAMAJI_PUBLISHED_VERSION
    ]


def installed_archives() -> list[HelmChart]:
    """The pinned archives the stacks install from ``.charts/``: every pinned archive (prod
    also installs kamaji-etcd on its own, as a tenant's dedicated DataStore). Both stacks
    install from the same ``.charts/`` — the lab cert-manager, MetalLB, Calico's two and HAMi;
    prod cert-manager, the Cluster API operator, the GPU Operator, kamaji-etcd, Calico's two and
    HAMi — and one ``make charts`` fills it for either, so both check all of them."""
    return pinned_archives()


def archive_name(chart: HelmChart) -> str:
    """The file name ``helm pull <repo>/<chart> --version <version>`` writes."""
    return f"{chart.chart}-{chart.version}.tgz"


def chart_input(chart: HelmChart) -> str:
    """A release's ``chart`` input: ``.charts/<chart>-<version>.tgz``, relative to the project
    directory, the same string on every machine (see ``kamaji_chart_input`` for how the provider
    resolves it). The provider loads an archive path as a local chart and asks no repository
    (``localChart``/``locateChart``, pulumi/pulumi-kubernetes v4.32.0
    provider/pkg/provider/helm_release.go:1545-1596)."""
    return f"{PROJECT_CHARTS_DIR}/{archive_name(chart)}"


def release_chart_name(chart: str) -> str:
    """The chart a release's ``chart`` input installs, by name: ``kamaji`` for the local Kamaji
    chart, ``<chart>`` for a pinned archive's ``chart_input``, else the input itself."""
    if chart == kamaji_chart_input():
        return "kamaji"
    for pinned in pinned_archives():
        if chart == chart_input(pinned):
            return pinned.chart
    return chart


def digest_record(archive: Path) -> Path:
    """Where ``make charts`` records the digest it checked an archive against:
    ``<archive>.sha256``."""
    return archive.with_name(archive.name + ".sha256")


def verify_archive(archive: Path, chart: HelmChart) -> list[str]:
    """Every way ``archive`` is not the pinned ``chart`` that ``make charts`` verified (empty
    when it is): missing, without its recorded digest, not matching it, or a Chart.yaml that
    names another chart or version."""
    if not archive.is_file():
        return [f"{archive} does not exist"]
    record = digest_record(archive)
    if not record.is_file():
        return [f"{record.name} (the digest `{MAKE_CHARTS}` checked) is missing"]
    data = archive.read_bytes()
    recorded = record.read_text().strip()
    actual = hashlib.sha256(data).hexdigest()
    if actual != recorded:
        return [f"sha256 {actual} is not the verified {recorded}"]
    try:
        files = archive_files(data)
        metadata = yaml.safe_load(files.get("Chart.yaml", b"")) or {}
    except (tarfile.TarError, OSError, EOFError, yaml.YAMLError) as error:
        return [f"not a chart archive ({error})"]
    found = (str(metadata.get("name")), str(metadata.get("version")))
    if found != (chart.chart, chart.version):
        return [f"its Chart.yaml is {found[0]} {found[1]}, not {chart.chart} {chart.version}"]
    return []


def check_pinned_charts(
    environ: Mapping[str, str] = os.environ, project_dir: Path | None = None
) -> None:
    """What the program checks before it registers anything: every chart the stacks install,
    as the provider will load it from ``.charts/``, is the pinned one — Kamaji's file by file,
    the others against the digest ``make charts`` verified (unless
    ``GPU_PLATFORM_SKIP_CHART_CHECK=1``). Raises ``ChartPinError``, one line naming
    ``make charts``."""
    if environ.get(SKIP_CHECK_ENV, "").strip() == "1":
        return
    check_kamaji_chart(project_kamaji_chart(project_dir))
    root = project_dir if project_dir is not None else Path.cwd()
    missing: list[str] = []
    wrong: list[str] = []
    for chart in installed_archives():
        archive = root / chart_input(chart)
        problems = verify_archive(archive, chart)
        if problems == [f"{archive} does not exist"]:
            missing.append(archive_name(chart))
        elif problems:
            wrong.append(f"{chart_input(chart)}: {problems[0]}")
    if missing:
        raise ChartPinError(
            f"the pinned chart archives {', '.join(missing)} are not in "
            f"{root / PROJECT_CHARTS_DIR}: run `{MAKE_CHARTS}` in the project directory (it "
            "fetches every pinned chart once, checked against its repository's published digest, "
            f"so the first run needs the network; offline, set {CHARTS_DIR_ENV} to a charts "
            "directory that holds them, e.g. a copy of ~/.cache/gpu-platform/charts from a "
            f"machine that ran it, then run `{MAKE_CHARTS}`)"
        )
    if wrong:
        raise ChartPinError(
            f"{'; '.join(wrong)}: not the archive `{MAKE_CHARTS}` verified; delete "
            f"{PROJECT_CHARTS_DIR}/ and run `{MAKE_CHARTS}` again"
        )


def check_kamaji_chart(chart_dir: Path) -> None:
    """Raise ``ChartPinError`` (one line naming the fix) unless ``chart_dir`` is the pinned
    chart."""
    kamaji, _ = kamaji_pins()
    problems = verify_kamaji_chart(chart_dir)
    if not problems:
        return
    if problems == [f"{chart_dir} does not exist"]:
        raise ChartPinError(
            f"the pinned Kamaji chart ({kamaji.repo} {kamaji.tag}) is not at {chart_dir}: run "
            f"`{MAKE_CHARTS}` in the project directory (it fetches the pinned charts once, so "
            f"the first run needs the network; offline, set {CHARTS_DIR_ENV} to a charts "
            f"directory that holds them and kamaji-{kamaji.tag}/, e.g. a copy of "
            f"~/.cache/gpu-platform/charts from a machine that ran it, then run `{MAKE_CHARTS}`)"
        )
    shown = "; ".join(problems[:3]) + (
        f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    )
    raise ChartPinError(
        f"{chart_dir} is not Kamaji {kamaji.tag}'s chart ({shown}): delete it and run "
        f"`{MAKE_CHARTS}` again"
    )
