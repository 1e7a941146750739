"""Near-copies of the reference notes and of the course pages are copies (issue 13, red-team attempts 05 and
11b): a few words added, dropped or changed per paragraph, or code fences dropped, do not make a note the
learner's. A note of one's own that quotes a sentence or two, the note skeleton, the files a fresh workspace
starts with and the reference workspace in place stay not copied."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_distcheck.dod.provenance import copied_from, paragraphs

REPO = Path(__file__).resolve().parents[1]
NOTES = ("megatron", "fsdp")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _reference(name: str) -> str:
    return (REPO / "solutions" / "docs" / "notes" / f"{name}.md").read_text(encoding="utf-8")


def _indeed(text: str) -> str:
    """Red-team attempt 05: " Indeed." appended to every paragraph that is not a heading, rule, fence or table."""
    parts = re.split(r"(\n[ \t]*\n)", text)
    prose = [p.strip() and p.strip()[0] not in "#`|" and not p.strip().startswith("---") for p in parts]
    return "".join(p.rstrip() + " Indeed." if keep else p for p, keep in zip(parts, prose, strict=True))


def _edited(text: str) -> str:
    """A few words per paragraph changed, dropped and added: every 15th word replaced, every 20th dropped, a
    phrase inserted after the first sentence."""
    out = []
    for block in re.split(r"(\n[ \t]*\n)", text):
        words = block.split(" ")
        if len(words) < 12 or block.lstrip().startswith(("#", "`", "|", "-")):
            out.append(block)
            continue
        words = ["really" if i % 15 == 7 else w for i, w in enumerate(words) if i % 20 != 11]
        words.insert(6, "as I read it,")
        out.append(" ".join(words))
    return "".join(out)


@pytest.mark.parametrize("name", NOTES)
@pytest.mark.parametrize("edit", [_indeed, _edited], ids=["word-appended", "words-changed"])
def test_a_reference_note_with_a_few_words_edited_per_paragraph_is_copied(tmp_path, name, edit):
    text = edit(_reference(name))
    assert text != _reference(name)
    note = _write(tmp_path / "docs" / "notes" / f"{name}.md", text)
    assert f"paragraphs are those of the reference solution solutions/docs/notes/{name}.md" in (copied_from(note) or "")


def _from_course_pages(pkg: str, ver: str) -> str:
    """Red-team attempt 11b: every paragraph of the theory pages and lab 03 that cites ``pkg``, its code-fence
    lines dropped and, when short, words appended."""
    pages = sorted((REPO / "docs" / "theory").glob("*.md")) + [REPO / "docs" / "lab" / "03-megatron-fsdp-reading.md"]
    paras = [p for page in pages for p in re.split(r"\n[ \t]*\n", page.read_text(encoding="utf-8"))]
    mine = [re.sub(r"(?m)^\s*```.*\n?", "", p) + (" in every single case here." if len(p.split()) < 30 else "")
            for p in paras if f"[cite: {pkg} " in p and "PACKAGE PATH" not in p]
    assert len(mine) >= 5
    return f"---\nchecked-against: {ver}\n---\n\n# notes\n\n" + "\n\n".join(mine) + "\n"


@pytest.mark.parametrize(("pkg", "ver"), [("megatron-core", "megatron-core 0.16.1"), ("torch", "torch 2.13.0")])
def test_notes_made_of_the_course_pages_are_copied_and_name_the_page(tmp_path, pkg, ver):
    note = _write(tmp_path / "docs" / "notes" / "n.md", _from_course_pages(pkg, ver))
    why = copied_from(note) or ""
    page = r"the course page docs/(theory|lab)/[\w.-]+\.md"
    assert re.search(rf"\d+ of its \d+ paragraphs are those of (the kit: \d+ of )?{page}", why), why


def test_a_course_page_copied_whole_into_a_note_is_copied(tmp_path):
    page = (REPO / "docs" / "theory" / "02-parallelism-flavors.md").read_text(encoding="utf-8")
    note = _write(tmp_path / "docs" / "notes" / "megatron.md", page.replace("```", ""))
    assert copied_from(note) == ("{} of its {} paragraphs are those of the course page docs/theory/02-parallelism-"
                                 "flavors.md".format(*[len(paragraphs(page))] * 2))


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
    """The ``n``-th paragraph of ``text`` (at least 80 characters) holding a sentence of 12 words or more:
    that sentence."""
    found = [s for para in paragraphs(text) for s in re.split(r"(?<=\.) ", para)
             if len(s.split()) >= 12 and "[cite" not in s and "`" not in s]
    return found[n]


@pytest.mark.parametrize("source", ["solutions/docs/notes/fsdp.md", "docs/theory/01-data-parallel-and-zero.md",
                                    "docs/lab/03-megatron-fsdp-reading.md"])
def test_an_own_note_quoting_a_sentence_or_two_is_not_copied(tmp_path, source):
    text = (REPO / source).read_text(encoding="utf-8")
    quoted = [OWN[0] + f' As the source puts it: "{_sentence(text, 0)}"',
              f'"{_sentence(text, 1)}" {OWN[1]}'] + OWN[2:]
    note = _write(tmp_path / "docs" / "notes" / "fsdp.md", "# My notes\n\n" + "\n\n".join(quoted))
    assert copied_from(note) is None
    # the same quotes as paragraphs of their own: 2 of 8, not more than half
    note.write_text("\n\n".join(OWN + [_sentence(text, 0) + " " + _sentence(text, 1), _sentence(text, 2)]))
    assert copied_from(note) is None


@pytest.mark.parametrize("template", ["docs/notes/TEMPLATE.md", "docs/es/notes/TEMPLATE.md"])
def test_the_note_skeleton_filled_in_is_not_copied(tmp_path, template):
    """The English skeleton and its Spanish twin are both a learner's starting file for docs/notes/*.md."""
    skeleton = (REPO / template).read_text(encoding="utf-8")
    note = _write(tmp_path / "docs" / "notes" / "megatron.md", skeleton)
    assert copied_from(note) is None
    note.write_text(skeleton + "\n\n" + "\n\n".join(OWN[:2]))
    assert copied_from(note) is None


