"""No process that ran lab code outlives the gate's verdict (docs/ci/threat-model.md, section 3).

Lab code could start a double-forked ``setsid`` daemon, in the sub-session or on a rank, that rewrites the
report after the kit wrote it, and a thread of lab code in a rank could do the same while the ranks lived on
after the report was written. Now the sub-session stops its ranks and zygotes before it writes its report,
and the gate's parent, a child subreaper while the sub-session runs, kills what the sub-session's tree left
and names it: every item untrusted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from dod_support import git_commit_all

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers and /proc are Linux's")

# Forks twice with setsid between, as a daemon does: its parent is gone at once, so it is reparented to the
# nearest subreaper (init without one). The daemon writes its pid to PIDFILE, then runs BODY.
DAEMON = """
import os, sys, time
def daemon(pidfile, body):
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)  # the middle process is reaped at once, as a daemon's starter does
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    try:
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        body()
    finally:
        os._exit(0)
"""


def _wait_for(path: Path, seconds: float = 30.0) -> int:
    deadline = time.monotonic() + seconds
    while not path.is_file():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.02)
    return int(path.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _subreaper() -> int:
    import ctypes

    from pytest_distcheck.dod.leftovers import PR_GET_CHILD_SUBREAPER

    value = ctypes.c_int(-1)
    ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)
    return value.value


@linux_only
def test_the_watch_kills_reaps_and_names_what_was_left_and_nothing_else(tmp_path):
    """In-process: a daemon still running and one that ended (a zombie of this process now) are named,
    killed and reaped; a child started before the watch is left alone; the subreaper setting is put back."""
    from pytest_distcheck.dod.leftovers import CMDLINE_CHARS, Watch, verdict_text

    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        was = _subreaper()
        watch = Watch()
        watch.start()
        assert _subreaper() == 1
        script = DAEMON + textwrap.dedent(f"""
            daemon({str(tmp_path / 'stays')!r}, lambda: time.sleep(60))
            daemon({str(tmp_path / 'ends')!r}, lambda: None)
            """)
        subprocess.run([sys.executable, "-c", script], check=True)
        stays, ends = _wait_for(tmp_path / "stays"), _wait_for(tmp_path / "ends")
        deadline = time.monotonic() + 30
        while Path(f"/proc/{ends}/stat").read_text().split(")")[-1].split()[0] != "Z":  # ended, not reaped
            assert time.monotonic() < deadline
            time.sleep(0.02)
        comm = Path(f"/proc/{ends}/comm").read_text().strip()
        cmd = f"{sys.executable} -c {script}".strip()
        cmd = cmd[:CMDLINE_CHARS - 3] + "..." if len(cmd) > CMDLINE_CHARS else cmd
        named = watch.end()
        assert sorted(named) == sorted([f"pid {stays} ({cmd})", f"pid {ends} ({comm}, ended but not reaped)"])
        assert not _alive(stays) and not Path(f"/proc/{ends}").exists()
        assert older.poll() is None
        assert _subreaper() == was
        assert verdict_text(named[:1]) == f"a process started while the gate ran outlived its sub-session: {named[0]}"
        assert watch.end() == []
    finally:
        older.kill()
        older.wait()


def test_off_linux_the_watch_does_nothing_and_does_not_fail(monkeypatch):
    """Without prctl (another platform) no subreaper is set and nothing under this process is new."""
    from pytest_distcheck.dod import leftovers

    monkeypatch.setattr(sys, "platform", "darwin")
    assert leftovers._prctl() is None
    watch = leftovers.Watch()
    watch.start()
    assert watch.end() == []


# The lab starts one daemon in the sub-session itself, at import (it keeps the sub-session's output pipe
# open), and one on rank 0, which rewrites the learner's report whenever it finds one not forged.
LAB = DAEMON + """
import json, pathlib
ROOT = pathlib.Path.cwd()

def forge():
    report = ROOT / "report.json"
    while True:
        try:
            doc = json.loads(report.read_text())
            if doc.get("forged") is not True:
                report.write_text(json.dumps({"forged": True}))
        except (OSError, ValueError):
            pass
        time.sleep(0.05)

def on_rank(root):
    import torch.distributed as dist
    global ROOT
    ROOT = pathlib.Path(root)
    if dist.get_rank() == 0:
        daemon(str(ROOT / "rank.pid"), forge)
    return os.getpid()

if "--gate" in sys.argv:  # the sub-session; the ranks import this module too
    daemon(str(ROOT / "subsession.pid"), lambda: time.sleep(60))
"""

CHECKS = """
import os
import pytest

@pytest.mark.dod("alpha")
def test_alpha():
    import experiments.ddp_cpu.lab

