"""`distcheck diagram` in Spanish: its own lines, the check's findings and the lessons they end with."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.cli import main
from pytest_distcheck.commands.diagram import INLINE_PLAN, MATCHES, PAGE_MISSING, RANKS, RANKS_IT_DRAWS
from pytest_distcheck.diagram import concepts
from pytest_distcheck.diagram.compare import MISSING, compare
from pytest_distcheck.diagram.config import load_plan_names
from pytest_distcheck.diagram.flow import INTO_NODE, INTO_NODE_RANK
from pytest_distcheck.diagram.mermaid import Edge, Flowchart, Subgraph, Vertex
from pytest_distcheck.diagram.plan import parse_inline
from pytest_distcheck.diagram.skeleton import LESSON, UNDRAWN, skeleton
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
    assert (f"{page}:45: mlp.down (row-parallel) recibe el tensor replicado, sin dividir, por las aristas "
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


# ---- the skeleton `distcheck diagram` prints, in Spanish -----------------------------------------

def _skeleton_page(capsys, lang: str) -> str:
    assert main(["diagram", "--plan", BLOCK, "--lang", lang]) == 0
    return capsys.readouterr().out


def test_the_skeleton_page_speaks_spanish_and_keeps_what_the_check_reads(capsys):
    page = _skeleton_page(capsys, "es")
    assert page.startswith(
        "<!-- Un esqueleto que imprimió `distcheck diagram` con el plan dado en línea\n"
        "     en 2 ranks. Decide, para cada capa, si es column- o row-parallel y qué guarda cada rank\n"
        "     de su peso; dónde van f y g; y las aristas: qué alimenta cada capa y adónde va su salida.\n"
        '     Las etiquetas que lee la comprobación y los pasos: lab 02, "Dibuja el bloque"\n'
        "     (docs/es/lab/02-tp-inference-cloud.md). Después: distcheck diagram --check,\n"
        "     distcheck diagram --render, y haz commit de la página y de su SVG. -->\n\n```mermaid\n")
    assert ("  %% Te toca dibujar: los estilos, qué guarda cada rank, f y g, el trabajo entre capas, "
            "las aristas.\n") in page
    assert '  x(["x: los estados ocultos que entran en el bloque [B, T, d]"])\n' in page
    assert page.endswith("```\n\n![El mismo diagrama, renderizado](diagram.svg)\n")
    assert max(len(line) for line in page.splitlines()) <= 108
    # What the check reads is the English skeleton's: the rank titles, the module paths (and the ids).
    english = skeleton(parse_inline(BLOCK), 2, "en").splitlines()
    kept = [line for line in english if not line.lstrip().startswith(("%%", "x(", "y("))]
    assert len(kept) == 1 + 2 * (4 + 2) and all(line in page.splitlines() for line in kept)
    assert 'subgraph n_rank_1["rank 1"]' in page and '    n_mlp_down_r1["mlp.down"]' in page


def _fence_line(page: str) -> int:
    return page.splitlines().index("```mermaid") + 1


@pytest.mark.parametrize(("printed", "checked"), [("es", "es"), ("es", "en"), ("en", "es")])
def test_a_skeleton_saved_unchanged_is_undrawn_in_either_language(tmp_path, monkeypatch, capsys, printed, checked):
    monkeypatch.chdir(tmp_path)
    page = _skeleton_page(capsys, printed)
    Path("page.md").write_text(page, encoding="utf-8")
    assert main(["diagram", "--check", "page.md", "--plan", BLOCK, "--world-size", "2", "--lang", checked]) == 1
    line = _fence_line(page)
    assert capsys.readouterr().out == f"page.md:{line}: {_(UNDRAWN).format(line=line)}\n"
    if checked == "es":
        assert "aún sin dibujar" in _(UNDRAWN)


def _drawn(skeleton_page: str) -> str:
    """The Spanish skeleton drawn as a learner would: its lines kept, styles added to its labels, the work between
    the layers inside each rank, the collectives and the residual adds outside them, and the edges."""
    page = skeleton_page
    for path, style in (("attn.qkv", "column-parallel"), ("attn.out", "row-parallel"), ("mlp.up", "column-parallel"),
                        ("mlp.down", "row-parallel")):
        page = page.replace(f'["{path}"]', f'["{path}<br/>{style}"]')
    edges = ['  x --> ln1["LayerNorm (replicada)"]', '  ln2["LayerNorm (replicada)"]',
             '  ar1["all-reduce (g)"]', '  ar2["all-reduce (g)"]', '  add1["suma residual"]', '  add2["suma residual"]']
    for r in range(2):
        page = page.replace(f'    n_attn_out_r{r}["', f'    att{r}["atención en las cabezas de este rank"]\n'
                                                    f'    n_attn_out_r{r}["')
        page = page.replace(f'    n_mlp_down_r{r}["', f'    act{r}["activación, elemento a elemento"]\n'
                                                    f'    n_mlp_down_r{r}["')
        edges += [f"  ln1 --> n_attn_qkv_r{r} --> att{r} --> n_attn_out_r{r} --> ar1",
                  f"  ln2 --> n_mlp_up_r{r} --> act{r} --> n_mlp_down_r{r} --> ar2"]
    edges += ["  ar1 --> add1", "  x --> add1", "  add1 --> ln2", "  ar2 --> add2", "  add1 --> add2", "  add2 --> y"]
    return page.replace("\n```\n\n", "\n" + "\n".join(edges) + "\n```\n\n")


def test_a_spanish_skeleton_drawn_honestly_matches_the_plan(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    page = _drawn(_skeleton_page(capsys, "es"))
    assert "x: los estados ocultos que entran en el bloque" in page and "%% Las capas del plan en cada rank" in page
    Path("page.md").write_text(page, encoding="utf-8")
    line = _fence_line(page)
    for lang in ("es", "en"):
        assert main(["diagram", "--check", "page.md", "--plan", BLOCK, "--world-size", "2", "--lang", lang]) == 0
        assert capsys.readouterr().out == _(MATCHES).format(page="page.md", line=line, plan=_(INLINE_PLAN),
                                                            ranks=_(RANKS).format(n=2)) + "\n"


def test_a_spanish_drawing_whose_g_is_a_reduce_scatter_is_named_in_spanish(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    page = _drawn(_skeleton_page(capsys, "es")).replace('ar2["all-reduce (g)"]', 'ar2["reduce-scatter (g)"]')
    Path("page.md").write_text(page, encoding="utf-8")
    assert main(["diagram", "--check", "page.md", "--plan", BLOCK, "--world-size", "2", "--lang", "es"]) == 1
    line = page.splitlines().index("  ar2 --> add2") + 1
    assert capsys.readouterr().out == (
        f"page.md:{line}: no hay all-gather después del reduce-scatter (nodo ar2) que sigue a mlp.down (row-parallel): "
        "nodo add2 ('suma residual') lee su porción de la secuencia por la arista ar2 --> add2: "
        f"{concepts.SEQUENCE_SHARD.lesson}\n")
    assert concepts.SEQUENCE_SHARD.lesson.startswith("un reduce-scatter suma las sumas parciales")
    # the block's output itself
    fc = Flowchart({i: Vertex(i, t) for i, t in (("x", "x"), ("q", "attn.qkv colwise"), ("o", "attn.out rowwise"),
                                                 ("rs", "reduce-scatter"), ("y", "y"))},
                   (Edge("x", "q"), Edge("q", "o"), Edge("o", "rs"), Edge("rs", "y")), ())
    [d] = compare(fc, {"attn.qkv": "colwise", "attn.out": "rowwise"}, 2)
    assert d.message == ("no hay all-gather después del reduce-scatter (nodo rs) que sigue a attn.out (row-parallel): "
                         "el bloque termina en nodo y con su porción de la secuencia: "
                         f"{concepts.SEQUENCE_SHARD.lesson}")


@pytest.mark.parametrize("f_label", ["f: identidad en el forward; en el backward, all-reduce",
                                     "f: identidad, bwd: all-reduce", "f (backward = all-reduce)"])
def test_a_spanish_drawing_whose_f_says_backward_first_matches(tmp_path, monkeypatch, capsys, f_label):
    monkeypatch.chdir(tmp_path)
    page = _drawn(_skeleton_page(capsys, "es"))
    page = page.replace("  ln1 --> n_attn_qkv_r", f'  ln1 -- "{f_label}" --> n_attn_qkv_r')
    assert page.count(f_label) == 2
    Path("page.md").write_text(page, encoding="utf-8")
    assert main(["diagram", "--check", "page.md", "--plan", BLOCK, "--world-size", "2", "--lang", "es"]) == 0, (
        capsys.readouterr().out)
