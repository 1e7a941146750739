"""Whether an evidence file is a copy of the kit's material: a reference solution, a course page or a right
diagram of the kit's fixtures (their fingerprints: :func:`pytest_distcheck.dod.provenance.shipped_fingerprints`).

A text is a copy when it *contains* the kit's prose (:func:`copied_from`): compared after
:func:`pytest_distcheck.textnorm.comparable` (look-alike letters made one), in 5-word windows that match with one
word dropped or changed in each, so filler added around a copy, look-alike letters or every 4th word dropped do not
hide it. A Mermaid block is a copy when it draws what a reference draws. Design record: docs/design/gate.md.
"""

from __future__ import annotations

import base64
import functools
import sys
from array import array
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_distcheck import textnorm
from pytest_distcheck.citations.syntax import CITATION
from pytest_distcheck.diagram.markdown import DRAWING_ASIDE, drawing_key, mermaid_blocks, without_mermaid
from pytest_distcheck.dod.provenance import CONFIRMED, SOLUTIONS, digest, json_digest, shipped_fingerprints
from pytest_distcheck.i18n import N_, _

# A Mermaid drawing shorter than this may well be drawn the same way twice.
MIN_DRAWING = 80
# A copy: a text holding this share of one source's windows (a source of at least MIN_WINDOWS), or this many
# windows of the kit's texts together (pieced from several).
CONTAINED, MIN_WINDOWS, PIECED = 0.5, 20, 200
COPY_OF = N_("it holds {pct:.0%} of {what} {src} ({n} of its {total} 5-word runs, one word in each may differ)")
PIECED_FROM = N_("{n} of its 5-word runs are the kit's ({parts})")
LINKS_TO = N_("it links to the reference solution {ref}")
IS_REFERENCE = N_("it is the reference solution {ref}, {how}")  # how: BYTE_FOR_BYTE or PARSED (the same JSON)
IS_FIXTURE = N_("it is the kit's own synthetic fixture {ref}, byte for byte")
BYTE_FOR_BYTE, PARSED = N_("byte for byte"), N_("parsed")
PIECE = N_("{n} of {what} {src}")
SAME_DRAWING = N_("its Mermaid diagram is that of {whose} {ref} ({aside})")
REFERENCE, KIT_FIXTURE = N_("the reference solution"), N_("the kit's own fixture")  # whose drawing
COURSE_PAGE = N_("the course page")


def drawings(text: str) -> list[str]:
    """The drawing of each Mermaid block of a Markdown text (``drawing_key`` of its :func:`textnorm.comparable`
    source: comments, spacing, look-alike letters and case aside) at least :data:`MIN_DRAWING` long."""
    keys = (drawing_key(b.source) for b in mermaid_blocks(text))
    return [k for k in keys if len(k) >= MIN_DRAWING]


def _prose_words(text: str) -> list[str]:
    """The comparable words of a Markdown text but its Mermaid blocks and its citations (two readers citing one
    place quote the same installed source)."""
    return textnorm.words(CITATION.sub(" ", without_mermaid(text)))


def windows(text: str) -> list[tuple[int, ...]]:
    """:func:`textnorm.windows` of a Markdown text's prose (:func:`_prose_words`)."""
    return textnorm.windows(_prose_words(text))


@functools.lru_cache(maxsize=64)
def _unpack(text: str) -> tuple[tuple[int, ...], ...]:
    data = array("I")
    data.frombytes(base64.b64decode(text))
    if sys.byteorder == "big":
        data.byteswap()
    return tuple(tuple(data[i:i + textnorm.WINDOW]) for i in range(0, len(data), textnorm.WINDOW))


def _in_place(path: Path, ref: str) -> bool:
    """Whether ``path`` is the kit's file ``ref`` where it lives (the reference workspace reads it there), as
    named, not resolved: a learner's path linking into ``solutions/`` is not the reference in place."""
    return Path(path).absolute().as_posix().endswith("/" + ref)


def _what(src: str) -> str:
    return _(REFERENCE if src.startswith(SOLUTIONS + "/") else COURSE_PAGE)


