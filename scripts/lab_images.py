"""Regenerate the lab's derived image list: ``components/pins/lab-images.json`` and its table in
``docs/lab.md`` (``make docs``). Renders the lab stack with the verification net's helpers (the
pinned chart archives must be in the charts cache: ``make charts``).

Usage: ``python scripts/lab_images.py [--check]`` (``--check``: exit 1 when either is stale).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The project and the policy pack, as pytest has them (pyproject.toml ``pythonpath``): the
# rendering helpers check CEL with the pack's own functions.
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "policies")]

from components.lab import lab_images  # noqa: E402
from tests.support.harness import evaluate, load_stack_config  # noqa: E402
from tests.support.lab_images import derived  # noqa: E402
from tests.support.rendered_stack import render_stack  # noqa: E402
from tests.support.upstream import upstream_dir_or_none  # noqa: E402

DOC = REPO_ROOT / "docs" / "lab.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the files are stale")
    args = parser.parse_args(argv)
    platform = load_stack_config("lab")["gpu-platform:platform"]
    rendered = render_stack(evaluate("lab", False), platform, upstream_dir_or_none())
    images = derived(rendered, platform)
    wanted = {
        lab_images.PINS_FILE: lab_images.to_json(images),
        DOC: lab_images.replace_block(DOC.read_text(), lab_images.markdown(images)),
    }
    stale = [path for path, text in wanted.items() if path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO_ROOT)} is stale: run `make docs`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
