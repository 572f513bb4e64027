"""Contract tests: the HAMi fit model against HAMi 2.10.0's own vectors (``fit-cases.json``).

Every vector of every section is run; each asserts exactly what the vector asserts (a ``null``
expectation is not asserted). The format is described in ``hami/FIT-CASES.md`` next to the JSON.
Vectors that upstream could not express as card-fit data (MIG, quotas, other vendors) are not in
the sections at all but in ``skipped``; none of the converted vectors is skipped here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from gpu_platform_policies.hami_fit import (
    NOUSE_GPUTYPE,
    NOUSE_GPUUUID,
    NUMA_BIND,
    USE_GPUTYPE,
    USE_GPUUUID,
    VGPU_MODE,
    Allocation,
    Card,
    ContainerRequest,
    NodeSpec,
    PodContainer,
    RequestConfig,
    ResourceNames,
    admit_container,
    fit,
    fit_in_devices,
    fit_pod_on_nodes,
    generate_resource_request,
    numa_bind_enforced,
    parse_quantity,
    sort_cards,
    type_matches,
    uuid_matches,
)

from tests.support.upstream import upstream_dir_or_none

VECTOR_FILE = Path("hami") / "fit-cases.json"
SECTIONS = (
    "cases",
    "pod_cases",
    "request_cases",
    "admission_cases",
    "type_check_cases",
    "uuid_check_cases",
    "numa_bind_cases",
)
MISSING_REASON = (
    "HAMi fit vectors not found (hami/fit-cases.json under the pinned upstream dir): set "
    "GPU_PLATFORM_UPSTREAM_DIR to the shared upstream folder (the vectors transcribe HAMi's "
    "Go tests; scripts/fetch-upstream.sh cannot download them)"
)


def _load_vectors() -> dict[str, Any] | None:
    """The vector file, read at collection time so that every vector gets its own test id."""
    base = upstream_dir_or_none()
    if base is None or not (base / VECTOR_FILE).is_file():
        return None
    loaded: dict[str, Any] = json.loads((base / VECTOR_FILE).read_text(encoding="utf-8"))
    return loaded


VECTORS = _load_vectors()


def _params(section: str) -> list[Any]:
    """One ``pytest.param`` per vector (id = vector id), or a single skipped placeholder."""
    if VECTORS is None:
        return [
            pytest.param(
                None, id=f"{section}-unavailable", marks=pytest.mark.skip(reason=MISSING_REASON)
            )
        ]
    return [pytest.param(vector, id=vector["id"]) for vector in VECTORS[section]]


# --- The file itself -----------------------------------------------------------------------------


def test_vector_file_is_the_pinned_one(upstream_file: Callable[[str], Path]) -> None:
    """The vectors are HAMi v2.10.0's and every section is exercised below."""
    data = json.loads(upstream_file(str(VECTOR_FILE)).read_text(encoding="utf-8"))
    assert data["format"] == "hami-fit-cases/1"
    assert data["provenance"]["tag"] == "v2.10.0"
    meta = {"format", "provenance", "counts", "skipped"}
    assert set(data) - meta == set(SECTIONS), "a new vector section needs a test"
    for section in SECTIONS:
        expected = sum(data["counts"][section].values())
        assert len(data[section]) == expected, section


# --- Helpers -------------------------------------------------------------------------------------


def _cards(devices: Sequence[Mapping[str, Any]]) -> list[Card]:
    return [Card.from_mapping(device) for device in devices]


def _assert_picks(got: Sequence[Allocation], want: Sequence[Mapping[str, Any]]) -> None:
    """Same number of picks, and each asserted key of each pick equal, in order."""
    assert len(got) == len(want), [a.id for a in got]
    for allocation, expected in zip(got, want, strict=True):
        actual = dataclasses.asdict(allocation)
        assert {key: actual[key] for key in expected} == expected


def _assert_fit_expectation(
    expect: Mapping[str, Any],
    *,
    fit_ok: bool,
    allocations: Sequence[Allocation],
    reason: str,
    reason_counts: Mapping[str, int] | None,
) -> None:
    assert fit_ok is expect["fit"], reason
    ids = [a.id for a in allocations]
    if expect["devices"] is not None:
        want = list(expect["devices"])
        if expect["devices_order"] == "exact":
            assert ids[: len(want)] == want
        else:
            assert expect["devices_order"] == "any"
            assert set(want) <= set(ids)
            if expect["num_devices"] is None or expect["num_devices"] == len(want):
                assert sorted(ids) == sorted(want)
    if expect["num_devices"] is not None:
        assert len(ids) == expect["num_devices"]
    if expect["allocations"] is not None:
        _assert_picks(allocations, expect["allocations"])
    if expect["reason"] is not None:
        assert reason == expect["reason"]
    if expect["reason_counts"] is not None:
        assert reason_counts is not None, "this entry point does not report reason counts"
        assert dict(reason_counts) == expect["reason_counts"]
    if expect["reason_contains"] is not None:
        assert expect["reason_contains"] in reason


# --- cases ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("upstream_dir")
@pytest.mark.parametrize("vector", _params("cases"))
def test_fit_case(vector: dict[str, Any]) -> None:
    """One container request against one card list, through ``Fit`` or ``fitInDevices``."""
    cards = _cards(vector["devices"])
    request = ContainerRequest.from_mapping(vector["request"])
    annotations: dict[str, str] = vector["annotations"]
    node_annotations: dict[str, str] | None = vector.get("node_annotations")
    pair_scores: dict[str, dict[str, float]] | None = vector.get("pair_scores")

    if vector["entry"] == "fitInDevices":
        scheduled = fit_in_devices(
            cards,
            [request],
            annotations,
            node_annotations=node_annotations,
            pair_scores=pair_scores,
        )
        _assert_fit_expectation(
            vector["expect"],
            fit_ok=scheduled.fit,
            allocations=scheduled.allocations,
            reason=scheduled.reason,
            reason_counts=None,
        )
        return

    assert vector["entry"] == "Fit"
    presort = vector.get("presort")
    if presort is not None:
        cards = sort_cards(cards, presort["scores"], presort["policy"], presort["numa_bind"])
    result = fit(cards, request, annotations, node_annotations, pair_scores)
    _assert_fit_expectation(
        vector["expect"],
        fit_ok=result.fit,
        allocations=result.allocations,
        reason=result.reason,
        reason_counts=result.reason_counts,
    )


