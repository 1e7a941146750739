"""The kit's one way to ask git about a workspace's repository.

Lab code runs in the same process as the checks and can set ``GIT_DIR``/``GIT_WORK_TREE`` (or any other
``GIT_*`` variable) so that git reads a shadow repository in which made-up evidence is committed
(red-team t3 E). Every git call of the kit therefore runs with all ``GIT_*`` variables removed from its
environment and ``-C <root>``, so git finds the repository from the workspace itself.

Lab code can also write the repository's config (``.git/config``, untracked): red team t4 A4 set
``core.fsmonitor`` to a script, which the gate's parent's ``git status`` ran and whose daemon rewrote the
report after the verdict. So no kit git call runs a program any config names. Measured with git 2.39
(tests/test_git_neutral.py), the commands the kit runs (``status``, ``ls-files``, ``hash-object``,
``rev-parse``, ``reflog``) start: the ``core.fsmonitor`` hook (status, ls-files), ``filter.<driver>.clean``
and ``.process`` for stat-dirty files (status, hash-object), the ``post-index-change`` hook when status
rewrites the index, ``gpg.program`` under ``log.showSignature`` (reflog), and, in each submodule, ``git
status`` with the submodule's own config. Each is turned off:

- the user's and the system's config are not read (``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_CONFIG_NOSYSTEM``:
  lab code can write ``~/.gitconfig`` too), nor stdin (``include.path=/dev/stdin``);
- ``core.fsmonitor=false``, ``core.hooksPath=/dev/null``, ``log.showSignature=false``, no pager, no optional
  locks (status does not rewrite the index), all given as command-line config (``GIT_CONFIG_COUNT``), which
  wins over the repository's and reaches the git processes git starts;
- every filter driver the repository's config defines gets an empty ``clean``, ``smudge`` and ``process`` and
  ``required=false`` (git runs no empty filter command; git's convert.c ``apply_filter``); the driver names
  are read with ``git config --list --name-only`` first, which runs nothing;
- ``status`` never looks inside submodules (``--ignore-submodules=dirty``: a submodule whose checked-out
  commit moved still shows), since a submodule's config names filters this process never read.

So a file is compared with its committed blob byte for byte: a clean filter (git-lfs, nbstripout) the
learner relies on is not applied. ``diff.external``, textconv and the other programs git runs for diffs,
merges, remotes or editors are not turned off: no kit call diffs, merges, fetches or edits. Not done: a
change of the config between the listing and the call (lab code running at that moment) is not seen here;
the gate's parent compares the config before and after (``isolation.repo_state``). git itself is the one found
on PATH when the kit was imported (:data:`GIT`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# Found once, when the kit is imported (the gate's parent imports it before any lab code runs): a ``git`` that
# lab code drops later into a folder on PATH (a virtual environment's ``bin``) is never the one run.
GIT = shutil.which("git") or "git"
# command-line config for every kit git call: (key, value)
NEUTRAL = (("core.fsmonitor", "false"), ("core.hooksPath", os.devnull), ("log.showSignature", "false"))
FILTER_KEYS = ("clean", "smudge", "process")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat",
               GIT_TERMINAL_PROMPT="0")
    return env


def _run(root: Path | str, args: tuple[str, ...], env: dict[str, str], timeout: float
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GIT, "--no-pager", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env=env, stdin=subprocess.DEVNULL)


def _filter_drivers(names: str) -> list[str]:
    """The filter driver names among ``git config --list --name-only -z`` output (``filter.<driver>.<key>``;
    a driver name may hold dots)."""
    drivers = []
    for name in names.split("\0"):
        section, _, rest = name.partition(".")
        driver, _, key = rest.rpartition(".")
        if section.lower() == "filter" and driver and key.lower() in (*FILTER_KEYS, "required") \
                and driver not in drivers:
            drivers.append(driver)
    return drivers


def run_git(root: Path | str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``git -C <root> <args>`` with text output captured, ``GIT_*`` variables removed, never checked, running
    no program any config names (the module docstring lists what is turned off and how).

    Args:
        root: the folder git starts from (the workspace root or below).
        args: git's arguments; ``status`` gets ``--ignore-submodules=dirty``.
        timeout: seconds before each of the (two) git processes is given up.

    Returns:
        git's result; when the repository's config cannot be listed, that listing's (non-zero) result.

    Raises:
        OSError: git cannot be started.
        subprocess.TimeoutExpired: git ran past ``timeout``.
    """
    env = _env()
    listed = _run(root, ("config", "--list", "--name-only", "-z"), env, timeout)
    if listed.returncode != 0 and listed.stderr.strip():  # no config at all exits 1 and says nothing
        return listed
    drivers = _filter_drivers(listed.stdout)
    pairs = [*NEUTRAL, *((f"filter.{d}.{k}", "") for d in drivers for k in FILTER_KEYS),
             *((f"filter.{d}.required", "false") for d in drivers)]
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    if args[:1] == ("status",):
        args = ("status", "--ignore-submodules=dirty", *args[1:])
    return _run(root, args, env, timeout)
