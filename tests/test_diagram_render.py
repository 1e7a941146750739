"""Rendering a diagram twice gives the same SVG bytes (a re-render of an unchanged page changes nothing)."""

from __future__ import annotations

import pytest

pytest.importorskip("mermaidx")

from pytest_distcheck.diagram.check import write_svg  # noqa: E402
from pytest_distcheck.diagram.markdown import mermaid_blocks  # noqa: E402
from pytest_distcheck.diagram.mermaid import render_svg  # noqa: E402

# A stadium node: Mermaid 11 draws it with rough.js, whose curves jitter without a fixed seed.
SOURCE = 'flowchart TD\n  x(["x: hidden states"])\n  a["column-parallel"]\n  x --> a\n'


def test_two_renders_of_the_same_source_are_identical():
    first = render_svg(SOURCE)
    assert "<path" in first
    assert render_svg(SOURCE) == first


def test_re_rendering_an_unchanged_page_leaves_the_svg_byte_for_byte(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"# d\n\n```mermaid\n{SOURCE}```\n")
    [block] = mermaid_blocks(page.read_text())
    before = write_svg(page, block).read_bytes()
    assert write_svg(page, block).read_bytes() == before


# The nanobind leak dump after a DoD run with the diagram (mermaid._release_fonts) is pinned by
# tests/test_solutions.py::test_the_reference_workspace_is_green: its `pytest -m local` run of the reference
# shows the dump without the fix, and it runs anyway (one sub-session, not two).
