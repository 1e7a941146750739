"""The calculators and the strategy chooser under --lang es: their input errors and the text a learner reads (rules,
rejected plans, memory assumptions, layout problems) in Spanish; names of arguments, options and values stay."""

from __future__ import annotations

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.calc import (
    collectives,
    cost,
    estimators,
    flops,
    inference,
    layout,
    memory,
    pipeline,
    precision,
    tp_traffic,
)
from pytest_distcheck.calc._checks import FINITE_POSITIVE, NON_NEGATIVE, RANKS_N, WHOLE
from pytest_distcheck.cli import main
from pytest_distcheck.commands import memory as memory_command
from pytest_distcheck.commands import strategy as strategy_command
from pytest_distcheck.i18n import _
from pytest_distcheck.strategy import Cluster, Model, check, choose, choose_inference
from pytest_distcheck.strategy.checking import SIZE
from pytest_distcheck.strategy.model import ONE_OF, USABLE_FRACTION
from pytest_distcheck.strategy.serving import NOTHING_FITS
from pytest_distcheck.strategy.training import R9_MICROBATCHES, SINGLE_GPU


@pytest.fixture(autouse=True)
def _spanish_then_english():
    i18n.use("es")
    yield
    i18n.use(i18n.DEFAULT)


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as excinfo:
        call(*args, **kwargs)
    return str(excinfo.value)


def test_the_shared_checks_speak_spanish_and_translate_a_described_argument_but_not_an_identifier():
    assert _error(collectives.busbw_factor, "all_reduce", 0) == _(WHOLE).format(name=_(RANKS_N), minimum=1, value=0)
    assert _error(collectives.busbw_factor, "all_reduce", 0) == (
        "número de ranks n debe ser un número entero >= 1; se ha recibido 0")
    assert _error(flops.training_flops, 0, 1e9) == "params debe ser > 0; se ha recibido 0"
    assert _error(cost.billed_seconds, -1) == _(NON_NEGATIVE).format(name="runtime_s", value=-1)
    assert _error(inference.serving_bytes_per_gpu, float("nan"), 32, 1, 1, 4096, 32) == _(FINITE_POSITIVE).format(
        name="params", value=float("nan"))


def test_collectives_name_what_they_know_in_spanish():
    said = _error(collectives.collective_seconds, "reduce", 1e6, 4, 0.0, 1e9)
    assert said == _(collectives.NO_MODEL).format(collective="reduce",
                                                  known="all_reduce, reduce_scatter, all_gather, alltoall, broadcast")
    assert said.startswith("no hay modelo alfa-beta para 'reduce'")
    assert _error(collectives.busbw_factor, "gather", 4).startswith("colectiva desconocida 'gather'; conocidas: ")
    assert _error(collectives.dp_bytes_per_step, 1e9, "HYBRID_SHARD", 8) == _(collectives.HYBRID_BYTES)


def test_pipeline_bubble_errors_in_spanish():
    said = _error(pipeline.bubble_fraction_of_total, 4, 6, 2)
    assert said == _(pipeline.INTERLEAVED_M).format(m=6, p=4, remainder=2)
    assert said.startswith("el calendario intercalado necesita que el número de micro-batches m sea múltiplo")
    assert _error(pipeline.bubble_ratio_over_ideal, 0, 8) == (
        "p (etapas del pipeline) debe ser un número entero >= 1; se ha recibido 0")
    assert "debe estar en (0, 1)" in _error(pipeline.min_microbatches_for_bubble, 4, 1.5)


def test_memory_errors_and_assumptions_in_spanish():
    assert _error(memory.fsdp_model_states, 1e9, "HYBRID_SHARD", 16) == _(memory.HYBRID_NEEDS_NODE).format(
        strategy="HYBRID_SHARD")
    assert _error(memory.zero_model_states, 1e9, "zero4", 8).startswith("etapa de ZeRO desconocida 'zero4'")
    assert _error(memory.zero_model_states, 1e9, 1, 0).startswith("dp (grado de paralelismo de datos) debe ser")
    assert _error(memory.model_states, 1e9, "zero", "zero1", dp=8, shard_group=3) == (
        "shard_group=3 debe dividir dp * cp = 8")
    notes = memory.plan_memory(7e9, sharding="zero3", dp=8, layers=32, hidden=4096, heads=32, seq_len=4096,
                               recompute="selective", cp=2).assumptions
    source = _(precision.recipe("zero").source)
    assert notes[0] == _(memory.PRECISION_NOTE).format(name="zero", bytes=16, source=source)
    assert "parámetros fp32, momento, varianza" in notes[0]
    assert notes[2] == _(memory.ACTIVATIONS_NOTE).format(recompute="selective", sp=_(memory.SP_OFF), layers=32,
                                                         split=_(memory.SPLIT_OVER_CP).format(cp=2))
    assert "paralelismo de secuencia desactivado" in notes[2] and "repartidas entre CP = 2" in notes[2]
    assert notes[3].startswith("ZeRO-3/FSDP: una unidad reunida de")


