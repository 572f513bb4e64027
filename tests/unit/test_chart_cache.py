"""The Kamaji chart pinned by content, the pinned archives in .charts/, and where chart archives
live."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from components import chart_cache
from components.chart_cache import PinnedFiles
from components.versions import PINNED, HelmChart
from tests.support.archives import tgz


def _pinned(files: dict[str, bytes]) -> PinnedFiles:
    return PinnedFiles(
        repo="example/chart",
        tag="v1",
        commit="0" * 40,
        path="charts/x",
        files={name: chart_cache.file_digest(name, data) for name, data in files.items()},
    )


def test_charts_dir_is_the_env_var_else_a_per_user_cache_outside_the_checkout() -> None:
    assert chart_cache.charts_dir({"GPU_PLATFORM_CHARTS_DIR": "/srv/charts"}) == Path("/srv/charts")
    assert chart_cache.charts_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/gpu-platform/charts")
    default = chart_cache.charts_dir({})
    assert default == Path.home() / ".cache" / "gpu-platform" / "charts"
    assert not default.is_relative_to(Path(__file__).resolve().parents[2])


def test_identical_files_have_no_differences() -> None:
    files = {"Chart.yaml": b"name: x\nversion: 1\n", "templates/a.yaml": b"kind: A\n"}
    assert chart_cache.differences(files, _pinned(files)) == []


def test_chart_yaml_is_compared_by_meaning_because_helm_package_reserialises_it() -> None:
    pinned = _pinned({"Chart.yaml": b"# comment\nname: x\nversion: '1'\n"})
    assert chart_cache.differences({"Chart.yaml": b"version: '1'\nname: x\n"}, pinned) == []
    assert chart_cache.differences({"Chart.yaml": b"version: '2'\nname: x\n"}, pinned) == [
        "Chart.yaml differs from example/chart v1"
    ]


def test_changed_missing_and_extra_files_are_named_changed_first() -> None:
    pinned = _pinned({"templates/a.yaml": b"kind: A\n", "values.yaml": b"a: 1\n"})
    found = {
        "templates/a.yaml": b"kind: B\n",
        "templates/extra.yaml": b"kind: C\n",
        "README.md": b"docs only",
    }
    assert chart_cache.differences(found, pinned) == [
        "templates/a.yaml differs from example/chart v1",
        "values.yaml is missing",
        "templates/extra.yaml is not part of example/chart v1",
    ]


def test_archive_files_are_relative_to_the_chart_directory() -> None:
    data = tgz("kamaji-etcd", {"Chart.yaml": b"name: kamaji-etcd\n", "templates/s.yaml": b"x"})
    assert chart_cache.archive_files(data) == {
        "Chart.yaml": b"name: kamaji-etcd\n",
        "templates/s.yaml": b"x",
    }


def test_the_pin_is_kamajis_image_release_and_bundles_the_pinned_kamaji_etcd() -> None:
    kamaji, etcd = chart_cache.kamaji_pins()
    assert (kamaji.repo, kamaji.tag, kamaji.path) == (
        "clastix/kamaji",
        PINNED.kamaji_image_tag,
        "charts/kamaji",
    )
    assert (etcd.repo, etcd.tag) == ("clastix/kamaji-etcd", f"v{PINNED.kamaji_etcd.version}")
    assert (
        chart_cache.bundled_etcd_archive_name() == f"kamaji-etcd-{PINNED.kamaji_etcd.version}.tgz"
    )
    # The templates read these through .Files.Get, so they are pinned too.
    assert "controller-gen/mutating-webhook.yaml" in kamaji.files
    assert kamaji.raw_url("values.yaml") == (
        f"https://raw.githubusercontent.com/clastix/kamaji/{PINNED.kamaji_image_tag}/"
        "charts/kamaji/values.yaml"
    )


def test_the_pin_agrees_with_the_independent_upstream_copies(upstream_dir: Path) -> None:
    """../shared/upstream holds byte-for-byte copies of the same tag's values and CRDs
    (SOURCES.md): the pinned digests must be theirs."""
    kamaji, etcd = chart_cache.kamaji_pins()
    pairs = {
        "values.yaml": upstream_dir / "kamaji/values.yaml",
        "crds/kamaji.clastix.io_tenantcontrolplanes.yaml": upstream_dir
        / "kamaji/crds/tenantcontrolplanes.kamaji.clastix.io.yaml",
        "crds/kamaji.clastix.io_datastores.yaml": upstream_dir
        / "kamaji/crds/datastores.kamaji.clastix.io.yaml",
    }
    for name, copy in pairs.items():
        assert kamaji.files[name] == hashlib.sha256(copy.read_bytes()).hexdigest(), name
    assert (
        etcd.files["values.yaml"]
        == hashlib.sha256((upstream_dir / "kamaji-etcd/values.yaml").read_bytes()).hexdigest()
    )
    assert kamaji.files["Chart.yaml"] == chart_cache.file_digest(
        "Chart.yaml", (upstream_dir / "kamaji/Chart.yaml").read_bytes()
    )


def test_a_missing_chart_directory_fails_with_the_command_to_run(tmp_path: Path) -> None:
    with pytest.raises(chart_cache.ChartPinError, match="run `make charts`"):
        chart_cache.check_kamaji_chart(tmp_path / "kamaji-26.8.2-edge")


def test_the_check_is_skipped_only_for_offline_evaluation(tmp_path: Path) -> None:
    chart_cache.check_pinned_charts({"GPU_PLATFORM_SKIP_CHART_CHECK": "1"})
    with pytest.raises(chart_cache.ChartPinError, match=r"\.charts/kamaji-"):
        chart_cache.check_pinned_charts({}, project_dir=tmp_path)


def test_the_program_checks_the_project_copy_not_the_cache(tmp_path: Path) -> None:
    """The Release names ``.charts/kamaji-<tag>`` relative to the project directory, so that is
    what the program verifies, whatever the charts cache holds."""
    assert chart_cache.kamaji_chart_input() == ".charts/kamaji-26.8.2-edge"
    assert chart_cache.project_kamaji_chart(tmp_path) == tmp_path / ".charts/kamaji-26.8.2-edge"
    with pytest.raises(chart_cache.ChartPinError, match=str(tmp_path / "p")):
        chart_cache.check_pinned_charts(
            {"GPU_PLATFORM_CHARTS_DIR": str(tmp_path / "cache")}, project_dir=tmp_path / "p"
        )


def test_a_chart_directory_with_a_foreign_subchart_is_refused(tmp_path: Path) -> None:
    chart = tmp_path / "kamaji"
    (chart / "charts").mkdir(parents=True)
    (chart / "charts" / "kamaji-etcd-0.15.0.tgz").write_bytes(tgz("kamaji-etcd", {"a": b"b"}))
    problems = chart_cache.verify_kamaji_chart(chart)
    assert f"charts/ must hold exactly {chart_cache.bundled_etcd_archive_name()}" in problems[-1]


def test_the_cached_kamaji_chart_verifies_when_present() -> None:
    chart = chart_cache.kamaji_chart_dir()
    if not chart.is_dir():
        pytest.skip(f"{chart} absent: run `make kamaji-chart`")
    assert chart_cache.verify_kamaji_chart(chart) == []


def test_a_missing_chart_says_it_needs_the_network_once_and_how_to_point_at_a_charts_directory(
    tmp_path: Path,
) -> None:
    with pytest.raises(chart_cache.ChartPinError) as raised:
        chart_cache.check_kamaji_chart(tmp_path / "absent")
    message = str(raised.value)
    assert "\n" not in message
    assert "needs the network" in message
    assert f"set {chart_cache.CHARTS_DIR_ENV} to a charts directory" in message
    kamaji, _ = chart_cache.kamaji_pins()
    assert f"kamaji-{kamaji.tag}/" in message


# ------------------------------------------------------------ the pinned archives in .charts/


def _chart_archive(name: str, version: str, extra: bytes = b"") -> bytes:
    chart_yaml = f"apiVersion: v2\nname: {name}\nversion: {version}\n".encode()
    return tgz(name, {"Chart.yaml": chart_yaml, "templates/a.yaml": b"kind: A\n" + extra})


def _place(project: Path, chart: HelmChart, data: bytes, record: bytes | None = None) -> Path:
    """An archive in the project's .charts/ with the digest `make charts` records beside it."""
    archive = project / chart_cache.chart_input(chart)
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest() if record is None else record.decode()
    chart_cache.digest_record(archive).write_text(digest + "\n")
    return archive


