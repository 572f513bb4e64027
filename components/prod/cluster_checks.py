"""Checks of the existing (prod) management cluster made before anything is registered.

A tenant namespace the program adopts (``managementNamespace.existing``: on Metal3 it holds the
tenant's BareMetalHosts) is read with ``Namespace.get``; when it is missing the engine fails the
read with its own ``resource ... does not exist`` after other resources may already have started.
``check_adopted_namespaces`` asks the cluster first (``scripts/management/namespaces-exist.sh``,
in preview too, since the read happens there as well) and fails with one line per missing
namespace, naming its key and the fix. ``GPU_PLATFORM_SKIP_PREFLIGHT=1`` skips it (the mock
harness sets it; the engine's read error is then what a missing namespace gives).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence

from pulumi import RunError

from components.config import ConfigError, problem_message
from components.scripts import read_script

CHECK_TIMEOUT_SECONDS = 120
# The switch the lab's host preflight reads too (components.lab.preflight.SKIP_ENV): one variable
# turns off every check of the environment made before registration.
SKIP_ENV = "GPU_PLATFORM_SKIP_PREFLIGHT"


def _run_script(environment: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", "-c", read_script("management", "namespaces-exist.sh")],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_SECONDS,
        check=False,
    )


def check_adopted_namespaces(
    adopted: Sequence[tuple[str, str]],
    kubeconfig: str | None,
    environ: Mapping[str, str] | None = None,
    run: Callable[[Mapping[str, str]], subprocess.CompletedProcess[str]] = _run_script,
) -> bool:
    """Raise ConfigError naming each ``(key, namespace)`` of ``adopted`` that the management
    cluster lacks, RunError when the cluster cannot be asked. Returns whether it ran."""
    if (os.environ if environ is None else environ).get(SKIP_ENV, "").strip() == "1":
        return False
    if not adopted or kubeconfig is None:
        # A missing kubeconfig secret is reported by the config loader, with its command.
        return False
    names = " ".join(namespace for _, namespace in adopted)
    try:
        result = run({"KUBECONFIG_CONTENT": kubeconfig, "NAMESPACES": names})
    except subprocess.TimeoutExpired:
        raise RunError(
            f"the management cluster did not answer within {CHECK_TIMEOUT_SECONDS}s whether the "
            f"adopted namespaces ({names}) exist: check its kubeconfig and that this machine "
            "reaches its API server"
        ) from None
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise RunError(
            f"cannot check on the management cluster that the adopted namespaces ({names}) "
            f"exist: {reason}"
        )
    missing = set(result.stdout.split())
    problems = [
        f"{key}: namespace {namespace!r} does not exist on the management cluster; create it "
        "and enrol the tenant's BareMetalHosts (and their BMC Secrets) in it before `pulumi up`"
        for key, namespace in adopted
        if namespace in missing
    ]
    if problems:
        raise ConfigError(problem_message("adopted namespaces are missing", problems))
    return True
