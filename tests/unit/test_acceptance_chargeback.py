"""TC-18's judge offline: HAMi's grants (allocation annotations) against the per-tenant series."""

from __future__ import annotations

import base64
import types

import pytest

from components.metrics import auth, objects
from tests.acceptance.chargeback import authorization, granted, judge_allocation, series_value
from tests.acceptance.hami_evidence import EvidenceError

# HAMi's allocated annotation: containers separated by ';', cards by ':' (uuid,type,MiB,cores).
THREE_PODS = ["GPU-a,NVIDIA,20000,30:;"] * 3


def test_grants_add_up_over_pods_and_cards() -> None:
    assert granted(THREE_PODS) == (60000, 90)
    assert granted(["GPU-a,NVIDIA,1000,10:GPU-b,NVIDIA,2000,20:;"]) == (3000, 30)
    assert granted([]) == (0, 0)


def test_matching_series_pass_and_a_missing_share_fails() -> None:
    assert judge_allocation("tenant-a", 60000, 90, 60000 / 1024, 0.9).ok
    short = judge_allocation("tenant-a", 60000, 90, 40000 / 1024, 0.9)
    assert not short.ok
    assert "40000 MiB" in short.explain()
    assert not judge_allocation("tenant-a", 60000, 90, 60000 / 1024, 0.6).ok


def test_a_tenant_without_a_series_or_a_grant_is_never_judged_zero_equals_zero() -> None:
    # A missing series is not 0: the rules emit nothing for a tenant holding nothing, and
    # nothing either for a tenant whose agent never remote-writes (the review's vacuous pass).
    response = {"data": {"result": [{"metric": {"tenant": "tenant-b"}, "value": [0, "2.5"]}]}}
    assert series_value(response, "tenant-b") == 2.5
    assert series_value(response, "tenant-a") is None
    nothing = judge_allocation("tenant-a", 0, 0, None, None)
    assert not nothing.ok
    assert "holds no GPU share" in nothing.explain()
    assert not judge_allocation("tenant-a", 0, 0, 0.0, 0.0).ok
    silent = judge_allocation("tenant-a", 1024, 5, None, None)
    assert not silent.ok
    assert "no tenant:gpu_memory_allocated_gib:sum or" in silent.explain()


def test_a_dra_tenants_series_is_judged_against_what_its_claims_hold() -> None:
    """Issue 43: a dra tenant holding one whole 80Gi card (81,920 MiB, 100 %) passes with the
    series the claims exporter feeds, and fails, naming its claims, without them."""
    from tests.acceptance.chargeback import judge_allocation

    held = "its ResourceClaims hold"
    assert judge_allocation("tenant-c", 81920, 100, 80.0, 1.0, granted_by=held).ok
    missing = judge_allocation("tenant-c", 81920, 100, None, None, granted_by=held)
    assert "although its ResourceClaims hold 81920 MiB / 100 %" in missing.explain()
    short = judge_allocation("tenant-c", 81920, 100, 80.0, 0.0, granted_by=held)
    assert "its ResourceClaims hold 100 %" in short.explain()


def test_tc18_sends_the_central_prometheus_password_from_its_secret() -> None:
    """Issue 40 point 7: TC-18's query carries the basic auth the central Prometheus asks for,
    the password read from the metrics namespace's Secret."""
    password = "5e" * 32
    reads: list[tuple[str, str]] = []

    class _Api:
        def read_namespaced_secret(self, name: str, namespace: str, **_: object) -> object:
            reads.append((namespace, name))
            encoded = base64.b64encode(password.encode()).decode()
            return types.SimpleNamespace(data={auth.PASSWORD_KEY: encoded})

    header = authorization(_Api())
    assert reads == [(objects.METRICS_NAMESPACE, objects.AUTH_SECRET)]
    assert header == "Basic " + base64.b64encode(f"{auth.USERNAME}:{password}".encode()).decode()


def test_tc18_without_the_password_secret_is_evidence_missing() -> None:
    class _Api:
        def read_namespaced_secret(self, name: str, namespace: str, **_: object) -> object:
            return types.SimpleNamespace(data=None)

    with pytest.raises(EvidenceError, match="holds no password"):
        authorization(_Api())
