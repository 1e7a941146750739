"""Relative Markdown links resolve, in this repository and in a fresh `distcheck init` workspace (issue 12):
a learner's repository gets the pages they read while working (start page, theory, labs, note template)
and no reference solution, so no page may link into solutions/. Anchors resolve too, as GitHub names
headings (issue 30), and README.md is a front page of at most 8 KB that links the manual in docs/kit/."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

from pytest_distcheck.workspace_init import init_workspace

REPO = Path(__file__).resolve().parents[1]
_MD = MarkdownIt("commonmark").enable("table")


README_MAX_BYTES = 8192


def link_targets(text: str) -> list[tuple[str, str]]:
    """(path, anchor) of the page's links and images that stay in the repository (no scheme), as CommonMark
    reads them (code spans and fences hold no links); a bare #anchor has the path ''."""
    found: list[tuple[str, str]] = []

    def walk(tokens) -> None:
        for tok in tokens:
            if tok.type in ("link_open", "image"):
                target = str(tok.attrGet("href") if tok.type == "link_open" else tok.attrGet("src"))
                parts = urlsplit(target)
                if not parts.scheme and not parts.netloc and (parts.path or parts.fragment):
                    found.append((unquote(parts.path), unquote(parts.fragment)))
            walk(tok.children or [])

    walk(_MD.parse(text))
    return found


def relative_links(text: str) -> list[str]:
    """Targets of the page's links and images that are paths (no scheme, not a bare #anchor)."""
    return [path for path, _ in link_targets(text) if path]


def _slug(heading: str) -> str:
    """GitHub's id for a heading (github-slugger): lower case, punctuation and symbols dropped (``-`` and
    ``_`` kept), each space a hyphen."""
    kept = "".join(c for c in heading.lower()
                   if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The ids GitHub gives the page's headings, a repeated one numbered ``-1``, ``-2``... as GitHub does."""
    tokens = _MD.parse(text)
    seen: dict[str, int] = {}
    out = set()
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open":
            continue
        words = "".join(c.content for c in tokens[i + 1].children or [] if c.type in ("text", "code_inline"))
        slug = _slug(words)
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _pages(root: Path) -> list[Path]:
    return [p for p in [root / "README.md"] if p.is_file()] + sorted((root / "docs").rglob("*.md"))


def broken_links(root: Path) -> list[str]:
    """``page: target`` for every relative link of ``root/README.md`` and under ``root/docs`` that names no
    existing file, or a heading its Markdown target does not have."""
    broken = []
    for page in _pages(root):
        for path, anchor in link_targets(page.read_text(encoding="utf-8")):
            target = (page.parent / path) if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(root)}: {path}")
            elif anchor and target.suffix == ".md" and target.is_file() and anchor not in anchors(
                    target.read_text(encoding="utf-8")):
                broken.append(f"{page.relative_to(root)}: {path}#{anchor} (no such heading)")
    return broken


def test_links_are_found_as_commonmark_reads_them():
    text = "[a](lab/x.md#part) ![i](../y.png) [w](https://e.org/z) [h](#top) `[c](no.md)`\n\n```\n[f](no.md)\n```\n"
    assert relative_links(text) == ["lab/x.md", "../y.png"]
    assert link_targets(text) == [("lab/x.md", "part"), ("../y.png", ""), ("", "top")]


def test_headings_get_github_s_ids():
    text = ("# 3. What counts\n\n## `dist_world`: code on every rank\n\n## all-reduce = reduce-scatter + all-gather\n\n"
            "## Lab 0 — Cloud budget\n\n## Notes\n\n## Notes\n\n```\n# not a heading\n```\n")
    assert anchors(text) == {"3-what-counts", "dist_world-code-on-every-rank", "all-reduce--reduce-scatter--all-gather",
                             "lab-0--cloud-budget", "notes", "notes-1"}


def test_a_missing_page_or_heading_is_named(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Top\n\n[ok](b.md#part-one) [no](b.md#part-two) [gone](c.md) [self](#top)"
                                            " [bad](#nowhere)\n")
    (tmp_path / "docs" / "b.md").write_text("# Part one\n")
    (tmp_path / "README.md").write_text("[docs](docs/a.md#top) [x](docs/a.md#bottom)\n")
    assert broken_links(tmp_path) == ["README.md: docs/a.md#bottom (no such heading)",
                                      "docs/a.md: b.md#part-two (no such heading)", "docs/a.md: c.md",
                                      "docs/a.md: #nowhere (no such heading)"]


def test_the_readme_is_a_front_page_of_at_most_8_kb_that_links_the_manual():
    readme = (REPO / "README.md").read_bytes()
    assert len(readme) <= README_MAX_BYTES, f"README.md is {len(readme)} bytes: move reference text to docs/kit/"
    linked = {(REPO / path).resolve() for path in relative_links(readme.decode())}
    manual = {p.resolve() for p in [*(REPO / "docs" / "kit").glob("*.md"), REPO / "docs" / "ci" / "gate.md"]}
    assert manual <= linked, sorted(str(p.relative_to(REPO)) for p in manual - linked)
    assert (REPO / "docs" / "README.md").resolve() in linked


def test_every_relative_link_in_the_readme_and_docs_resolves_in_this_repository():
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
