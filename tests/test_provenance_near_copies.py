"""The kit's prose inside a learner's text is a copy, whatever is added around it (issue 26, point 3): the
reference notes diluted with filler, in look-alike letters, with every 4th word dropped or a word appended to
each paragraph; a note pieced from several kit texts; the reference diagram in look-alike letters or reflowed.
A note of one's own that quotes a sentence or two, the note skeleton, a fresh workspace and the reference
workspace in place stay not copied."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_distcheck import copies, textnorm
from pytest_distcheck.copies import KIT_FIXTURE, LINKS_TO, REFERENCE, SAME_DRAWING, copied_from
from pytest_distcheck.diagram.markdown import DRAWING_ASIDE
from pytest_distcheck.dod import provenance

REPO = Path(__file__).resolve().parents[1]
NOTES = ("megatron", "fsdp")
CYRILLIC = str.maketrans("aeopcxyABCEHKMOPTX", "аеорсхуАВСЕНКМОРТХ")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _reference(name: str) -> str:
    return (REPO / "solutions" / "docs" / "notes" / f"{name}.md").read_text(encoding="utf-8")


def _paragraphs(text: str) -> list[str]:
    return [b for b in re.split(r"\n[ \t]*\n", text) if len(b) >= 80 and not b.lstrip().startswith(("#", "`", "|"))]


def _indeed(text: str) -> str:
    return re.sub(r"([^\n])(\n[ \t]*\n|\Z)", r"\1 Indeed.\2", text)


def _every_4th_dropped(text: str) -> str:
    return " ".join(w for i, w in enumerate(text.split(" ")) if i % 4 != 3)


def _diluted(text: str) -> str:
    filler = "My own words on a subject of my own, written here so that the note grows longer and longer."
    return text + "\n\n" + "\n\n".join(f"{filler} Paragraph {i}." for i in range(300))


EDITS = {"word-appended": _indeed, "every-4th-word-dropped": _every_4th_dropped, "diluted-with-filler": _diluted,
         "look-alike-letters": lambda t: t.translate(CYRILLIC)}


@pytest.mark.parametrize("name", NOTES)
@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_a_reference_note_edited_or_diluted_is_copied(tmp_path, name, edit):
    text = edit(_reference(name))
    assert text != _reference(name)
    note = _write(tmp_path / "docs" / "notes" / f"{name}.md", text)
    why = copied_from(note) or ""
    assert why.startswith("it holds ") and f"of the reference solution solutions/docs/notes/{name}.md (" in why, why


def test_look_alike_letters_have_one_skeleton():
    assert textnorm.skeleton("раураl") == textnorm.skeleton("paypal")
    assert textnorm.words("Тhе | ＭОDEL") == textnorm.words("the model")


def test_a_course_page_copied_whole_into_a_note_is_copied(tmp_path):
    page = (REPO / "docs" / "theory" / "02-parallelism-flavors.md").read_text(encoding="utf-8")
    note = _write(tmp_path / "docs" / "notes" / "megatron.md", page.replace("```", ""))
    assert (copied_from(note) or "").startswith("it holds 100% of the course page docs/theory/02-parallelism-flavors")


OWN = [
    "I read how the tensor-parallel linear layers split their weights: the column-parallel layer keeps a slice "
    "of the output features on each rank, so its forward needs no communication until the row-parallel layer "
    "that follows sums the partial results with one all-reduce.",
    "My own reading of the sequence-parallel option: the activations between the blocks are split along the "
    "sequence dimension, which trades the all-reduce for a reduce-scatter and an all-gather of the same volume "
    "but saves activation memory on every rank.",
    "In FSDP2 I followed fully_shard down to the parameter class and saw each parameter become a DTensor "
    "sharded on its first dimension; I had expected a flat buffer per module, as in the first version.",
    "The prefetching knobs surprised me: forward prefetch is explicit and backward prefetch defaults to the "
    "next module, which costs memory for the extra all-gathered parameters but hides part of the latency.",
    "Mixed precision is a policy object in both versions; the reduction dtype can differ from the parameter "
    "dtype, and I would keep reductions in float32 for a small world size where the extra bytes are cheap.",
    "What I still have to check is how the optimizer state follows the sharding when a checkpoint is saved "
    "with one world size and loaded with another; the docs point at distributed checkpointing for that.",
]


def _sentence(text: str, n: int) -> str:
    found = [s for para in _paragraphs(text) for s in re.split(r"(?<=\.) ", para)
             if len(s.split()) >= 12 and "[cite" not in s and "`" not in s]
    return found[n]


@pytest.mark.parametrize("source", ["solutions/docs/notes/fsdp.md", "docs/theory/01-data-parallel-and-zero.md",
                                    "docs/lab/03-megatron-fsdp-reading.md"])
def test_an_own_note_quoting_a_sentence_or_two_is_not_copied(tmp_path, source):
    text = (REPO / source).read_text(encoding="utf-8")
    quoted = [OWN[0] + f' As the source puts it: "{_sentence(text, 0)}"', f'"{_sentence(text, 1)}" {OWN[1]}'] + OWN[2:]
    note = _write(tmp_path / "docs" / "notes" / "fsdp.md", "# My notes\n\n" + "\n\n".join(quoted))
    assert copied_from(note) is None


@pytest.mark.parametrize("template", ["docs/notes/TEMPLATE.md", "docs/es/notes/TEMPLATE.md"])
def test_the_note_skeleton_filled_in_is_not_copied(tmp_path, template):
    """The English skeleton and its Spanish twin are both a learner's starting file for docs/notes/*.md."""
    skeleton = (REPO / template).read_text(encoding="utf-8")
    note = _write(tmp_path / "docs" / "notes" / "megatron.md", skeleton)
    assert copied_from(note) is None
    note.write_text(skeleton + "\n\n" + "\n\n".join(OWN[:2]))
    assert copied_from(note) is None


