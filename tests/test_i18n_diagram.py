"""`distcheck diagram` in Spanish: its own lines, the check's findings and the lessons they end with."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.cli import main
from pytest_distcheck.commands.diagram import INLINE_PLAN, MATCHES, PAGE_MISSING, RANKS_IT_DRAWS
from pytest_distcheck.diagram import concepts
from pytest_distcheck.diagram.compare import MISSING
from pytest_distcheck.diagram.skeleton import LESSON, UNDRAWN
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
