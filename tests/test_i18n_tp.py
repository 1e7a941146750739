"""pytest_distcheck.tp under --lang es: plan errors, assert_tp_matches_dense's refusals and mismatch report,
assert_collectives and assert_replicated in Spanish, with fault names, styles, paths and Python names kept.

All through the pure parts (no ranks): the ranks speak the language they were told at start
(tests/test_i18n_ranks.py), so what these build is what a learner's ranks build."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from pytest_distcheck import i18n
from pytest_distcheck.i18n import _
from pytest_distcheck.tp import replicated
from pytest_distcheck.tp.collectives import COUNTS, DIFFER, NEEDS_GRAD, NONE, assert_collectives
from pytest_distcheck.tp.compare import DENSE, NO_SUBMODULE, _check_even
from pytest_distcheck.tp.diagnose import FAULTS, HEADLINE, INPUT_I, OUTPUT, WHAT_THESE_MEAN, diagnose, report
from pytest_distcheck.tp.plan import (
    A_FUSED_PART,
    EVEN_SHARDS,
    FUSED_COLWISE_ONLY,
    NOT_A_STYLE,
    NOT_DIVISIBLE,
    PLAN_ENTRY,
    UNKNOWN_STYLE,
    Layer,
    parse_plan,
)
from pytest_distcheck.tp.replicated import MUST_BE_REPLICATED, TENSOR, VALUES_DIFFER, replication_error
from pytest_distcheck.tp.shards import HOLDS_WHOLE, what_is_held

TOL = dict(rtol=1e-6, atol=1e-8)


@pytest.fixture(autouse=True)
def _english_after():
    """Spanish in each test; the session's own summary, after the last test here, stays English."""
    i18n.use("es")
    yield
    i18n.use(i18n.DEFAULT)


def _raised(make, kind=ValueError) -> str:
    with pytest.raises(kind) as exc:
        make()
    return str(exc.value)


def test_plan_errors_speak_spanish_and_keep_the_path_and_the_style_names():
    unknown = _(UNKNOWN_STYLE).format(style="colwize", known="colwise, rowwise, replicated")
    assert _raised(lambda: parse_plan({"x": "colwize"})) == _(PLAN_ENTRY).format(path="x", problem=unknown)
    assert _raised(lambda: parse_plan({"x": "colwize"})).startswith(
        "entrada del plan 'x': estilo desconocido 'colwize' (los conocidos: colwise, rowwise, replicated)")
    not_a_style = _(NOT_A_STYLE).format(type="int")
    assert _raised(lambda: parse_plan({"y": 3})) == _(PLAN_ENTRY).format(path="y", problem=not_a_style)
    assert "se esperaba un nombre de estilo o un Layer" in not_a_style
    assert _raised(lambda: Layer("rowwise", fused=3)) == _(FUSED_COLWISE_ONLY).format(fused=3, style="rowwise")
    assert "solo se aplica a capas colwise" in _(FUSED_COLWISE_ONLY)


def test_an_uneven_split_is_refused_in_spanish():
    dense = nn.Sequential(nn.Linear(4, 9))  # 9 output features, plus the bias, over 2 ranks
    message = _raised(lambda: _check_even({"0": Layer("colwise")}, dense, 2))
    assert message == "; ".join([_(NOT_DIVISIBLE).format(what="0.weight dim 0", length=9, t=2),
                                 _(NOT_DIVISIBLE).format(what="0.bias dim 0", length=9, t=2), _(EVEN_SHARDS)])
    assert message.startswith("0.weight dim 0 de longitud 9 no es divisible por el grado de TP 2;")
    fused = _raised(lambda: _check_even({"0": Layer("colwise", fused=2)}, nn.Sequential(nn.Linear(4, 6)), 2))
    label = _(A_FUSED_PART).format(label="0.weight dim 0")
    assert fused.startswith(_(NOT_DIVISIBLE).format(what=label, length=3, t=2))
    assert "(una parte fusionada)" in label


def _records(outs, dxs, dense_out, dense_dx, w):
    """Records of a 2-rank column-parallel layer (weight shards right) with the given outputs and dL/dx."""
    dense = {"inputs": [torch.ones(1)], "out": dense_out, "xgrads": [dense_dx], "order": [], "layers": {},
             "params": {"lin.weight": {"value": w, "grad": None}}}
    ranks = [{"inputs": [torch.ones(1)], "out": o, "xgrads": [g], "order": [], "layers": {},
              "params": {"lin.weight": {"value": w.chunk(2)[k], "grad": None}}}
             for k, (o, g) in enumerate(zip(outs, dxs, strict=True))]
    return ranks, dense


