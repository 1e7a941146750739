"""One JS context serves every parse of a MermaidParser, and a source parsed once is answered from the cache:
neither may change what a parse says."""

from __future__ import annotations

import pytest

from pytest_distcheck.diagram import mermaid
from pytest_distcheck.diagram.mermaid import MermaidParser, MermaidSyntaxError

# Anonymous subgraphs get ids from a counter of Mermaid's FlowDB, a class, and a style: state a context could keep.
SUBGRAPHS = "flowchart TD\n subgraph one\n a-->b\n end\n subgraph two\n c-->d:::hot\n end\n classDef hot fill:#f00\n"
OTHER = "flowchart LR\n subgraph rank 0\n x[column-parallel]-->y\n end\n y-- all-reduce -->z\n"
BROKEN = "flowchart LR\n a-->\n"


def test_a_reused_context_parses_as_a_fresh_one():
    with MermaidParser() as fresh:
        expected = fresh._parse_uncached(SUBGRAPHS)
    with MermaidParser() as fresh:
        rejected = fresh._parse_uncached(BROKEN)
    with MermaidParser() as reused:
        answers = [reused._parse_uncached(s) for s in (OTHER, BROKEN, SUBGRAPHS, OTHER, SUBGRAPHS)]
    assert answers[2] == answers[4] == expected
    assert answers[0] == answers[3]
    assert answers[1] == rejected and rejected[0].startswith("Parse error on line")  # (message, line)
    assert [s.id for s in expected.flowchart.subgraphs] == ["one", "two"]
    assert expected.flowchart.vertices["d"].classes == ("hot",)


def test_a_cached_answer_is_the_parse_and_a_rejection_is_raised_again(monkeypatch):
    monkeypatch.setattr(mermaid, "_PARSED", {})
    with MermaidParser() as parser:
        first = parser.parse(OTHER)
        seen = []
        for _ in range(2):
            with pytest.raises(MermaidSyntaxError) as info:
                parser.parse(BROKEN)
            seen.append((info.value.message, info.value.line))
        assert seen[0] == seen[1] and seen[0][1] is not None and seen[0][0].startswith("Parse error on line")
        monkeypatch.setattr(parser, "_parse_uncached", None)  # a second parse must not reach the engine
        assert parser.parse(OTHER) == first
    with MermaidParser() as other:  # nor start one: a parser whose parses are all cached never does
        assert other.parse(OTHER) == first and not other._engine.started
