"""Relative Markdown links resolve, in this repository and in a fresh `distcheck init` workspace (issue 12):
a learner's repository gets the pages they read while working (start page, theory, labs, note template)
and no reference solution, so no page may link into solutions/."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

from pytest_distcheck.workspace_init import init_workspace

REPO = Path(__file__).resolve().parents[1]
_MD = MarkdownIt("commonmark").enable("table")


def relative_links(text: str) -> list[str]:
    """Targets of the page's links and images that are paths (no scheme, not a bare #anchor), as
    CommonMark reads them (code spans and fences hold no links)."""
    found: list[str] = []

    def walk(tokens) -> None:
        for tok in tokens:
            if tok.type in ("link_open", "image"):
                target = str(tok.attrGet("href") if tok.type == "link_open" else tok.attrGet("src"))
                parts = urlsplit(target)
                if not parts.scheme and not parts.netloc and parts.path:
                    found.append(unquote(parts.path))
            walk(tok.children or [])

    walk(_MD.parse(text))
    return found


def broken_links(root: Path) -> list[str]:
    """``page: target`` for every relative link under ``root/docs`` that names no existing file."""
    return [f"{page.relative_to(root)}: {target}" for page in sorted((root / "docs").rglob("*.md"))
            for target in relative_links(page.read_text(encoding="utf-8"))
            if not (page.parent / target).exists()]


def test_links_are_found_as_commonmark_reads_them():
    text = "[a](lab/x.md#part) ![i](../y.png) [w](https://e.org/z) [h](#top) `[c](no.md)`\n\n```\n[f](no.md)\n```\n"
    assert relative_links(text) == ["lab/x.md", "../y.png"]


def test_every_relative_link_in_docs_resolves_in_this_repository():
    assert broken_links(REPO) == []


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("learner")
    assert init_workspace(dest).conflicts == []
    return dest


def test_every_relative_link_in_docs_resolves_in_a_fresh_workspace(workspace):
    assert broken_links(workspace) == []


def test_a_fresh_workspace_has_the_pages_a_learner_reads_and_no_solutions(workspace):
    docs = {p.relative_to(workspace).as_posix() for p in (workspace / "docs").rglob("*.md")}
    want = {p.relative_to(REPO).as_posix() for d in ("theory", "lab", "es") for p in (REPO / "docs" / d).rglob("*.md")}
    assert want | {"docs/README.md", "docs/notes/TEMPLATE.md"} == docs
    assert not (workspace / "solutions").exists() and not (workspace / "checks" / "solutions.toml").exists()
