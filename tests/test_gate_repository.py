"""The repository must not change under the gate (red-team t2 B3).

B3: the lab, at import by the live DDP check, writes a made-up log to the committed path, runs ``git add``
and ``git commit`` itself; the committed-log check then sees a committed log. The gate's parent records the
repository (HEAD, the tracked files' status, HEAD's last reflog entry) before it starts the sub-session and
compares after it ended: a change makes every item untrusted, naming both commits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dod_support import git_commit_all, workflow_accepts, write_checks
from test_gate_redteam import phase35

COMMITS_ITSELF = """
import subprocess
subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "mine"],
               check=True)
"""


def _head(root) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def test_a_commit_made_while_the_gate_runs_makes_every_item_untrusted(workspace_dir):
    write_checks(workspace_dir, alpha=COMMITS_ITSELF.replace("\n", "\n    "))
    git_commit_all(workspace_dir.path)
    before = _head(workspace_dir.path)
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--gate", "--dod-json", "report.json")
    after = _head(workspace_dir.path)
    assert after != before
    report = json.loads((workspace_dir.path / "report.json").read_text())
    why = f"the repository changed while the gate ran: HEAD moved from {before[:12]} to {after[:12]}"
    assert [(it["id"], it["state"]) for it in report["items"]] == [("alpha", "untrusted"), ("beta", "untrusted")]
    assert all(it["reason"].startswith(why) for it in report["items"]), report["items"]
    assert report["summary"]["done"] == 0 and why in " ".join(report["gate"]["rederived"])
    result.stdout.fnmatch_lines([f"distcheck gate: verdict re-derived from the sub-session's report: FAILED (*{why}*"])
    assert result.ret != 0


def test_the_repository_state_names_what_changed(tmp_path):
    """In-process: HEAD, the tracked files and the reflog; nothing outside a repository."""
    from pytest_distcheck.dod.isolation import repo_changes, repo_state

    assert repo_state(tmp_path) is None
    (tmp_path / "a.txt").write_text("a")
    git_commit_all(tmp_path)
    start = repo_state(tmp_path)
    assert repo_changes(start, repo_state(tmp_path)) == []
    (tmp_path / "a.txt").write_text("b")
    assert repo_changes(start, repo_state(tmp_path)) == [
        "the repository changed while the gate ran: tracked files changed (M a.txt)"]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-qam", "x"], cwd=tmp_path, check=True)
    subprocess.run([*git, "reset", "-q", "--hard", "HEAD~1"], cwd=tmp_path, check=True)
    assert repo_state(tmp_path)["head"] == start["head"]  # back where it was, but the reflog saw it
    assert repo_changes(start, repo_state(tmp_path)) == [
        "the repository changed while the gate ran: HEAD's reflog changed (last entry now: HEAD@{0}: reset: moving to "
        "HEAD~1)"]
    assert repo_changes(start, None) == ["the repository changed while the gate ran: it is no longer a git "
                                         "repository"]


def test_the_after_run_record_is_taken_while_the_leftover_watch_is_on(workspace_dir, monkeypatch):
    """So a program a git call of the parent might still start (t4 A4) is the parent's, killed and named."""
    from pytest_distcheck.dod import isolation, leftovers

    order = []

    class Watch(leftovers.Watch):
        def start(self):
            order.append("watch on")
            super().start()

        def end(self):
            order.append("watch off")
            return super().end()

    def repo_state(root):
        order.append("record")
        return real(root)

    real = isolation.repo_state
    monkeypatch.setattr(leftovers, "Watch", Watch)
    monkeypatch.setattr(isolation, "repo_state", repo_state)
    write_checks(workspace_dir, alpha="pass")
    git_commit_all(workspace_dir.path)
    isolation.run_gate(workspace_dir.path, "checks/distcheck.toml", None, None, "no", lambda text: None)
    assert order == ["record", "watch on", "record", "watch off"]


