"""make kubeconfigs: one owner-only file per tenant."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from write_kubeconfigs import write_kubeconfigs


def test_one_owner_only_file_per_tenant(tmp_path: Path) -> None:
    paths = write_kubeconfigs({"tenant-b": "b-config", "tenant-a": "a-config"}, tmp_path / "kc")
    assert [p.name for p in paths] == ["tenant-a.yaml", "tenant-b.yaml"]
    assert paths[0].read_text() == "a-config"
    for path in paths:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
