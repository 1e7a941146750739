"""speedup.py never falls back: a run tied to a reservation names its backend and device, CUDA that is
not usable stops it, and results get a new name per run id and are never overwritten."""

from __future__ import annotations

import pytest

from experiments.tp_inference import speedup


def _choose(argv: list[str]):
    return speedup.backend_and_device(speedup.parse_args(argv))


def test_a_run_with_a_run_id_must_name_backend_and_device():
    for argv in (["--run-id", "r1"], ["--run-id", "r1", "--backend", "nccl"], ["--run-id", "r1", "--device", "cuda"]):
        with pytest.raises(SystemExit, match="give --backend and --device explicitly"):
            _choose(argv)
    assert _choose(["--run-id", "r1", "--backend", "gloo", "--device", "cpu"]) == ("gloo", "cpu")


def test_a_run_id_from_the_environment_counts_too(monkeypatch):
    monkeypatch.setenv("DISTCHECK_RUN_ID", "r9")
    with pytest.raises(SystemExit, match="give --backend and --device explicitly"):
        _choose([])


def test_cuda_that_is_not_usable_stops_the_run_instead_of_falling_back(monkeypatch):
    monkeypatch.setattr(speedup.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"--device cuda, but CUDA is not usable here: torch .* "
                                         r"torch.cuda.is_available\(\) is False; not falling back to the CPU"):
        _choose(["--run-id", "r1", "--backend", "nccl", "--device", "cuda"])
    with pytest.raises(SystemExit, match="not falling back"):
        _choose(["--backend", "nccl"])  # the device follows nccl: cuda, which is not usable
    with pytest.raises(SystemExit, match="--backend gloo with --device cuda: nccl runs on cuda, gloo on cpu"):
        _choose(["--backend", "gloo", "--device", "cuda"])
    assert _choose([]) == ("gloo", "cpu")  # a local run without a run id still picks what is there


def test_an_existing_output_is_refused_before_the_run(tmp_path, monkeypatch):
    out = tmp_path / "committed.json"
    out.write_text("{}")
    with pytest.raises(SystemExit, match="committed.json exists; results are never overwritten"):
        _choose(["--out", str(out)])
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SystemExit, match="never overwritten"):  # main() stops before any process group
        speedup.main(["--out", str(out)])
    assert out.read_text() == "{}"


def test_results_get_a_new_name_per_run_id():
    assert speedup.result_name("cuda", "nccl", 2, "5e55101d-a1b2c3") == "speedup-cuda-nccl-2-5e55101d-a1b2c3.json"
    assert speedup.result_name("cpu", "gloo", 2, "a/b c") == "speedup-cpu-gloo-2-a_b_c.json"