def test_the_kits_own_docs_written_apart_from_the_sources_are_not_copies():
    """Prose by the course's authors that is not a source (the CI pages, the benchmarks' README) holds far less
    of the kit's texts than a copy: calibration of :data:`copies.PIECED` and :data:`copies.CONTAINED`. PIECED is a
    count for a note's length (the longest reference note is about 2000 words); a page several times as long holds
    as many incidental phrases ("in the kit's repository") per note's length of it, so it is scaled."""
    sources = provenance.shipped_fingerprints()["shingles"]["sources"]
    note_words = 2000
    for rel in ("docs/ci/github-actions.md", "benchmarks/README.md", "fixtures/diagrams/README.md",
                "docs/ci/known-limitations.md"):
        text = (REPO / rel).read_text(encoding="utf-8")
        held, kit = copies.contained(text, sources)
        per_note = kit / max(1.0, len(text.split()) / note_words)
        assert per_note < copies.PIECED / 2, (rel, kit, per_note)
        assert all(n < copies.CONTAINED * total / 4 for n, total in held.values()), rel


def test_a_fresh_workspace_and_the_reference_workspace_in_place_are_not_copied(tmp_path):
    from pytest_distcheck.workspace_init import init_workspace

    assert init_workspace(tmp_path).conflicts == []
    started = sorted(tmp_path.rglob("*.md"))
    assert any("docs/theory/" in p.as_posix() for p in started)
    assert {p.relative_to(tmp_path).as_posix(): copied_from(p) for p in started} == {
        p.relative_to(tmp_path).as_posix(): None for p in started}
    for rel in ("docs/notes/TEMPLATE.md", "docs/es/notes/TEMPLATE.md", "experiments/35-cloud-budget.md"):
        moved = tmp_path / "elsewhere" / Path(rel).name
        moved.parent.mkdir(exist_ok=True)
        shutil.copy(tmp_path / rel, moved)
        assert copied_from(moved) is None, rel
    for path in sorted((REPO / "solutions").rglob("*")):
        if path.is_file():
            assert copied_from(path) is None, path


def test_a_note_pieced_from_several_kit_texts_is_copied_naming_each(tmp_path):
    """No one source holds half of the note, but the kit's texts together are much of it: 2 paragraphs of each
    reference note and 2 of a theory page, a word appended to each, among one's own and filler."""
    parts = [_paragraphs(_reference(n))[5:7] for n in NOTES]
    parts.append(_paragraphs((REPO / "docs" / "theory" / "03-collectives-and-cost.md").read_text())[2:4])
    taken = [p + " Indeed." for part in parts for p in part]
    note = _write(tmp_path / "docs" / "notes" / "fsdp.md", _diluted("\n\n".join(OWN[:2] + taken)))
    why = copied_from(note) or ""
    assert re.fullmatch(r"\d+ of its 5-word runs are the kit's \(\d+ of the \w+ \w+ [\w/.-]+, .*\)", why), why
    for src in ("solutions/docs/notes/fsdp.md", "solutions/docs/notes/megatron.md"):
        assert src in why
    note.write_text("\n\n".join(OWN + taken[:1]))  # one paragraph quoted: not a copy
    assert copied_from(note) is None


def test_a_workspace_path_linking_into_its_solutions_folder_is_a_copy(tmp_path):
    ref = tmp_path / "solutions" / "docs" / "notes" / "fsdp.md"
    ref.parent.mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "docs" / "notes" / "fsdp.md", ref)
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "notes" / "fsdp.md").symlink_to("../../solutions/docs/notes/fsdp.md")
    assert copied_from(tmp_path / "docs" / "notes" / "fsdp.md") == LINKS_TO.format(ref="solutions/docs/notes/fsdp.md")
    assert copied_from(ref) is None
    (entry,) = copies.evidence_entry([tmp_path / "docs" / "notes" / "fsdp.md"], tmp_path)["files"]
    assert entry["path"] == "docs/notes/fsdp.md"
    assert entry["copied"] == LINKS_TO.format(ref="solutions/docs/notes/fsdp.md")


