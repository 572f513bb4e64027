"""Write each tenant's admin kubeconfig (``pulumi stack output --json --show-secrets
tenantKubeconfigs`` on stdin) to ``<dir>/<tenant>.yaml`` with mode 600, and print how to use them.

The kubeconfigs are secrets: they are written only to files readable by their owner and never
echoed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def write_kubeconfigs(kubeconfigs: dict[str, str], directory: Path) -> list[Path]:
    """Write one file per tenant, owner-only; return the paths in tenant order."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for tenant in sorted(kubeconfigs):
        path = directory / f"{tenant}.yaml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(kubeconfigs[tenant])
        path.chmod(0o600)
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: write_kubeconfigs.py <directory>  (JSON map tenant -> kubeconfig on stdin)")
        return 2
    kubeconfigs = json.load(sys.stdin)
    for path in write_kubeconfigs(kubeconfigs, Path(argv[1])):
        print(f"{path.stem}: export KUBECONFIG={path}   # then: kubectl get nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
