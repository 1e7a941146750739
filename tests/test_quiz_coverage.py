"""Each item of the phase quiz names the page and the section that teach it, they exist, and the section says what
the item asks (issue 21; issue 27: `says`, the phrases the section must contain)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "checks" / "quiz" / "35.json"
ITEMS = json.loads(BANK.read_text())["items"]


def section_text(markdown: str, heading: str) -> str | None:
    """The lines of the section under ``heading``, up to the next heading of the same or a higher level (its
    subsections included); ``None`` when the page has no such heading."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    found = [(t.map[0], int(t.tag[1]), tokens[i + 1].content) for i, t in enumerate(tokens)
             if t.type == "heading_open" and t.map is not None]
    lines = markdown.split("\n")
    for k, (line, level, text) in enumerate(found):
        if text == heading:
            end = next((ln for ln, lv, _ in found[k + 1:] if lv <= level), len(lines))
            return "\n".join(lines[line:end])
    return None


def missing_sections(items: list[dict], root: Path) -> list[str]:
    """One line per item whose `taught_in` is absent or names a page or heading that does not exist."""
    problems = []
    for item in items:
        where = item.get("taught_in")
        if where is None:
            problems.append(f"{item['id']}: no taught_in")
            continue
        page = root / where["page"]
        if not page.is_file():
            problems.append(f"{item['id']}: page {where['page']} does not exist")
        elif (text := section_text(page.read_text(), where["section"])) is None:
            problems.append(f"{item['id']}: {where['page']} has no heading {where['section']!r}")
        else:
            flat = " ".join(text.split())  # line breaks are the page's layout, not what it says
            problems += [f"{item['id']}: {where['page']}, section {where['section']!r}, does not say {said!r}"
                         for said in where.get("says", []) if " ".join(said.split()) not in flat]
    return problems


def test_every_item_names_an_existing_page_and_section_that_says_what_it_asks():
    assert not missing_sections(ITEMS, ROOT)
    assert all(item["taught_in"].get("says") for item in ITEMS)


def test_a_section_that_no_longer_says_it_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "p.md").write_text(
        "# T\n\n## PP\n\nThe bubble is (p-1)/m.\n\n### Sub\n\n1F1B.\n\n## TP\n\nf, g.\n")
    item = {"id": "x", "taught_in": {"page": "docs/p.md", "section": "PP", "says": ["(p-1)/m", "1F1B"]}}
    assert missing_sections([item], tmp_path) == []
    item["taught_in"]["says"] = ["f, g"]  # in the next section, not this one
    assert missing_sections([item], tmp_path) == ["x: docs/p.md, section 'PP', does not say 'f, g'"]


def test_a_renamed_heading_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "p.md").write_text("# Title\n\n## Pipeline parallelism\n\n```\n## not a heading\n```\n")
    item = {"id": "x", "taught_in": {"page": "docs/p.md", "section": "Pipeline parallelism"}}
    assert missing_sections([item], tmp_path) == []
    for section in ("Pipeline parallelism (PP)", "not a heading"):
        item["taught_in"]["section"] = section
        assert missing_sections([item], tmp_path) == [f"x: docs/p.md has no heading {section!r}"]
    assert missing_sections([{"id": "y"}], tmp_path) == ["y: no taught_in"]
    item["taught_in"]["page"] = "docs/gone.md"
    assert missing_sections([item], tmp_path) == ["x: page docs/gone.md does not exist"]


@pytest.mark.parametrize("item_id, words", [
    # the two items no page taught before issue 21
    ("gpt-params", ["12 l h² (1 + 13/(12h) + (V + s)/(12 l h))"]),
    ("inf-pp-latency", ["does not cut one token's latency", "same compute\ntime as on one GPU"]),
])
def test_the_formerly_untaught_items_are_taught(item_id, words):
    item = next(i for i in ITEMS if i["id"] == item_id)
    text = (ROOT / item["taught_in"]["page"]).read_text()
    for w in words:
        assert w in text, f"{item_id}: {item['taught_in']['page']} does not say {w!r}"


def test_taught_in_changes_no_item_as_loaded_for_grading(tmp_path):
    """taught_in is metadata: the bank loads to the same items with it as without it."""
    from pytest_distcheck.quiz.bank import load_bank

    raw = json.loads(BANK.read_text())
    for item in raw["items"]:
        del item["taught_in"]
    stripped = tmp_path / "35.json"
    stripped.write_text(json.dumps(raw))
    assert load_bank(BANK).items == load_bank(stripped).items


def test_the_ddp_bucket_default_is_in_mib_as_torch_counts_it():
    """bucket_cap_mb=25 is 25 MiB (torch/nn/parallel/distributed.py multiplies by 1024 * 1024), so neither
    the quiz nor a page may call it 25 MB (issue 21, nits)."""
    import re

    pages = sorted((ROOT / "docs" / "theory").glob("*.md")) + sorted((ROOT / "docs" / "lab").glob("*.md"))
    texts = {str(BANK.relative_to(ROOT)): BANK.read_text()} | {str(p.relative_to(ROOT)): p.read_text() for p in pages}
    wrong = [name for name, text in texts.items() if re.search(r"\b25 ?MB\b", text)]
    assert not wrong, f"'25 MB' for DDP's bucket (25 MiB) in {wrong}"
    item = next(i for i in ITEMS if i["id"] == "ddp-when-allreduce")
    assert "25 MiB" in item["explanation"] and "1 MiB" in item["explanation"]
