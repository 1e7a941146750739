"""`distcheck diagram` in Spanish: its own lines, the check's findings and the lessons they end with."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.cli import main
from pytest_distcheck.commands.diagram import INLINE_PLAN, MATCHES, PAGE_MISSING, RANKS_IT_DRAWS
from pytest_distcheck.diagram import concepts
from pytest_distcheck.diagram.compare import MISSING, compare
from pytest_distcheck.diagram.config import load_plan_names
from pytest_distcheck.diagram.flow import INTO_NODE, INTO_NODE_RANK
from pytest_distcheck.diagram.mermaid import Edge, Flowchart, Subgraph, Vertex
from pytest_distcheck.diagram.skeleton import LESSON, UNDRAWN
from pytest_distcheck.diagram.source import (
    CANNOT_BUILD,
    CANNOT_READ,
    NOT_A_LITERAL,
    NOT_ONLY_LITERAL,
    NOT_PYTHON,
    SourceError,
)
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import _

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagrams"
BLOCK = "attn.qkv=colwise,attn.out=rowwise,mlp.up=colwise,mlp.down=rowwise"


@pytest.fixture(autouse=True)
def _english_after():
    yield
    i18n.use(i18n.DEFAULT)


def test_a_right_diagram_is_confirmed_in_spanish(capsys):
    page = str(FIXTURES / "ok-megatron-wq-wk-wv.md")
    assert main(["diagram", "--check", page, "--plan", "attn.qkv=colwise,attn.out=rowwise", "--lang", "es"]) == 0
    expected = _(MATCHES).format(page=page, line=10, plan=_(INLINE_PLAN), ranks=_(RANKS_IT_DRAWS))
    assert capsys.readouterr().out == expected + "\n" and expected != MATCHES.format(
        page=page, line=10, plan=INLINE_PLAN, ranks=RANKS_IT_DRAWS)


def test_a_missing_layer_is_named_in_spanish_with_its_lesson(capsys):
    page = str(FIXTURES / "dropped-layer.md")
    assert main(["diagram", "--check", page, "--plan", BLOCK, "--world-size", "2", "--lang", "es"]) == 1
    lesson = concepts.NAMING.lesson
    assert lesson != concepts.NAMING.text  # the language in use is Spanish
    assert f"{page}:8: " + _(MISSING).format(path="mlp.up", style="column-parallel", lesson=lesson) in (
        capsys.readouterr().out.splitlines())


def test_a_missing_page_is_a_spanish_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["diagram", "--check", "nope.md", "--plan", BLOCK, "--lang", "es"]) == 2
    assert _(PAGE_MISSING).format(command="distcheck diagram > nope.md") in capsys.readouterr().err


def test_the_lessons_and_the_undrawn_skeleton_speak_the_language_in_use():
    assert [c.lesson for c in concepts.ALL] == [c.text for c in concepts.ALL]
    assert LESSON in UNDRAWN  # the whole sentence is in the catalog, and says where drawing is taught
    i18n.use("es")
    assert all(c.lesson != c.text for c in concepts.ALL)
    assert "docs/es/lab/02-tp-inference-cloud.md" in _(UNDRAWN)


def test_the_edges_a_finding_names_are_aristas_in_spanish(capsys):
    page = str(FIXTURES / "row-parallel-reads-ln2.md")
    assert main(["diagram", "--check", page, "--plan", BLOCK, "--world-size", "2", "--lang", "es"]) == 1
    out = capsys.readouterr().out
    assert (f"{page}:7: mlp.down (row-parallel) recibe el tensor replicado, sin dividir, por las aristas "
            "ln2 --> down0, ln2 --> down1: ") in out, out
    assert " edge" not in out, out


def _fed_by(extra: Edge) -> str:
    """The input finding of attn.out when rank 1's attn.out reads ``extra`` instead of its attention."""
    v = [Vertex("x", "x"), Vertex("ar", "all-reduce"), Vertex("y", "y")]
    e, subs = [], []
    for r in range(2):
        v += [Vertex(f"q{r}", "attn.qkv column-parallel"), Vertex(f"att{r}", "attention"),
              Vertex(f"o{r}", "attn.out row-parallel")]
        e += [Edge("x", f"q{r}"), Edge(f"q{r}", f"att{r}"), Edge(f"o{r}", "ar")]
        e += [Edge(f"att{r}", f"o{r}")] if r == 0 else []
        subs.append(Subgraph(f"s{r}", f"rank {r}", (f"q{r}", f"att{r}", f"o{r}")))
    fc = Flowchart({x.id: x for x in v}, (*e, Edge("ar", "y"), extra), tuple(subs))
    (found,) = [d.message for d in compare(fc, {"attn.qkv": "colwise", "attn.out": "rowwise"}, 2)
                if d.message.startswith("attn.out")]
    return found


