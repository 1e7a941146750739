"""The distcheck subcommands' own lines under --lang es (strategy, memory, bubble, layout; pods' and budget's few):
every word of the frame in Spanish, with formulas, symbols, numbers, units, plan names and identifiers as they are
and the columns still aligned; the argument types' errors (commands/_numbers.py, --check's spec) too."""

from __future__ import annotations

import argparse

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.cli import main
from pytest_distcheck.commands import _numbers, bubble, budget, layout, pods
from pytest_distcheck.commands import memory as memory_command
from pytest_distcheck.commands import strategy as strategy_command
from pytest_distcheck.i18n import _


@pytest.fixture(autouse=True)
def _english_after():
    yield
    i18n.use(i18n.DEFAULT)


def _spanish(capsys, *argv: str) -> tuple[int, list[str]]:
    """``distcheck ARGV --lang es``: its exit status and its stdout's lines."""
    capsys.readouterr()
    rc = main([*argv, "--lang", "es"])
    return rc, capsys.readouterr().out.splitlines()


def _type_error(parse, text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as excinfo:
        parse(text)
    return str(excinfo.value)


def test_strategy_chooses_in_spanish(capsys):
    rc, lines = _spanish(capsys, "strategy", "--params", "7.5B", "--gpu-memory-gb", "80", "--gpus-per-node", "8")
    assert rc == 0
    assert lines[0] == _(strategy_command.CLUSTER).format(gpus=8, nodes=strategy_command.nodes(1), per_node=8,
                                                           memory=80, intra="nvlink", inter="", params=7.5e9)
    assert lines[0] == "8 GPU (1 nodo x 8, 80 GB, nvlink); modelo de 7.5e+09 parámetros"
    assert _(strategy_command.RECOMMENDED).format(plan="ZeRO-2 (FSDP SHARD_GRAD_OP)") in lines
    assert "  TP = 1, PP = 1, DP = 8, ZeRO-2, FSDP SHARD_GRAD_OP" in lines
    assert _(strategy_command.MEMORY_PER_GPU).format(total=62.6, states=28.1, activations=34.4, gathered="",
                                                     usable=72.0) in lines
    assert ("  memoria por GPU: 62.6 GB = estados del modelo 28.1 GB + activaciones 34.4 GB (72.0 GB utilizables)"
            in lines)
    assert _(strategy_command.RULES_FIRED) in lines and "reglas aplicadas:" in lines
    assert strategy_command.rejected_first(2) in lines
    assert "descartados antes (2 candidatos, en el orden en que se probaron):" in lines
    sources = [line for line in lines if line.startswith("        ")]
    assert sources and all(line.startswith("        fuente: ") for line in sources)


@pytest.mark.parametrize(("argv", "missing"), [
    ((), "--params (o --model), --gpu-memory-gb, --gpus-per-node"),
    (("--params", "7B"), "--gpu-memory-gb, --gpus-per-node"),
])
def test_strategy_says_what_to_give_in_spanish_once_prefixed(capsys, argv, missing):
    capsys.readouterr()
    assert main(["strategy", *argv, "--lang", "es"]) == 2
    assert _(strategy_command.OR_FLAG).format(flag="--params", other="--model") == "--params (o --model)"
    given = _(strategy_command.GIVE).format(missing=missing)
    assert given == f"da {missing} (o --rules para ver la tabla de decisión)"
    assert capsys.readouterr().err == f"distcheck strategy: {given}\n"


def test_strategy_speaks_spanish_across_nodes_for_a_published_model(capsys):
    rc, lines = _spanish(capsys, "strategy", "--model", "llama2-13b", "--gpu-memory-gb", "40", "--gpus-per-node", "8",
                         "--nodes", "2", "--intra", "pcie")
    assert rc == 0
    inter = _(strategy_command.INTER_NODE).format(inter=_(strategy_command.LINK_SPEED["fast"]))
    assert lines[0] == _(strategy_command.CLUSTER).format(gpus=16, nodes=strategy_command.nodes(2), per_node=8,
                                                           memory=40, intra="pcie", inter=inter, params=13015864320)
    assert lines[0].startswith("16 GPU (2 nodos x 8, 40 GB, pcie, red rápida entre nodos); modelo de ")
    assert lines[1] == ("arquitectura llama2-13b: L = 40 capas, h = 5120, a = 40 cabezas (40 cabezas KV), "
                        "s = 4096 tokens; fuente: Touvron et al. 2023 (Llama 2, arXiv:2307.09288) Tabla 1 "
                        "(contexto de 4k, GQA en 70B); meta-llama/Llama-2-13b-hf config.json")
    sources = [line for line in lines if line.startswith("        fuente: ")]
    assert "        fuente: Rajbhandari et al. 2019 (ZeRO) sec. 3.2 (estados residuales)" in sources
    assert ("        fuente: Narayanan et al. 2021 sec. 3.2, Takeaways #1 y #2; Shoeybi et al. 2019 sec. 3 (cabezas "
            "repartidas entre los ranks de TP); documentación de vLLM, parallelism_scaling (TP = GPU por nodo, "
            "PP = nodos)") in sources
    plan = next(line for line in lines if line.startswith("  TP = "))
    assert plan.endswith(", " + _(strategy_command.RECOMPUTATION).format(recompute="full") + ", "
                         + _(strategy_command.MICROBATCHES).format(m=12))
    assert plan == "  TP = 1, PP = 4, DP = 4, ZeRO-1, recomputación full, m >= 12 micro-batches"
    assert _(strategy_command.MORE).format(n=16) == "... 16 más ..." and "  - ... 16 más ..." in lines


def test_strategy_says_a_plan_does_not_fit_in_spanish(capsys):
    rc, lines = _spanish(capsys, "strategy", "--params", "13B", "--gpu-memory-gb", "24", "--gpus-per-node", "4",
                         "--nodes", "2", "--inter", "slow")
    assert rc == 1
    assert (_(strategy_command.RECOMMENDED).format(plan="TP=4 x PP=2 x DP=1") + "   "
            + _(strategy_command.DOES_NOT_FIT)) in lines
    assert "recomendado: TP=4 x PP=2 x DP=1   (NO CABE)" in lines
    assert any(", " + _(strategy_command.SEQUENCE_PARALLEL) + ", " in line for line in lines)
    assert "paralelismo de secuencia" in lines[3]


def test_strategy_check_names_the_broken_rules_in_spanish(capsys):
    cluster = ("--params", "175B", "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--nodes", "16")
    rc, lines = _spanish(capsys, "strategy", *cluster, "--check", "tp=8,pp=8,dp=2")
    assert rc == 0
    assert lines[1] == _(strategy_command.CHECKED_MEMORY).format(name="tp=8, pp=8, dp=2", total=35.9, states=27.3,
                                                                  activations=8.6, gathered=0.0, recompute="selective")
    assert lines[1].endswith("+ unidad reunida 0.0 GB (recomputación selective)")
    assert lines[2] == _(strategy_command.BREAKS_NO_RULE).format(name="tp=8, pp=8, dp=2")
    assert lines[2] == "el plan tp=8, pp=8, dp=2 no incumple ninguna regla"
    rc, lines = _spanish(capsys, "strategy", *cluster, "--check", "tp=8,pp=4,dp=4,zero=zero3,recompute=full")
    name = "tp=8, pp=4, dp=4, zero=zero3, recompute=full"
    assert rc == 1 and strategy_command.breaks(name, 1) in lines
    assert f"el plan {name} incumple 1 regla:" in lines
    i18n.use("es")
    assert strategy_command.breaks(name, 2) == f"el plan {name} incumple 2 reglas:"


def test_strategy_places_a_model_for_serving_in_spanish(capsys):
    model = ("--params", "8B", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
             "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--inference", "--context", "8192")
    rc, lines = _spanish(capsys, "strategy", *model, "--batch", "52")
    assert rc == 0
    assert _(strategy_command.SERVING).format(tp=1, pp=1, replicas=strategy_command.replicas(8)) in lines
    assert "recomendado para servir: TP = 1, PP = 1, 8 réplicas" in lines
    assert "  [INF] TP=1 x PP=1: TP dentro de un nodo; 8 réplicas en 8 GPU" in lines
    assert _(strategy_command.SERVING_MEMORY).format(total=71.8, weights=16.0, kv=55.8, usable=72.0) in lines
    assert "  memoria por GPU: 71.8 GB = pesos 16.0 GB + caché KV 55.8 GB (72.0 GB utilizables)" in lines
    rc, lines = _spanish(capsys, "strategy", *model, "--batch", "53")
    assert "recomendado para servir: TP = 2, PP = 1, 4 réplicas" in lines
    assert ("        fuente: Pope et al. 2022, 'Efficiently Scaling Transformer Inference', sec. 2 (caché KV); "
            "documentación de vLLM, parallelism_scaling (TP dentro de un nodo, PP entre nodos)") in lines
    assert strategy_command.rejected_first(1) in lines and "descartado antes (1 candidato):" in lines
    i18n.use("es")
    assert strategy_command.replicas(1) == "1 réplica"
    from pytest_distcheck.strategy.serving import placed

    assert placed(8, 1, "TP dentro de un nodo", 1, 8) == "TP=8 x PP=1: TP dentro de un nodo; 1 réplica en 8 GPU"


def test_strategy_rules_print_the_decision_table_in_spanish(capsys):
    rc, lines = _spanish(capsys, "strategy", "--rules")
    assert rc == 0
    assert lines[0] == _(strategy_command.RULES_HEADER)
    assert lines[0] == "tabla de decisión de distcheck strategy, en su orden de preferencia:"
    assert lines[2].startswith("        fuente: ") and not any("source:" in line for line in lines)
    from pytest_distcheck.strategy import SOURCES

    assert "        fuente: " + _(SOURCES["R1"]) in lines
    assert _(SOURCES["R1"]) == ("Rajbhandari et al. 2019 (ZeRO) sec. 5.1-5.2 (memoria), sec. 7.2.1 (comunicación = "
                                "la de DDP)")


def test_strategy_sources_and_link_speed_stay_english(capsys):
    from pytest_distcheck.strategy import ARCHITECTURES, SOURCES

    assert SOURCES["R1"] == "Rajbhandari et al. 2019 (ZeRO) sec. 5.1-5.2 memory, sec. 7.2.1 communication = DDP's"
    assert ARCHITECTURES["llama2-13b"].cited == ("Touvron et al. 2023 (Llama 2, arXiv:2307.09288) Table 1 (4k context, "
                                                 "GQA for 70B); meta-llama/Llama-2-13b-hf config.json")
    assert main(["strategy", "--model", "llama2-13b", "--gpu-memory-gb", "40", "--gpus-per-node", "8", "--nodes", "2",
                 "--intra", "pcie"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("16 GPUs (2 node(s) x 8, 40 GB, pcie, fast inter-node); model ")
    assert "        source: Rajbhandari et al. 2019 (ZeRO) sec. 3.2 (residual states)" in out


def test_english_keeps_its_counts_as_they_were():
    """English says "1 node(s)", "1 replica(s)", "1 rule(s)" as before; only Spanish chooses singular or plural."""
    assert strategy_command.nodes(1) == "1 node(s)" and strategy_command.replicas(1) == "1 replica(s)"
    assert strategy_command.breaks("tp=1", 1) == "plan tp=1 breaks 1 rule(s):"
    assert strategy_command.rejected_first(1) == "rejected first (1 candidates, in the order tried):"
    assert bubble.pipeline_line(1, 8, "GPipe / 1F1B") == "pipeline: p = 1 stages, m = 8 micro-batches (GPipe / 1F1B)"


def test_memory_tables_speak_spanish_with_their_columns_aligned(capsys):
    rc, lines = _spanish(capsys, "memory", "--params", "7.5B", "--dp", "64", "--gpus-per-node", "8")
    assert rc == 0
    assert lines[0] == _(memory_command.STATES_HEADER).format(
        psi=7.5e9, nd=64, split="", what=_(memory_command.RECIPE_BYTES).format(name="zero", bytes=16),
        variant="zero-paper", unit_note=_(memory_command.UNIT_NOTE["GB"]))
    assert lines[0].startswith("estados del modelo por GPU, Psi = 7.5e+09 parámetros, N_d = 64, receta zero, "
                               "16 B/parámetro; variante zero-paper")
    ddp = next(line for line in lines if line.startswith("  DDP / FSDP NO_SHARD"))
    assert ddp.endswith("(parámetros 15 GB, gradientes 15 GB, optimizador 90 GB)  sec. 3.1")
    hybrid = next(line for line in lines if line.startswith("  FSDP HYBRID_SHARD"))
    assert hybrid.endswith(_(memory_command.HYBRID_ROW)) and "dentro de un nodo" in hybrid
    distopt = next(line for line in lines if line.startswith("  " + _(memory_command.DISTOPT_NAME)))
    assert distopt.startswith("  optimizador distribuido de Megatron ")
    assert distopt.endswith("   " + _(memory_command.DISTOPT_SOURCE))
    assert distopt.endswith("   README de Megatron-LM, 'Distributed Optimizer'")
    # the formula column starts at one place in every row, the longer Spanish name included
    assert len({ddp.index("(2+2+K) Psi"), hybrid.index("(2+2+K) Psi/G"), distopt.index("4 Psi + 12 Psi/N_d")}) == 1
    assert "\n" + _(memory_command.PLAN_TOTAL).format(
        tp=1, pp=1, cp=1, dp=64, zero="zero1", recompute="none", total="31.41 GB", states="31.41 GB",
        activations="0 GB", gathered="0 GB", margin="0 GB") in "\n".join(lines)
    assert any(line.startswith("plan TP=1 x PP=1 x CP=1 x DP=64, zero1, recompute none: 31.41 GB por GPU = estados "
                               "31.41 GB + activaciones 0 GB + unidad reunida 0 GB + margen 0 GB") for line in lines)
    assert _(memory_command.ASSUMED) in lines and "supuestos:" in lines


def test_memory_activations_speak_spanish(capsys):
    rc, lines = _spanish(capsys, "memory", "--params", "175B", "--dp", "8", "--tp", "8", "--pp", "16", "--layers",
                         "96", "--hidden", "12288", "--heads", "96", "--seq-len", "2048")
    assert rc == 0
    assert lines[0].split("; ")[0].endswith(_(memory_command.SPLIT).format(tp=8, pp=16, local=175e9 / 128)
                                            + ", " + _(memory_command.RECIPE_BYTES).format(name="zero", bytes=16))
    assert ", TP = 8, PP = 16 (abajo, Psi = Psi/(TP x PP) = 1.367e+09 por GPU)" in lines[0]
    assert _(memory_command.ACTIVATIONS_HEADER).format(s=2048, b=1, h=12288, a=96, t=8, L=96) in lines
    assert "activaciones, s = 2048, b = 1, h = 12288, a = 96, t = 8, L = 96, 16 bits (Korthikanti et al. 2022)" in lines
    rows = {name: next(line for line in lines if line.startswith("  " + _(name)))
            for name in (memory_command.NO_RECOMPUTATION, memory_command.TP_SEQUENCE_PARALLEL,
                         memory_command.TP_SELECTIVE, memory_command.TP_SP_SELECTIVE,
                         memory_command.FULL_RECOMPUTATION)}
    assert rows[memory_command.TP_SEQUENCE_PARALLEL].startswith("  TP + paralelismo de secuencia  (sbh/t)(34 + 5as/h)")
    assert rows[memory_command.FULL_RECOMPUTATION].endswith(" GB para L capas  " + _(memory_command.TABLE_2))
    assert " GB/capa " in rows[memory_command.TP_SELECTIVE] and rows[memory_command.TP_SELECTIVE].endswith("Tabla 2")
    assert len({line.index("GB/capa") for line in rows.values()}) == 1
    assert _(memory_command.FIRST_STAGE) in lines and lines[lines.index(_(memory_command.FIRST_STAGE))].startswith(
        "  (con 1F1B, la primera etapa del pipeline")


def test_memory_framework_tables_speak_spanish(capsys):
    rc, lines = _spanish(capsys, "memory", "--params", "2851M", "--dp", "8", "--variant", "deepspeed-docs",
                         "--unit", "GiB")
    assert rc == 0
    assert lines[0].startswith("estados del modelo, variante deepspeed-docs (documentación de DeepSpeed, "
                               "docs/code-docs/source/memory.rst ('Memory Requirements')); ")
    assert lines[0].endswith(_(memory_command.UNIT_NOTE["GiB"])) and 'lo que DeepSpeed imprime como "GB"' in lines[0]
    assert lines[1] == "  Psi = 2.851e+09, 1 nodo x 8 GPU; N = 8"
    assert lines[2].endswith(" " + _(memory_command.DEEPSPEED_ROW).format(
        gpu="   5.31 GiB", gpu_formula="2 Psi", host=" 127.45 GiB", host_formula="1.5 x max(4 N, 16) Psi"))
    assert "por GPU    5.31 GiB (2 Psi); por nodo  127.45 GiB" in lines[2]
    assert _(memory_command.ZERO3_NEEDS_LAYER) in lines
    assert "  (las filas de ZeRO-3 necesitan --largest-layer: el 4L de DeepSpeed, la capa más grande reunida)" in lines
    rc, lines = _spanish(capsys, "memory", "--params", "7B", "--dp", "8", "--variant", "megatron-distopt")
    assert lines[1] == _(memory_command.DISTOPT_GROUP).format(group=8, local=7e9)
    assert lines[1] == "  por GPU, d = N_d = 8, Psi = 7e+09 por GPU"


def test_memory_sources_and_offload_formulas_speak_spanish(capsys):
    from pytest_distcheck.calc import estimators

    rc, lines = _spanish(capsys, "memory", "--params", "2851M", "--dp", "8", "--variant", "deepspeed-estimator",
                         "--unit", "GiB")
    assert rc == 0
    source = _(estimators.SOURCES["deepspeed-estimator"])
    assert source == ("deepspeed/runtime/zero/stage_1_and_2.py y stage3.py, "
                      "estimate_zero{2,3}_model_states_mem_needs, desde el PR #5099 de DeepSpeed")
    assert lines[0] == _(memory_command.FRAMEWORK_HEADER).format(
        variant="deepspeed-estimator", source=source, unit_note=_(memory_command.UNIT_NOTE["GiB"]))
    rc, lines = _spanish(capsys, "memory", "--params", "7B", "--dp", "8", "--variant", "megatron-distopt")
    assert "(README de Megatron-LM, 'Distributed Optimizer' (bytes teóricos por parámetro))" in lines[0]
    rc, lines = _spanish(capsys, "memory", "--params", "7B", "--dp", "16", "--gpus-per-node", "8", "--zero", "zero3",
                         "--offload-optimizer", "cpu")
    assert rc == 0
    offload = next(line for line in lines if line.startswith("  offload zero3"))
    assert "(la GPU guarda parámetros + 4L); por nodo, CPU 73.5 GB (1.5 x n x (gradientes+optimizador))" in offload
    assert offload.endswith("  " + _(estimators.SOURCES["zero-paper"]))


def test_memory_says_in_spanish_why_the_plan_is_zero_paper(capsys):
    rc, lines = _spanish(capsys, "memory", "--params", "2851M", "--dp", "8", "--largest-layer", "32M", "--variant",
                         "deepspeed-docs", "--unit", "GiB")
    assert rc == 0
    plan = next(i for i, line in enumerate(lines) if line.startswith("plan TP=1"))
    assert lines[plan].endswith("(variante zero-paper)")
    assert lines[plan + 1] == _(memory_command.PLAN_VARIANT).format(variant="deepspeed-docs")
    assert lines[plan + 1] == ("  (el plan cuenta --zero y --recipe como el artículo de ZeRO, sea cual sea --variant, "
                               "y les suma las activaciones y la unidad reunida; la tabla deepspeed-docs de arriba es "
                               "la estimación propia de ese framework, para comparar)")


def test_memory_sources_and_offload_formulas_stay_english(capsys):
    from pytest_distcheck.calc import estimators

    assert estimators.SOURCES["deepspeed-estimator"] == (
        "deepspeed/runtime/zero/stage_1_and_2.py and stage3.py, estimate_zero{2,3}_model_states_mem_needs, "
        "after DeepSpeed PR #5099")
    assert main(["memory", "--params", "7B", "--dp", "16", "--gpus-per-node", "8", "--zero", "zero3",
                 "--offload-optimizer", "cpu"]) == 0
    assert "(GPU holds params + 4L); per node CPU 73.5 GB (1.5 x n x (grads+optimizer))" in capsys.readouterr().out


def test_bubble_speaks_spanish_with_its_columns_aligned(capsys):
    rc, lines = _spanish(capsys, "bubble", "-p", "4", "-m", "8", "-v", "2")
    assert rc == 0
    assert lines[0] == bubble.pipeline_line(4, 8, _(bubble.INTERLEAVED).format(v=2))
    assert lines[0] == "pipeline: p = 4 etapas, m = 8 micro-batches (1F1B intercalado, v = 2)"
    assert lines[1].startswith("  " + _(bubble.OVER_IDEAL)) and lines[1].startswith("  burbuja / tiempo de cómputo")
    assert lines[2].startswith("  " + _(bubble.OVER_TOTAL)) and lines[3].startswith("  " + _(bubble.IN_FLIGHT))
    assert lines[1].index("(p-1)/(v*m)") == lines[2].index("((p-1)/v)") == lines[3].index("GPipe m = 8")
    assert lines[4] == "  " + _(bubble.NEEDS_M).format(need=8) + " " + _(bubble.MULTIPLE_OF_P)
    assert lines[4] == "  burbuja del 20% o menos de la iteración: hace falta m >= 8 (un múltiplo de p)"
    assert lines[5] == _(bubble.FIRST_CAN_EXCEED) and lines[5].startswith("El primer número puede pasar de 1")
    rc, lines = _spanish(capsys, "bubble", "-p", "1", "-m", "8")
    assert lines[0] == "pipeline: p = 1 etapa, m = 8 micro-batches (GPipe / 1F1B)"
    assert "= 0/8 = 0 (0.0%)" in lines[2] and lines[4] == _(bubble.ONE_STAGE)
    assert lines[4] == ("  una sola etapa: no hay pipeline, así que no hay burbuja (ninguna etapa espera a otra); "
                        "m solo divide el batch")


def test_layout_speaks_spanish_with_its_columns_aligned(capsys):
    rc, lines = _spanish(capsys, "layout", "--gpus", "64", "--tp", "4", "--pp", "8", "--vp", "5", "--mbs", "1",
                         "--gbs", "128", "--layers", "80", "--ga", "64")
    assert rc == 0
    assert lines[0] == _(layout.LAYOUT).format(gpus=64, tp=4, pp=8, cp=1, dp="2")
    assert lines[0].startswith("disposición: 64 GPU = TP 4 x PP 8 x CP 1 x DP 2")
    assert lines[1].startswith("  " + _(layout.MICROBATCHES)) and lines[1].endswith("   " + _(layout.GA_COUNT))
    assert lines[1].endswith("   el número de pasos de acumulación de gradientes")
    assert lines[2].startswith("  " + _(layout.CHUNK_LAYERS)) and lines[3].startswith("  " + _(layout.BUBBLE))
    assert lines[1].index("m = GBS") == lines[2].index("L / (PP x VP)") == lines[3].index("(p-1)/(v*m)")
    assert lines[-1] == _(layout.CONSISTENT) == "coherente: todas las divisiones son exactas"
    rc, lines = _spanish(capsys, "layout", "--gpus", "60", "--tp", "4", "--pp", "8", "--mbs", "1", "--gbs", "128")
    assert rc == 1 and _(layout.DOES_NOT_ADD_UP) in lines and "no cuadra:" in lines


def test_pods_and_budget_speak_spanish(capsys):
    assert main(["pods", "--all", "--lang", "es"]) == 2
    assert _(pods.ALL_NEEDS_SWEEP) in capsys.readouterr().err
    i18n.use("es")
    assert _(pods.ALL_NEEDS_SWEEP) == "--all solo va con --sweep" and _(pods.ORPHAN) == "HUÉRFANO: "
    # each column head of the ledger table fits the width its rows take, so the table stays aligned
    heads = [_(c) for c in budget.COLUMNS]
    assert heads[0] == "hora (UTC)"
    assert all(len(h) <= w for h, w in zip(heads, (20, 16, 7, 20, 8, 7, 9, 14), strict=False))


def test_the_argument_types_refuse_in_spanish():
    i18n.use("es")
    assert _type_error(_numbers.count, "abc") == _(_numbers.NOT_A_COUNT).format(text="abc")
    assert _type_error(_numbers.count, "abc") == "'abc' no es una cantidad (p. ej., 7.5e9, 7.5B, 350M)"
    assert _type_error(_numbers.count, "-5") == _(_numbers.MUST_BE_POSITIVE).format(text="-5")
    assert _type_error(_numbers.count, "7.5X") == _(_numbers.UNKNOWN_SUFFIX).format(text="7.5X", suffix="X")
    assert _type_error(_numbers.count, "1e17") == "'1e17' pasa de 1e+16; ¿hay una errata?"
    assert _type_error(_numbers.count, "7.5") == _(_numbers.UNDER_1000).format(text="7.5", hint="7.5B")
    assert _type_error(_numbers.count, "350") == (
        "'350' parámetros son menos de 1000: ¿querías decir " + _(_numbers.M_OR_B).format(digits="350") + "?")
    assert _(_numbers.M_OR_B).format(digits="350") == "350M o 350B"
    assert _type_error(_numbers.count, "1e400") == _(_numbers.NOT_FINITE).format(text="1e400")
    assert _type_error(_numbers.positive_int, "x") == "'x' no es un número entero"
    assert _type_error(_numbers.positive_int, "0") == _(_numbers.AT_LEAST_1).format(text="0")
    assert _type_error(_numbers.positive_int, "10000000000") == _(_numbers.OVER).format(text="10000000000",
                                                                                         limit="1,000,000,000")
    fraction = _numbers.real(0, 1, low_open=True)
    assert _type_error(fraction, "0") == _(_numbers.OUTSIDE).format(text="0", interval="(0, 1]")
    assert _type_error(fraction, "0") == "'0' está fuera de (0, 1]"
    assert _type_error(fraction, "x") == _(_numbers.NOT_A_NUMBER).format(text="x") == "'x' no es un número"
    assert _type_error(fraction, "nan") == "'nan' no es un número finito"


def test_the_check_spec_refuses_in_spanish():
    i18n.use("es")
    spec = strategy_command._plan_spec
    assert _type_error(spec, "foo=1") == _(strategy_command.NOT_KEY_VALUE).format(
        item="foo=1", keys="tp, pp, dp, cp, zero, recompute")
    assert _type_error(spec, "foo=1").startswith("'foo=1': se esperaba CLAVE=VALOR")
    assert _type_error(spec, "tp=8,pp=4,dp=2,recompute=x") == "'recompute=x': recompute es none, selective o full"
    assert _type_error(spec, "tp=8") == _(strategy_command.SPEC_LACKS).format(text="tp=8", missing="pp, dp")
    assert _type_error(spec, "tp=8") == "a 'tp=8' le falta: pp, dp (p. ej., tp=8,pp=4,dp=2)"
    assert _type_error(spec, "tp=0,pp=1,dp=1") == "'0' debe ser >= 1"


def test_estimate_says_a_prices_confidence_in_spanish(capsys):
    from pytest_distcheck.commands.estimate import CONFIDENCE

    assert main(["estimate", "--gpu", "RTX 4090", "--count", "2", "--minutes", "25", "--pod", "--lang", "es"]) == 0
    out = capsys.readouterr().out
    assert "confianza media)" in out and _(CONFIDENCE["medium"]) == "media"


def test_estimate_says_its_sources_and_what_is_left_in_spanish(capsys):
    from decimal import Decimal

    from pytest_distcheck.budget.errors import usd
    from pytest_distcheck.commands.budget import load_guard
    from pytest_distcheck.commands.estimate import LEFT_AFTER, SHORT

    assert main(["estimate", "--gpu", "RTX 4090", "--count", "2", "--minutes", "30", "--lang", "es"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("fuente: skypilot-org/skypilot-catalog catalogs/v8/runpod/vms.csv @46062acb (generado a partir del "
            "securePrice de la API de RunPod);") in lines[1]
    assert lines[2].endswith("(fuente: documentación de RunPod, pods/pricing.mdx y accounts-billing/billing.mdx: "
                             "los pods se facturan por segundo (el saldo se descuenta cada 5 minutos))")
    # the kit's own workspace: what is left of its phase ceiling (the ledger this checkout ships)
    i18n.use("es")
    phase = load_guard("checks/distcheck.toml").status().limits["phase"]
    left, after, short = usd(phase.left), usd(phase.left - Decimal("0.59")), usd(Decimal("19.12") - phase.left)
    assert phase.name.startswith("tope de la fase de ")
    assert lines[-1] == _(LEFT_AFTER).format(after=after, left=left, limit=phase.name)
    assert lines[-1] == f"  saldo tras esta ejecución: {after} (ahora quedan {left} del {phase.name})"
    assert main(["estimate", "--gpu", "H100", "--count", "8", "--minutes", "60", "--lang", "es"]) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (f"  saldo tras esta ejecución: {_(SHORT).format(usd=short)} "
                    f"(ahora quedan {left} del {phase.name})")
    assert last.startswith(f"  saldo tras esta ejecución: NO ALCANZA, faltan {short} (ahora quedan {left} del tope")


def test_estimate_keeps_its_english(capsys):
    assert main(["estimate", "--gpu", "RTX 4090", "--count", "2", "--minutes", "30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("source: skypilot-org/skypilot-catalog catalogs/v8/runpod/vms.csv @46062acb (generated from the RunPod "
            "API's securePrice);") in lines[1]
    assert lines[2].endswith("pods are billed per second (balance debited every 5 minutes))")
    assert lines[-1].startswith("  left after: $") and " left under the phase ceiling $" in lines[-1]