def _mermaid(text: str) -> str:
    return re.search(r"```mermaid\n.*?\n```", text, re.S).group(0)


@pytest.mark.parametrize("edit", [lambda m: re.sub(r"\n[ \t]*\n", "\n", m), lambda m: m.translate(CYRILLIC)],
                         ids=["reflowed", "look-alike-letters"])
def test_the_reference_diagram_reflowed_or_in_look_alike_letters_is_a_copy(tmp_path, edit):
    block = _mermaid((REPO / "solutions" / "docs" / "tp-sharding.md").read_text())
    mine = edit(block).replace("```" + "mermaid".translate(CYRILLIC), "```mermaid")
    page = _write(tmp_path / "docs" / "tp-sharding.md", "# My page\n\n" + mine + "\n")
    assert copied_from(page) == SAME_DRAWING.format(whose=REFERENCE, ref="solutions/docs/tp-sharding.md",
                                                    aside=DRAWING_ASIDE)


def test_a_right_page_of_the_kits_diagram_fixtures_is_a_copy_and_a_wrong_one_is_left_to_the_check(tmp_path):
    page = _write(tmp_path / "docs" / "tp-sharding.md",
                  (REPO / "fixtures" / "diagrams" / "ok-gpu-subgraph-edges.md").read_text() + "\nMine.\n")
    assert copied_from(page) == SAME_DRAWING.format(whose=KIT_FIXTURE, ref="fixtures/diagrams/ok-gpu-subgraph-edges.md",
                                                    aside=DRAWING_ASIDE)
    page.write_text((REPO / "fixtures" / "diagrams" / "missing-all-reduce.md").read_text())
    assert copied_from(page) is None
    assert copied_from(REPO / "fixtures" / "diagrams" / "ok-gpu-subgraph-edges.md") is None  # in place


def test_a_learners_own_drawing_is_not_a_copy(tmp_path):
    from diagram_support import right_diagram

    plan = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}
    page = _write(tmp_path / "docs" / "tp-sharding.md", f"# Mine\n\n```mermaid\n{right_diagram(plan, 2)}```\n"
                  "\nEach rank holds half of the heads and half of the MLP's hidden units.\n")
    assert copied_from(page) is None


def test_the_reference_diagram_with_its_ids_renamed_is_a_copy(tmp_path):
    """Issue 27: the reference diagram, its node and subgraph ids renamed and re-spaced, under prose of one's own."""
    block = _mermaid((REPO / "solutions" / "docs" / "tp-sharding.md").read_text())
    renamed = block
    for old, new in (("qkv0", "a0"), ("sdpa1", "b1"), ("attn_rank0", "box0"), ("ar2", "sum2")):
        renamed = re.sub(rf"\b{old}\b(?![^\[]*\])", new, renamed)
    assert renamed != block
    page = _write(tmp_path / "docs" / "tp-sharding.md",
                  "# My block\n\n" + renamed.replace("\n  ", "\n    ") + "\n\nWritten by me.\n")
    assert copied_from(page) == SAME_DRAWING.format(whose=REFERENCE, ref="solutions/docs/tp-sharding.md",
                                                    aside=DRAWING_ASIDE)


def test_a_spanish_page_copied_into_a_note_is_a_copy_of_that_page(tmp_path):
    """A Spanish twin (docs/es/) is a course page of its own: its prose is its fingerprint (the code it shares with
    its English page stays the English page's)."""
    page = (REPO / "docs" / "es" / "theory" / "03-collectives-and-cost.md").read_text(encoding="utf-8")
    note = _write(tmp_path / "docs" / "notes" / "fsdp.md", page.replace("```", ""))
    why = copied_from(note) or ""
    assert why.startswith("it holds 100% of the course page docs/es/theory/03-collectives-and-cost.md"), why


def test_why_a_file_is_a_copy_is_said_in_the_language_in_use(tmp_path):
    from pytest_distcheck import i18n
    from pytest_distcheck.copies import BYTE_FOR_BYTE, IS_REFERENCE
    from pytest_distcheck.i18n import _

    note = tmp_path / "docs" / "notes" / "fsdp.md"
    note.parent.mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "docs" / "notes" / "fsdp.md", note)
    i18n.use("es")
    why = copied_from(note)
    assert why == _(IS_REFERENCE).format(ref="solutions/docs/notes/fsdp.md", how=_(BYTE_FOR_BYTE))
    assert why.startswith("es la solución de referencia") and why.endswith("byte a byte")
