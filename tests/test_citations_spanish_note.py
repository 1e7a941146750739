"""A note written in Spanish from docs/es/notes/TEMPLATE.md counts as one written in English from the English
template (issue 31): headings are never statements, so their language does not matter, and an everyday Spanish
word that is also an English placeholder ("todo el estado", all the state) is no placeholder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_distcheck.citations.decision import decision_problem
from pytest_distcheck.citations.verifier import Status, verify_note

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "fixtures" / "notes" / "site"
CITE = "`[cite: toyparallel toyparallel/layers.py::{}]`"
# Five decisions in Spanish, each under a Spanish heading, citing the toy package of fixtures/notes/site.
DECISIONS = [
    ("Las capas por columnas no se comunican en el forward",
     "Cada rank guarda su porción de columnas de la matriz de pesos, así que el forward no necesita ninguna "
     "colectiva hasta la capa por filas",
     'ColumnLinear.forward "no communication in forward: each rank owns a column slice"'),
    ("Un solo all-reduce al final de la capa por filas",
     "La capa por filas suma las salidas parciales de todos los ranks con un único all-reduce, y todo el "
     "coste de comunicación de la pareja queda ahí", 'RowLinear.forward "one all-reduce sums the partial products"'),
    ("Las divisiones tienen que ser exactas",
     "El reparto exige que el tamaño sea divisible por el world size, de modo que ningún rank recibe una "
     "porción distinta", 'divide "the size must divide by the world size"'),
    ("El tamaño por rank se calcula una vez",
     "La capa por columnas guarda su número de salidas por rank al construirse y no lo vuelve a calcular "
     "en cada paso", 'ColumnLinear.__init__ "self.out_per_rank = divide(out_features, world_size)"'),
    ("Primero columnas, después filas",
     "Una pareja se construye siempre con la capa por columnas delante y la de filas detrás, para que las "
     "dos colectivas encajen", 'make_pair.build_inner "return ColumnLinear(8, 8, world_size), RowLinear()"'),
]


@pytest.fixture(autouse=True)
def toy_site(monkeypatch):
    monkeypatch.syspath_prepend(str(TOY))


def _note_from_the_spanish_template(tmp_path: Path) -> Path:
    """docs/es/notes/TEMPLATE.md as a learner fills it: its example section replaced by five decisions."""
    template = (REPO / "docs" / "es" / "notes" / "TEMPLATE.md").read_text(encoding="utf-8")
    head, example = template.split("\n## 1. ", 1)
    assert "[cite: PACKAGE PATH::SYMBOL" in example  # the part a learner replaces
    sections = [f"## {n}. {title}\n\n{text}\n{CITE.format(cite)}.\n"
                for n, (title, text, cite) in enumerate(DECISIONS, start=1)]
    head = "---\nchecked-against: toyparallel 1.2.0\n---\n\n" + head  # what distcheck cite --record writes
    note = tmp_path / "docs" / "notes" / "megatron.md"
    note.parent.mkdir(parents=True)
    note.write_text(head + "\n" + "\n".join(sections), encoding="utf-8")
    return note


def test_a_note_written_in_spanish_from_the_spanish_template_counts_its_five_decisions(tmp_path):
    note = _note_from_the_spanish_template(tmp_path)
    assert re.search(r"^## 1\. Las capas por columnas", note.read_text(encoding="utf-8"), re.M)
    rep = verify_note(note, label="docs/notes/megatron.md")
    assert [(r.status, r.reason) for r in rep.results] == [(Status.COUNTED, "")] * 5
    assert rep.cited_statements == 5 and rep.ok and rep.warnings == []


@pytest.mark.parametrize("text", [
    "La capa por filas suma todo el resultado parcial con un único all-reduce al final",
    "Todo el estado del optimizador se reparte entre los ranks de datos en cada paso",
])
def test_the_spanish_word_todo_is_no_placeholder(text):
    assert decision_problem(text) == ""


def test_todo_in_capitals_is_still_a_placeholder():
    assert decision_problem("TODO: explicar aquí qué se decidió y por qué importa tanto") == (
        "placeholder 'TODO' in place of a stated decision")


@pytest.mark.parametrize("template", ["docs/notes/TEMPLATE.md", "docs/es/notes/TEMPLATE.md"])
def test_a_note_just_copied_from_the_template_is_in_progress_not_broken(tmp_path, template):
    """The DoD row's first step is `cp TEMPLATE.md docs/notes/fsdp.md`: the template's example of the form is
    not a citation that fails (broken), only one that does not count yet."""
    from pytest_distcheck.citations.verifier import TEMPLATE_EXAMPLE
    from pytest_distcheck.i18n import _

    note = tmp_path / "fsdp.md"
    note.write_text((REPO / template).read_text(encoding="utf-8"), encoding="utf-8")
    rep = verify_note(note, label="docs/notes/fsdp.md", packages=("megatron-core", "torch"))
    assert rep.failures == [] and rep.cited_statements == 0
    assert {(r.status, r.reason) for r in rep.results} == {(Status.UNCOUNTED, _(TEMPLATE_EXAMPLE))}


def test_spanish_stop_words_are_filler_as_english_ones_are():
    """Eight Spanish function words state no decision, as eight English ones do (a learner's walkthrough found
    "que los del con por una las para" counted)."""
    from pytest_distcheck.citations.decision import too_few_distinct_words

    assert decision_problem("que los del con por una las para como") == too_few_distinct_words(0)
    assert decision_problem("the and this that with from for are") == too_few_distinct_words(0)
    # words that begin with an accented letter are words too
    assert decision_problem("él índice ámbito único óptimo según está más") == too_few_distinct_words(4)
