"""The repository must not change under the gate (red-team t2 B3).

B3: the lab, at import by the live DDP check, writes a made-up log to the committed path, runs ``git add``
and ``git commit`` itself; the committed-log check then sees a committed log. The gate's parent records the
repository (HEAD, the tracked files' status, HEAD's last reflog entry) before it starts the sub-session and
compares after it ended: a change makes every item untrusted, naming both commits.
"""

from __future__ import annotations

import json
import subprocess

from dod_support import git_commit_all, write_checks

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