@pytest.mark.parametrize(("extra", "spanish"), [
    (Edge("x", "o1"), "por la arista x --> o1: "),
    (Edge("x", "s1"), "por la arista x --> s1 (hasta el nodo o1, rank 1): "),
])
def test_one_edge_is_la_arista_and_says_where_it_ends_in_spanish(extra, spanish):
    i18n.use("es")
    assert "attn.out (row-parallel) recibe el tensor replicado, sin dividir, " + spanish in _fed_by(extra)
    assert (_(INTO_NODE), _(INTO_NODE_RANK)) == (" (hasta el nodo {node})", " (hasta el nodo {node}, rank {rank})")


def test_one_edge_is_an_edge_in_english():
    assert " by edge x --> s1 (into node o1, rank 1): " in _fed_by(Edge("x", "s1"))


def _plan_error(tmp_path, source: str) -> ConfigError:
    (tmp_path / "p.py").write_text(source)
    with pytest.raises(ConfigError) as info:
        load_plan_names("p:PLAN", tmp_path, Path("checks/distcheck.toml"), "diagram.plan")
    return info.value


@pytest.mark.parametrize(("source", "spanish"), [
    ("BASE = {}\nPLAN = BASE\n", "p.py:2: PLAN no es un literal (un nombre donde hay que escribir el valor tal cual): "
                                 "escríbelo como un literal (dict, list, tuple, str) para que el kit pueda leerlo sin "
                                 "ejecutar código"),
    ('PLAN = {f"l{i}": "colwise" for i in range(2)}\n', "p.py:1: PLAN no es un literal (una comprensión donde hay que "
                                                        "escribir el valor tal cual): escríbelo como un literal (dict, "
                                                        "list, tuple, str) para que el kit pueda leerlo sin ejecutar "
                                                        "código"),
    ('PLAN = {"attn.qkv": "colwise"}\ndel PLAN\n', "p.py:2: PLAN se asigna o se modifica aquí de otra forma que con "
                                                   "una asignación literal en el nivel superior: el kit lo lee sin "
                                                   "ejecutar código, así que no puede haber nada más"),
    ("PLAN = {[1]: 'colwise'}\n", "p.py:1: PLAN no se puede construir a partir de su literal: "),
    ("PLAN = (\n", "p.py:1: no es Python válido: "),
])
def test_a_plan_source_that_cannot_be_read_as_literals_is_said_in_spanish(tmp_path, source, spanish):
    i18n.use("es")
    problem = _plan_error(tmp_path, source).problem
    # Python's own words (the SyntaxError, the TypeError) follow ": " as they are.
    assert problem.startswith(spanish) if spanish.endswith(": ") else problem == spanish, problem


def test_the_source_errors_are_catalog_messages():
    i18n.use("es")
    assert all(_(m) != m for m in (NOT_A_LITERAL, NOT_ONLY_LITERAL, CANNOT_BUILD, NOT_PYTHON, CANNOT_READ))
    assert str(SourceError(3, "x")) == "línea 3: x" and str(SourceError(0, "x")) == "x"
    assert _(CANNOT_READ).format(error="e") == "no se puede leer: e"
