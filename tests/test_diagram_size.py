"""A diagram larger than Mermaid draws (its maxEdges) is refused before parsing, naming the file, count and limit."""

from __future__ import annotations

import time

import pytest

from pytest_distcheck.cli import main
from pytest_distcheck.diagram.check import TOO_MANY_EDGES
from pytest_distcheck.diagram.mermaid import MAX_EDGES, TooManyEdges, links_at_least, render_svg

CHAIN = 2000  # a 34 KB page: minutes in Mermaid's parser before the bound


def _chain(edges: int) -> str:
    return "flowchart LR\n" + "".join(f"  attn_qkv_{i}[\"attn.qkv {i}\"] --> attn_qkv_{i + 1}\n" for i in range(edges))


@pytest.mark.parametrize(("source", "links"), [
    ("flowchart LR\n  a --> b --> c\n", 2),
    ("flowchart LR\n  a -- text --> b\n  a -.-> b\n  a ==> b\n  a --- b\n  a ~~~ b\n  a <--> b\n  a --x b\n", 7),
    ('flowchart LR\n  A["x --> y"] -->|a --> b| B\n  %% c --> d\n', 1),
    ("---\ntitle: a --> b\n---\nflowchart LR\n  a --> b\n", 1),
])
def test_links_are_counted_outside_labels_comments_and_front_matter(source, links):
    assert links_at_least(source) == links


def test_a_page_with_more_edges_than_mermaid_draws_is_refused_at_once_naming_file_count_and_limit(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "big.md"
    page.write_text("# Big\n\n```mermaid\n" + _chain(CHAIN) + "```\n")
    assert len(page.read_bytes()) > 30_000
    start = time.perf_counter()
    assert main(["diagram", "--check", "big.md", "--plan", "attn.qkv=colwise"]) == 1
    assert time.perf_counter() - start < 20  # no parse: the engine's start alone
    message = TOO_MANY_EDGES.format(line=3, edges=CHAIN, limit=MAX_EDGES)
    assert capsys.readouterr().out == f"big.md:3: {message}\n"


def test_a_diagram_at_mermaid_s_limit_is_not_refused_by_the_bound():
    assert links_at_least(_chain(MAX_EDGES)) == MAX_EDGES  # parsed as usual (Mermaid's own check applies)


def test_rendering_refuses_a_diagram_over_the_limit_before_drawing_it():
    with pytest.raises(TooManyEdges) as info:
        render_svg(_chain(MAX_EDGES + 1))
    assert (info.value.edges, info.value.limit) == (MAX_EDGES + 1, 500)