def contained(text: str, sources: Mapping[str, str]) -> tuple[dict[str, tuple[int, int]], int]:
    """How much of each source (``{path: packed windows}``) ``text`` holds: ``{path: (windows held, windows)}``
    for each source it holds any of, and how many of the text's own windows are some source's."""
    mine, held, kit = windows(text), {}, []
    for src, packed in sources.items():
        wins = _unpack(packed)
        n = textnorm.held(mine, wins)
        if n:
            held[src] = (n, len(wins))
            kit += wins
    return held, textnorm.held(kit, mine)


def _copied_text(path: Path, text: str, sources: Mapping[str, str]) -> str | None:
    if any(_in_place(path, s) for s in sources):
        return None  # a course page or reference where it lives: the kit's own, sharing text with its others
    held, kit = contained(text, sources)
    best = max(held, key=lambda s: held[s][0] / held[s][1], default=None)
    if best and held[best][1] >= MIN_WINDOWS and held[best][0] >= CONTAINED * held[best][1]:
        n, total = held[best]
        return _(COPY_OF).format(pct=n / total, what=_what(best), src=best, n=n, total=total)
    if kit >= PIECED:
        parts = ", ".join(_(PIECE).format(n=n, what=_what(s), src=s)
                          for s, (n, _total) in sorted(held.items(), key=lambda kv: -kv[1][0])[:3])
        return _(PIECED_FROM).format(n=kit, parts=parts)
    return None


def copied_from(path: Path) -> str | None:
    """Why the evidence file ``path`` is a copy of the kit's material; ``None`` when it is not (or it is that
    file itself, in its place). A copy: a link to a reference file, the same bytes or parsed JSON, a JSON result
    of the kit's synthetic fixtures byte for byte, a text holding the kit's prose (:data:`COPY_OF`,
    :data:`PIECED_FROM`), or a Mermaid block that draws what a reference page or a right diagram of the kit's
    fixtures draws (:func:`drawings`)."""
    path = Path(path)
    if not path.is_file():
        return None
    kit = shipped_fingerprints()
    fp = kit[SOLUTIONS]
    data = path.read_bytes()
    same = fp["files"].get(digest(data)) or (fp["files"].get(json_digest(data) or "") if path.suffix == ".json"
                                               else None)
    if same and not _in_place(path, same):
        if path.resolve().as_posix().endswith("/" + same):
            return _(LINKS_TO).format(ref=same)
        return _(IS_REFERENCE).format(ref=same, how=_(BYTE_FOR_BYTE if digest(data) in fp["files"] else PARSED))
    # A result file of the kit's fixtures (a synthetic GPU result). Not its ledgers: the kit's own tests give them
    # to the spend check as input; a fixture's row is never a GPU run's (provenance.fixture_rows, the TP check).
    fixture = kit["files"].get(digest(data)) if path.suffix == ".json" else None
    if fixture and not _in_place(path, fixture):
        return _(IS_FIXTURE).format(ref=fixture)
    if path.suffix != ".md":
        return None
    text = data.decode("utf-8", errors="replace")
    why = _copied_text(path, text, kit["shingles"]["sources"])
    if why:
        return why
    for key in drawings(text):
        drawn = digest(key.encode())
        for ref, whose in ((fp["drawings"].get(drawn), REFERENCE), (kit["drawings"].get(drawn), KIT_FIXTURE)):
            if ref and not _in_place(path, ref):
                return _(SAME_DRAWING).format(whose=_(whose), ref=ref, aside=_(DRAWING_ASIDE))
    return None


def evidence_entry(paths: Iterable[Path], root: Path, flags: Iterable[str] = ()) -> dict[str, Any]:
    """What the ``distcheck_evidence`` fixture records for a check: each existing file (path relative to
    ``root``, sha256, and ``copied``: :func:`copied_from` or ``None``) and the check's ``flags``, plus
    ``copied`` when a file is a copy (and then not ``confirmed``)."""
    files = []
    for path in map(Path, paths):
        if not path.is_file():
            continue
        rel = str(path)
        for named in (path.absolute(), path.resolve()):  # the learner's name for it first, not a link's target
            try:
                rel = named.relative_to(Path(root).resolve()).as_posix()
                break
            except ValueError:
                continue
        files.append({"path": rel, "sha256": digest(path.read_bytes()), "copied": copied_from(path)})
    flags = list(flags)
    if any(f["copied"] for f in files):  # what the check established of a copy is not the learner's
        flags = [f for f in flags if f != CONFIRMED] + ["copied"]
    return {"files": files, "flags": list(dict.fromkeys(flags))}
