"""The tp-speedup-committed check against synthetic results and ledgers (fixtures/tp_inference, never measured).

Each test builds a small git workspace in pytester's directory: the check, a workspace file, a results
folder and a ledger, commits it, and reads the DoD table the check produced.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ledger_support import rechained

from pytest_distcheck.evidence import record_sources
from pytest_distcheck.paid import REHEARSE_FIRST

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "checks" / "test_tp_speedup_committed.py"
FIX = REPO / "fixtures" / "tp_inference"
HOW = "pytest -m gpu --max-usd 3"
TOML = f"""
[phase]
id = "t"
title = "t"
[[items]]
id = "tp-speedup-committed"
title = "TP speedup on 2 GPUs"
how = "{HOW}"
[tp_inference]
results_dir = "results"
experiment = "tp-inference"
code = "lab"
[budget]
ledger = "ledger.md"
phase_ceiling_usd = 5.0
[budget.experiment_ceilings_usd]
tp-inference = 3.0
"""


def learners(text: str) -> str:
    """The fixture's text as if a learner's own run had produced it: the kit's fixtures are never evidence
    (their run ids, marker and numbers are recognised, pytest_distcheck/dod/provenance.py)."""
    return text.replace("s0fixture", "r0learner").replace("SYNTHETIC GPU", "TEST GPU").replace(
        "pod-synthetic", "pod-learner").replace("SYNTHETIC", "test data")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def workspace(pytester):
    """``workspace(result=..., png=True, commit=True)`` writes the files and runs the check."""
    root = pytester.path
    (root / "checks").mkdir()
    shutil.copy(CHECK, root / "checks" / CHECK.name)
    (root / "checks" / "distcheck.toml").write_text(TOML)
    (root / "ledger.md").write_text(rechained(learners((FIX / "synthetic-ledger.md").read_text())))
    (root / "results").mkdir()
    pytester.makeini(f"[pytest]\npythonpath = {REPO}\n")

    (root / "lab").mkdir()
    (root / "lab" / "speedup.py").write_text("# the lab's code\n")

    def run(result: dict | None = None, png: bool = True, commit: bool = True, extra: dict | None = None,
            sources: bool = True, edit_code: bool = False):
        files = dict(extra or {})
        if result is not None:
            if sources:  # as speedup.py records them: the hashes of the lab's code when it ran
                result = {**result, "sources": record_sources(["lab/speedup.py"], root)}
            files["synthetic-cuda-2gpu.json"] = result
        for name, data in files.items():
            (root / "results" / name).write_text(json.dumps(data, indent=1))
        if png:
            shutil.copy(FIX / "synthetic-cuda-2gpu.png", root / "results")
        if edit_code:  # the lab's code changed after the result was produced
            (root / "lab" / "speedup.py").write_text("# the lab's code, edited\n")
        _git(root, "init", "-q")
        if commit:
            _git(root, "add", "-A")
            _git(root, "commit", "-qm", "workspace")
        return pytester.runpytest("-p", "no:cacheprovider", "checks")

    return run


@pytest.fixture
def good() -> dict:
    result = json.loads(learners((FIX / "synthetic-cuda-2gpu.json").read_text()))
    for m in result["measurements"]:  # other numbers than the fixture's (not checked against the rest)
        m["prefill_allreduce_s"] += 1e-6
    result["pod"] = {"provider": "runpod", "id": "pod-learner"}
    return result


def test_a_committed_2gpu_result_within_the_ceiling_is_done(workspace, good):
    result = workspace(good)
    result.stdout.fnmatch_lines([
        "*results/synthetic-cuda-2gpu.json: 2 x TEST GPU (nccl), run r0learner-0001 cost $0.6950 of $3.0 "
        "(settled); best decode speedup 1.60x at TP 2, batch 1, prompt 128*",
        "DONE     tp-speedup-committed  evidence checked, self-reported: 1 GPU result tied to their ledger rows "
        "by run id and pod",
    ])
    assert result.ret == 0


@pytest.mark.parametrize(("pod", "message"), [
    (None, "results/synthetic-cuda-2gpu.json: names no pod (provider, id), so it cannot be tied to the ledger rows "
           "of run 'r0learner-0001'*"),
    ({"provider": "runpod", "id": "pod-other"}, "results/synthetic-cuda-2gpu.json: ran on runpod pod 'pod-other', "
                                                "but the ledger rows of run 'r0learner-0001' name runpod pod "
                                                "'pod-learner'"),
])
def test_a_result_must_name_the_pod_its_ledger_rows_name(workspace, good, pod, message):
    if pod is None:
        del good["pod"]
    else:
        good["pod"] = pod
    _broken(workspace(good), message)


def test_no_result_is_pending_with_the_command(workspace):
    """Without a budget (`pytest -m local`) the next step is the free rehearsal, which ends with the paid command
    (walkthroughs: with the key exported, the table's line paid before any rehearsal; then `rehearse && pay` did
    too, without a stop to read what a rehearsal cannot cover)."""
    result = workspace(None, png=False)
    assert REHEARSE_FIRST.format(how=HOW) == "distcheck rehearse"  # it ends with the paid command, to run for real
    result.stdout.fnmatch_lines(["PENDING  tp-speedup-committed  no result in results",
                                 f"*-> {REHEARSE_FIRST.format(how=HOW)}"])
    assert result.ret == 0


def test_only_cpu_results_are_pending_naming_what_was_found(workspace, good):
    cpu = {**good, "device": {"type": "cpu", "name": "some CPU", "count": 1}, "backend": "gloo"}
    result = workspace(cpu)
    result.stdout.fnmatch_lines([
        "PENDING  tp-speedup-committed  no result produced on CUDA with >= 2 GPUs yet "
        "(found: results/synthetic-cuda-2gpu.json (2 ranks on 1 x cpu, gloo))",
        f"*-> {REHEARSE_FIRST.format(how=HOW)}",
    ])


def test_a_one_gpu_result_is_not_evidence(workspace, good):
    result = workspace({**good, "device": {**good["device"], "count": 1}})
    result.stdout.fnmatch_lines(["PENDING  tp-speedup-committed  no result produced on CUDA with >= 2 GPUs yet*"])


def test_an_uncommitted_result_is_pending_with_the_git_command(workspace, good):
    result = workspace(good, commit=False)
    result.stdout.fnmatch_lines([
        "PENDING  tp-speedup-committed  results/synthetic-cuda-2gpu.json is not committed; "
        "results/synthetic-cuda-2gpu.png is not committed",
        '*-> git add results/synthetic-cuda-2gpu.json results/synthetic-cuda-2gpu.png && git commit -m "DoD evidence" '
        '-- results/synthetic-cuda-2gpu.json results/synthetic-cuda-2gpu.png',
    ])


def _broken(result, message: str) -> None:
    result.stdout.fnmatch_lines(["BROKEN   tp-speedup-committed  " + message])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_speedups_that_disagree_with_the_latencies_are_broken(workspace, good):
    good["speedups"][1]["decode"] = 3.5
    _broken(workspace(good), "results/synthetic-cuda-2gpu.json: speedups[[]1[]].decode = 3.5 but the "
                             "measurements give 1.58621 (median decode_step_s at TP 1 / at TP 2)")


def test_a_result_without_tp2_is_broken(workspace, good):
    good["measurements"] = [m for m in good["measurements"] if m["tp"] == 1]
    good["speedups"] = []
    _broken(workspace(good), "*synthetic-cuda-2gpu.json: measures TP degrees [[]1[]]; expected at least 1 and 2")


def test_a_missing_png_is_broken(workspace, good):
    _broken(workspace(good, png=False),
            "*: plot 'synthetic-cuda-2gpu.png' not found at results/synthetic-cuda-2gpu.png")


def test_a_result_without_ledger_rows_is_broken(workspace, good):
    _broken(workspace({**good, "run_id": "s9unpaid-0001"}),
            "*run_id 's9unpaid-0001' has no row in the ledger ledger.md; a paid result must come from a run "
            f"under the budget guard ({HOW})")


def test_a_run_above_the_ceiling_is_broken(workspace, good):
    _broken(workspace({**good, "run_id": "r0learner-0002", "pod": {"provider": "runpod", "id": "pod-learner-2"}}),
            "ledger.md line 9: run 'r0learner-0002' cost $5.5600, above the tp-inference ceiling $3.0")


def test_an_invalid_result_file_is_broken_naming_file_and_field(workspace, good):
    del good["measurements"][2]["decode_step_s"]["samples"]
    _broken(workspace(good), "*synthetic-cuda-2gpu.json, measurements[[]2[]].decode_step_s: 'samples' is a "
                             "required property")


def test_a_malformed_ledger_is_broken(workspace, good, pytester):
    ledger = pytester.path / "ledger.md"
    ledger.write_text(rechained(ledger.read_text().replace("| 0.6950 |", "| -0.6950 |")))
    _broken(workspace(good), "the ledger does not parse: *ledger.md, line 8: negative cost*")


def test_a_result_produced_before_the_code_changed_is_stale(workspace, good):
    result = workspace(good, edit_code=True)
    result.stdout.fnmatch_lines([
        "STALE    tp-speedup-committed  lab/speedup.py changed since results/synthetic-cuda-2gpu.json was "
        "produced (recorded sha256:*, now sha256:*)",
        f"*-> {REHEARSE_FIRST.format(how=HOW)}",
    ])
    assert result.ret == 0


def test_a_result_older_than_a_new_code_file_is_stale(workspace, good, pytester):
    (pytester.path / "lab" / "shard.py").write_text("# a file added after the run\n")
    result = workspace(good)
    result.stdout.fnmatch_lines([
        "STALE    tp-speedup-committed  results/synthetic-cuda-2gpu.json does not record lab/shard.py among its "
        "sources*",
        f"*-> {REHEARSE_FIRST.format(how=HOW)}",
    ])


def test_a_result_that_records_no_sources_is_stale(workspace, good):
    result = workspace(good, sources=False)
    result.stdout.fnmatch_lines(["STALE    tp-speedup-committed  results/synthetic-cuda-2gpu.json records no sources*"])


def test_a_run_on_local_gpus_is_not_a_cloud_run(workspace, good, pytester):
    """The DoD says 2 cloud GPUs; a result and ledger rows of provider `local` do not count."""
    ledger = pytester.path / "ledger.md"
    ledger.write_text(rechained(ledger.read_text().replace("| runpod |", "| local |")))
    good["pod"] = {"provider": "local", "id": "pod-learner"}
    _broken(workspace(good), "results/synthetic-cuda-2gpu.json: ran on provider local, not a cloud pod*")


def test_a_result_dated_in_the_future_is_broken(workspace, good):
    """A result typed with times dated 2031."""
    good["finished_utc"] = "2031-05-01T00:05:00Z"
    _broken(workspace(good),
            "results/synthetic-cuda-2gpu.json: dated in the future (finished_utc 2031-05-01T00:05:00Z)*")


def test_a_reconciled_row_read_from_the_ledger_is_not_confirmed(workspace, good, pytester):
    """A `reconciled` row typed into the ledger; the provider was not asked in this run."""
    ledger = pytester.path / "ledger.md"
    ledger.write_text(rechained(ledger.read_text() + "| 2026-01-01T00:20:00Z | r0learner-0001 | reconciled | runpod "
                                "| TEST GPU x 2 | 900 | 2.78 | 0.6950 | USD | tp-inference | "
                                "tests/test_tp.py::test_speedup | pod-learner |\n"))
    result = workspace(good)
    result.stdout.fnmatch_lines(["DONE     tp-speedup-committed  evidence checked, self-reported (reconciled row in "
                                 "the ledger, not re-checked in this run): 1 GPU result tied*"])
    assert "checked, confirmed" not in result.stdout.str()


def test_the_kits_synthetic_result_copied_byte_for_byte_is_untrusted_as_copied(workspace, pytester):
    """A copy of the kit's material is untrusted and flagged `copied` (docs/ci/github-actions.md's states), as a
    copied reference note or fixture diagram is; it was only broken, with no flag for a grader's filter."""
    from pytest_distcheck.copies import IS_FIXTURE

    workspace(None, png=False, commit=False)
    shutil.copy(FIX / "synthetic-cuda-2gpu.json", pytester.path / "results")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-qm", "workspace")
    result = pytester.runpytest("-p", "no:cacheprovider", "checks")
    why = IS_FIXTURE.format(ref="fixtures/tp_inference/synthetic-cuda-2gpu.json")
    result.stdout.fnmatch_lines([f"UNTRUSTED  tp-speedup-committed  copied from the kit: "
                                 f"results/synthetic-cuda-2gpu.json: {why}*"])
