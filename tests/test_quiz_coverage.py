"""Each item of the phase quiz names the page and the section that teach it, they exist, and the section says what
the item asks (issue 21; issue 27: `says`, the phrases the section must contain)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from quiz_support import missing_sections

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "checks" / "quiz" / "35.json"
ITEMS = json.loads(BANK.read_text())["items"]


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
