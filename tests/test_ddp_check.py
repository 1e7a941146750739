"""The ddp-allreduce-logged check against good, missing, corrupt and wrong committed logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dod_support import git_commit_all

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "checks" / "test_ddp_allreduce_logged.py"


@pytest.fixture
def ddp_workspace(pytester):
    pytester.mkdir("checks")
    shutil.copy(CHECK, pytester.path / "checks" / CHECK.name)
    pytester.makeini(f"[pytest]\npythonpath = {REPO}\n")

    def run(committed_log: str):
        (pytester.path / "checks" / "distcheck.toml").write_text(
            "allow_paths_outside_root = true\n"  # the logs under test live in the repository, not here
            "[phase]\nid = 't'\ntitle = 't'\n"
            "[[items]]\nid = 'ddp-allreduce-logged'\ntitle = 'ddp'\nhow = 'run the lab'\n"
            f"[ddp]\ncommitted_log = '{committed_log}'\nlive_log = 'live.json'\n"
        )
        return pytester.runpytest("-p", "no:cacheprovider", "-k", "committed", "checks")

    return run


def test_the_real_log_is_done_only_once_committed(ddp_workspace, pytester):
    """The docs promise a *committed* log: an untracked one is pending naming git, a committed one passes."""
    # Another host load: a copy of the reference (same parsed content) would be untrusted ("copied").
    data = json.loads((REPO / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json").read_text())
    data["host"]["load_avg_1m"] += 0.25
    (pytester.path / "log.json").write_text(json.dumps(data, indent=1))
    result = ddp_workspace("log.json")
    result.stdout.fnmatch_lines([f"PENDING  ddp-allreduce-logged  {pytester.path} is not in a git repository",
                                 "*-> git init && git add log.json && git commit"])
    git_commit_all(pytester.path)
    result = ddp_workspace("log.json")
    result.assert_outcomes(passed=1, deselected=1)
    # The live check was deselected (-k committed), so the item is not claimed done.
    result.stdout.fnmatch_lines(["NOT RUN  ddp-allreduce-logged  1 of 2 checks did not run: "
                                 "*test_ddp_lab_runs_live_on_two_gloo_ranks deselected (-k 'committed')"])
    assert result.ret == 0


def test_a_missing_log_is_pending_with_the_command(ddp_workspace):
    result = ddp_workspace("nowhere.json")
    result.stdout.fnmatch_lines(["PENDING  ddp-allreduce-logged  no committed all-reduce log at nowhere.json",
                                 "*-> run the lab"])
    assert result.ret == 0


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        ("corrupt.json", "*corrupt.json, line * not valid JSON*"),
        ("schema-invalid.json", "*schema-invalid.json, allreduce_sweep[[]2[]]: 'busbw_gbps' is a required property*"),
        ("busbw-inconsistent.json",
         "*busbw-inconsistent.json, allreduce_sweep[[]3[]].busbw_gbps: expected algbw*2(n-1)/n = *, found *"),
    ],
)
def test_a_bad_log_is_broken_naming_file_and_field(ddp_workspace, fixture, message):
    result = ddp_workspace(str(REPO / "fixtures" / "ddp" / fixture))
    result.stdout.fnmatch_lines(["BROKEN   ddp-allreduce-logged  " + message])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


CANNED_LAB = '''
import json
from dataclasses import dataclass
SIZES = tuple(4096 * 4**k for k in range(8))
LOG = {log!r}

@dataclass(frozen=True)
class LabConfig:
    sizes_bytes: tuple = SIZES
    reps: int = 5

def run(cfg=None):  # canned: no training, no collective
    return json.loads(LOG)

def format_table(result):
    return "canned"
'''


def test_a_lab_returning_a_canned_log_without_all_reduces_is_broken(pytester):
    """Red-team A11: the learner's run() returns a log without running any all-reduce; the live check
    counts the all-reduces the ranks ran."""
    pytester.mkdir("checks")
    shutil.copy(CHECK, pytester.path / "checks" / CHECK.name)
    pytester.makeini("[pytest]\npythonpath = .\n")
    log = (REPO / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json").read_text()
    (pytester.path / "experiments" / "ddp_cpu").mkdir(parents=True)
    (pytester.path / "experiments" / "__init__.py").write_text("")
    (pytester.path / "experiments" / "ddp_cpu" / "__init__.py").write_text("")
    (pytester.path / "experiments" / "ddp_cpu" / "lab.py").write_text(CANNED_LAB.format(log=log))
    (pytester.path / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 't'\ntitle = 't'\n"
        "[[items]]\nid = 'ddp-allreduce-logged'\ntitle = 'ddp'\nhow = 'run the lab'\n"
        "[ddp]\ncommitted_log = 'log.json'\nlive_log = 'live.json'\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "live", "checks")
    result.stdout.fnmatch_lines(["BROKEN   ddp-allreduce-logged  the lab's log claims 49 timed all-reduces "
                                 "(sweep and DDP buckets) but the ranks ran 0*"])


BUMPS_THE_COUNTER = '''
import torch.distributed as dist

def run(cfg=None):  # red-team t2 B1b: no collective; the kit's counter bumped through its wrapper's closure
    for cell in getattr(dist.all_reduce, "__closure__", None) or ():
        if isinstance(cell.cell_contents, list) and cell.cell_contents:
            cell.cell_contents[0] += 10**6
    return json.loads(LOG)
'''

PADS_WITH_ONE_ELEMENT = '''
import torch, torch.distributed as dist

def run(cfg=None):  # red-team t2 B1a: as many all-reduces as the log claims, each of one float
    log = json.loads(LOG)
    n = sum(r["reps"] for r in log["allreduce_sweep"]) + len(log["ddp"]["bucket_allreduce"])
    for _ in range(n):
        dist.all_reduce(torch.zeros(1))
    return log
'''


def _live(pytester, lab: str) -> pytest.RunResult:
    """The live check on a lab ``experiments/ddp_cpu/lab.py`` (CANNED_LAB's log, then ``lab``)."""
    pytester.mkdir("checks")
    shutil.copy(CHECK, pytester.path / "checks" / CHECK.name)
    pytester.makeini("[pytest]\npythonpath = .\n")
    data = json.loads((REPO / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json").read_text())
    data["host"]["load_avg_1m"] += 0.25  # not a copy of the reference: only the live run judges it
    (pytester.path / "experiments" / "ddp_cpu").mkdir(parents=True)
    (pytester.path / "experiments" / "__init__.py").write_text("")
    (pytester.path / "experiments" / "ddp_cpu" / "__init__.py").write_text("")
    (pytester.path / "experiments" / "ddp_cpu" / "lab.py").write_text(CANNED_LAB.format(log=json.dumps(data)) + lab)
    (pytester.path / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 't'\ntitle = 't'\n"
        "[[items]]\nid = 'ddp-allreduce-logged'\ntitle = 'ddp'\nhow = 'run the lab'\n"
        "[ddp]\ncommitted_log = 'log.json'\nlive_log = 'live.json'\n")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "live", "checks")


def test_b1b_a_counter_bumped_through_the_wrappers_closure_is_not_a_collective(pytester):
    """The count of all-reduces comes from the default process group's sequence number, not from a Python
    counter the lab can reach."""
    result = _live(pytester, BUMPS_THE_COUNTER)
    result.stdout.fnmatch_lines(["BROKEN   ddp-allreduce-logged  the lab's log claims 49 timed all-reduces "
                                 "(sweep and DDP buckets) but the ranks ran 0*"])


FORGES_THE_RECORDS = PADS_WITH_ONE_ELEMENT.replace("    return log", """\
    for cell in dist.all_reduce.__closure__ or ():  # the kit's records of sizes, written by hand
        if isinstance(cell.cell_contents, dict):
            for r in log["allreduce_sweep"]:
                cell.cell_contents[r["size_bytes"]] += r["reps"]
            for b in log["ddp"]["bucket_allreduce"]:
                cell.cell_contents[b["bytes"]] += 1
    return log""")


@pytest.mark.parametrize(("lab", "expected"), [
    (PADS_WITH_ONE_ELEMENT, "the lab's log claims 5 all-reduces of 4096 B but rank 0 all-reduced 0 tensors of that "
                            "size*"),
    (FORGES_THE_RECORDS, "rank 0: the kit's wrapper recorded 98 all-reduces but the process group ran 49 "
                         "collectives: its records were tampered with"),
], ids=["pads", "pads-and-forges-records"])
def test_b1a_one_element_all_reduces_do_not_back_a_log_of_other_sizes(pytester, lab, expected):
    """Each size the log claims must have been all-reduced at least its ``reps`` times on every rank, and the
    kit's records of sizes can count no more all-reduces than the process group ran collectives."""
    result = _live(pytester, lab)
    result.stdout.fnmatch_lines(["BROKEN   ddp-allreduce-logged  " + expected])


LIES_WITH_GET = '''
class LabLog(dict):  # red-team t3 B: json.dumps writes the whole log, .get hides what the ranks must back
    def get(self, key, default=None):
        return default if key in ("allreduce_sweep", "ddp") else super().get(key, default)

def run(cfg=None):
    return LabLog(json.loads(LOG))
'''


def test_t3b_the_log_is_judged_as_written_to_disk_not_as_returned(pytester):
    """A returned dict whose ``.get`` hides the sweep must not hide it from the check: the check reads the
    live log back from disk (plain JSON types) and judges that."""
    result = _live(pytester, LIES_WITH_GET)
    result.stdout.fnmatch_lines(["BROKEN   ddp-allreduce-logged  the lab's log claims 49 timed all-reduces "
                                 "(sweep and DDP buckets) but the ranks ran 0*"])


SWAPS_THE_CHECKS_CODE = '''
import sys

def _never_unbacked(log, runs):
    return None

f = sys._getframe(0)  # red-team t3 A: the check's _unbacked keeps its identity, its code is the lab's
while f is not None and "_run_recording_all_reduces" not in f.f_globals:
    f = f.f_back
if f is not None:  # on the ranks the lab is imported outside the check
    f.f_globals["_unbacked"].__code__ = _never_unbacked.__code__
'''


def test_t3a_lab_code_swapping_the_checks_code_cannot_reach_the_check(pytester):
    """The lab is imported on the ranks only: what it swaps there is a copy of the check's functions, and the
    check in this process judges its canned log as it is. (In this process the module snapshot would name
    the swap: tests/test_gate_redteam.py::test_t3a_a_check_modules_function_with_swapped_code_or_defaults_is_named.)"""
    result = _live(pytester, SWAPS_THE_CHECKS_CODE)
    result.stdout.fnmatch_lines(["BROKEN   ddp-allreduce-logged  the lab's log claims 49 timed all-reduces "
                                 "(sweep and DDP buckets) but the ranks ran 0*"])
