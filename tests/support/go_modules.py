"""Upstream files read from pinned Go modules: ``tests/support/upstream-modules/go.mod`` names
each module at its version and ``go.sum`` holds its checksum, so ``go mod download`` fetches it
once into Go's module cache (from the Go module proxy, which this project's machines reach) and
refuses a download that does not match. Nothing from it is copied into the checkout.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

MODULES = Path(__file__).resolve().parent / "upstream-modules"
DOWNLOAD_SECONDS = 300


def pinned_version(module: str) -> str | None:
    """The version ``upstream-modules/go.mod`` requires of ``module``."""
    found = re.search(
        rf"^require {re.escape(module)} (\S+)$", (MODULES / "go.mod").read_text(), re.M
    )
    return found.group(1) if found else None


def module_dir(module: str) -> Path | str:
    """The pinned ``module``'s directory in Go's module cache, or one line saying why not (no
    Go, no answer from the proxy, a checksum that does not match go.sum)."""
    go = shutil.which("go")
    if go is None:
        return f"go is not on PATH: the contract test reads {module} from the Go module proxy"
    try:
        done = subprocess.run(
            [go, "mod", "download", "-json", module],
            cwd=MODULES,
            capture_output=True,
            text=True,
            timeout=DOWNLOAD_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"go mod download {module}: no answer in {DOWNLOAD_SECONDS} s"
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return f"go mod download {module}: {done.stderr.strip()[-300:] or 'no answer'}"
    if answer.get("Error") or not answer.get("Dir"):
        return f"go mod download {module}: {answer.get('Error') or done.stderr.strip()[-300:]}"
    return Path(answer["Dir"])
