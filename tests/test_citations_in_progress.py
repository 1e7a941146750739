"""A note in progress is PENDING (not enough yet), a wrong citation BROKEN (wrong evidence)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck.citations.verdict import COUNT_OF, HAS_OF, NO_NOTE_YET, notes_verdict
from pytest_distcheck.citations.verifier import verify_note

NOTES = Path(__file__).resolve().parents[1] / "fixtures" / "notes"
GOOD = (NOTES / "good.md").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def toy_site(monkeypatch):
    monkeypatch.syspath_prepend(str(NOTES / "site"))


def note(tmp_path, name: str, bullets: int, extra: str = ""):
    """A note with the first ``bullets`` cited statements of fixtures/notes/good.md (all resolve)."""
    head, body = GOOD.split("\n- ", 1)
    items = ("- " + body).split("\n- ")[:bullets]
    text = head + "\n" + "\n- ".join(items).split("\n\nExamples")[0] + "\n" + extra
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return verify_note(path, label=f"docs/notes/{name}")


def test_two_notes_with_one_good_citation_each_are_pending_with_both_counts(tmp_path):
    verdict = notes_verdict([note(tmp_path, "megatron.md", 1), note(tmp_path, "fsdp.md", 1)], minimum=5)
    assert verdict.state == "pending"
    assert verdict.reason.splitlines()[0] == (HAS_OF.format(label="docs/notes/megatron.md", n=1, minimum=5) + "; "
                                              + COUNT_OF.format(label="docs/notes/fsdp.md", n=1, minimum=5))
    assert verdict.command == "distcheck cite"


def test_a_missing_note_is_named_with_the_other_notes_count(tmp_path):
    verdict = notes_verdict([note(tmp_path, "megatron.md", 2)], minimum=5, missing=["docs/notes/fsdp.md"])
    assert verdict.state == "pending"
    assert verdict.reason.splitlines()[0] == (HAS_OF.format(label="docs/notes/megatron.md", n=2, minimum=5) + "; "
                                              + NO_NOTE_YET.format(label="docs/notes/fsdp.md", minimum=5))


def test_a_failing_citation_in_a_short_note_is_still_broken(tmp_path):
    bad = '- The layer does something else entirely, as this quote claims nowhere in the code\n  ' \
          '`[cite: toyparallel toyparallel/layers.py::divide "a quote that is not in the function"]`.\n'
    verdict = notes_verdict([note(tmp_path, "megatron.md", 1, bad), note(tmp_path, "fsdp.md", 5)], minimum=5)
    assert verdict.state == "broken" and "1 citation(s) do not resolve" in verdict.reason


def test_a_broken_note_still_says_which_note_is_missing(tmp_path):
    bad = '- The layer does something else entirely, as this quote claims nowhere in the code\n  ' \
          '`[cite: toyparallel toyparallel/layers.py::divide "a quote that is not in the function"]`.\n'
    verdict = notes_verdict([note(tmp_path, "megatron.md", 5, bad)], minimum=5, missing=["docs/notes/fsdp.md"])
    assert verdict.state == "broken"
    assert NO_NOTE_YET.format(label="docs/notes/fsdp.md", minimum=5) in verdict.reason.splitlines()[0]


def test_enough_statements_everywhere_is_done(tmp_path):
    verdict = notes_verdict([note(tmp_path, "megatron.md", 5), note(tmp_path, "fsdp.md", 5)], minimum=5)
    assert verdict.state == "done"
