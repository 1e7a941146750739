"""The TP speedup experiment (experiments/tp_inference/speedup.py) and the result format it writes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pytest_distcheck.phase35.tp_result import compute_speedups, load_result, problems

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "fixtures" / "tp_inference" / "synthetic-cuda-2gpu.json"
TINY = ["--batch-sizes", "1,2", "--prompt-lens", "8", "--new-tokens", "2", "--warmup", "0", "--reps", "2"]


def _run_speedup(argv: list[str]):
    import torch

    from experiments.tp_inference.speedup import parse_args, run

    return run(parse_args(argv), torch.device("cpu"))


@pytest.mark.world_size(2)
def test_speedup_runs_on_two_gloo_ranks_and_writes_a_valid_result(dist_world, tmp_path):
    out = tmp_path / "r.json"
    paths = dist_world.run(_run_speedup, [*TINY, "--torch-tp", "--out", str(out), "--run-id", "test-0001"],
                           timeout=180)
    assert paths == [out, None]  # rank 0 writes
    result = load_result(out)  # schema-valid
    assert problems(result) == []
    assert (tmp_path / result["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["run_id"] == "test-0001"
    assert "experiments/tp_inference/speedup.py" in result["sources"]  # the code it came from, hashed
    assert (result["device"]["type"], result["backend"], result["world_size"]) == ("cpu", "gloo", 2)
    assert result["settings"]["timer"] == "wall-clock" and result["versions"]["nccl"] is None
    layers = result["model"]["n_layers"]
    got = {(m["tp"], m["batch_size"]): m for m in result["measurements"]}
    assert sorted(got) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    # Two all-reduces per block in forward (Megatron-LM Fig. 3), none at TP 1.
    assert [got[(1, b)]["allreduces_per_forward"] for b in (1, 2)] == [0, 0]
    assert [got[(2, b)]["allreduces_per_forward"] for b in (1, 2)] == [2 * layers] * 2
    assert got[(2, 1)]["prefill_allreduce_s"] > 0 and got[(1, 1)]["prefill_allreduce_s"] == 0
    assert [(s["tp"], s["batch_size"]) for s in result["speedups"]] == [(2, 1), (2, 2)]
    # --torch-tp: PyTorch's parallelize_module timed beside the lab's layers at TP 2, with the ratio.
    assert result["settings"]["torch_tp"] is True and "torch_tp_decode_step_s" not in got[(1, 1)]
    m = got[(2, 1)]
    assert len(m["torch_tp_decode_step_s"]["samples"]) == 2 and len(m["torch_tp_prefill_s"]["samples"]) == 2
    ratio = m["torch_tp_decode_step_s"]["median"] / m["decode_step_s"]["median"]
    assert m["torch_tp_decode_ratio"] == pytest.approx(ratio)
    assert "at the end)" in result["notes"]  # host load at start and end
    bad = copy.deepcopy(result)
    bad["measurements"][2]["torch_tp_decode_ratio"] *= 2
    assert [p for p in problems(bad) if "measurements[2].torch_tp_decode_ratio" in p]


def test_without_torchrun_it_says_how_to_run(capsys, monkeypatch):
    from experiments.tp_inference import speedup

    monkeypatch.delenv("RANK", raising=False)
    assert speedup.main([]) == 2
    assert "torchrun --nproc_per_node 2 -m experiments.tp_inference.speedup" in capsys.readouterr().err


def test_settings_that_do_not_fit_are_refused():
    from experiments.tp_inference.speedup import _settings, parse_args

    with pytest.raises(SystemExit, match=r"--tp-degrees \[1, 4\]: need TP 1 and degrees <= the world size 2"):
        _settings(parse_args(["--tp-degrees", "1,4"]), "gloo", 2)
    with pytest.raises(SystemExit, match="prompt length 500 \\+ 16 new tokens exceed the model's max_seq_len 160"):
        _settings(parse_args(["--prompt-lens", "500"]), "gloo", 2)
    with pytest.raises(SystemExit):  # argparse: not a list of whole numbers
        parse_args(["--batch-sizes", "1,x"])
    assert _settings(parse_args([]), "gloo", 4)["tp_degrees"] == [1, 2, 4]


def test_a_tp_degree_that_does_not_split_the_model_evenly_is_refused_before_tp_1_is_timed():
    from experiments.tp_inference.speedup import _settings, parse_args
    from pytest_distcheck.tp.plan import DOES_NOT_FIT, EVEN_SHARDS, HEADS_NOT_DIVISIBLE, NOT_DIVISIBLE

    with pytest.raises(SystemExit) as info:  # the cpu preset: d_model 256, 8 heads, d_ff 1024
        _settings(parse_args(["--tp-degrees", "1,3"]), "gloo", 4)
    text = str(info.value)
    # One sentence of the kit's (the language in use), not the lab's English around it.
    assert text.startswith("--tp-degrees [1, 3] (cpu preset): " + DOES_NOT_FIT.split("{problems}")[0].format(t=3))
    assert NOT_DIVISIBLE.format(what="attn.out in_features", length=256, t=3) in text
    assert HEADS_NOT_DIVISIBLE.format(heads=8, t=3, per=8 / 3) in text and text.endswith(EVEN_SHARDS)
    assert _settings(parse_args([]), "gloo", 3)["tp_degrees"] == [1, 2]  # the default skips what does not fit


# -- the result format: what problems() finds --------------------------------------------------------
@pytest.fixture
def result() -> dict:
    return json.loads(FIX.read_text())


def test_speedups_are_tp1_latency_over_tp_latency(result):
    m = {(x["tp"], x["batch_size"]): x for x in result["measurements"]}
    (s,) = [s for s in compute_speedups(result["measurements"]) if s["batch_size"] == 16]
    assert s["prefill"] == pytest.approx(m[(1, 16)]["prefill_s"]["median"] / m[(2, 16)]["prefill_s"]["median"])
    assert s["decode"] == pytest.approx(0.0046 / 0.0029)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["measurements"][0]["prefill_s"].update(median=1.0),
         "measurements[0].prefill_s.median = 1 but its samples give 0.02"),
        (lambda r: r["measurements"][1].update(decode_tokens_per_s=1.0),
         "measurements[1].decode_tokens_per_s = 1 but batch_size / median decode_step_s = 3478.26"),
        (lambda r: r["measurements"].append(copy.deepcopy(r["measurements"][0])),
         "measurements[4] measures tp=1, batch_size=1, prompt_len=128 again (first in measurements[0])"),
        (lambda r: r.update(world_size=1), "measurements[2].tp = 2 exceeds world_size 1"),
        (lambda r: r["speedups"].pop(), "speedups has no entry for tp=2, batch_size=16, prompt_len=128"),
        (lambda r: r["speedups"].append({**r["speedups"][0], "prompt_len": 64}),
         "speedups[2] (tp=2, batch_size=1, prompt_len=64) has no measurement at that TP degree and at TP 1"),
        (lambda r: r["speedups"][0].update(prefill=2.0),
         "speedups[0].prefill = 2 but the measurements give 1.42857 (median prefill_s at TP 1 / at TP 2)"),
    ],
)
def test_problems_names_each_disagreement(result, edit, message):
    assert problems(result) == []
    edit(result)
    assert any(p.startswith(message) for p in problems(result)), problems(result)