@pytest.mark.dod("beta")
def test_beta(dist_world):
    from experiments.ddp_cpu import lab
    dist_world.run(lab.on_rank, os.getcwd())
"""


@linux_only
def test_a_daemon_the_lab_leaves_behind_is_killed_and_named_and_the_gate_fails(workspace_dir):
    root = workspace_dir.path
    workspace_dir.makepyfile(**{"experiments/__init__": "", "experiments/ddp_cpu/__init__": "",
                                "experiments/ddp_cpu/lab": LAB, "checks/test_checks": CHECKS})
    git_commit_all(root)
    pids: list[int] = []
    try:
        result = workspace_dir.runpytest("-p", "no:cacheprovider", "--gate", "--dod-json", "report.json")
        pids = [int((root / name).read_text()) for name in ("subsession.pid", "rank.pid")]
        dead = [not _alive(pid) for pid in pids]
        report = json.loads((root / "report.json").read_text())
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, 9)
    assert dead == [True, True]
    assert "forged" not in report
    why = "processes started while the gate ran outlived its sub-session: "
    assert [(it["id"], it["state"]) for it in report["items"]] == [("alpha", "untrusted"), ("beta", "untrusted")]
    for it in report["items"]:
        assert it["reason"].startswith(why), it["reason"]
        named = re.findall(r"pid (\d+) \(" + re.escape(sys.executable) + " ", it["reason"])
        assert sorted(map(int, named)) == sorted(pids), it["reason"]
    assert report["gate"]["passed"] is False
    result.stdout.fnmatch_lines([f"distcheck gate: verdict re-derived from the sub-session's report: FAILED (*{why}*"])
    assert result.ret != 0


RANK_PIDS = """
import os
import pytest

@pytest.mark.dod("alpha")
def test_alpha(dist_world):
    pids = dist_world.run(lambda: (os.getpid(), os.getppid()))
    with open("pids", "w") as f:
        f.write(" ".join(str(p) for pair in pids for p in pair))

@pytest.mark.dod("beta")
def test_beta():
    pass
"""

# Wraps json.dumps, which renders the JSON report as it is written: which of the ranks and their zygote are
# still there at that moment (the kit's own functions are not patched: the DoD plugin would see it).
AT_REPORT = """
import json
import os
import re

_dumps = json.dumps

def dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and "items" in obj and "summary" in obj:
        pids = open("pids").read().split()
        with open("there-at-report", "w") as f:
            f.write(" ".join(p for p in pids if os.path.exists(f"/proc/{p}")))
    return _dumps(obj, *args, **kwargs)

json.dumps = dumps
"""


@linux_only
def test_ranks_and_zygotes_are_gone_and_reaped_before_the_report_is_written(workspace_dir):
    workspace_dir.makepyfile(**{"checks/test_checks": RANK_PIDS, "conftest": AT_REPORT})
    result = workspace_dir.runpytest_subprocess("-p", "no:cacheprovider", "--dod-json", "report.json")
    result.assert_outcomes(passed=2)
    assert len((workspace_dir.path / "pids").read_text().split()) == 4
    assert (workspace_dir.path / "there-at-report").read_text() == ""


# Run in a fresh interpreter: run_gate on a workspace whose checks pass, noting which modules were imported
# after the sub-session started (lab code could have rewritten their files by then).
LATE_IMPORTS = """
import subprocess, sys
from pathlib import Path
from pytest_distcheck.dod import isolation

started = []
_popen = subprocess.Popen

class Popen(_popen):
    def __init__(self, args, *rest, **kwargs):
        if isolation.FLAG in args and not started:  # the sub-session, not a git call
            started.append(set(sys.modules))
        super().__init__(args, *rest, **kwargs)

subprocess.Popen = Popen
root = Path(sys.argv[1])
status = isolation.run_gate(root, "checks/distcheck.toml", str(root / "report.json"), str(root / "report.md"), "no",
                            lambda text: None)
print(status, sorted(set(sys.modules) - started[0]))
"""


def test_the_gate_imports_nothing_after_the_sub_session_started(workspace_dir):
    workspace_dir.makepyfile(**{"checks/test_checks": "import pytest\n\n@pytest.mark.dod('alpha')\ndef test_alpha():"
                                                      "\n    pass\n\n@pytest.mark.dod('beta')\ndef test_beta():\n"
                                                      "    pass\n"})
    out = subprocess.run([sys.executable, "-I", "-c", LATE_IMPORTS, str(workspace_dir.path)], capture_output=True,
                         text=True, env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1) == ["1", "[]\n"], out.stdout  # 1: phase t1 has no shipped DoD (unverified)
    assert (workspace_dir.path / "report.md").is_file()
