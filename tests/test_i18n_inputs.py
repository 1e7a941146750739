"""Errors about the learner's input files under --lang es: the quiz's bank, config, log and re-grading, a text file
read by textfile.read_text (each noun it names), the evidence's sources, and the [diagram] section. Field paths,
file names and what the learner typed stay as they are."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

import pytest_distcheck
from pytest_distcheck import i18n
from pytest_distcheck.diagram import config as diagram
from pytest_distcheck.errors import LINE, ConfigError
from pytest_distcheck.evidence import DISAGREES, NO_SOURCE, NO_SOURCES, check_fresh, digest, require_consistent
from pytest_distcheck.i18n import _
from pytest_distcheck.quiz import bank, calculators, log, regrade
from pytest_distcheck.quiz.config import NO_SECTION as NO_QUIZ
from pytest_distcheck.quiz.config import NOT_A_MARK, quiz_config
from pytest_distcheck.quiz.draw import ATTEMPT_SIZE, draw_attempt
from pytest_distcheck.textfile import (
    DIAGRAM_PAGE,
    LEDGER,
    NOT_A_FILE,
    NOT_FOUND,
    NOT_UTF8,
    NOTE,
    TOO_LARGE,
    WORKSPACE_FILE,
    read_text,
)
from pytest_distcheck.workspace import load_workspace

WORKSPACE = """
[phase]
id = "35"
title = "t"