# --- pod_cases -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("upstream_dir")
@pytest.mark.parametrize("vector", _params("pod_cases"))
def test_pod_case(vector: dict[str, Any]) -> None:
    """Whole pods on one or more nodes: sorting, init containers, usage carried over."""
    nodes = {
        name: NodeSpec(
            cards=tuple(_cards(spec["devices"])),
            gpu_policy=spec["gpu_policy"],
            pair_scores=spec.get("pair_scores"),
            node_annotations=spec.get("node_annotations"),
        )
        for name, spec in vector["nodes"].items()
    }
    containers = [
        PodContainer(
            requests=tuple(ContainerRequest.from_mapping(r) for r in container["requests"]),
            init=container["init"],
        )
        for container in vector["containers"]
    ]
    results = fit_pod_on_nodes(nodes, containers, vector["annotations"])
    fitting = {name for name, result in results.items() if result.fit}
    expect = vector["expect"]

    if expect["fit_nodes"] is not None:
        assert fitting == set(expect["fit_nodes"]), {n: r.reason for n, r in results.items()}
        for name, want in expect["fit_nodes"].items():
            got = results[name]
            assert len(got.containers) == len(want["containers"])
            for picks, wanted_picks in zip(got.containers, want["containers"], strict=True):
                _assert_picks(picks, wanted_picks)
            if want["node_score"] is not None:
                assert got.node_score == pytest.approx(want["node_score"])

    if expect["failed_nodes"] is not None:
        assert set(results) - fitting == set(expect["failed_nodes"])
        for name, reason in expect["failed_nodes"].items():
            assert results[name].reason == reason


# --- request_cases -------------------------------------------------------------------------------


@pytest.mark.usefixtures("upstream_dir")
@pytest.mark.parametrize("vector", _params("request_cases"))
def test_request_case(vector: dict[str, Any]) -> None:
    """Container resources (quantity strings) -> request, or None for the empty request."""
    config = RequestConfig(
        default_memory=vector["config"]["default_memory"],
        default_cores=vector["config"]["default_cores"],
        memory_factor=vector["config"]["memory_factor"],
    )
    request = generate_resource_request(vector["limits"], vector["requests"], config)
    if vector["expect"] is None:
        assert request is None
        return
    assert request is not None
    actual = dataclasses.asdict(request)
    assert {key: actual[key] for key in vector["expect"]} == vector["expect"]


# --- admission_cases -----------------------------------------------------------------------------


@pytest.mark.usefixtures("upstream_dir")
@pytest.mark.parametrize("vector", _params("admission_cases"))
def test_admission_case(vector: dict[str, Any]) -> None:
    """What the webhook does to the cores limit, and which percentages it rejects."""
    names = ResourceNames(**vector["resource_names"])
    result = admit_container(vector["limits"], vector["requests"], names)
    expect = vector["expect"]
    if "rejected" in expect:
        assert result.rejected is expect["rejected"], result.reason
    if expect.get("core_limit_present") is not None:
        assert not result.rejected, result.reason
        assert (names.cores in result.limits) is expect["core_limit_present"]
    if expect.get("core_limit") is not None:
        assert parse_quantity(result.limits[names.cores]) == expect["core_limit"]
    if expect.get("core_request") is not None:
        assert parse_quantity(result.requests[names.cores]) == expect["core_request"]


# --- type / uuid / numa matchers -----------------------------------------------------------------


def _present(pairs: Mapping[str, str | None]) -> dict[str, str]:
    """Annotations from optional values (None = the annotation is absent)."""
    return {key: value for key, value in pairs.items() if value is not None}


@pytest.mark.usefixtures("upstream_dir")
@pytest.mark.parametrize("vector", _params("type_check_cases"))
def test_type_check_case(vector: dict[str, Any]) -> None:
    """use-gputype / nouse-gputype / vgpu-mode matching for one card."""
    annotations = _present(
        {USE_GPUTYPE: vector["use"], NOUSE_GPUTYPE: vector["nouse"], VGPU_MODE: vector["vgpu_mode"]}
    )
    matched = type_matches(vector["card_type"], vector["card_mode"], annotations)
    assert matched is vector["expect_match"]


@pytest.mark.usefixtures("upstream_dir")
@pytest.mark.parametrize("vector", _params("uuid_check_cases"))
def test_uuid_check_case(vector: dict[str, Any]) -> None:
    """use-gpuuuid / nouse-gpuuuid matching for one card."""
    annotations = _present({USE_GPUUUID: vector["use"], NOUSE_GPUUUID: vector["nouse"]})
    assert uuid_matches(vector["device_id"], annotations) is vector["expect_match"]


@pytest.mark.usefixtures("upstream_dir")
@pytest.mark.parametrize("vector", _params("numa_bind_cases"))
def test_numa_bind_case(vector: dict[str, Any]) -> None:
    """How the numa-bind annotation value is read."""
    annotations = _present({NUMA_BIND: vector["numa_bind"]})
    assert numa_bind_enforced(annotations) is vector["expect_enforced"]
