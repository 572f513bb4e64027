"""The README is a front page and docs/ holds the rest: every relative link in them reaches a
file (and a heading, where it names one), every docs page is linked from the README, and the
README stays short."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.support.harness import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def prose(text: str) -> str:
    """The text without code: a fenced block or a code span may hold brackets that are no link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text()))


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page's headings give, with GitHub's -1, -2 … for repeated headings."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = anchor(heading)
        found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target)


def test_the_anchor_is_githubs() -> None:
    assert anchor("Testing: what is verified where") == "testing-what-is-verified-where"
    assert anchor("What `make lab` leaves you") == "what-make-lab-leaves-you"
    assert anchor("Lab and prod: one seam") == "lab-and-prod-one-seam"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in filter(relative, links(page)):
        file_part, _, fragment = target.partition("#")
        destination = (page.parent / unquote(file_part)).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and fragment not in anchors(destination):
            broken.append(f"{target}: no heading #{fragment} in {destination.name}")
    assert broken == []


def test_docs_holds_pages_and_the_readme_links_every_one() -> None:
    assert len(DOCS) >= 3
    linked = {
        (README.parent / unquote(target.partition("#")[0])).resolve()
        for target in filter(relative, links(README))
    }
    assert [page.name for page in DOCS if page.resolve() not in linked] == []


def test_the_readme_is_a_front_page() -> None:
    assert len(README.read_text().splitlines()) <= 250
