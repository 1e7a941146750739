"""Benchmark: the learner's loop in one run: a dist_world test against its baselines, and `pytest -m local`.

Run on a quiet machine (from the repository root, with the ``bench`` extra; about 4 minutes on 2 cores)::

    .venv/bin/python benchmarks/learner_loop.py --out benchmarks/results/learner_loop.json

It writes the JSON result and prints the Markdown rows of the table in benchmarks/README.md, with the load
average (1 min) read before and after every session:

- per test, from ``benchmarks/rank_pool.py``'s harnesses (``--rounds`` interleaved sessions of ``--tests``
  tests each; each row is the round of median session wall): ``dist_world`` with its all-reduce
  (``pool``) and with a call that does no collective (``pool-noop``: the pool's own cost), a trivial test in
  a module that imports torch (``trivial-torch``), ``MultiThreadedTestCase`` (``mttc``) and
  ``MultiProcContinuousTest`` (``mpct``);
- the wall of ``pytest -m local`` (a fresh ``pytest`` process, interpreter start to exit) in a fresh
  ``git clone`` of HEAD: on the learner's workspace as cloned (nothing done, the live DDP run due), then on
  a workspace with every free item done (the reference solutions, ``--workspace checks/solutions.toml``,
  plus a passing quiz attempt written from the bank's answers, committed in the clone: synthetic, for this
  timing only) twice: its first run (live) and the next one (the live run reused from ``.distcheck/``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

if not __package__:  # run as a script: the repository root is not on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import rank_pool  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HARNESSES = ("pool", "pool-noop", "trivial-torch", "mttc", "mpct")
LOCAL_RUNS = (("fresh clone, nothing done", "checks/distcheck.toml"),
              ("every free item done, first run", "checks/solutions.toml"),
              ("every free item done, next run (live DDP run reused)", "checks/solutions.toml"))
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"]


def passing_quiz_log(clone: Path) -> None:
    """Write and commit a graded, complete quiz attempt with every answer right, at the reference workspace's log."""
    import tomllib

    from pytest_distcheck.quiz.bank import load_bank
    from pytest_distcheck.quiz.draw import draw_attempt

    cfg = tomllib.loads((clone / "checks" / "solutions.toml").read_text())["quiz"]
    drawn = draw_attempt(load_bank(clone / cfg["bank"]), 35_033, cfg["items_per_attempt"])
    answers = [{"item": d.item.id, "params": d.params, "seconds": 30.0,
                "given": e if isinstance(e := d.expected(), str) else f"{e:.6g}"} for d in drawn]
    record = {"bank": "35", "seed": 35_033, "mode": "graded", "status": "complete", "answers": answers,
              "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:05:00+00:00", "reported_score": 1.0}
    log = clone / cfg["log"]
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(json.dumps(record) + "\n")
    for args in (["add", cfg["log"]], ["commit", "-qm", "bench: a passing quiz attempt (synthetic)"]):
        subprocess.run([*GIT, *args], cwd=clone, check=True, capture_output=True)


def local_run(clone: Path, label: str, workspace: str, timeout_s: float) -> dict:
    """One ``pytest -m local`` session in ``clone``: its wall (s), load before and after, and the DoD states."""
    report = clone.parent / "dod.json"
    cmd = [sys.executable, "-m", "pytest", "-m", "local", "-q", "-p", "no:cacheprovider", "--workspace", workspace,
           "--dod-json", str(report)]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=clone, capture_output=True, text=True, timeout=timeout_s,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    wall = time.perf_counter() - t0
    items = json.loads(report.read_text())["items"] if report.exists() else []
    if proc.returncode not in (0, 1) or not items:
        raise RuntimeError(f"{label}: pytest exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return {"label": label, "workspace": workspace, "wall_s": wall, "load_avg_1m_before": load_before,
            "load_avg_1m_after": os.getloadavg()[0], "exit": proc.returncode,
            "done": sorted(it["id"] for it in items if it["state"] == "done"),
            "not_done": {it["id"]: it["state"] for it in items if it["state"] != "done"}}