def _place_all(project: Path) -> dict[str, Path]:
    return {
        chart.chart: _place(project, chart, _chart_archive(chart.chart, chart.version))
        for chart in chart_cache.installed_archives()
    }


@pytest.fixture
def kamaji_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Kamaji half of the check passes (its own tests are above), so these see the
    archives'."""
    monkeypatch.setattr(chart_cache, "check_kamaji_chart", lambda chart_dir: None)


def test_every_release_input_is_a_project_relative_archive_path() -> None:
    """The same string on every machine, an archive the provider loads as a local chart."""
    assert chart_cache.chart_input(PINNED.hami) == ".charts/hami-2.10.0.tgz"
    assert chart_cache.chart_input(PINNED.calico_crds) == (
        ".charts/crd.projectcalico.org.v1-v3.32.1.tgz"
    )
    names = {chart.chart for chart in chart_cache.installed_archives()}
    assert {"cert-manager", "metallb", "crd.projectcalico.org.v1", "tigera-operator", "hami"} <= (
        names
    )
    assert {"gpu-operator", "cluster-api-operator", "kamaji-etcd"} <= names  # prod's
    assert chart_cache.release_chart_name(chart_cache.chart_input(PINNED.hami)) == "hami"
    assert chart_cache.release_chart_name(chart_cache.kamaji_chart_input()) == "kamaji"


