"""Mermaid blocks and links of a Markdown page (pytest_distcheck.diagram.markdown)."""

from __future__ import annotations

from pathlib import PurePosixPath as P

from pytest_distcheck.diagram.markdown import MermaidBlock, linked_targets, links_to, mermaid_blocks

PAGE = """# Title

```mermaid
flowchart TD
  A --> B
```

```python
print("not a diagram")
```

- a list item

  ~~~~ Mermaid title="x"
  sequenceDiagram
  ~~~~

![rendered](tp.svg) and [up](../other.svg#part) and [web](https://example.org/x.svg)

```mermaid
flowchart LR
  never closed
"""


def test_blocks_are_found_with_their_lines_in_page_order():
    blocks = mermaid_blocks(PAGE)
    assert [(b.fence_line, b.source, b.closed) for b in blocks] == [
        (3, "flowchart TD\n  A --> B\n", True),
        (14, "sequenceDiagram\n", True),  # inside a list item, tilde fence, any case, info words
        (20, "flowchart LR\n  never closed\n", False),
    ]
    assert blocks[0].first_line == 4


def test_page_line_maps_block_lines_and_clamps_past_the_end():
    block = MermaidBlock(source="flowchart TD\n  A --> B\n  B --> C\n", fence_line=10)
    assert block.page_line(1) == 11
    assert block.page_line(3) == 13
    assert block.page_line(7) == 13  # Mermaid names a line past the end when it hits the end of text
    assert block.page_line(None) == 10


def test_a_page_without_mermaid_has_no_blocks():
    assert mermaid_blocks("# nothing\n\n```\ncode\n```\n") == []


def test_links_and_images_are_listed_with_lines():
    assert linked_targets(PAGE) == [("tp.svg", 18), ("../other.svg", 18), ("https://example.org/x.svg", 18)]


def test_links_to_resolves_relative_paths_from_the_page():
    page = P("docs/tp.md")
    assert links_to(PAGE, page, P("docs/tp.svg"))
    assert links_to(PAGE, page, P("other.svg"))
    assert not links_to(PAGE, page, P("docs/other.svg"))
    assert not links_to("see `tp.svg` in code only\n", page, P("docs/tp.svg"))


def test_without_mermaid_empties_every_block_and_its_fences_and_keeps_the_rest_in_place():
    from pytest_distcheck.diagram.markdown import without_mermaid

    page = "a\n```mermaid\nflowchart TD\n  x --> y\n```\nb\n~~~ Mermaid\nz\n~~~\n```python\nkept\n```\n```mermaid\nopen"
    assert without_mermaid(page).split("\n") == ["a", "", "", "", "", "b", "", "", "", "```python", "kept", "```",
                                                 "", ""]


def test_the_drawing_key_leaves_ids_comments_and_spacing_aside():
    from pytest_distcheck.diagram.markdown import DRAWING_STEPS, drawing_key

    src = ('flowchart TD\n  %% mine\n  a["attn.qkv: column-parallel"] -- "f" --> b(("+"))\n'
           '  subgraph s0["rank 0"]\n    a\n  end\n')
    renamed = ('flowchart TD\n\n  q["attn.qkv: column-parallel"]  --  "f"  -->  add(("+"))\n'
               '  subgraph r["rank 0"]\n a\n end\n')
    assert drawing_key(src) != drawing_key(renamed)  # `a` in the subgraph is now another node than `q`
    assert drawing_key(src) == drawing_key(renamed.replace("\n a\n", "\n q\n"))
    assert drawing_key(src) != drawing_key(src.replace("column-parallel", "row-parallel"))  # labels count
    assert drawing_key(src) != drawing_key(src.replace("flowchart TD", "flowchart LR"))  # keywords count
    assert drawing_key(src).startswith('flowchart TD n1["attn.qkv: column-parallel"] -- "f" --> n2(("+"))')
    assert len(DRAWING_STEPS) == 3
