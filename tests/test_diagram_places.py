"""Where a node is defined and an edge written in a Mermaid block's source (the lines findings name).

Source text only: no Mermaid parser.
"""

from __future__ import annotations

import pytest

from pytest_distcheck.diagram.flow import _PLACES, FLOW_MESSAGES
from pytest_distcheck.diagram.places import edge_line, node_line

SOURCE = """flowchart TD
  %% a comment naming q0[not here]
  x --> q0
  a["a label naming q0 and b"] --> b(round)
  class q0 colwise
  q0["attn.qkv
  column-parallel"]:::colwise
  c{rhombus} -- "q0 on an edge" --> d@{ shape: rect, label: "d" }
  e:::rowwise --> f>flag]
  subgraph s1["rank 0"]
    g
  end
  a -->|to g| s1
  a & e --> g --> b
  style h fill:#fff
"""


@pytest.mark.parametrize("vid, line", [
    ("q0", 6),  # drawn on line 3, but given its label (over two lines) on line 6; comments and labels naming it aside
    ("x", 3),  # never given a label: the first line drawing it
    ("a", 4), ("b", 4),  # id[label] and id(label) inside an edge
    ("c", 8), ("d", 8),  # id{label}, id@{...}
    ("e", 9), ("f", 9),  # id:::class, id>label]
    ("g", 11),
    ("h", 15),  # named only by a style line
    ("zz", None),
])
def test_a_node_is_found_on_the_line_that_defines_it(vid, line):
    assert node_line(SOURCE, vid) == line


@pytest.mark.parametrize("start, end, line", [
    ("x", "q0", 3),
    ("a", "b", 4),
    ("c", "d", 8),  # a quoted edge label naming q0 is not q0
    ("a", "s1", 13),  # to a subgraph, past a |label|
    ("e", "g", 14), ("g", "b", 14),  # a & e --> g --> b
    ("b", "a", 4),  # not written so: the line defining its start
])
def test_an_edge_is_found_on_the_line_that_writes_it(start, end, line):
    assert edge_line(SOURCE, start, end) == line


def test_every_flow_finding_says_what_it_is_about():
    assert set(_PLACES) == set(FLOW_MESSAGES)
