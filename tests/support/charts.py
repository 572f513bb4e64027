"""Render a recorded ``helm.v3.Release`` with Helm's own engine, as ``helm install`` would.

The mock harness records every Release the program registers (chart, version, release name,
namespace, values). This module finds the pinned chart archive, prepares it for the target
cluster and renders it with Helm's Go engine (``helm-python-sdk``, import ``helm_python``), so the
tests see the objects Helm would create instead of the values the program passes.

What "as ``helm install`` would" means here, and where it stops:

* Archives come from ``$GPU_PLATFORM_CHARTS_DIR``, else from the per-user cache
  ``${XDG_CACHE_HOME:-~/.cache}/gpu-platform/charts`` that ``make fetch-upstream`` fills, named
  as ``helm pull`` writes them: ``<chart>-<version>.tgz``. A Release whose ``chart`` is a local
  path (a directory or an archive) is rendered from that path; the program's Kamaji chart
  (``.charts/kamaji-<tag>``, relative to the project) from the cache's ``kamaji-<tag>``, the
  copy ``make charts`` verifies and copies there (both checked against the same pin), and the
  program's pinned archives (``.charts/<chart>-<version>.tgz``) from the cache's archive of the
  same name, which ``make charts`` copies there.
* Install mode (``.Release.IsInstall``), the release name and namespace the program registered.
* The target cluster's Kubernetes version and API versions. Helm's engine offers no option for
  them (the SDK renders with Helm's defaults: Kubernetes v1.36.0 and the built-in API versions of
  its client library), so the chart is unpacked into a scratch directory and every
  ``.Capabilities.KubeVersion.*`` and ``.Capabilities.APIVersions.Has "…"`` in its templates is
  replaced by the target's literal value first; a reference in any other form is an error, never
  left to Helm's default. Helm install checks the chart's ``kubeVersion`` constraint against the
  cluster (helm v3.20 ``pkg/action/install.go``); so does ``render_release``.
* The CRDs of the ``crds/`` folders of the chart and of its *enabled* subcharts, which Helm
  installs before anything else (v3.20 ``pkg/action/install.go``, ``installCRDs``).
* Not a cluster: ``lookup`` returns nothing, no admission, defaulting or controllers run, and the
  engine is Helm v4.2's (the program installs with pulumi-kubernetes' embedded Helm v3.20; the two
  render templates alike — the template functions and the values coalescing are shared code).
"""

from __future__ import annotations

import atexit
import copy
import functools
import hashlib
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components import chart_cache
from components.chart_cache import CHARTS_DIR_ENV, charts_dir

HOOK_ANNOTATION = "helm.sh/hook"