# Red team t4 A4, as the red team ran it (appended to experiments/__init__.py, imported on the ranks): the lab
# points core.fsmonitor at a hook; git, started by the gate's parent after its leftover watch ended, ran the
# hook, whose double-forked daemon rewrote the learner's reports to PASSED ~0.2 s after the parent exited.
A4 = r"""
def _a4_arm():
    import os, sys, subprocess
    def ppid(pid):
        t = open(f"/proc/{pid}/stat").read()
        return int(t[t.rfind(")") + 2:].split()[1])
    pid, gate = os.getpid(), None
    for _ in range(8):
        pid = ppid(pid)
        if pid <= 1:
            break
        if b"--distcheck-subsession" in open(f"/proc/{pid}/cmdline", "rb").read():
            gate = ppid(pid)
            break
    if gate is None:
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hook = os.path.join(root, ".git", "a4-hook")
    with open(hook, "w") as f:
        f.write(f"#!{sys.executable}\n" + HOOK.replace("@GATE@", str(gate)).replace("@ROOT@", root))
    os.chmod(hook, 0o755)
    subprocess.run(["git", "-C", root, "config", "core.fsmonitor", hook], check=False)

HOOK = r'''
import json, os, sys, time, subprocess
GATE, ROOT = @GATE@, "@ROOT@"
def ppid(pid):
    t = open(f"/proc/{pid}/stat").read()
    return int(t[t.rfind(")") + 2:].split()[1])
if ppid(os.getppid()) != GATE:  # only when the gate's parent itself ran git
    sys.exit(1)
subprocess.run(["git", "-C", ROOT, "config", "--unset", "core.fsmonitor"], env={"PATH": os.environ.get("PATH", "")})
args = open(f"/proc/{GATE}/cmdline", "rb").read().decode().split("\0")
cwd = os.readlink(f"/proc/{GATE}/cwd")
paths = {}
for a in args:
    for opt in ("--dod-json", "--dod-markdown"):
        if a.startswith(opt + "="):
            paths[opt] = os.path.join(cwd, a.split("=", 1)[1])
if os.fork():
    sys.exit(1)
os.setsid()
if os.fork():
    os._exit(0)
os.close(0); os.close(1); os.close(2)
os.unlink(sys.argv[0])
while os.path.exists(f"/proc/{GATE}"):
    time.sleep(0.05)
time.sleep(0.2)
j = paths.get("--dod-json")
if j and os.path.exists(j):
    doc = json.load(open(j))
    for it in doc["items"]:
        it.update(state="done", reason="evidence checked", command=None, flags=[], evidence=[])
    n = len(doc["items"])
    doc["summary"].update(done=n, total=n, ran=n, by_state={**dict.fromkeys(doc["summary"]["by_state"], 0), "done": n})
    doc["gate"].update(passed=True, verdict="passed", rederived=[], failing=[])
    open(j, "w").write(json.dumps(doc, indent=2) + "\n")
m = paths.get("--dod-markdown")
if m:
    open(m, "w").write("**gate: PASSED** (6/6 items done)\n")
'''
_a4_arm()
del _a4_arm
"""


def _running(text: str) -> list[int]:
    """Pids of the processes whose command line holds ``text``."""
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and text.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            pass
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the attack reads /proc")
def test_a4_a_fsmonitor_hook_the_lab_sets_never_runs_and_the_report_stays_failed(pytester):
    """``distcheck gate`` as CI runs it, in a process of its own that exits: the report must not say PASSED
    at any moment after it returned, and the hook's daemon must never have started."""
    root = phase35(pytester)
    init = root / "experiments" / "__init__.py"
    init.write_text(init.read_text() + A4)
    git_commit_all(root)
    hook = str(root / ".git" / "a4-hook")
    try:
        result = pytester.run(sys.executable, "-m", "pytest_distcheck.cli", "gate", "--dod-json=dod-report.json",
                              "--dod-markdown=summary.md", timeout=600)
        time.sleep(1.5)  # the daemon rewrote the reports ~0.2 s after the gate's process exited
        daemons = _running(hook)
    finally:
        for pid in _running(hook):
            os.kill(pid, signal.SIGKILL)
    assert result.ret == 1, result.stdout.str()
    assert daemons == []
    report = root / "dod-report.json"
    assert not workflow_accepts(report)
    doc = json.loads(report.read_text())
    assert doc["gate"]["verdict"] == "failed" and doc["summary"]["done"] == 0, doc["gate"]
    why = "the repository changed while the gate ran: the repository's config changed (core.fsmonitor)"
    assert why in doc["gate"]["rederived"], doc["gate"]["rederived"]
    assert "PASSED" not in (root / "summary.md").read_text()
