"""Locating the pinned upstream files (charts' values.yaml, CRDs, HAMi fit vectors).

They are read from ``$GPU_PLATFORM_UPSTREAM_DIR`` when set, else from ``../shared/upstream`` beside
the checkout (this workspace and its CI), else from ``.upstream/`` where
``scripts/fetch-upstream.sh`` puts them for people outside this workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_VAR = "GPU_PLATFORM_UPSTREAM_DIR"


def candidate_dirs() -> list[Path]:
    """Where the pinned files are looked for, in order."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return [Path(explicit)]
    return [REPO_ROOT.parent / "shared" / "upstream", REPO_ROOT / ".upstream"]


def upstream_dir_or_none() -> Path | None:
    """The first candidate that holds the HAMi chart defaults, or None."""
    for candidate in candidate_dirs():
        if (candidate / "hami" / "values.yaml").is_file():
            return candidate
    return None
