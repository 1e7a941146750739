"""Parsing notes: the citation syntax, the blocks citations stand in, front matter, malformed citations."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_distcheck.citations.decision import words
from pytest_distcheck.citations.report import citations
from pytest_distcheck.citations.syntax import (
    CURLY_CLOSE,
    ECHO_CHARS,
    EMPTY,
    EXPECTED,
    FORM,
    MISSPELT_OPEN,
    NEVER_CLOSED,
    NO_PATH_SYMBOL,
    NO_SYMBOL,
    NOT_CLOSED,
    NOT_CLOSED_AFTER,
    TEXT_AFTER_QUOTE,
    UNCLOSED_COMMENT,
    parse_note,
)
from pytest_distcheck.errors import ConfigError

NOTE = Path("note.md")
REFERENCE = Path(__file__).resolve().parents[1] / "solutions" / "docs" / "notes" / "megatron.md"


def parse(text: str):
    return parse_note(textwrap.dedent(text).lstrip("\n"), NOTE)


def test_a_citation_gives_package_path_symbol_quote_and_line():
    note = parse("""
        # Title

        Column-parallel splits the output dimension
        `[cite: megatron-core megatron/core/tensor_parallel/layers.py::ColumnParallelLinear.forward "a = b"]`.
    """)
    (cit,) = note.citations
    assert (cit.package, cit.path, cit.symbol, cit.quote) == (
        "megatron-core",
        "megatron/core/tensor_parallel/layers.py",
        "ColumnParallelLinear.forward",
        "a = b",
    )
    assert cit.line == 4
    assert cit.block.line == 3 and cit.block.kind == "paragraph"


def test_the_quote_is_optional_and_escapes_are_undone():
    note = parse(r"""
        One [cite: torch torch/a.py::f] and [cite: torch torch/a.py::g "say \"hi\" \\ there"] here.
    """)
    assert [c.quote for c in note.citations] == [None, 'say "hi" \\ there']


def test_a_citation_may_wrap_over_lines_and_a_quote_may_hold_brackets():
    note = parse("""
        - first bullet
        - second bullet with a long citation [cite: torch
          torch/distributed/fsdp/api.py::ShardingStrategy "x[0] ]
          y"] and more text
    """)
    (cit,) = note.citations
    assert cit.line == 2 and " ".join(cit.quote.split()) == "x[0] ] y"
    assert cit.block.kind == "list item" and cit.block.line == 2


def test_citations_in_fenced_code_are_examples_and_ignored():
    note = parse("""
        ```
        [cite: torch torch/a.py::f "ignored"]
        ```
        ~~~markdown
        [cite: broken
        ~~~
        [cite: torch torch/b.py::g "kept"]
    """)
    assert [c.path for c in note.citations] == ["torch/b.py"] and note.malformed == []


def test_each_list_item_and_heading_is_its_own_block():
    note = parse("""
        ## Heading [cite: torch torch/a.py::h "x"]
        - item one [cite: torch torch/a.py::f "x"]
          continued
        - item two [cite: torch torch/a.py::g "x"]
        Paragraph after? No: a lazy continuation of item two.
    """)
    kinds = [(c.symbol, c.block.kind, c.block.line) for c in note.citations]
    assert kinds == [("h", "heading", 1), ("f", "list item", 2), ("g", "list item", 4)]
    assert len(words(note.citations[2].block.text)) == 11


def test_the_words_of_a_block_leave_its_citations_out():
    note = parse('See [cite: torch torch/a.py::f "many words inside the quote do not count"].')
    assert len(words(note.citations[0].block.text)) == 1


def test_front_matter_records_versions():
    note = parse("""
        ---
        title: x
        checked-against: megatron-core 0.16.1, torch 2.13.0
        ---
        text
    """)
    assert note.checked_against == {"megatron-core": "0.16.1", "torch": "2.13.0"}


def test_no_front_matter_means_nothing_recorded():
    assert parse("text\n").checked_against is None


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("---\nchecked-against: torch\n---\n", "line 2", "checked-against entry 'torch' is not 'PACKAGE VERSION'"),
        ("---\ntitle: x\n", "line 1", "never closed"),
    ],
)
def test_bad_front_matter_names_file_and_line(text, where, problem):
    with pytest.raises(ConfigError) as info:
        parse_note(text, NOTE)
    assert info.value.where == where and problem in info.value.problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[cite:]", EMPTY),
        ("[cite: torch]", NO_PATH_SYMBOL),
        ("[cite: torch torch/a.py]", NO_PATH_SYMBOL),
        ('[cite: torch torch/a.py:: "q"]', NO_SYMBOL),
        ('[cite: torch torch/a.py::f "never closed]', NEVER_CLOSED),
        ('[cite: torch torch/a.py::f "q" extra]', TEXT_AFTER_QUOTE),
    ],
)
def test_malformed_citations_say_what_is_wrong(text, problem):
    note = parse(f"intro line\n\nbefore {text} after\n")
    assert note.citations == []
    (bad,) = note.malformed
    assert bad.line == 3 and bad.problem == EXPECTED.format(problem=problem, form=FORM)


F = "[cite: torch torch/a.py::f"  # a citation's opening, up to its symbol


@pytest.mark.parametrize(
    ("text", "written", "problem"),
    [
        (F + ' "A = [A_1, ..., A_p]"', F + ' "A = [A_1, ..., A_p]"', NOT_CLOSED),
        ("`" + F + ' "A is split by its columns"`.', F + ' "A is split by its columns"', NOT_CLOSED),
        (F + ' "a quote of the code" and prose after', F + ' "a quote of the code"', NOT_CLOSED),
        (F, F, NOT_CLOSED_AFTER.format(symbol="f")),
        (F + ' "a quote of the code\u201d]', F + ' "a quote of the code\u201d]', CURLY_CLOSE.format(quote="\u201d")),
    ],
)
def test_a_citation_not_closed_says_where_the_bracket_goes_and_is_echoed_as_written(text, written, problem):
    note = parse(f"intro line\n\nA decision in prose {text}\n")
    (bad,) = note.malformed
    assert (bad.line, bad.text, bad.problem) == (3, written, EXPECTED.format(problem=problem, form=FORM))


def test_a_citation_not_closed_before_the_next_one_is_not_closed():
    note = parse('A decision [cite: torch torch/a.py::f "a quote of the code" and [cite: torch torch/a.py::g "two"].\n')
    assert [c.symbol for c in note.citations] == ["g"]
    (bad,) = note.malformed
    assert bad.text == '[cite: torch torch/a.py::f "a quote of the code"'
    assert bad.problem == EXPECTED.format(problem=NOT_CLOSED, form=FORM)


@pytest.mark.parametrize(
    ("old", "new"),
    [('A_p]"]`', 'A_p]"`'), ('as A = [A_1, ..., A_p]"]`', 'as"`')],
    ids=["bracket-inside-the-quote", "no-bracket-inside-the-quote"],
)
def test_the_reference_notes_citation_without_its_bracket_is_echoed_whole(old, new):
    lines = REFERENCE.read_text().split("\n")
    assert old in lines[23]
    lines[23] = lines[23].replace(old, new)
    (bad,) = parse_note("\n".join(lines), REFERENCE).malformed
    cited = lines[23][lines[23].index("[cite:") : lines[23].rindex('"') + 1]
    assert (bad.line, bad.text, bad.problem) == (24, cited, EXPECTED.format(problem=NOT_CLOSED, form=FORM))


def test_a_long_malformed_citation_is_cut_with_an_ellipsis_not_a_bracket():
    text = '[cite: torch torch/a.py::f "' + "word " * 60 + '"'
    (bad,) = parse(f"A decision in prose {text}\n").malformed
    assert bad.text.endswith("...") and len(bad.text) == ECHO_CHARS and bad.text.startswith(text[:100])


@pytest.mark.parametrize("opening", ["[cit:", "[Cite:", "[CITE:", "[ cite:", "[cite :", "[cite", "[cita:"])
def test_a_misspelt_cite_keyword_is_named_not_ignored(opening):
    note = parse(f'intro line\n\nA decision {opening} torch torch/a.py::f "a quote of the code"] after\n')
    assert note.citations == [] and note.unseen == 0
    (bad,) = note.malformed
    assert (bad.line, bad.text) == (3, f'{opening} torch torch/a.py::f "a quote of the code"]')
    assert bad.problem == EXPECTED.format(problem=MISSPELT_OPEN.format(written=opening), form=FORM)


def test_a_reference_to_a_paper_in_brackets_is_no_misspelt_citation():
    note = parse("As the paper shows [Citation: Shoeybi et al. 2019, Sec. 3] and [cite 2].\n")
    assert note.malformed == [] and note.citations == []


def test_an_unclosed_html_comment_says_where_it_hides_the_citations():
    note = parse("""
        A decision stated in prose [cite: torch torch/a.py::f "quote one here"].

        <!-- draft: rewrite below
        A second decision [cite: torch torch/a.py::g "quote two here"].

        A third decision [cite: torch torch/a.py::h "quote three here"].
    """)
    assert [c.symbol for c in note.citations] == ["f"] and note.unseen == 2
    assert [(m.line, m.text, m.problem) for m in note.malformed] == [
        (3, "<!-- draft: rewrite below", UNCLOSED_COMMENT.format(citations=citations(2)))]


@pytest.mark.parametrize(
    "text",
    ["<!-- a draft -->\nA decision [cite: torch torch/a.py::f \"quote one here\"].\n",
     "A decision [cite: torch torch/a.py::f \"quote one here\"].\n\n<!-- nothing cited below\ntext\n"],
    ids=["closed", "no-citation-below"],
)
def test_an_html_comment_that_hides_no_citation_is_not_reported(text):
    assert parse_note(text, NOTE).malformed == []


def test_link_targets_and_html_are_not_words_and_hide_no_citation():
    note = parse("""
        See [the docs](https://example.com/one/two/three/four/five/six/seven/eight) <b>now</b>
        [cite: torch torch/a.py::f "x"] <!-- [cite: torch torch/a.py::g "hidden"] -->
    """)
    (cit,) = note.citations
    assert cit.symbol == "f" and len(words(cit.block.text)) == 4  # See, the, docs, now


def test_a_table_row_is_a_statement_with_its_line():
    note = parse("""
        | decision | where |
        | --- | --- |
        | split by columns | `[cite: torch torch/a.py::f "x"]` |
        | split by rows | `[cite: torch torch/a.py::g "y"]` |
    """)
    assert [(c.line, c.block.kind, c.block.line) for c in note.citations] == [
        (3, "table row", 3), (4, "table row", 4)
    ]
