"""Which conntrack sysctls kube-proxy writes at start, for a ``KubeProxyConfiguration``'s
``conntrack`` block (v1alpha1), as the upstream code decides it.

Transcribed from kubernetes ``cmd/kube-proxy/app/server_linux.go`` (``setupConntrack``,
``getConntrackMax``; the v1.3x code, read through the code index, not at an exact tag) and the
v1alpha1 defaulting (``pkg/proxy/apis/config/v1alpha1/defaults.go``): ``maxPerCore`` defaults to
32768, ``min`` to 131072, ``tcpEstablishedTimeout`` to 24h, ``tcpCloseWaitTimeout`` to 1h; the
pointer fields keep an explicit zero. Each sysctl is written when its setting is positive (the
max when ``maxPerCore`` x CPUs, floored at ``min``, is positive), whatever the host's value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "maxPerCore": 32768,
        "min": 131072,
        "tcpEstablishedTimeout": "24h0m0s",
        "tcpCloseWaitTimeout": "1h0m0s",
        "tcpBeLiberal": False,
        "udpTimeout": "0s",
        "udpStreamTimeout": "0s",
    }
)
_UNIT_SECONDS = MappingProxyType(
    {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
)


def seconds(duration: str) -> float:
    """A Go duration string (``24h0m0s``, ``0s``) in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|h|m|s)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Go duration: {duration!r}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def sysctl_writes(conntrack: Mapping[str, Any] | None, cpus: int) -> list[str]:
    """The ``net.netfilter.*`` sysctls kube-proxy writes with this configuration on a host with
    ``cpus`` CPUs (absent keys take the v1alpha1 defaults)."""
    config = {**DEFAULTS, **(conntrack or {})}
    writes: list[str] = []
    max_per_core = config["maxPerCore"]
    if max_per_core is not None and max_per_core > 0:
        floor = config["min"] or 0
        if max(max_per_core * cpus, floor) > 0:
            writes.append("net.netfilter.nf_conntrack_max")
    if seconds(config["tcpEstablishedTimeout"]) > 0:
        writes.append("net.netfilter.nf_conntrack_tcp_timeout_established")
    if seconds(config["tcpCloseWaitTimeout"]) > 0:
        writes.append("net.netfilter.nf_conntrack_tcp_timeout_close_wait")
    if config["tcpBeLiberal"]:
        writes.append("net.netfilter.nf_conntrack_tcp_be_liberal")
    if seconds(config["udpTimeout"]) > 0:
        writes.append("net.netfilter.nf_conntrack_udp_timeout")
    if seconds(config["udpStreamTimeout"]) > 0:
        writes.append("net.netfilter.nf_conntrack_udp_timeout_stream")
    return writes