class ChartUnavailableError(Exception):
    """Chart archives a test needs are not on this machine (the test skips with this text:
    one line naming them and the command that fetches them)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = sorted(set(paths))
        folders = sorted({str(p.parent) for p in self.paths})
        names = ", ".join(p.name + ("" if p.suffix == ".tgz" else "/") for p in self.paths)
        super().__init__(
            f"chart archives not in {', '.join(folders)}: {names}; run `make fetch-upstream` "
            f"(or set {CHARTS_DIR_ENV})"
        )


class RenderError(Exception):
    """Helm would refuse the release: a template error, an incompatible kubeVersion, or a
    Capabilities reference the renderer cannot pin to the target cluster."""


def archive_name(chart: str, version: str) -> str:
    """The file name ``helm pull <repo>/<chart> --version <version>`` writes."""
    return f"{chart}-{version}.tgz"


def chart_source(inputs: Mapping[str, Any]) -> Path:
    """The archive (or chart directory) a recorded Release installs; raises
    ``ChartUnavailableError`` with a one-line reason when it is not on this machine."""
    chart = str(inputs.get("chart", ""))
    if chart == chart_cache.kamaji_chart_input():
        # The project's copy of the cache's verified directory (make kamaji-chart): the cache is
        # where `make charts` and CI put it, whichever checkout the tests run in.
        cached = chart_cache.kamaji_chart_dir(charts_dir())
        if cached.is_dir() and not chart_cache.verify_kamaji_chart(cached):
            return cached
        raise ChartUnavailableError([cached])
    name = chart_cache.release_chart_name(chart)
    if name != chart:
        # A pinned archive in the project's .charts/ (make charts): its verified source is the
        # cache's archive of the same name, where `make charts` and CI put it.
        path = charts_dir() / Path(chart).name
        if not path.is_file():
            raise ChartUnavailableError([path])
        return path
    local = Path(chart)
    if local.is_absolute() or chart.startswith("."):
        if local.exists():
            return local
        raise ChartUnavailableError([local])
    version = str(inputs.get("version", ""))
    path = charts_dir() / archive_name(chart, version)
    if not path.is_file():
        raise ChartUnavailableError([path])
    return path


# ------------------------------------------------------------------- target cluster pinning


@dataclass(frozen=True)
class ClusterCapabilities:
    """What ``.Capabilities`` would say on the target cluster at install time."""

    kube_version: str  # e.g. v1.35.0
    api_versions: frozenset[str]  # "group/version" and "group/version/Kind" (core: "v1", "v1/Pod")

    @property
    def major(self) -> str:
        return self.kube_version.lstrip("v").split(".")[0]

    @property
    def minor(self) -> str:
        return self.kube_version.lstrip("v").split(".")[1]

    def has(self, api: str) -> bool:
        return api in self.api_versions


_PREFIX = r"(?:\$[A-Za-z0-9_]*)?"
_KUBE_VERSION_FIELD = re.compile(
    _PREFIX + r"\.Capabilities\.KubeVersion\.(Version|GitVersion|Major|Minor)\b"
)
_API_HAS = re.compile(_PREFIX + r'\.Capabilities\.APIVersions\.Has\s+"([^"]+)"')
# Anything else that reaches the capabilities (``with .Capabilities``, ``$c := .Capabilities``,
# ``.Capabilities.KubeVersion`` passed whole) would render with the engine's defaults; only
# ``.Capabilities.HelmVersion`` is the same everywhere.
_ANY_CAPABILITY = re.compile(r"\bCapabilities\b(?!\.HelmVersion\b)")


def pin_capabilities(template: str, caps: ClusterCapabilities) -> str:
    """Replace the template's Capabilities references by the target cluster's literal values.

    Raises ``RenderError`` for a reference this cannot pin (e.g. ``.Capabilities.KubeVersion``
    passed whole to a helper), so a chart never silently renders with Helm's defaults."""

    def version_field(match: re.Match[str]) -> str:
        value = {
            "Version": caps.kube_version,
            "GitVersion": caps.kube_version,
            "Major": caps.major,
            "Minor": caps.minor,
        }[match.group(1)]
        return f'"{value}"'

    pinned = _KUBE_VERSION_FIELD.sub(version_field, template)
    pinned = _API_HAS.sub(lambda m: "true" if caps.has(m.group(1)) else "false", pinned)
    leftover = _ANY_CAPABILITY.search(pinned)
    if leftover is not None:
        line = pinned[: leftover.start()].count("\n") + 1
        raise RenderError(f"line {line}: a .Capabilities reference the renderer cannot pin")
    return pinned


# ------------------------------------------------------------------------ kubeVersion check

_CONSTRAINT = re.compile(r"^(>=|<=|!=|=|>|<)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(-[0-9A-Za-z.-]+)?$")


def kube_version_satisfies(constraint: str, version: str) -> bool:
    """Masterminds semver constraints as chart ``kubeVersion`` fields use them (``>= 1.18.0-0``,
    ``>=1.21.0-0 <1.36.0``, alternatives with ``||``). Other operators raise ``RenderError``."""
    target = tuple(int(p) for p in version.lstrip("v").split("-")[0].split(".")[:3])
    for alternative in constraint.split("||"):
        terms = [t for t in re.split(r"[\s,]+(?=[<>=!])|,", alternative.strip()) if t.strip()]
        if all(_term_holds(term.strip(), target) for term in terms):
            return True
    return False


def _term_holds(term: str, target: tuple[int, ...]) -> bool:
    match = _CONSTRAINT.match(term)
    if match is None:
        raise RenderError(f"unsupported kubeVersion constraint term {term!r}")
    op = match.group(1) or "="
    bound = tuple(int(match.group(i) or 0) for i in (2, 3, 4))
    # A "-0" pre-release suffix only widens the bound to pre-releases; targets are releases.
    return {
        ">=": target >= bound,
        "<=": target <= bound,
        ">": target > bound,
        "<": target < bound,
        "=": target == bound,
        "!=": target != bound,
    }[op]


