"""docs/README.md ("Start here"): the reading order, every page's previous/next links, reading times
recomputed from the pages (no hand-typed figure that drifts), and each lab page stating its own time and
cost near the top, as the table does (issue 27)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

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


# The line each lab page carries before its first section, with the figures of its row in docs/README.md
# (in docs/es/README.md for the Spanish twin).
LAB_TIME_AND_COST = "**Reading:** {reading}. **Doing (estimate):** {doing}. **Cost:** {cost}."
LAB_TIME_AND_COST_ES = "**Lectura:** {reading}. **Práctica (estimación):** {doing}. **Coste:** {cost}."


def _rows(start: Path = START) -> dict[str, list[str]]:
    """Page link -> the cells of its row in the reading-order table of the start page ``start``."""
    return {LINK.findall(line)[0]: [c.strip() for c in line.strip().strip("|").split("|")]
            for line in start.read_text().splitlines() if line.startswith("| ") and line[2].isdigit()
            and LINK.findall(line)}


@pytest.mark.parametrize(("docs", "line"), [(DOCS, LAB_TIME_AND_COST), (DOCS / "es", LAB_TIME_AND_COST_ES)],
                         ids=["en", "es"])
def test_every_lab_page_states_its_time_and_cost_near_the_top(docs, line):
    rows = _rows(docs / "README.md")
    labs = [p for p in ORDER if p.startswith("lab/") and (docs / p).is_file()]  # twins: test_docs_es_parity
    assert len(labs) == 4 or docs != DOCS
    for rel in labs:
        assert rel in rows, f"{docs.relative_to(REPO)}/README.md: the table does not link {rel}"
        _, _, reading, _, doing, cost = rows[rel]
        top = (docs / rel).read_text().split("\n## ", 1)[0]
        stated = line.format(reading=reading, doing=doing, cost=cost)
        assert stated in " ".join(top.split()), f"{rel}: state {stated!r} before its first section"


# What a lab page may name of the kit's package: what the learner calls or reads (the TP checker, the
# calculators, the result schemas, the price table). The rest (the budget guard, the pod lease, the diagram
# reader...) is the kit's machinery, explained in its manual, docs/kit/ (issue 27, point 4).
KIT_PATH = re.compile(r"pytest_distcheck[./][\w./-]*\w")
LEARNER_FACING = re.compile(r"pytest_distcheck(?:\.(?:tp|calc)\b|/schemas/[\w.-]+\.json$|/data/prices\.json$)")


def kit_machinery_named(text: str) -> list[str]:
    """The paths and modules of the kit's package a page names that are not learner-facing."""
    return sorted({m for m in KIT_PATH.findall(text) if not LEARNER_FACING.match(m)})


def test_a_lab_page_that_names_the_kit_s_own_modules_is_caught():
    text = "Run `pytest_distcheck.tp.assert_tp_matches_dense`; see `pytest_distcheck/pods/lease.py` and " \
           "`pytest_distcheck/schemas/tp-inference-result.schema.json`, `pytest_distcheck.budget.guard`."
    assert kit_machinery_named(text) == ["pytest_distcheck.budget.guard", "pytest_distcheck/pods/lease.py"]


@pytest.mark.parametrize("docs", [DOCS, DOCS / "es"], ids=["en", "es"])
def test_lab_pages_leave_the_kit_s_machinery_to_its_manual(docs):
    named = {rel: kit_machinery_named((docs / rel).read_text()) for rel in ORDER
             if rel.startswith("lab/") and (docs / rel).is_file()}
    assert {rel: found for rel, found in named.items() if found} == {}, "move that text to docs/kit/"