def test_a_fresh_workspace_and_the_reference_workspace_in_place_are_not_copied(tmp_path):
    """Every Markdown file ``distcheck init`` writes (course pages in place, the skeleton, the empty ledger) and
    every file of solutions/ where it lives; the skeleton and ledger moved elsewhere are not copies either."""
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
    """No one source holds half of the note, but the kit's texts together do: 2 paragraphs of each reference note
    and 2 of a theory page, a word appended to each, with 2 of one's own."""
    parts = [paragraphs(_reference(n))[5:7] for n in NOTES]
    parts.append(paragraphs((REPO / "docs" / "theory" / "03-collectives-and-cost.md").read_text(encoding="utf-8"))[2:4])
    taken = [p + " Indeed." for part in parts for p in part]
    note = _write(tmp_path / "docs" / "notes" / "fsdp.md", "\n\n".join(OWN[:2] + taken))
    assert copied_from(note) == ("6 of its 8 paragraphs are those of the kit: 2 of the course page "
                                 "docs/theory/03-collectives-and-cost.md, 2 of the reference solution "
                                 "solutions/docs/notes/fsdp.md, 2 of the reference solution "
                                 "solutions/docs/notes/megatron.md")
    note.write_text("\n\n".join(OWN + taken[:4]))  # 4 of 10: not more than half
    assert copied_from(note) is None


def test_a_note_made_of_a_spanish_page_is_a_copy_of_it_and_its_code_of_the_english_page(tmp_path):
    """A Spanish twin (docs/es/) is a course page of its own: its prose is its fingerprint, while the code blocks
    it shares with its English page stay the English page's."""
    page = REPO / "docs" / "es" / "theory" / "03-collectives-and-cost.md"
    prose = [p for p in paragraphs(page.read_text(encoding="utf-8")) if not p.startswith(("#", "`", "|"))][1:5]
    note = _write(tmp_path / "docs" / "notes" / "fsdp.md", "\n\n".join(OWN[:2] + [p + " Claro." for p in prose]))
    assert copied_from(note) == ("4 of its 6 paragraphs are those of the course page "
                                 "docs/es/theory/03-collectives-and-cost.md")
    code = paragraphs((REPO / "docs" / "theory" / "03-collectives-and-cost.md").read_text(encoding="utf-8"))[2]
    note.write_text("\n\n".join(OWN[:2] + [p + " Claro." for p in prose[:2]] + [code]))
    assert "1 of the course page docs/theory/03-collectives-and-cost.md" in (copied_from(note) or "")
