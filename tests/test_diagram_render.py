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



def test_a_dod_run_with_the_diagram_ends_without_a_nanobind_leak_dump():
    # Seen after every full `pytest -m local` once the diagram existed: nanobind's "leaked 2 instances"
    # dump after the DoD table (mermaidx's module-level FontFace objects outlived novasvg's teardown).
    # The smallest run found that shows it: the DDP log item, then the diagram item.
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--workspace", "checks/solutions.toml",
         "--dod", "ddp-allreduce-logged,tp-diagram-committed"],
        cwd=repo, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "leaked" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]