def local_walls(rounds: int, timeout_s: float) -> list[dict]:
    """Each of :data:`LOCAL_RUNS` in a fresh clone of HEAD, ``rounds`` times; the round of median wall each."""
    runs: dict[str, list[dict]] = {label: [] for label, _ in LOCAL_RUNS}
    for r in range(rounds):
        with tempfile.TemporaryDirectory(prefix="distcheck-loop-") as tmp:
            clone = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, capture_output=True)
            for i, (label, workspace) in enumerate(LOCAL_RUNS):
                if i == 1:
                    passing_quiz_log(clone)
                print(f"round {r + 1}/{rounds}: pytest -m local, {label} ...", file=sys.stderr, flush=True)
                runs[label].append(local_run(clone, label, workspace, timeout_s))
    rows = []
    for label, _ in LOCAL_RUNS:
        ordered = sorted(runs[label], key=lambda x: x["wall_s"])
        row = dict(ordered[(len(ordered) - 1) // 2])
        row["walls_s"] = [x["wall_s"] for x in runs[label]]
        row["load_avg_1m_before"] = min(x["load_avg_1m_before"] for x in runs[label])
        row["load_avg_1m_after"] = max(x["load_avg_1m_after"] for x in runs[label])
        rows.append(row)
    return rows


def harness_rows(tests: int, rounds: int, timeout_s: float) -> list[dict]:
    """:data:`HARNESSES` from rank_pool.py, interleaved over ``rounds``; the round of median session wall each."""
    runs: dict[str, list[dict]] = {name: [] for name in HARNESSES}
    for r in range(rounds):
        for name in HARNESSES:
            print(f"round {r + 1}/{rounds}: {name}, {tests} tests ...", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix="distcheck-bench-") as tmp:
                runs[name].append(rank_pool.run_harness(name, tests, Path(tmp), timeout_s))
    return [rank_pool.median_round(runs[name]) for name in HARNESSES]


def _load(row: dict) -> str:
    return f"{row['load_avg_1m_before']:.2f}-{row['load_avg_1m_after']:.2f}"


def table_rows(harnesses: list[dict], local: list[dict]) -> list[str]:
    """The Markdown rows (measure | value | against | load) of both parts, and the issue's targets."""
    by = {r["harness"]: r for r in harnesses}
    pool, trivial = by["pool"]["per_test_median_s"], by["trivial-torch"]["per_test_median_s"]
    noop = by["pool-noop"]["per_test_median_s"]
    lines = ["| measure | value | against `dist_world` | load (1 min) |", "|---|---|---|---|"]
    for r in harnesses:
        ratio = r["per_test_median_s"] / pool
        lines.append(f"| per test: {r['label']} | {r['per_test_median_s'] * 1e3:.2f} ms (min "
                     f"{r['per_test_min_s'] * 1e3:.2f}) | {ratio:.2f}x | {_load(r)} |")
    for r in local:
        done = f"{len(r['done'])}/{len(r['done']) + len(r['not_done'])} done"
        lines.append(f"| `pytest -m local`, {r['label']} ({done}) | {r['wall_s']:.2f} s | | {_load(r)} |")
    fresh = local[0]["wall_s"]
    lines += ["", f"- {'MET   ' if pool <= 1.5 * trivial else 'MISSED'} dist_world per test <= 1.5x a trivial test "
                  f"in a torch-importing module: {pool * 1e3:.2f} vs {trivial * 1e3:.2f} ms ({pool / trivial:.2f}x)",
              f"- {'MET   ' if pool < by['mttc']['per_test_median_s'] else 'MISSED'} dist_world per test ahead of "
              f"MultiThreadedTestCase: {pool * 1e3:.2f} vs {by['mttc']['per_test_median_s'] * 1e3:.2f} ms",
              f"- {'MET   ' if fresh <= 8 else 'MISSED'} `pytest -m local` on a fresh clone <= 8 s: {fresh:.2f} s",
              f"- (not a target) a dist_world call without a collective against the same trivial test: "
              f"{noop * 1e3:.2f} vs {trivial * 1e3:.2f} ms ({noop / trivial:.2f}x)"]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=rank_pool.SUITE, help="tests per harness session")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved sessions of each harness and local run")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per session")
    parser.add_argument("--out", help="write the JSON result here")
    args = parser.parse_args(argv)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    harnesses = harness_rows(args.tests, args.rounds, args.timeout)
    local = local_walls(args.rounds, args.timeout)
    print("\n".join(table_rows(harnesses, local)))
    loads = [x for r in harnesses + local for x in (r["load_avg_1m_before"], r["load_avg_1m_after"])]
    print(f"\nload average (1 min) during the run: {min(loads):.2f} .. {max(loads):.2f} (median "
          f"{statistics.median(loads):.2f}) on {os.cpu_count()} logical CPUs; commit {commit[:10]}")
    if args.out:
        result = {"schema": "distcheck/learner-loop-benchmark/1", "started_utc": started,
                  "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": commit,
                  "host": rank_pool._host(), "args": vars(args), "harnesses": harnesses, "local": local,
                  "table": table_rows(harnesses, local)}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
