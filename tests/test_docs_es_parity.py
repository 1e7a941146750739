"""Each Spanish page under docs/es/ is the twin of an English learner page (issue 31): a change to one side that
the other lacks fails here, naming the pair and what differs.

The English pages (the phase pack's docs/*.md) are the source of truth: each has a twin at docs/es/<same path>
or is listed in NOT_YET_TRANSLATED. A pair agrees on its headings, commands, code, numbers and links (the rules
are the docstrings of the functions below), links to its twin on the line under its title, and runs its
doctests, console blocks and inline markers (tests/docs_support.py) in both languages.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from itertools import zip_longest
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from docs_support import console_mismatches, doctest_failures, inline_markers, inline_mismatches
from markdown_it import MarkdownIt

from pytest_distcheck import i18n
from pytest_distcheck.budget.plugin import HEADER, PAID_ON
from pytest_distcheck.citations.report import LABELS
from pytest_distcheck.citations.verifier import Status
from pytest_distcheck.dod.state import State
from pytest_distcheck.phase_pack import pack_files

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ES = "es"
GLOSSARY = "glosario.md"  # Spanish only: the English form of each term is the term itself
# English pages whose Spanish twin is still to be written. Writing a twin means deleting its line here.
NOT_YET_TRANSLATED: set[str] = set()
ENGLISH = sorted(p.removeprefix("docs/") for p in pack_files(ROOT)
                 if p.startswith("docs/") and p.endswith(".md") and not p.startswith(f"docs/{ES}/"))
PAIRS = [p for p in ENGLISH if (DOCS / ES / p).is_file()]

SWITCH_EN = "English · [Español]({})"
SWITCH_ES = "[English]({}) · Español"
PROBLEM = "{pair}: {what}: {detail}"
COMMAND = re.compile(r"^(?:\$ |(?:distcheck|pytest|torchrun|git)\b|\[cite:)")
SHELL = ("bash", "sh", "shell")  # fences whose comments are prose (translated), not code
MARKDOWN = ("markdown", "md")  # fences that show a page the learner writes: its prose is translated, its code not
MERMAID_LABEL = re.compile(r'"[^"\n]*"')
DOCTEST_COMMENT = re.compile(r"^((?:>>>|\.\.\.) .*?)\s+#.*$", re.M)
NUMBER = re.compile(r"\d+(?:[.,\u00a0\u202f]\d+)*")
GROUPED = re.compile(r"[1-9]\d{0,2}(?:[,\u00a0\u202f]\d{3})+")
_MD = MarkdownIt("commonmark").enable("table")


def headings(text: str) -> list[tuple[int, str]]:
    """(level, text) of each heading, outside code."""
    tokens = _MD.parse(text)
    return [(int(t.tag[1]), tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"]


def slugs(text: str) -> list[str]:
    """GitHub's anchor of each heading, in order: lower case, punctuation dropped, spaces to hyphens, a repeat
    suffixed -1, -2."""
    seen: Counter[str] = Counter()
    out = []
    for _, title in headings(text):
        base = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        out.append(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return out


def _inline_children(text: str):
    for token in _MD.parse(text):
        if token.type == "inline":
            yield from token.children or []


def code(text: str) -> tuple[list[str], list[str]]:
    """(code spans, code blocks): every span, and every fenced or indented block with the comment after ` #` on
    a doctest line (`>>> `, `... `) removed, since that comment may be translated; so are the comments of a
    ```bash block (:func:`_shell_code`). The commands of a page are its spans and block lines that begin with
    `$ `, `distcheck`, `pytest`, `torchrun`, `git` or `[cite:`. A ```console block counts by its `$ ` lines
    only: its output is the command's in the page's language, checked by re-running it
    (test_the_spanish_twin_reruns_its_numbers). A ```markdown block (an example of a note) counts by its code
    spans, one a line: its prose is the learner's, in the page's language, while a citation's quote must match
    the source. A ```mermaid block counts by its structure (:func:`_mermaid_structure`)."""
    spans = [c.content for c in _inline_children(text) if c.type == "code_inline"]
    blocks = [_console_commands(t.content) if t.info.strip() == "console"
              else _shell_code(t.content) if t.info.strip() in SHELL
              else "".join(f"{s}\n" for s in code(t.content)[0]) if t.info.strip() in MARKDOWN
              else _mermaid_structure(t.content) if t.info.strip() == "mermaid"
              else DOCTEST_COMMENT.sub(r"\1", t.content)
              for t in _MD.parse(text) if t.type in ("fence", "code_block")]
    return spans, blocks


def _mermaid_structure(block: str) -> str:
    """``block`` with each double-quoted label reduced to its numbers: a translated figure's words may differ,
    while its node ids, shapes, edges, subgraphs and the numbers in its labels (ranks, heads, columns) must
    not, so that it stays the same figure."""
    return MERMAID_LABEL.sub(lambda m: '"' + " ".join(sorted(NUMBER.findall(m[0]))) + '"', block)


def _shell_code(block: str) -> str:
    """``block`` without its shell comments: a ``#`` that starts a word outside quotes, to the end of its line
    (the blanks before it go too; a line that was only a comment is left empty)."""
    out = []
    for line in block.splitlines(keepends=True):
        quote, cut = "", None
        for i, ch in enumerate(line):
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1].isspace()):
                cut = i
                break
        out.append(line if cut is None else line[:cut].rstrip() + ("\n" if line.endswith("\n") else ""))
    return "".join(out)


def _console_commands(block: str) -> str:
    return "".join(line for line in block.splitlines(keepends=True) if line.startswith("$ "))


def quoted_output() -> list[tuple[str, str]]:
    """(English, Spanish) of each code span a page quotes from the kit's output, built from the kit's own messages
    in each language: the twin quotes what the kit prints under es (the budget header of lab 00, a DoD row's
    label, a citation's status, lab 02's diagram finding, from the fixture that makes it)."""
    rendered = []
    for lang in (i18n.DEFAULT, ES):
        i18n.use(lang)
        try:
            rendered.append([
                _diagram_finding(lang),
                i18n._(HEADER).format(paid=i18n._(PAID_ON).format(usd="$3.00"), left="$5.00", ceiling="$5.00",
                                      spent="$0.00", ledger="experiments/35-cloud-budget.md", held=""),
                f"{State.DONE.label} reading-notes-cited",
                i18n._(LABELS[Status.UNCOUNTED]),
            ])
        finally:
            i18n.use(i18n.DEFAULT)
    return list(zip(*rendered, strict=True))


def _diagram_finding(lang: str) -> str:
    """Lab 02's example: `distcheck diagram --check` on a page whose mlp.down reads the LayerNorm's output."""
    import contextlib
    import io

    from pytest_distcheck.cli import main

    page = ROOT / "fixtures" / "diagrams" / "row-parallel-reads-ln2.md"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["--lang", lang, "diagram", "--check", str(page)])
    line = next(line for line in out.getvalue().splitlines() if "mlp.down (row-parallel)" in line)
    return line.split(": ", 1)[1]


QUOTED = quoted_output()
AS_ENGLISH = {es: en for en, es in QUOTED}


def english_name(span: str, docs: Path) -> str:
    """A code span that names a Spanish page (``docs/es/X``, an existing twin of ``docs/X``) read as that English
    page, as :func:`link_target` reads a link: the twin may point its reader to the Spanish page."""
    prefix = f"{docs.name}/{ES}/"
    rel = span.removeprefix(prefix)
    if rel == span or not (docs / ES / rel).is_file() or not (docs / rel).is_file():
        return span
    return f"{docs.name}/{rel}"


def numbers(text: str) -> list[str]:
    """The numbers of the prose, headings, tables and link texts (not code, not link targets). Decimals take a
    point in both languages (the course's numbers are code-facing: 1.5, never 1,5); digits grouped by
    thousands with an English comma or a Spanish no-break or thin space read as ungrouped (51,200 = 51 200)."""
    found = [m for c in _inline_children(text) if c.type == "text" for m in NUMBER.findall(c.content)]
    return [re.sub(r"[,\u00a0\u202f]", "", m) if GROUPED.fullmatch(m) else m for m in found]


def links(text: str) -> list[str]:
    """The target of each link and image, as CommonMark reads them."""
    found: list[str] = []

    def walk(tokens) -> None:
        for tok in tokens:
            if tok.type == "link_open":
                found.append(str(tok.attrGet("href")))
            elif tok.type == "image":
                found.append(str(tok.attrGet("src")))
            walk(tok.children or [])

    walk(_MD.parse(text))
    return found


def link_target(href: str, page: Path, docs: Path) -> tuple[str, Path | None]:
    """(what the link names in English-tree terms, the file it resolves to). An external URL names itself. A
    relative target is a path from the repository root with docs/es/ read as docs/, so a twin's link to a
    twin and the English page's link to the English page name the same page; its #anchor on a Spanish page is
    read as the English anchor of the heading at the same position."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc:
        return href, None
    file = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
    root, es_root = docs.parent.resolve(), (docs / ES).resolve()
    spanish = file.is_relative_to(es_root)
    name = (f"{docs.name}/{file.relative_to(es_root).as_posix()}" if spanish
            else file.relative_to(root).as_posix() if file.is_relative_to(root) else str(file))
    anchor = parts.fragment
    if anchor and spanish:
        english = root / name
        theirs = slugs(file.read_text(encoding="utf-8")) if file.is_file() else []
        ours = slugs(english.read_text(encoding="utf-8")) if english.is_file() else []
        anchor = ours[theirs.index(anchor)] if anchor in theirs and len(ours) == len(theirs) else f"?{anchor}"
    return name + (f"#{anchor}" if anchor else ""), file


def _switch_line(text: str) -> str | None:
    lines = text.splitlines()
    title = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
    return None if title is None else next((line for line in lines[title + 1:] if line.strip()), None)


def _differ(en: list[str], es: list[str]) -> str:
    only_en, only_es = Counter(en) - Counter(es), Counter(es) - Counter(en)
    return f"English only {sorted(only_en.elements())}, Spanish only {sorted(only_es.elements())}"


def parity_problems(en: Path, es: Path, docs: Path) -> list[str]:
    """One line per difference between the English page ``en`` and its Spanish twin ``es`` (both under
    ``docs``, the twin under ``docs/es``), each naming the pair."""
    pair = f"{en.relative_to(docs.parent)} ↔ {es.relative_to(docs.parent)}"
    en_text, es_text = en.read_text(encoding="utf-8"), es.read_text(encoding="utf-8")
    problems = []

    def problem(what: str, detail: str) -> None:
        problems.append(PROBLEM.format(pair=pair, what=what, detail=detail))

    for page, text, want in ((en, en_text, SWITCH_EN.format(os.path.relpath(es, en.parent))),
                             (es, es_text, SWITCH_ES.format(os.path.relpath(en, es.parent)))):
        if (found := _switch_line(text)) != want.replace(os.sep, "/"):
            problem("language switch", f"the line under {page.name}'s title must be {want!r}, found {found!r}")
    en_heads, es_heads = headings(en_text), headings(es_text)
    if [lvl for lvl, _ in en_heads] != [lvl for lvl, _ in es_heads]:
        n = next((i for i, (a, b) in enumerate(zip(en_heads, es_heads, strict=False)) if a[0] != b[0]),
                 min(len(en_heads), len(es_heads)))
        en_h, es_h = ("#" * h[n][0] + " " + h[n][1] if n < len(h) else None for h in (en_heads, es_heads))
        problem("headings", f"{len(en_heads)} in English, {len(es_heads)} in Spanish; the first that differs is "
                            f"#{n + 1}: English {en_h!r}, Spanish {es_h!r}")
    (en_spans, en_blocks), (es_spans, es_blocks) = code(en_text), code(es_text)
    es_spans = [AS_ENGLISH.get(s) or english_name(s, docs) for s in es_spans]
    is_command = [[s for s in spans if COMMAND.match(s)]
                  + [line.strip() for b in blocks for line in b.splitlines() if COMMAND.match(line.strip())]
                  for spans, blocks in ((en_spans, en_blocks), (es_spans, es_blocks))]
    if Counter(is_command[0]) != Counter(is_command[1]):
        problem("commands", _differ(*is_command))
    # An inline marker's values are the command's output in the page's language (re-run under --lang).
    shown = [{v for _, values in inline_markers(t) for v in values} for t in (en_text, es_text)]
    others = [[s for s in spans if not COMMAND.match(s) and s not in values]
              for spans, values in zip((en_spans, es_spans), shown, strict=True)]
    if Counter(others[0]) != Counter(others[1]):
        problem("code spans", _differ(*others))
    for n, (a, b) in enumerate(zip(en_blocks, es_blocks, strict=False)):
        if a != b:
            line = next((x, y) for x, y in zip_longest(a.splitlines(), b.splitlines(), fillvalue="") if x != y)
            problem("code blocks", f"block #{n + 1} differs: English {line[0]!r}, Spanish {line[1]!r}")
    if len(en_blocks) != len(es_blocks):
        extra = [b.split("\n", 1)[0] for b in (en_blocks if len(en_blocks) > len(es_blocks) else es_blocks)
                 [min(len(en_blocks), len(es_blocks)):]]
        problem("code blocks", f"{len(en_blocks)} in English, {len(es_blocks)} in Spanish; unmatched {extra}")
    if Counter(numbers(en_text)) != Counter(numbers(es_text)):
        problem("numbers", _differ(numbers(en_text), numbers(es_text)))
    en_links = [link_target(h, en, docs)[0] for h in links(en_text)]
    es_links = []
    for href in links(es_text):
        name, file = link_target(href, es, docs)
        if file is not None and file == (docs / ES / GLOSSARY).resolve():
            continue
        if file is not None and not file.exists():
            problem("links", f"{href} resolves to no file")
        elif (file is not None and file != en.resolve() and file.is_relative_to(docs.resolve())
              and not file.is_relative_to((docs / ES).resolve())
              and (docs / ES / file.relative_to(docs.resolve())).is_file()):
            problem("links", f"{href} is an English page whose Spanish twin exists; link the twin")
        es_links.append(name)
    if Counter(en_links) != Counter(es_links):
        problem("links", _differ(en_links, es_links))
    return problems


def test_every_english_page_has_a_spanish_twin_or_is_listed_as_not_yet_translated():
    missing = [p for p in ENGLISH if p not in PAIRS and p not in NOT_YET_TRANSLATED]
    stale = sorted(p for p in NOT_YET_TRANSLATED if p in PAIRS or p not in ENGLISH)
    assert not missing, f"English pages without a twin under docs/{ES}/: {missing}; translate or list them"
    assert not stale, f"NOT_YET_TRANSLATED lists pages that have a twin or are no English page: {stale}"


def test_every_spanish_page_is_the_twin_of_an_english_page_or_the_glossary():
    spanish = sorted(p.relative_to(DOCS / ES).as_posix() for p in (DOCS / ES).rglob("*.md"))
    assert [p for p in spanish if p not in PAIRS and p != GLOSSARY] == []


@pytest.mark.parametrize("page", PAIRS)
def test_the_spanish_twin_matches_its_english_page(page):
    assert parity_problems(DOCS / page, DOCS / ES / page, DOCS) == []


@pytest.mark.parametrize("page", PAIRS)
def test_the_spanish_twin_reruns_its_numbers(page, capsys, monkeypatch):
    """Its doctests (as many as the English page's), and its console blocks and inline markers as the commands
    print them under --lang es."""
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    twin = DOCS / ES / page
    text = twin.read_text(encoding="utf-8")
    if ">>> " in text:
        attempted, failed = doctest_failures(twin)
        assert (attempted, failed) == (doctest_failures(DOCS / page)[0], 0), f"es/{page}: {failed} failed"
    try:
        assert console_mismatches(text, capsys, lang=ES) == [], f"es/{page}"
        assert inline_mismatches(text, capsys, lang=ES) == [], f"es/{page}"
    finally:
        i18n.use(i18n.DEFAULT)


def test_the_glossary_gives_the_english_form_of_the_field_s_standard_terms():
    """The terms the guide fixes (GUIDE.md, "Names use the field's standard terms") each have an entry."""
    text = (DOCS / ES / GLOSSARY).read_text(encoding="utf-8").lower()
    terms = ["rank", "world size", "process group", "backend", "all-reduce", "reduce-scatter", "all-gather",
             "algbw", "busbw", "column-parallel", "row-parallel", "micro-batch", "bubble", "zero stage",
             "sharding strategy", "shard"]
    assert [t for t in terms if f"**{t}" not in text] == []


def _write_pair(docs: Path, en: str, es: str) -> tuple[Path, Path]:
    for rel, text in (("theory/a.md", en), (f"{ES}/theory/a.md", es)):
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text, encoding="utf-8")
    return docs / "theory" / "a.md", docs / ES / "theory" / "a.md"


EN_PAGE = """# A title

English · [Español](../es/theory/a.md)

Run `distcheck bubble -p 4 -m 8`: 3 of 8 slots idle, 0.375 of the time ([b](b.md#the-part), [c](c.md),
[x](https://example.org/x)).

## The part

```python
>>> 1 + 1   # two
2

```

```bash
# first, the bubble
distcheck bubble -p 4 -m 8   # 3 of 8 idle
echo "a # b" 'c # d'
```
"""
ES_PAGE = """# Un título

[English](../../theory/a.md) · Español

Ejecuta `distcheck bubble -p 4 -m 8`: 3 de 8 huecos libres, 0.375 del tiempo ([b](b.md#la-parte),
[c](../../theory/c.md), [x](https://example.org/x); términos en el [glosario](../glosario.md)).

## La parte

```python
>>> 1 + 1   # dos
2

```

```bash
# primero, la burbuja
distcheck bubble -p 4 -m 8   # 3 de 8 libres
echo "a # b" 'c # d'
```
"""


@pytest.fixture
def docs(tmp_path) -> Path:
    """A docs tree whose b.md has a twin and c.md has none."""
    root = tmp_path / "docs"
    for rel, text in (("theory/b.md", "# B\n\n## The part\n"), (f"{ES}/theory/b.md", "# B\n\n## La parte\n"),
                      ("theory/c.md", "# C\n"), (f"{ES}/{GLOSSARY}", "# Glosario\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_a_faithful_twin_with_translated_prose_doctest_and_shell_comments_has_no_problem(docs):
    assert parity_problems(*_write_pair(docs, EN_PAGE, ES_PAGE), docs) == []


@pytest.mark.parametrize(("added", "what", "named"), [
    ("\n## Another part\n", "headings", "Another part"),
    ("\nThen `pytest -m local`.\n", "commands", "pytest -m local"),
    ("\nIt took 42 s.\n", "numbers", "42"),
    ("\nSee [the docs](https://example.org/docs).\n", "links", "https://example.org/docs"),
    ("\n```console\n$ distcheck bubble -p 2 -m 4\n```\n", "code blocks", "unmatched ['$ distcheck bubble -p 2 -m 4']"),
])
def test_a_heading_command_number_link_or_block_added_on_one_side_only_is_named(docs, added, what, named):
    pair = "docs/theory/a.md ↔ docs/es/theory/a.md"
    for en, es in ((EN_PAGE + added, ES_PAGE), (EN_PAGE, ES_PAGE + added)):
        problems = parity_problems(*_write_pair(docs, en, es), docs)
        assert [p for p in problems if p.startswith(f"{pair}: {what}: ") and named in p], problems


@pytest.mark.parametrize(("old", "new", "what"), [
    ("0.375 del", "0,375 del", "numbers"),                            # a decimal comma is another number
    ("b.md#la-parte", "../../theory/b.md#the-part", "links"),          # the twin exists: link it
    ("b.md#la-parte", "b.md#otra", "links"),                          # an anchor that is no heading
    (">>> 1 + 1   # dos", ">>> 1 + 2   # dos", "code blocks"),         # only the comment may change
    ("-m 8   # 3 de", "-m 9   # 3 de", "commands"),                   # a shell line's command, before its comment
    ("echo \"a # b\" 'c # d'", "echo \"a # c\" 'c # d'", "code blocks"),  # a quoted # is no comment
    ("'c # d'", "'c # e'", "code blocks"),
    ("[English](../../theory/a.md) · Español", "Español", "language switch"),
    ("Ejecuta `distcheck", "Lee `docs/es/theory/c.md`. Ejecuta `distcheck", "code spans"),  # c.md has no twin
])
def test_a_twin_that_drifts_inside_its_lines_is_named(docs, old, new, what):
    problems = parity_problems(*_write_pair(docs, EN_PAGE, ES_PAGE.replace(old, new)), docs)
    assert [p for p in problems if f": {what}: " in p], problems


def test_a_code_span_may_name_the_spanish_twin_of_the_page_the_english_one_names(docs):
    en = EN_PAGE.replace("Run `distcheck", "Read `docs/theory/b.md`. Run `distcheck")
    es = ES_PAGE.replace("Ejecuta `distcheck", "Lee `docs/es/theory/b.md`. Ejecuta `distcheck")
    assert parity_problems(*_write_pair(docs, en, es), docs) == []
    assert parity_problems(*_write_pair(docs, en, es.replace("docs/es/theory/b.md", "docs/theory/b.md")), docs) == []


FIGURE = '```mermaid\nflowchart TD\n  a["rank 0: heads 1 … a/2"] -- "f: identity forward" --> b(["the output"])\n```\n'
NOTE = '```markdown\nRow-parallel sums them\n`[cite: torch torch/x.py::f "y = g(x)"]`.\n```\n'


def test_a_twin_may_translate_a_figure_s_labels_and_a_note_example_s_prose_but_not_their_code(docs):
    """A ```mermaid block agrees on all but its labels' words; a ```markdown block (a note) on its code spans."""
    es_figure = FIGURE.replace("heads", "cabezas").replace("identity", "identidad").replace("the output", "la salida")
    es_note = NOTE.replace("Row-parallel sums them", "Una capa row-parallel las suma")
    en, es = EN_PAGE + FIGURE + NOTE, ES_PAGE + es_figure + es_note
    assert parity_problems(*_write_pair(docs, en, es), docs) == []
    for old, new in (("--> b", "--> c"), ('(["la', '["la'), ("rank 0", "rank 1"), ("a/2", "a/3"), ('= g(x)', '= f(x)')):
        problems = parity_problems(*_write_pair(docs, en, es.replace(old, new)), docs)
        assert [p for p in problems if ": code blocks: " in p], (old, problems)


def test_each_quoted_output_is_on_an_english_page_and_as_the_kit_prints_it_under_es_on_its_twin():
    spans = {p: [code((DOCS / rel).read_text(encoding="utf-8"))[0] for rel in (p, f"{ES}/{p}")] for p in PAIRS}
    for en, es in QUOTED:
        assert en != es
        assert [p for p, (on_en, _) in spans.items() if en in on_en] == [
            p for p, (_, on_es) in spans.items() if es in on_es] != [], en


def test_thousands_grouped_either_way_read_as_the_same_number():
    assert numbers("51,200 tokens, 0.5 s") == numbers("51\u202f200 tókenes, 0.5 s") == ["51200", "0.5"]


def test_the_budget_lab_s_shell_comments_are_spanish_and_its_commands_the_english_ones():
    page = "lab/00-cloud-budget-and-tooling.md"
    en_blocks, es_blocks = (code((DOCS / rel).read_text(encoding="utf-8"))[1] for rel in (page, f"{ES}/{page}"))
    (es_block,) = [t.content for t in _MD.parse((DOCS / ES / page).read_text(encoding="utf-8"))
                   if t.type == "fence" and t.info.strip() == "bash"]
    comments = [line.split("   # ", 1)[1] for line in es_block.splitlines()]
    assert comments == ["primero, el precio del peor caso de la comprobación de TP",
                        "todo el camino de pago por $0 (laboratorio 02)",
                        "solo del entorno, nunca de un fichero del repositorio",
                        "o DISTCHECK_MAX_USD=3, o distcheck_max_usd = 3 en el ini",
                        "lo que se ha gastado y lo que queda"]
    assert _shell_code(es_block) in en_blocks and en_blocks == es_blocks
