"""The reusable all-reduce bandwidth report: the sweep on the rank pool, its table, and its PNG plot."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest

from pytest_distcheck import bandwidth

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "solutions" / "experiments" / "ddp_cpu" / "results" / "allreduce-cpu.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")  # IHDR width, height


@pytest.mark.world_size(3)
def test_sweep_runs_on_the_pool_and_every_rank_reports_the_same_rows(dist_world):
    rows = dist_world.run(bandwidth.allreduce_sweep, [4096, 65536], 1, 3)
    assert rows[0] == rows[1] == rows[2]  # the slowest rank's time per repetition, everywhere
    assert [(r["size_bytes"], r["count"], r["dtype"], r["reps"]) for r in rows[0]] == [
        (4096, 1024, "float32", 3), (65536, 16384, "float32", 3)]
    for r in rows[0]:
        assert r["time_s_min"] <= r["time_s_median"] <= r["time_s_max"]
        assert math.isclose(r["busbw_gbps"], r["algbw_gbps"] * 2 * (3 - 1) / 3)  # nccl-tests factor, n = 3
    table = bandwidth.format_sweep(rows[0]).splitlines()
    assert table[0].split() == ["size", "(B)", "count", "type", "time", "(us)", "algbw", "GB/s", "busbw", "GB/s"]
    assert table[2].split()[:3] == ["65536", "16384", "float32"]


def test_plot_of_the_committed_sweep(tmp_path):
    rows = json.loads(COMMITTED.read_text())["allreduce_sweep"]
    out = bandwidth.plot_sweep(rows, tmp_path / "sub" / "sweep.png", "all_reduce test plot")
    assert out == tmp_path / "sub" / "sweep.png"
    width, height = _png_size(out)
    assert width > 400 and height > 300


def test_plot_with_more_than_two_ranks_shows_algbw_and_busbw(tmp_path):
    rows = [bandwidth.allreduce_row(s, "float32", [s / 1e9, 2 * s / 1e9], 4) for s in (4096, 16384)]
    bandwidth.plot_sweep(rows, tmp_path / "four.png", "n = 4")
    assert _png_size(tmp_path / "four.png")[0] > 400


def test_the_committed_plot_sits_next_to_its_json():
    png = COMMITTED.with_suffix(".png")
    assert png.is_file(), f"regenerate it: python -m experiments.ddp_cpu.lab --replot {COMMITTED.relative_to(ROOT)}"
    _png_size(png)


def test_lab_runs_its_sweep_on_a_rank_pool_and_saves_the_plot_next_to_the_json(dist_world, tmp_path):
    from experiments.ddp_cpu import lab

    cfg = lab.LabConfig(steps=1, global_batch=8, hidden=8, sizes_bytes=(4096, 16384), warmup=1, reps=2)
    result = lab.run_on_pool(cfg, dist_world._registry.get(2, "gloo"))  # the RankPool behind dist_world
    out = tmp_path / "allreduce.json"
    out.write_text(json.dumps(result))
    bandwidth.check_sanity(bandwidth.load_result(out), out, 2, [4096, 16384])
    assert lab.save_plot(result, str(out)) == str(tmp_path / "allreduce.png")
    _png_size(tmp_path / "allreduce.png")
    assert "busbw GB/s" in lab.format_table(result)


def test_the_lab_ends_with_the_git_line_that_commits_its_log_and_plot(tmp_path, monkeypatch):
    """The fresh-user trial: `wrote ...json and ...png` left the commit step out; the DoD check reads the log
    committed and lists the plot as evidence (checks/test_ddp_allreduce_logged.py), so both are named."""
    from experiments.ddp_cpu import lab

    monkeypatch.chdir(tmp_path)  # no repository here: git init first
    monkeypatch.delenv("OLDPWD", raising=False)
    out, png = "experiments/ddp_cpu/results/allreduce-cpu.json", "experiments/ddp_cpu/results/allreduce-cpu.png"
    line = f'git init && git add {out} {png} && git commit -m "DDP lab: all-reduce log and plot" -- {out} {png}'
    why = "commit both (the DoD check reads the log as committed and records the plot beside it as evidence): "
    assert lab.commit_step(out, png) == why + line
    # Started from a subfolder as the DoD table prints it, (cd ../.. && torchrun ...): the shell is still there.
    monkeypatch.setenv("OLDPWD", str(tmp_path / "experiments" / "ddp_cpu"))
    assert lab.commit_step(out, png) == why + f"(cd {shlex.quote(str(tmp_path.resolve()))} && {line})"
    monkeypatch.setenv("OLDPWD", str(tmp_path.parent))  # a shell above the lab's folder: the line as it is
    assert lab.commit_step(out, png) == why + line


def test_what_check_sanity_finds_wrong_is_said_in_the_kits_language():
    from pytest_distcheck import i18n
    from pytest_distcheck.errors import ConfigError
    from pytest_distcheck.i18n import _

    result = json.loads((Path(__file__).resolve().parents[1] / "solutions" / "experiments" / "ddp_cpu" / "results"
                         / "allreduce-cpu.json").read_text())
    result["ddp"]["params_equal_across_ranks"] = False
    try:
        i18n.use("es")
        with pytest.raises(ConfigError) as exc:
            bandwidth.check_sanity(result, "r.json", 2, [4096])
        assert exc.value.problem == _(bandwidth.DIVERGED) == "se esperaba true: las réplicas de DDP han divergido"
        with pytest.raises(ConfigError) as exc:
            bandwidth.check_sanity(result, "r.json", 4, [4096])
        assert str(exc.value) == "r.json, world_size: " + _(bandwidth.EXPECTED_FOUND).format(expected=4, found=2)
        assert exc.value.problem.startswith("se esperaba 4")
    finally:
        i18n.use(i18n.DEFAULT)
