"""Bad numbers on the calculator commands: a clear message and a non-zero exit, never a traceback or an
absurd number (issue 17). The fuzz test feeds seeded random numeric text to every numeric option of
`memory`, `strategy`, `bubble` and `estimate`, in process."""

import random
import shutil
from pathlib import Path

import pytest

from pytest_distcheck.cli import main


def run(capsys, argv):
    """(exit status, stdout, stderr) of `distcheck ARGV` in process; argparse's SystemExit is an exit status."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


MEM = ["memory", "--params", "7B", "--dp", "8"]


@pytest.mark.parametrize(("argv", "says"), [
    (MEM + ["--k", "-12"], "--k"),
    (MEM + ["--k", "nan"], "--k"),
    (MEM + ["--k", "inf"], "--k"),
    (["memory", "--params", "7.5X", "--dp", "8"], "'X' is not a known suffix"),
    (["memory", "--params", "7.5", "--dp", "8"], "did you mean 7.5B?"),
    (["memory", "--params", "350", "--dp", "8"], "did you mean 350M or 350B?"),
    (["memory", "--params", "1e400", "--dp", "8"], "finite"),
    (["memory", "--params=-7B", "--dp", "8"], "> 0"),
    (["strategy", "--params", "7B", "--gpu-memory-gb", "nan", "--gpus-per-node", "8"], "--gpu-memory-gb"),
    (["strategy", "--params", "7B", "--gpu-memory-gb", "80", "--gpus-per-node", "8", "--usable-fraction", "2"],
     "--usable-fraction"),
    (["estimate", "--gpu", "H100", "--minutes", "inf"], "--minutes"),
    (["estimate", "--gpu", "H100", "--minutes", "1e308"], "--minutes"),
    (["estimate", "--gpu", "H100", "--minutes", "nan"], "--minutes"),
    (["estimate", "--gpu", "H100", "--minutes", "10", "--count", "0"], "--count"),
    (["bubble", "-p", "4", "-m", "99999999999999999999999"], "-m"),
])
def test_bad_number_is_refused_with_a_message(capsys, argv, says):
    rc, out, err = run(capsys, argv)
    assert rc not in (0, None), out
    assert says in err
    assert "Traceback" not in err


def test_plain_count_of_a_thousand_or_more_is_accepted(capsys):
    rc, out, _ = run(capsys, ["memory", "--params", "7500000000", "--dp", "64"])
    assert rc == 0 and "Psi = 7.5e+09" in out


NUMERIC = {  # a valid command and the numeric options it takes
    "memory": (["memory", "--params", "7B", "--dp", "8"],
               ["--params", "--dp", "--k", "--tp", "--pp", "--cp", "--layers", "--hidden", "--heads", "--seq-len",
                "--micro-batch", "--gpus-per-node", "--margin-gb", "--largest-layer"]),
    "strategy": (["strategy", "--params", "7B", "--gpu-memory-gb", "80", "--gpus-per-node", "8"],
                 ["--params", "--gpu-memory-gb", "--gpus-per-node", "--nodes", "--layers", "--hidden", "--heads",
                  "--seq-len", "--micro-batch", "--usable-fraction", "--batch", "--context"]),
    "bubble": (["bubble", "-p", "4", "-m", "8"], ["-p", "-m", "-v"]),
    "layout": (["layout", "--gpus", "64", "--mbs", "1", "--gbs", "128"],
               ["--gpus", "--tp", "--pp", "--cp", "--vp", "--mbs", "--gbs", "--layers", "--ga"]),
    "estimate": (["estimate", "--gpu", "H100", "--minutes", "10"], ["--minutes", "--count"]),
}
TEXTS = ["0", "-1", "1", "2", "3", "7", "8", "64", "1e308", "-1e308", "inf", "-inf", "nan", "1e-308", "0.5",
         "7.5", "1_000", "1e9", "7.5B", "350M", "1T", "2K", "7.5X", "", " ", "abc", "1/0", "0x10", "1e", "--",
         "999999999999999999999999", "12.0", "-0", "+5", "1,000"]


@pytest.mark.parametrize("command", sorted(NUMERIC))
def test_fuzz_numeric_options_never_crash(capsys, tmp_path, monkeypatch, command):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)  # the shipped price table, never the live API
    (tmp_path / "checks").mkdir()
    (tmp_path / "experiments").mkdir()  # a workspace with no ledger yet: estimate reaches its arithmetic
    shutil.copy(Path(__file__).resolve().parents[1] / "checks" / "distcheck.toml", tmp_path / "checks")
    monkeypatch.chdir(tmp_path)
    base, options = NUMERIC[command]
    rng = random.Random(17)
    for _ in range(100):
        argv = list(base)
        for option in rng.sample(options, rng.randint(1, min(3, len(options)))):
            argv += [option, rng.choice(TEXTS) if rng.random() < 0.8 else repr(rng.uniform(-1e6, 1e6))]
        if command == "strategy" and rng.random() < 0.3:
            argv += ["--check", rng.choice(["tp=8,pp=1,dp=1", "tp=0,pp=1,dp=8", "tp=3", "x=1", "tp=inf"])]
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        except Exception as exc:  # noqa: BLE001 -- the point: no exception may escape
            pytest.fail(f"distcheck {' '.join(argv)!s} raised {type(exc).__name__}: {exc}")
        out, err = capsys.readouterr()
        assert rc in (0, 1, 2), argv
        if rc == 2:
            assert err.strip(), f"{argv}: exit 2 without a message"
        for word in ("nan", "inf", "-0 GB"):
            assert f" {word} GB" not in out, (argv, out)