# -------------------------------------------------------------------------------- rendering


@dataclass
class RenderedRelease:
    """What ``helm install`` of one recorded Release would create, in its order: the CRDs of
    ``crds/`` folders, the pre-install hooks, the templates' objects, the post-install hooks."""

    name: str
    namespace: str
    chart: str
    version: str
    crds: list[dict[str, Any]] = field(default_factory=list)
    pre_install_hooks: list[dict[str, Any]] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    post_install_hooks: list[dict[str, Any]] = field(default_factory=list)

    def all_objects(self) -> list[dict[str, Any]]:
        return [*self.crds, *self.pre_install_hooks, *self.objects, *self.post_install_hooks]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.all_objects() if o.get("kind") == kind]


def render_release(
    inputs: Mapping[str, Any],
    caps: ClusterCapabilities,
    values: Mapping[str, Any] | None = None,
    source: Path | None = None,
) -> RenderedRelease:
    """Render a recorded Release's chart with its values (or ``values``) for ``caps``: the
    cluster before the release. The CRDs of the ``crds/`` folders of the chart and its enabled
    subcharts are added to its API versions, as Helm installs those first and refreshes its
    capabilities before rendering (helm v3.20 ``pkg/action/install.go``: ``installCRDs``, then
    ``cfg.Capabilities = nil``).

    ``source`` overrides the archive (tests that alter a chart on purpose pass their copy)."""
    import helm_python

    path = source if source is not None else chart_source(inputs)
    release_name = str(inputs.get("name") or "release-name")
    namespace = str(inputs.get("namespace") or "default")
    used_values = dict(values if values is not None else inputs.get("values") or {})
    own_crds = _enabled_crds(str(path), fingerprint(path), caps.kube_version, used_values)
    caps = ClusterCapabilities(caps.kube_version, caps.api_versions | _api_forms(own_crds))
    chart_dir = _prepared_chart(str(path), fingerprint(path), caps)
    with helm_python.Chart.load(str(chart_dir)) as chart:
        constraint = (chart.metadata or {}).get("kubeVersion")
        if constraint and not kube_version_satisfies(constraint, caps.kube_version):
            raise RenderError(
                f"chart {chart.name} requires kubeVersion {constraint}, which is incompatible "
                f"with Kubernetes {caps.kube_version}"
            )
        try:
            manifests = chart.render(
                used_values, name=release_name, namespace=namespace, is_install=True
            )
        except helm_python.HelmError as error:
            raise RenderError(f"{chart.name}: {error}") from error
        rendered = RenderedRelease(
            name=release_name,
            namespace=namespace,
            chart=chart.name,
            version=chart.version,
            crds=own_crds,
        )
    for template, text in sorted(manifests.items()):
        if template.endswith("NOTES.txt"):
            continue
        for obj in documents(text):
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            if HOOK_ANNOTATION not in annotations:
                rendered.objects.append(obj)
                continue
            # Helm lower-cases hook names; an annotation naming no known hook is not installed
            # (pkg/releaseutil/manifest_sorter.go).
            hooks = {h.strip().lower() for h in str(annotations[HOOK_ANNOTATION]).split(",")}
            if "pre-install" in hooks:
                rendered.pre_install_hooks.append(obj)
            elif "post-install" in hooks:
                rendered.post_install_hooks.append(obj)
            # test, upgrade, delete and unknown hooks do not run on install
    return rendered


