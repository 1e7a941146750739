"""`distcheck diagram --plan`: checking a diagram against a plan of one's own, with no workspace file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagrams"
BLOCK = "attn.qkv=colwise,attn.out=rowwise,mlp.up=colwise,mlp.down=rowwise"


@pytest.fixture
def bare(tmp_path, monkeypatch):
    """An empty folder: no checks/distcheck.toml anywhere."""
    monkeypatch.chdir(tmp_path)  # --plan module:NAME is read from the current folder, not sys.path
    return tmp_path


def test_an_inline_plan_needs_no_workspace(bare, capsys):
    page = str(FIXTURES / "ok-megatron-wq-wk-wv.md")
    assert main(["diagram", "--check", page, "--plan", "attn.qkv=colwise,attn.out=rowwise"]) == 0
    assert capsys.readouterr().out == (
        f"{page}: the diagram at line 10 matches the plan given inline on the ranks it draws\n"
    )


def test_a_diagram_drawn_without_ranks_is_said_to_be_read_as_a_summary(bare, capsys):
    # a Spanish learner's `rango 0` subgraphs are no ranks: it matched "on 2 ranks", which it does not draw
    from pytest_distcheck.commands.diagram import MATCHES_SUMMARY

    page = bare / "page.md"
    page.write_text('# TP\n\n```mermaid\nflowchart LR\n  x --> q["attn.qkv: column-parallel"] --> '
                    'o["attn.out: row-parallel"] --> g["g: all-reduce"] --> y\n```\n')
    assert main(["diagram", "--check", str(page), "--plan", "attn.qkv=colwise,attn.out=rowwise"]) == 0
    assert capsys.readouterr().out == MATCHES_SUMMARY.format(page=str(page), line=3,
                                                             plan="the plan given inline") + "\n"


def test_a_wrong_flow_is_named_with_an_inline_plan(bare, capsys):
    page = str(FIXTURES / "row-parallel-reads-ln2.md")
    assert main(["diagram", "--check", page, "--plan", BLOCK, "--world-size", "2"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        f"{page}:37: the output of mlp.up (column-parallel) goes nowhere: no edge leaves nodes up0, up1")
    assert out[1].startswith(f"{page}:45: mlp.down (row-parallel) is fed the replicated, unsplit tensor by edges "
                             "ln2 --> down0, ln2 --> down1")


def test_a_plan_module_of_ones_own_with_its_aliases(bare, capsys):
    (bare / "myplan.py").write_text('PLAN = {"mlp.down": "rowwise"}\nPLAN_ALIASES = {"mlp.down": ["W2"]}\n')
    (bare / "page.md").write_text(
        "```mermaid\nflowchart LR\n  X -- split --> w0\n  X -- split --> w1\n"
        '  subgraph g0["GPU 0"]\n    w0["W2 (RowParallelLinear)"]\n  end\n'
        '  subgraph g1["GPU 1"]\n    w1["W2 (RowParallelLinear)"]\n  end\n'
        "  w0 --> AR[all-reduce]\n  w1 --> AR\n  AR --> Y\n```\n"
    )
    assert main(["diagram", "--check", "page.md", "--plan", "myplan:PLAN"]) == 0
    assert capsys.readouterr().out == "page.md: the diagram at line 1 matches myplan:PLAN on the ranks it draws\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--check", "p.md", "--plan", "qkv=diagonal"],
         "--plan: plan entry 'qkv': unknown style 'diagonal' (known: colwise, rowwise)"),
        (["--check", "p.md", "--plan", "qkv"], "--plan: expected 'module:attribute', found 'qkv'"),
        (["--check", "--plan", "qkv=colwise"], "--plan: with --plan give the page too"),
        (["--check", "p.md", "--plan", "qkv=colwise", "--world-size", "0"], "--world-size: must be >= 1, found 0"),
    ],
)
def test_bad_plans_are_named(bare, capsys, argv, message):
    assert main(["diagram", *argv]) == 2
    assert message in capsys.readouterr().err