def test_the_mismatch_report_of_assert_tp_matches_dense_speaks_spanish_with_fault_names_kept():
    w, dense_out, dx = torch.randn(4, 2), torch.randn(3), torch.randn(3)
    ranks, dense = _records([dense_out, dense_out], [dx * 0.5, dx * 0.5], dense_out, dx, w)
    found = diagnose(ranks, dense, {"lin": Layer("colwise")}, **TOL)
    lines = report(found, 2, **TOL).splitlines()
    assert lines[0] == _(HEADLINE).format(size=2, rtol=1e-6, atol=1e-8, faults="missing-f")
    assert lines[0].startswith("el módulo TP no coincide con el módulo denso (grado de TP 2;")
    assert lines[1].startswith(f"- missing-f [{_(INPUT_I).format(i=0)}]: el dL/dx de la entrada 0 es parcial")
    assert lines[2:] == [_(WHAT_THESE_MEAN), f"  missing-f: {_(FAULTS['missing-f'])}"]
    assert lines[3].startswith("  missing-f: falta f antes de una capa column-parallel")
    # A parameter that was never split, and a plain mismatch of the output on one rank.
    ranks, dense = _records([dense_out, dense_out + 1], [dx, dx], dense_out, dx, w)
    ranks[1]["params"]["lin.weight"]["value"] = w
    found = diagnose(ranks, dense, {"lin": Layer("colwise")}, **TOL)
    assert [(f.fault, f.where, f.ranks) for f in found] == [("not-sharded", "lin.weight", [1]),
                                                            ("mismatch", _(OUTPUT), [1])]
    assert found[0].detail == f"plan: colwise; el rank {_(HOLDS_WHOLE)}"
    text = report(found, 2, **TOL)
    assert "- then also differ" not in text and "- además difieren (probablemente como consecuencia" in text
    assert "[salida, rank 1]" not in text  # named as a consequence, after the not-sharded line


def test_what_a_rank_holds_of_a_fused_weight_is_said_in_spanish_in_both_numbers():
    gate_up = torch.randn(8, 4)
    one = what_is_held(gate_up[:4], gate_up, Layer("colwise", fused=2), "weight", 0, 2, False, **TOL)[1]
    assert one.startswith("tiene las filas 0..3 de 8, un trozo contiguo que solo cubre la parte 1 de las 2 partes")
    qkv = torch.randn(12, 4)
    two = what_is_held(qkv[:6], qkv, Layer("colwise", fused=3), "weight", 0, 2, False, **TOL)[1]
    assert "solo cubre las partes 1, 2 de las 3 partes fusionadas" in two


def test_a_missing_submodule_is_refused_in_spanish_before_any_collective():
    from pytest_distcheck.tp import assert_tp_matches_dense

    dense = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))
    message = _raised(lambda: assert_tp_matches_dense(dense, dense, {"up": "colwise"}, torch.ones(2, 4)))
    assert message == _(NO_SUBMODULE).format(path="up", what=_(DENSE), names="0, 1")
    assert message.startswith("entrada del plan 'up': el módulo denso no tiene el submódulo 'up'")


def test_collectives_that_differ_are_said_in_spanish():
    message = _raised(lambda: assert_collectives(nn.Linear(2, 2), torch.randn(1, 2), forward={"all-reduce": 1}),
                      AssertionError)
    want = _(COUNTS).format(forward="1 all-reduce", backward=_(NONE))
    assert message == _(DIFFER).format(want=want, found=_(COUNTS).format(forward=_(NONE), backward=_(NONE)))
    assert message.startswith("las colectivas no son las esperadas: se esperaba forward: 1 all-reduce; "
                              "backward: ninguna; hay")
    mlp = nn.Sequential(nn.Linear(2, 4), nn.Linear(4, 2))  # unsharded: none of the plan's all-reduces runs
    message = _raised(lambda: assert_collectives(mlp, torch.randn(1, 2, requires_grad=True),
                                                 plan={"0": "colwise", "1": "rowwise"}), AssertionError)
    assert message.splitlines()[1] == _(NEEDS_GRAD).format(path="0")
    assert "su entrada requiere gradiente, así que su f hace el all-reduce de dL/dx en el backward" in message


def test_a_replicated_tensor_that_differs_is_said_in_spanish(monkeypatch):
    a = torch.zeros(2, 3)
    b = a.clone()
    b[1, 2] = 0.5
    err = _(VALUES_DIFFER).format(name=_(TENSOR), rank=1, diff=0.5, where=(1, 2), n=1, total=6)
    assert replication_error([a, b]) == err
    assert err.startswith("el tensor difiere entre los ranks: el rank 1 frente al rank 0")
    monkeypatch.setattr(replicated, "gather_objects", lambda t, group=None: [a, b])  # rank 1's copy differs
    message = _raised(lambda: replicated.assert_replicated(a), AssertionError)
    assert message == _(MUST_BE_REPLICATED).format(error=err)
    assert "haz dist.broadcast de él desde el rank 0" in message