def _enabled_crds(
    path: str, content: str, kube_version: str, values: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The CRD objects of the ``crds/`` folders of the chart and of the subcharts its values
    enable (Helm's ``ProcessDependencies`` drops disabled ones before ``CRDObjects``)."""
    import helm_python

    root = _prepared_chart(path, content, ClusterCapabilities(kube_version, frozenset()))
    with helm_python.Chart.load(str(root)) as chart:
        enabled = _enabled_subchart_paths(root, chart.merge_values(dict(values)))
        files = [
            c for c in chart.crds if _crd_owner(c.get("filename") or c.get("name", "")) in enabled
        ]
    return [doc for crd_file in files for doc in documents(crd_file.get("data", ""))]


def _api_forms(crds: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """ "group/version" and "group/version/Kind" of every served version of ``crds``."""
    forms: set[str] = set()
    for crd in crds:
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            if version.get("served"):
                api = f"{spec['group']}/{version['name']}"
                forms.update((api, f"{api}/{spec['names']['kind']}"))
    return frozenset(forms)


# Helm's own manifest splitter (helm v3.20 pkg/releaseutil/manifest.go: ``sep``), which also
# splits "---# comment" where a YAML parser would not.
_MANIFEST_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")


# libyaml's parser (PyYAML's pure-Python one takes seconds on Calico's and Kamaji's CRDs).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def documents(text: str) -> list[dict[str, Any]]:
    return copy.deepcopy(_parsed(text))


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> list[dict[str, Any]]:
    documents = (
        yaml.load(part, Loader=_LOADER) for part in _MANIFEST_SEPARATOR.split(text) if part.strip()
    )
    return [doc for doc in documents if isinstance(doc, dict) and doc]


def fingerprint(path: Path) -> str:
    """Content hash of an archive or chart directory, so a cached preparation is never stale."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path) if file != path else file.name).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


SCRATCH_PREFIX = "gpu-platform-chart-"


@functools.cache
def _scratch_root() -> Path:
    """The one directory of this process that holds every prepared chart, made on first use.
    ``release_scratch`` removes it (the test session does, at its end: tests/conftest.py); a
    process that never calls it removes it at exit."""
    root = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    atexit.register(shutil.rmtree, root, True)
    return root


def release_scratch() -> None:
    """Remove every prepared chart of this process (and forget them: the next render prepares
    its chart anew)."""
    if _scratch_root.cache_info().currsize == 0:
        return
    root = _scratch_root()
    _prepared_chart.cache_clear()
    _scratch_root.cache_clear()
    shutil.rmtree(root, ignore_errors=True)


@functools.lru_cache(maxsize=64)
def _prepared_chart(path: str, fingerprint: str, caps: ClusterCapabilities) -> Path:
    """Unpack the chart (and every subchart archive inside it) into a scratch directory and pin
    its Capabilities references to ``caps``. Cached per chart content and target; the scratch
    directories live under ``_scratch_root()`` until ``release_scratch``."""
    import helm_python

    del fingerprint  # part of the cache key only
    scratch = Path(tempfile.mkdtemp(dir=_scratch_root()))
    source = Path(path)
    if source.is_dir():
        root = scratch / source.name
        shutil.copytree(source, root, symlinks=False)
    else:
        helm_python.expand(str(scratch), str(source))
        (root,) = [p for p in scratch.iterdir() if p.is_dir()]
    _expand_subcharts(root)
    for template in _template_files(root):
        try:
            template.write_text(pin_capabilities(template.read_text(), caps))
        except RenderError as error:
            raise RenderError(f"{template.relative_to(root)}: {error}") from error
    for values in root.rglob("values.yaml"):
        # A template may render a values string with ``tpl``; one naming the capabilities
        # could not be pinned here.
        if _ANY_CAPABILITY.search(values.read_text()):
            raise RenderError(f"{values.relative_to(root)} mentions .Capabilities (tpl)")
    return root


def _expand_subcharts(chart_root: Path) -> None:
    """Replace ``charts/*.tgz`` by their unpacked directories, recursively (Helm loads both)."""
    import helm_python

    charts = chart_root / "charts"
    if not charts.is_dir():
        return
    for archive in sorted(charts.glob("*.tgz")):
        helm_python.expand(str(charts), str(archive))
        archive.unlink()
    for sub in sorted(p for p in charts.iterdir() if p.is_dir()):
        _expand_subcharts(sub)


def _template_files(chart_root: Path) -> Iterable[Path]:
    for templates in chart_root.rglob("templates"):
        if templates.is_dir():
            yield from (p for p in templates.rglob("*") if p.is_file())


def _crd_owner(filename: str) -> tuple[str, ...]:
    """The subchart path of a ``crds/`` file as the SDK names it (``<chart>/crds/x.yaml`` is the
    chart's own: ``()``; ``<chart>/charts/nfd/crds/x.yaml`` is subchart ``("nfd",)``)."""
    parts = Path(filename).parts[1:]
    owner: list[str] = []
    index = 0
    while index + 1 < len(parts) and parts[index] == "charts":
        owner.append(parts[index + 1])
        index += 2
    return tuple(owner)


def _enabled_subchart_paths(
    chart_root: Path, merged_values: Mapping[str, Any]
) -> set[tuple[str, ...]]:
    """Subchart paths Helm keeps after evaluating dependency conditions (Helm's
    ``pkg/chart/v2/util/dependencies.go`` ``processDependencyConditions``: the first condition
    path that resolves to a bool decides; no resolvable path keeps the dependency)."""
    enabled: set[tuple[str, ...]] = {()}

    def walk(root: Path, values: Mapping[str, Any], prefix: tuple[str, ...]) -> None:
        metadata = yaml.safe_load((root / "Chart.yaml").read_text()) or {}
        for dependency in metadata.get("dependencies") or []:
            name = dependency.get("alias") or dependency["name"]
            condition = str(dependency.get("condition") or "")
            keep = True
            for path in (p.strip() for p in condition.split(",") if p.strip()):
                value: Any = values
                for key in path.split("."):
                    value = value.get(key) if isinstance(value, Mapping) else None
                if isinstance(value, bool):
                    keep = value
                    break
            sub_root = root / "charts" / dependency["name"]
            if keep and sub_root.is_dir():
                enabled.add((*prefix, dependency["name"]))
                sub_values = values.get(name) if isinstance(values.get(name), Mapping) else {}
                walk(sub_root, sub_values, (*prefix, dependency["name"]))

    walk(chart_root, merged_values, ())
    return enabled


# ------------------------------------------------------------------ one chart, outside a stack


def render_pinned(
    chart: str,
    version: str,
    values: Mapping[str, Any],
    *,
    name: str,
    namespace: str,
    kube_version: str,
) -> RenderedRelease:
    """A pinned chart from the charts cache rendered on its own, for a fresh cluster of
    ``kube_version`` (its built-in API versions and the chart's own ``crds/``)."""
    from tests.support.kube_schemas import builtin_api_versions

    inputs = {"chart": chart, "version": version, "name": name, "namespace": namespace}
    caps = ClusterCapabilities(kube_version, builtin_api_versions(kube_version))
    return render_release({**inputs, "values": dict(values)}, caps)


def render_pinned_or_skip(
    chart: str, version: str, values: Mapping[str, Any], **kwargs: Any
) -> RenderedRelease:
    """``render_pinned``, skipping the test (one line naming the archive) when it is absent."""
    import pytest

    try:
        return render_pinned(chart, version, values, **kwargs)
    except ChartUnavailableError as missing:
        pytest.skip(str(missing))


def release_secret_bytes(
    chart: str, version: str, values: Mapping[str, Any], *, name: str, namespace: str
) -> int:
    """An estimate of the bytes Helm v3 stores in the release Secret of this install.

    Helm's storage driver (helm v3.20 ``pkg/storage/driver/util.go`` ``encodeRelease``) writes
    base64(gzip(json(release))) under the Secret's ``release`` key; the release holds the chart
    (templates and files base64-encoded, being ``[]byte``), the values and the rendered manifest.
    Python's zlib at level 9 stands in for Go's ``gzip.BestCompression``."""
    import base64
    import gzip
    import json

    import helm_python

    path = chart_source({"chart": chart, "version": version})
    with helm_python.Chart.load(str(path)) as loaded:
        rendered = loaded.render(dict(values), name=name, namespace=namespace, is_install=True)
        templates, files = loaded.templates, loaded.files
        metadata, defaults = loaded.metadata, loaded.values

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    manifest = "".join(
        f"---\n# Source: {template}\n{text}\n"
        for template, text in sorted(rendered.items())
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
        "config": dict(values),
        "manifest": manifest,
        "hooks": [],
    }
    raw = json.dumps(release, separators=(",", ":"), ensure_ascii=False).encode()
    return len(base64.b64encode(gzip.compress(raw, compresslevel=9)))
