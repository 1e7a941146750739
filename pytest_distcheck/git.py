"""The kit's one way to ask git about a workspace's repository: ``git -C <root>`` with replace refs off.

The variables git sets for its hooks (``GIT_DIR``, ``GIT_INDEX_FILE``, ...: a ``pre-commit`` hook running the
checks) would point git at another repository or index, so every ``GIT_*`` variable but the ``GIT_CONFIG*``
ones is removed; the user's and the system's config are read as git reads them (``safe.directory`` included).
One is kept: a ``GIT_INDEX_FILE`` beside the repository's own ``index`` (``git commit -a`` or ``git commit PATH``
commit from a temporary index there, which is what that hook's commit will hold).
The gate's own calls (:mod:`pytest_distcheck.dod.snapshot`) are ``rev-parse``, ``ls-tree`` and ``cat-file
--batch``, which run no filter, hook or other program a config names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

GIT = shutil.which("git") or "git"
DUBIOUS = "detected dubious ownership"
# git's own fix, as it prints it for a repository owned by another user: the path is the repository's.
TRUST = "git config --global --add safe.directory {path}"


def _env(root: Path | str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith("GIT_CONFIG")}
    index = os.environ.get("GIT_INDEX_FILE")
    git_dir = Path(index).resolve().parent if index else None
    if git_dir is not None and git_dir.name == ".git" and Path(root).resolve().is_relative_to(git_dir.parent):
        env["GIT_INDEX_FILE"] = str(Path(index).resolve())
    env.update(GIT_NO_REPLACE_OBJECTS="1", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return env


def run_git(root: Path | str, *args: str, timeout: float = 60, data: bytes | None = None,
            text: bool = True) -> subprocess.CompletedProcess:
    """``git --no-replace-objects -C <root> <args>``, output captured, never checked.

    Args:
        root: the folder git starts from (the workspace root or below).
        data: bytes for git's standard input (then the output is bytes too); else stdin is empty.
        text: decode the output as text (when ``data`` is ``None``).

    Raises:
        OSError: git cannot be started.
        subprocess.TimeoutExpired: git ran past ``timeout`` seconds.
    """
    return subprocess.run([GIT, "--no-replace-objects", "--no-pager", "-C", str(root), *args], capture_output=True,
                          timeout=timeout, check=False, env=_env(root), input=data,
                          stdin=subprocess.DEVNULL if data is None else None, text=text and data is None)


def said(proc: subprocess.CompletedProcess, root: Path | str) -> str:
    """What a failed git call means for a person: git's first line, or, for a repository owned by another user,
    that and the command that trusts it (``safe.directory``: containers, CI ``container:`` jobs)."""
    err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode("utf-8", "replace")
    if DUBIOUS in err:
        found = re.search(r"repository at '([^']+)'", err)
        path = found.group(1) if found else str(root)
        return (f"git refuses the repository at {path}: it belongs to another user ({DUBIOUS}); if you trust it: "
                + TRUST.format(path=path))
    return (err.strip().splitlines() or ["no message"])[0]
