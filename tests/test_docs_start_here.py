"""docs/README.md ("Start here"): the reading order, every page's previous/next links, reading times
recomputed from the pages (no hand-typed figure that drifts), and each lab page stating its own time and
cost near the top, as the table does (issue 27)."""

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


# The line each lab page carries before its first section, with the figures of its row in docs/README.md.
LAB_TIME_AND_COST = "**Reading:** {reading}. **Doing (estimate):** {doing}. **Cost:** {cost}."


def _rows() -> dict[str, list[str]]:
    """Page link -> the cells of its row in the reading-order table."""
    return {LINK.findall(line)[0]: [c.strip() for c in line.strip().strip("|").split("|")]
            for line in START.read_text().splitlines() if line.startswith("| ") and line[2].isdigit()
            and LINK.findall(line)}


def test_every_lab_page_states_its_time_and_cost_near_the_top():
    rows = _rows()
    labs = [p for p in ORDER if p.startswith("lab/")]
    assert len(labs) == 4
    for rel in labs:
        _, _, reading, _, doing, cost = rows[rel]
        top = (DOCS / rel).read_text().split("\n## ", 1)[0]
        stated = LAB_TIME_AND_COST.format(reading=reading, doing=doing, cost=cost)
        assert stated in " ".join(top.split()), f"{rel}: state {stated!r} before its first section"
