"""The manual's section on `distcheck diagram` (docs/kit/tools.md) shows the check's own messages: each message it
quotes, with `...` for what it leaves out, is what the check says of a wrong page of fixtures/diagrams/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from pytest_distcheck.diagram.check import check_page
from pytest_distcheck.diagram.mermaid import MermaidParser
from pytest_distcheck.diagram.plan import LayerNames, parse_inline

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "docs" / "kit" / "tools.md"
SECTION = "## The TP sharding diagram check (`distcheck diagram`)"
# The wrong pages whose messages the section quotes, all drawn against the lab's plan on 2 ranks.
PAGES = ["qkv-row-parallel.md", "row-parallel-reads-ln2.md", "missing-all-reduce.md", "dropped-layer.md"]
PLAN = parse_inline("attn.qkv=colwise,attn.out=rowwise,mlp.up=colwise,mlp.down=rowwise")
MESSAGE = re.compile(r"^(?:attn|mlp)\.\w+ |^no all-reduce |^the output of |^layer ")


def quoted_messages(markdown: str) -> list[str]:
    """The code spans of the diagram section that quote a message of the check."""
    section = markdown.split(SECTION, 1)[1].split("\n## ", 1)[0]
    spans = [c.content for t in MarkdownIt("commonmark").parse(section) if t.type == "inline"
             for c in t.children or [] if c.type == "code_inline"]
    return [s for s in spans if MESSAGE.match(s)]


def matches(quote: str, message: str) -> bool:
    """Whether ``message`` says ``quote``, each ``...`` of it standing for any text."""
    pieces = [re.escape(p.strip()) for p in quote.split("...")]
    return re.match(".*?".join(pieces), message) is not None


@pytest.fixture(scope="module")
def messages() -> list[str]:
    with MermaidParser() as parser:
        return [f.message for page in PAGES
                for f in check_page((ROOT / "fixtures" / "diagrams" / page).read_text(encoding="utf-8"), PLAN, 2,
                                    parser, LayerNames(residual=("attn", "mlp"))).findings]


def test_every_message_the_manual_quotes_is_one_the_check_gives(messages):
    quotes = quoted_messages(TOOLS.read_text(encoding="utf-8"))
    assert len(quotes) >= 5
    assert [q for q in quotes if not any(matches(q, m) for m in messages)] == []


def test_a_quote_the_check_no_longer_gives_is_caught(messages):
    assert not any(matches("mlp.down is drawn column-parallel ...", m) for m in messages)
    assert any(matches("layer mlp.up missing: ...", m) for m in messages)