def test_precision_tp_traffic_estimators_and_inference_errors_in_spanish():
    assert _error(precision.recipe, "fp4") == _(precision.UNKNOWN_RECIPE).format(
        recipe="fp4", known=", ".join(precision.PRESETS))
    assert _error(precision.dtype_bytes, "int4").startswith("dtype desconocido 'int4'; conocidos: fp32")
    assert _error(precision.scheme, "zero9").startswith("sharding desconocido 'zero9'")
    assert _error(tp_traffic.tp_allreduces_per_layer, "half") == _(memory.UNKNOWN_RECOMPUTE).format(
        recompute="half", known="none, selective, full")
    assert _error(tp_traffic.tp_collectives_per_layer, regather_input=True) == _(tp_traffic.REGATHER_NEEDS_SP)
    assert "da también sequence_parallel=True" in _(tp_traffic.REGATHER_NEEDS_SP)
    said = _error(estimators.offload_placement, 1e9, "zero2", 8, 8, "cpu", "cpu")
    assert said == _(estimators.PARAM_OFFLOAD_STAGE).format(stage="zero2")
    assert said == "el offload de parámetros (ZeRO-Infinity) necesita ZeRO-3, no 'zero2'"
    assert estimators.offload_placement(1e9, "zero3", 8, 8, "cpu", "cpu").gpu_formula == "la GPU guarda 4L"
    assert _error(inference.kv_cache_bytes, 32, 1, 4096, 4096, 32, 5) == _(inference.HEADS_DIVIDE).format(
        hidden=4096, heads=32, kv_heads=5)
    assert _error(inference.serving_bytes_per_gpu, 7e9, 32, 1, 4096, 4096, 32, pp=3) == (
        "layers=32 debe ser divisible entre pp=3")
    assert "cota inferior" in _(estimators.LOWER_BOUND)


def test_a_layout_that_does_not_add_up_says_why_in_spanish():
    problems = layout.derive_layout(63, 1, 1, 1, 128).problems
    assert problems == (_(layout.M_NOT_WHOLE).format(gbs=128, per_step="63", m="2.032"),)
    assert problems[0] == "GBS = 128 no es múltiplo de DP x MBS = 63: 2.032 micro-batches por paso"


def test_the_strategy_inputs_are_refused_in_spanish():
    cluster = Cluster(80, 8)
    assert _error(choose, Model(7e9), cluster, 1.5) == _(USABLE_FRACTION).format(value=1.5)
    assert _error(choose, Model(7e9, layers=0), cluster) == (
        "el campo layers del modelo debe ser un número entero >= 1; se ha recibido 0")
    assert _error(choose, Model(7e9), Cluster(80, 8, intra_node="ib")) == _(ONE_OF).format(
        name="intra_node", choices=("nvlink", "pcie"), value="ib")
    assert _error(check, Model(7e9), cluster, 0, 1, 8) == "tp debe ser un número entero >= 1; se ha recibido 0"
    assert _error(choose_inference, Model(7e9), cluster, 0, 4096).startswith("batch debe ser un número entero")


def test_the_chooser_explains_its_plan_in_spanish_and_keeps_its_identifiers():
    plan = choose(Model(175e9), Cluster(80, 8, nodes=16))
    texts = {rule.id: rule.text for rule in plan.rules}
    assert texts["R9"] == _(R9_MICROBATCHES).format(m=12, fraction=0.2)
    assert texts["R9"] == "usa m >= 12 micro-batches por batch: burbuja del 20.0% de la iteración"
    assert texts["R4"].startswith("no cabe ningún sharding de paralelismo de datos: TP=8 dentro de un nodo")
    assert texts["ACT"].startswith("arquitectura no indicada: activaciones contadas con la forma de Megatron-LM")
    assert plan.rejected[0].startswith("DDP, recompute none: ") and " GB por GPU (estados " in plan.rejected[0]
    assert choose(Model(1e8), Cluster(80, 1)).name == _(SINGLE_GPU) == "una sola GPU"
    broken, _mem = check(Model(7e9), Cluster(80, 8), 3, 1, 1)
    assert [r.id for r in broken] == ["SIZE", "R4"]
    assert broken[0].text == _(SIZE).format(tp=3, pp=1, cp=1, dp=1, product=3, gpus=8)
    assert broken[0].text.endswith("pero el clúster tiene 8 GPU")
    served = choose_inference(Model(70e9), Cluster(80, 8, intra_node="pcie"), 32, 4096)
    assert served.rules[-1].text == _(NOTHING_FITS) and served.rules[-1].text.startswith("no cabe nada: ")


def test_the_decision_table_prints_in_spanish_with_its_sources_titles_as_published(capsys):
    strategy_command.print_rules()
    out = capsys.readouterr().out
    assert "[R6] PP -> su parte de paralelismo de datos usa ZeRO-1, no ZeRO-2/3" in out
    # the label and the source's own words translated; the names of pages and papers as published
    assert "fuente: HF perf_train_gpu_many (ZeRO-2/3 con PP); Ultra-Scale Playbook" in out
    assert ("fuente: documentación de HF Transformers v4.39, perf_train_gpu_many, 'Model doesn't fit onto a single "
            "GPU' (sin NVLink") in out


def test_the_commands_print_these_errors_in_spanish_with_lang_es(capsys):
    assert main(["bubble", "-p", "4", "-m", "6", "-v", "2", "--lang", "es"]) == 2
    assert capsys.readouterr().err.strip() == "distcheck bubble: " + _(pipeline.INTERLEAVED_M).format(
        m=6, p=4, remainder=2)
    assert main(["memory", "--params", "7B", "--dp", "8", "--tp", "3", "--heads", "32", "--hidden", "4096",
                 "--layers", "32", "--seq-len", "2048", "--lang", "es"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "distcheck memory: " + _(memory_command.TP_HEADS).format(tp=3, heads=32)
    assert err.startswith("distcheck memory: --tp 3 no divide --heads 32: TP da a cada rank cabezas de atención")