[[items]]
id = "quiz-passed"
title = "t"
how = "distcheck quiz 35"
"""
CHOICE = {"id": "c1", "kind": "choice", "topic": "t", "question": "q?", "choices": ["x", "y"], "answer": "A",
          "explanation": "because"}


@pytest.fixture(autouse=True)
def _spanish():
    i18n.use("es")
    yield
    i18n.use(i18n.DEFAULT)


def _raises(call, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    return info.value


def _workspace(tmp_path, extra: str = ""):
    (tmp_path / "checks").mkdir(exist_ok=True)
    path = tmp_path / "checks" / "distcheck.toml"
    path.write_text(WORKSPACE + extra)
    return load_workspace(path)


# textfile


@pytest.mark.parametrize(("what", "noun"), [(LEDGER, "registro de gastos"), (NOTE, "nota"),
                                            (WORKSPACE_FILE, "fichero de workspace"),
                                            (DIAGRAM_PAGE, "página del diagrama")])
def test_a_missing_file_names_its_noun_in_spanish(tmp_path, what, noun):
    path = tmp_path / "x.md"
    err = _raises(read_text, path, what)
    assert str(err) == f"{path}: {_(NOT_FOUND).format(what=noun)}"
    assert str(err) == f"{path}: no existe ese fichero ({noun})"


def test_a_folder_a_large_file_and_bad_bytes_are_said_in_spanish(tmp_path):
    folder = tmp_path / "ledger.md"
    folder.mkdir()
    problem = _raises(read_text, folder, LEDGER).problem
    assert problem == _(NOT_A_FILE).format(what="registro de gastos")
    assert problem.startswith("es una carpeta, no un fichero (registro de gastos): ")
    big = tmp_path / "note.md"
    big.write_text("x" * 2000)
    err = _raises(read_text, big, NOTE, limit=1000)
    assert err.problem == _(TOO_LARGE).format(size=2000, limit=1000, what="nota")
    assert err.problem.startswith("tiene 2000 bytes, más de los 1000")  # no thousands comma in Spanish
    latin = tmp_path / "ws.toml"
    latin.write_bytes(b"a = 1\nb = '\xe9'\n")
    err = _raises(read_text, latin, WORKSPACE_FILE)
    assert err.where == _(LINE).format(n=2) == "línea 2"
    assert err.problem == _(NOT_UTF8).format(byte=0xE9, offset=11, what="fichero de workspace")
    assert "guarda el fichero (fichero de workspace) como UTF-8" in err.problem


# quiz


def test_a_bank_goal_error_is_spanish_and_keeps_the_field_path(tmp_path):
    path = tmp_path / "bank.json"
    path.write_text(json.dumps({"id": "t", "title": "t", "goals": [{"id": "g", "title": "G"}], "items": [CHOICE]}))
    err = _raises(bank.load_bank, path)
    assert (err.where, err.problem) == ("items[0].goal", _(bank.NO_GOAL).format(goals="g"))
    assert err.problem == "se esperaba uno de los objetivos del banco (g), no hay ninguno"


def test_the_quiz_config_and_a_draw_too_large_speak_spanish(tmp_path):
    ws = _workspace(tmp_path)
    assert _raises(quiz_config, ws).problem == _(NO_QUIZ)
    assert _(NO_QUIZ).startswith("no hay sección [quiz]")
    ws = _workspace(tmp_path, '[quiz]\nbank = "b.json"\nlog = "l.jsonl"\npass_mark = 2\nitems_per_attempt = 10\n')
    err = _raises(quiz_config, ws)
    assert (err.where, err.problem) == ("quiz.pass_mark", _(NOT_A_MARK).format(value=2))
    path = tmp_path / "bank.json"
    path.write_text(json.dumps({"id": "t", "title": "t", "items": [CHOICE]}))
    with pytest.raises(ValueError) as info:
        draw_attempt(bank.load_bank(path), 1, 5)
    assert str(info.value) == _(ATTEMPT_SIZE).format(n=5, total=1, path=path)
    assert str(info.value).startswith("un intento de 5 preguntas necesita entre 1 y 1")


def test_a_bad_log_line_names_the_line_in_spanish_and_says_to_fix_it_by_hand(tmp_path):
    path = tmp_path / "attempts.jsonl"
    path.write_text("{not json\n")
    err = _raises(log.read_attempts, path)
    assert err.where == "línea 1"
    assert err.problem.startswith("no es JSON válido: ")
    assert err.problem.endswith("; " + _(log.FIX_BY_HAND)) and "corrige o borra esa línea a mano" in err.problem
    path.write_text('{"a": 1}')
    assert _raises(log.check_appendable, path).problem == f"{_(log.INCOMPLETE)}; {_(log.FIX_BY_HAND)}"


def test_regrading_says_its_counts_and_reasons_in_spanish():
    assert regrade.answer_count(1, 10, True) == "1 respuesta, un intento tiene 10"
    assert regrade.answer_count(3, 10, True) == "3 respuestas, un intento tiene 10"
    assert regrade.answer_count(12, 10, False) == "12 respuestas, un intento abandonado tiene como mucho 10"
    assert _(regrade.WHY_SEED_SEEN).format(seed=21, line=1) == "la semilla 21 ya aparece en la línea 1"
    with pytest.raises(ValueError) as info:
        calculators.resolve("nope")
    assert str(info.value) == _(calculators.NOT_MODULE_FUNCTION).format(
        name="nope", modules=", ".join(calculators.CALC_MODULES))
    assert str(info.value).startswith("la calculadora 'nope' debe ser MODULE.FUNCTION")


# evidence


def test_evidence_problems_are_spanish_and_keep_the_paths(tmp_path):
    assert _raises(digest, "lab/gone.py", tmp_path).problem == _(NO_SOURCE) == "no se encuentra la fuente"
    assert check_fresh({}, tmp_path, where="r.json") == [_(NO_SOURCES).format(where="r.json")]
    assert check_fresh({}, tmp_path, where="r.json")[0].startswith("r.json no registra sus fuentes")
    with pytest.raises(pytest_distcheck.Broken) as info:
        require_consistent("total", Decimal("4.10"), Decimal("5.20"), where="ledger.md, total", unit="$")
    assert info.value.reason == _(DISAGREES).format(where="ledger.md, total", what="total", stored="$4.10",
                                                    recomputed="$5.20")
    assert "el valor guardado de total, $4.10, no coincide con $5.20" in info.value.reason


# [diagram]


def test_the_diagram_section_and_its_plan_errors_speak_spanish(tmp_path):
    ws = _workspace(tmp_path)
    err = _raises(diagram.diagram_config, ws)
    assert (err.where, err.problem) == ("[diagram]", _(diagram.NO_SECTION))
    assert err.problem == "falta la sección (necesita page, plan, world_size)"
    err = _raises(diagram.load_plan_names, "lab.plan", tmp_path, ws.path, "diagram.plan")
    assert err.problem == _(diagram.NOT_A_REF).format(ref="lab.plan")
    err = _raises(diagram.load_plan_names, "lab.plan:PLAN", tmp_path, ws.path, "diagram.plan")
    assert err.problem == _(diagram.NO_MODULE).format(module="lab.plan", looked="lab/plan/__init__.py ni lab/plan.py",
                                                      root=tmp_path.resolve())
    assert err.problem.startswith("no se encuentra el módulo 'lab.plan': no hay ni lab/plan/__init__.py ni ")
