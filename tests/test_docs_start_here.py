"""docs/README.md ("Start here"): the reading order, every page's previous/next links, and reading
times recomputed from the pages (no hand-typed figure that drifts)."""

from __future__ import annotations

import math
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
START = DOCS / "README.md"
ORDER = [
    "theory/00-motivation.md", "theory/01-data-parallel-and-zero.md", "theory/02-parallelism-flavors.md",
    "theory/03-collectives-and-cost.md", "theory/04-distributed-inference.md",
    "lab/00-cloud-budget-and-tooling.md", "lab/01-ddp-on-cpu.md", "lab/02-tp-inference-cloud.md",
    "lab/03-megatron-fsdp-reading.md",
]
LINK = re.compile(r"\[[^\]]+\]\(([^)#]+)[^)]*\)")


def test_every_theory_and_lab_page_is_in_the_reading_order():
    pages = sorted(p.relative_to(DOCS).as_posix() for d in ("theory", "lab") for p in (DOCS / d).glob("*.md"))
    assert pages == sorted(ORDER)
    table = [m for line in START.read_text().splitlines() if line.startswith("| ") and line[2].isdigit()
             for m in LINK.findall(line)]
    assert table == ORDER


def _nav(page: Path) -> tuple[Path, Path]:
    last = page.read_text().rstrip().splitlines()[-1]
    match = re.fullmatch(r"Previous: \[[^\]]+\]\(([^)]+)\) \| Next: \[[^\]]+\]\(([^)]+)\)", last)
    assert match, f"{page.relative_to(REPO)}: the last line is not 'Previous: [..](..) | Next: [..](..)': {last!r}"
    return ((page.parent / match.group(1)).resolve(), (page.parent / match.group(2)).resolve())


def test_previous_and_next_links_follow_the_reading_order():
    chain = [START, *(DOCS / p for p in ORDER), START]
    for n, rel in enumerate(ORDER, start=1):
        prev, nxt = _nav(DOCS / rel)
        assert (prev, nxt) == (chain[n - 1].resolve(), chain[n + 1].resolve()), rel
    assert START.read_text().rstrip().splitlines()[-1] == f"Next: [theory 00: why distribute]({ORDER[0]})"


def test_reading_times_are_the_pages_words_at_200_per_minute():
    for line in START.read_text().splitlines():
        links = LINK.findall(line)
        if not (line.startswith("| ") and line[2].isdigit() and links):
            continue
        stated = int(re.search(r"\| (\d+) min \|", line).group(1))
        words = len((DOCS / links[0]).read_text().split())
        assert stated == 5 * math.ceil(words / 200 / 5), f"{links[0]}: {words} words -> update docs/README.md"


def test_every_dod_item_is_explained():
    from pytest_distcheck.workspace import load_workspace

    text = START.read_text()
    for item in load_workspace(REPO / "checks" / "distcheck.toml").items:
        assert f"| `{item.id}` |" in text, item.id
