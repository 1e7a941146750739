"""What counts (issue 19): only what a reader sees, once per place, in prose, from library code.

The notes are under fixtures/notes (SYNTHETIC, citing the toy package in fixtures/notes/site); a
few cases need the real megatron-core or torch sources and are skipped without them.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

from pytest_distcheck.citations.decision import PLACEHOLDER, too_few_words
from pytest_distcheck.citations.record import record_versions
from pytest_distcheck.citations.report import UNCOUNTED
from pytest_distcheck.citations.verdict import notes_verdict
from pytest_distcheck.citations.verifier import DUPLICATE, KINDS, NO_DECISION, TEST_CODE, Status, verify_note

REPO = Path(__file__).resolve().parents[1]
NOTES = REPO / "fixtures" / "notes"


@pytest.fixture(autouse=True)
def toy_site(monkeypatch):
    monkeypatch.syspath_prepend(str(NOTES / "site"))


def verify(name: str):
    return verify_note(NOTES / name, label=f"notes/{name}")


def installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_citations_in_comments_and_code_blocks_are_not_seen():
    rep = verify("hidden.md")
    # Block comment, inline comment, indented code and a four-backtick fence hide four citations.
    assert [r.citation.line for r in rep.results] == [21] and rep.malformed == []
    (res,) = rep.results
    # The words in the comment do not make "Pairs" a decision.
    assert (res.status, res.code) == (Status.UNCOUNTED, "no-decision")
    block = res.citation.block
    assert res.reason == NO_DECISION.format(kind=KINDS[block.kind], line=block.line, problem=too_few_words(1))
    assert rep.cited_statements == 0


@pytest.mark.parametrize("note", ["all-hidden.md", "all-hidden-inline.md"])
def test_notes_whose_content_is_all_in_comments_are_not_done(note):
    rep = verify(note)
    assert rep.results == [] and rep.cited_statements == 0
    # nothing counted yet: the notes are in progress (pending), not wrong evidence (broken)
    assert notes_verdict([rep, rep], minimum=5).state == "pending"


@pytest.mark.parametrize(
    ("note", "why"),
    [
        ("filler.md", "placeholder 'Lorem' in place of a stated decision"),
        ("todo.md", "placeholder 'TODO' in place of a stated decision"),
        ("repeated.md", "only 1 distinct content word besides citations, at least 5"),
    ],
)
def test_eight_filler_words_are_no_decision(note, why):
    rep = verify(note)
    assert [r.code for r in rep.results] == ["no-decision"] * 5
    assert all(why in r.reason for r in rep.results)
    verdict = notes_verdict([rep], minimum=5)
    assert rep.cited_statements == 0 and verdict.state == "pending" and "not counted" in verdict.reason


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Megatron splits the weight by columns, so no rank talks in forward", ""),
        ("TODO: explain what was decided here and why it matters", "placeholder 'TODO'"),
        ("foo baz qux quux corge grault garply waldo", "placeholder 'foo'"),
        ("It is what it is and that is all there is", "distinct content word"),
        ("Too short to say anything", "5 words besides citations, at least 8"),
        ("word1 word2 word3 word4 word5 word6 word7 word8", "only 1 distinct content word"),
        ("one two three four five six seven eight", "only 0 distinct content words"),
        ("sed do eiusmod tempor incididunt ut labore et", "placeholder 'sed'"),
        ("a b c d e f g h", "only 0 distinct content words"),
    ],
)
def test_the_decision_rule(text, problem):
    from pytest_distcheck.citations.decision import decision_problem

    got = decision_problem(text + ' [cite: p p.py::f "many words inside the quote do not count at all"]')
    assert (got == "") if not problem else (problem in got)


def test_six_spellings_of_one_place_count_once():
    rep = verify("spellings.md")
    assert [r.status for r in rep.results] == [Status.COUNTED] + [Status.UNCOUNTED] * 5
    assert {r.reason for r in rep.results[1:]} == {
        DUPLICATE.format(earlier=4, path="toyparallel/layers.py", symbol="RowLinear.forward", line=50)
    }
    assert rep.cited_statements == 1 and rep.ok
    # One package, however it is spelled: no false "does not list" warning after --record.
    assert list(rep.installed) == ["toyparallel"]


def test_record_writes_normalised_names_once(tmp_path):
    shutil.copy(NOTES / "spellings.md", tmp_path / "n.md")
    assert record_versions(verify_note(tmp_path / "n.md")) == "checked-against: toyparallel 1.2.0"
    assert verify_note(tmp_path / "n.md").warnings == []


@pytest.mark.skipif(not installed("megatron-core"), reason="needs megatron-core")
def test_megatron_core_spelled_two_ways_is_one_package_and_one_place(tmp_path):
    cite = 'megatron/core/tensor_parallel/layers.py::ColumnParallelLinear.__init__ ' \
        '"self.output_size_per_partition = divide(output_size, world_size)"'
    (tmp_path / "n.md").write_text(
        f"- The output size must divide exactly by the tensor-parallel size [cite: megatron-core {cite}].\n"
        f"- Construction fails when the columns cannot be split evenly over ranks [cite: Megatron_Core {cite}].\n"
    )
    rep = verify_note(tmp_path / "n.md")
    assert [r.status for r in rep.results] == [Status.COUNTED, Status.UNCOUNTED]
    assert record_versions(rep).startswith("checked-against: megatron-core 0.")
    assert verify_note(tmp_path / "n.md").warnings == []


def test_quotes_wrap_onto_lines_markdown_reads_as_headings_or_lists():
    rep = verify("wrapped.md")
    # Onto "# comment", "- ", "* ", "1. "; and a prose line "#L120 ..." is no heading.
    assert [(r.citation.line, r.status) for r in rep.results] == [
        (3, Status.COUNTED), (6, Status.COUNTED), (9, Status.COUNTED), (12, Status.COUNTED), (17, Status.COUNTED)
    ]
    assert rep.malformed == [] and rep.cited_statements == 5
    assert rep.results[-1].citation.block.kind == "paragraph" and rep.results[-1].citation.block.line == 15


def test_each_table_row_is_a_statement():
    rep = verify("table.md")
    assert [r.citation.block.kind for r in rep.results] == ["table row"] * 3
    assert rep.cited_statements == 3


def test_a_byte_order_mark_and_crlf_are_tolerated(tmp_path):
    text = (NOTES / "good.md").read_text()
    (tmp_path / "n.md").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    rep = verify_note(tmp_path / "n.md")
    assert rep.checked_against == {"toyparallel": "1.2.0"} and rep.warnings == []
    assert rep.cited_statements == 5 and [r.citation.line for r in rep.results] == [7, 9, 11, 13, 15]
    record_versions(rep)
    raw = (tmp_path / "n.md").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf---\r\nchecked-against: toyparallel 1.2.0\r\n---\r\n")
    assert raw.count(b"checked-against") == 1


def write(tmp_path, citation: str) -> Path:
    path = tmp_path / "n.md"
    path.write_text(f"A statement of a decision made in the code, with enough words to count\n[cite: {citation}].\n")
    return path


@pytest.mark.parametrize(
    ("citation", "reason"),
    [
        ('toyparallel toyparallel/sharding.py::Strategy "NO_SHARD = enum.auto()"',
         "the quote occurs in 2 places of toyparallel (toyparallel/sharding.py::Strategy.NO_SHARD, "
         "toyparallel/sharding.py::HandleStrategy.NO_SHARD), so it pins no place; quote more of the line"),
        ('toyparallel toyparallel/layers.py::ColumnLinear.forward "def forward(self, x):"',
         "the quote occurs in 2 places of toyparallel (toyparallel/layers.py::ColumnLinear.forward, "
         "toyparallel/layers.py::RowLinear.forward)"),
    ],
)
def test_a_boilerplate_quote_pins_no_place(tmp_path, citation, reason):
    (res,) = verify_note(write(tmp_path, citation)).results
    assert (res.status, res.code) == (Status.UNCOUNTED, "quote-not-unique") and reason in res.reason


@pytest.mark.skipif(not installed("torch"), reason="needs torch")
@pytest.mark.parametrize(
    ("citation", "reason"),
    [
        ('torch torch/distributed/fsdp/api.py::ShardingStrategy "NO_SHARD = auto()"',
         "the quote occurs in 2 places of torch"),
        ('torch torch/distributed/fsdp/fully_sharded_data_parallel.py::FullyShardedDataParallel.__init__ '
         '"def __init__("', "the quote occurs in more than 4 places of torch"),
    ],
)
def test_real_boilerplate_quotes_pin_no_place(tmp_path, citation, reason):
    (res,) = verify_note(write(tmp_path, citation)).results
    assert res.code == "quote-not-unique" and reason in res.reason


def test_a_copy_of_the_same_symbol_elsewhere_is_the_same_place(tmp_path):
    # Vendored code (megatron-core carries a copy of CudaRNGStatesTracker) must not unpin a quote.
    (res,) = verify_note(write(
        tmp_path, 'toyparallel toyparallel/layers.py::ColumnLinear.forward "no communication in forward"'
    )).results
    assert res.status is Status.COUNTED


def test_test_helpers_are_not_design_decisions(tmp_path):
    (res,) = verify_note(write(
        tmp_path, 'toyparallel toyparallel/testing/helpers.py::make_batch "build a fake batch for the unit tests"'
    )).results
    assert (res.status, res.code) == (Status.UNCOUNTED, "test-code")
    assert res.reason == TEST_CODE.format(path="toyparallel/testing/helpers.py")


@pytest.mark.skipif(not installed("torch"), reason="needs torch")
def test_torch_testing_internal_is_test_code(tmp_path):
    (res,) = verify_note(write(
        tmp_path,
        'torch torch/testing/_internal/common_fsdp.py::FSDPTest "class FSDPTest(FSDPTestMixin, MultiProcessTestCase)"',
    )).results
    assert res.code == "test-code"


def test_the_verdict_of_a_short_note_lists_what_was_not_counted_and_why():
    rep = verify("todo.md")
    verdict = notes_verdict([rep], minimum=5)
    cit = rep.results[0].citation
    assert cit.text.startswith("[cite: toyparallel")
    reason = NO_DECISION.format(kind=KINDS["list item"], line=3, problem=PLACEHOLDER.format(word="TODO"))
    assert UNCOUNTED.format(label="notes/todo.md", line=4, text=cit.text, reason=reason) in verdict.reason.splitlines()
