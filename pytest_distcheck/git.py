"""The kit's one way to ask git about a workspace's repository.

Lab code runs in the same process as the checks and can set ``GIT_DIR``/``GIT_WORK_TREE`` (or any other
``GIT_*`` variable) so that git reads a shadow repository in which made-up evidence is committed
(red-team t3 E). Every git call of the kit therefore runs with all ``GIT_*`` variables removed from its
environment and ``-C <root>``, so git finds the repository from the workspace itself.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def run_git(root: Path | str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``git -C <root> <args>`` with text output captured, ``GIT_*`` variables removed, never checked.

    Args:
        root: the folder git starts from (the workspace root or below).
        args: git's arguments.
        timeout: seconds before the call is given up.

    Raises:
        OSError: git cannot be started.
        subprocess.TimeoutExpired: git ran past ``timeout``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=timeout,
                          check=False, env=env)