def test_an_archive_verifies_only_as_make_charts_left_it(tmp_path: Path) -> None:
    chart = PINNED.cert_manager
    data = _chart_archive(chart.chart, chart.version)
    archive = _place(tmp_path, chart, data)
    assert chart_cache.verify_archive(archive, chart) == []
    archive.write_bytes(_chart_archive(chart.chart, chart.version, extra=b"# changed\n"))
    assert "is not the verified" in chart_cache.verify_archive(archive, chart)[0]
    chart_cache.digest_record(archive).unlink()
    assert "is missing" in chart_cache.verify_archive(archive, chart)[0]
    archive.unlink()
    assert chart_cache.verify_archive(archive, chart) == [f"{archive} does not exist"]


def test_another_chart_or_version_under_the_pinned_name_is_refused(tmp_path: Path) -> None:
    """A renamed archive, even with a matching record, is not the pinned chart."""
    chart = PINNED.metallb
    archive = _place(tmp_path, chart, _chart_archive("metallb", "0.15.2"))
    assert chart_cache.verify_archive(archive, chart) == [
        "its Chart.yaml is metallb 0.15.2, not metallb 0.16.1"
    ]
    garbage = _place(tmp_path, chart, b"not a tarball")
    assert "not a chart archive" in chart_cache.verify_archive(garbage, chart)[0]


@pytest.mark.usefixtures("kamaji_in_place")
def test_the_program_starts_only_with_every_archive_verified(tmp_path: Path) -> None:
    _place_all(tmp_path)
    chart_cache.check_pinned_charts({}, project_dir=tmp_path)


@pytest.mark.usefixtures("kamaji_in_place")
def test_missing_archives_fail_in_one_line_naming_make_charts(tmp_path: Path) -> None:
    archives = _place_all(tmp_path)
    archives["hami"].unlink()
    archives["tigera-operator"].unlink()
    with pytest.raises(chart_cache.ChartPinError) as raised:
        chart_cache.check_pinned_charts({}, project_dir=tmp_path)
    message = str(raised.value)
    assert "\n" not in message
    assert "run `make charts`" in message
    assert "hami-2.10.0.tgz" in message
    assert "tigera-operator-v3.32.1.tgz" in message
    assert "needs the network" in message
    assert chart_cache.CHARTS_DIR_ENV in message


@pytest.mark.usefixtures("kamaji_in_place")
def test_a_tampered_archive_fails_naming_it_and_make_charts(tmp_path: Path) -> None:
    archives = _place_all(tmp_path)
    archives["cert-manager"].write_bytes(b"\x1f\x8b tampered")
    with pytest.raises(chart_cache.ChartPinError) as raised:
        chart_cache.check_pinned_charts({}, project_dir=tmp_path)
    message = str(raised.value)
    assert "\n" not in message
    assert ".charts/cert-manager-v1.21.1.tgz: sha256" in message
    assert "run `make charts` again" in message


def test_the_archive_check_is_skipped_only_for_offline_evaluation(tmp_path: Path) -> None:
    chart_cache.check_pinned_charts({"GPU_PLATFORM_SKIP_CHART_CHECK": "1"}, project_dir=tmp_path)
