"""The gate's isolated sub-session: the DoD checks for ``--gate`` run where no learner code can reach first.

Issue 13 measured that a root ``conftest.py``, a ``-p`` plugin, the ini file, ``-o`` and
``PYTEST_ADDOPTS`` all load before the kit can snapshot anything, so a check in the same process can be
talked into a pass (``pytest_distcheck.pending = print``). Design decisions, each with the test that pins it:

- ``pytest --gate`` (and ``distcheck gate``) run the checks in one extra process, launched by
  :func:`run_gate` (tests/test_gate_bypasses.py, 1-5):
  ``python -I -X pycache_prefix=/dev/null/distcheck-gate -m pytest -c <kit ini> --rootdir <root> --noconftest
  -p pytest_distcheck.plugin -p no:cacheprovider --gate --distcheck-subsession --dod-json <a file of the parent's>
  <registered checks>``
  with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` and every ``PYTEST_*``/``DISTCHECK_*`` variable removed.
  ``-I`` drops ``PYTHON*`` variables, the user site and the current folder from ``sys.path``; no
  ``conftest.py``, no other plugin, no learner ini, ``addopts`` or ``-o`` reach it. It ends with
  ``os._exit`` right after writing its report, and the parent re-derives the verdict from that report
  (:func:`finish`; red-team A01, tests/test_gate_redteam.py).
- Only the workspace's registered checks are collected (their files, nothing else of ``checks/``). The
  workspace file is the one the learner's run would use (``--workspace``, the ini key, found walking up);
  when its phase has a shipped DoD (:mod:`~pytest_distcheck.dod.manifest`), any other file or content is
  untrusted, so pointing the gate at another file cannot pass it.
- The sub-session checks its own isolation (:func:`problems`) and, before anything of the learner's
  loads, imports the kit modules the checks use and snapshots them (:func:`kit_modules_used`), so a
  learner module imported by a check that replaces a kit function is caught even with a builtin or
  a ``functools.partial`` (tests/test_gate_tamper.py). A kit module first imported after that is refused
  and makes every item untrusted (:class:`LateKitImports`), and no bytecode is read or written at all
  (``-X pycache_prefix`` under ``/dev/null``, where no file can exist: a folder of the parent's was found and
  written by lab code, red team t6 A9): red team t4 A2, A3, tests/test_gate_bytecode.py.
- The workspace root is never on the sub-session's ``sys.path`` for a phase whose DoD the kit ships (its
  checks import none of the learner's code; the live DDP check hands the root to the ranks; for another
  phase :func:`expose_root` appends it), and the checks folder is appended
  (``--import-mode=append``): a root-level ``statistics.py`` cannot shadow a module the kit imports late
  (red-team R1, tests/test_gate_redteam.py), and a ``*.dist-info`` at the root is no installed package
  to ``importlib.metadata`` (its entry points never load: red-team t4 A6). Workspace code other than the
  registered check files that runs anyway is seen by an audit hook and makes every item untrusted,
  naming the file (:class:`RootWatch`). The parent does not start the sub-session when a check's folder
  is a package (``checks/__init__.py`` would run in it: red-team t4 A1) or holds a package or extension module
  Python would import in place of a registered check (t6 A7, A7b; :func:`foreign_check_code`).
- The parent records the git repository before it starts the sub-session and after it ended
  (:func:`repo_state`: HEAD, the tracked files' status, HEAD's last reflog entry, the repository's config, hooks
  and ``info/attributes``); lab code that commits a made-up log while the checks run makes every item
  untrusted, naming both commits (red-team t2 B3, tests/test_gate_repository.py), and so does lab code that
  points the config at a program (t4 A4; no kit git call runs one: :mod:`pytest_distcheck.git`).
- No process that ran lab code outlives the verdict (Linux): the sub-session stops its ranks and zygotes
  before it writes its report (``pytest_distcheck.ranks.plugin``), and while it runs the parent is a child
  subreaper that then kills, reaps and names what the sub-session's tree left
  (:mod:`~pytest_distcheck.dod.leftovers`): every item untrusted. The parent imports what the verdict needs
  before the sub-session starts (lab code may rewrite the kit's files meanwhile). tests/test_gate_leftovers.py.
- No learner code runs in the sub-session itself: the live DDP check imports the lab by name on the
  ranks, whose replies this process unpickles as plain data only (``ranks.plugin.plain_results_only``),
  and the diagram check reads the TP plan's source as literals (tests/test_gate_lab_on_ranks.py). What the
  lab can still do on the ranks: docs/ci/threat-model.md, section 4.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from pytest_distcheck.dod import leftovers
from pytest_distcheck.git import run_git

FLAG = "--distcheck-subsession"
# The kit's own tests of in-process detection (tests/test_dod_gate.py) turn this off; in the sub-session a
# problem of :func:`problems` makes every item untrusted.
REQUIRED = True
INI_NAME = "distcheck-gate.ini"
# What the sub-session shuts out, as the JSON report states it when the sub-session checked it held.
WHAT = ("learner conftest.py files (--noconftest)", "installed plugins (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1)",
        "-p plugins, -o, -k/-m/--deselect and every other argument of the learner's command line",
        "the learner's ini file and its addopts (the kit's own ini)",
        "root-level modules shadowing what the kit imports (the workspace root is not on sys.path)",
        "PYTEST_*, DISTCHECK_* and PYTHON* environment variables (python -I)",
        "test files other than the registered checks",
        "kit functions replaced by the learner's modules after the sub-session started (snapshot)",
        "any cached bytecode (-X pycache_prefix under /dev/null) and kit modules first imported after the checks "
        "started")
# Passed on from the learner's command line to the sub-session (paths made absolute); the rest is ignored.
CARRIED = ("--gate", "--dod-json", "--dod-markdown", "--color")
# The sub-session's bytecode folder: under /dev/null no folder or file can be made, so no bytecode is ever read or
# written there (a real folder, even the parent's own temporary one, is found and written by lab code: t6 A9).
NO_BYTECODE = os.path.join(os.devnull, "distcheck-gate")
RELAY_S = 5.0  # seconds to finish relaying the sub-session's output once it and what it left are gone


def ini_text(root: Path, workspace_rel: str) -> str:
    """The kit's ini file for the sub-session: the workspace file, nothing else (no ``pythonpath``: the
    workspace root stays off ``sys.path``)."""
    return (f"# written by pytest-distcheck for the gate's isolated sub-session\n[pytest]\n"
            f"distcheck_config = {workspace_rel}\naddopts =\n")


# GitHub Actions' files through which a step sets the environment, PATH and outputs of the job's later steps:
# lab code must not find them through its environment (red team t6 A10: LD_PRELOAD for the upload step).
_CI_FILE_COMMANDS = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")


def clean_env(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without ``PYTEST_*``, ``DISTCHECK_*``, ``PYTHON*`` variables and the CI's file commands
    (``GITHUB_ENV``...), plugin autoload off."""
    env = {k: v for k, v in environ.items() if not k.startswith(("PYTEST_", "DISTCHECK_", "PYTHON"))
           and k not in _CI_FILE_COMMANDS}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # torch would load every installed `torch.backends` entry point
    return env


def targets(root: Path, workspace_rel: str) -> list[str]:
    """What the sub-session collects: every registered check (``file::function``) whose file exists; the
    checks folder for an item that registers none, or when the workspace file is missing or malformed."""
    from pytest_distcheck.errors import ConfigError
    from pytest_distcheck.workspace import load_workspace

    path = root / workspace_rel
    try:
        ws = load_workspace(path, root=root)
    except (ConfigError, OSError):
        return [str(Path(workspace_rel).parent)]
    # A registered check whose file is missing is reported by the kit (not run: file missing), not by pytest.
    out = list(dict.fromkeys(c for it in ws.items for c in it.checks if (root / c.split("::", 1)[0]).is_file()))
    if not out or any(not it.checks for it in ws.items):
        out.append(str(Path(workspace_rel).parent))
    return out


def command(root: Path, ini: Path, nodeids: list[str], json_path: str | None, md_path: str | None,
            color: str = "auto") -> list[str]:
    """The sub-session's command line (see the module docstring).

    No bytecode is read or written (``-X pycache_prefix`` under ``/dev/null``: :data:`NO_BYTECODE`; pytest's
    assertion-rewrite cache follows it too, ``_pytest.assertion.rewrite.get_cache_dir``): a committed
    ``checks/__pycache__``, a ``.pyc`` planted beside a kit module or in the prefix folder is never read
    (red team t4 A2, A3, t6 A9). Every module is compiled from source, about 1 s of CPU.
    """
    argv = [sys.executable, "-I", "-X", f"pycache_prefix={NO_BYTECODE}", "-m", "pytest", "-c", str(ini),
            "--rootdir", str(root), "--noconftest",
            "-p", "pytest_distcheck.plugin", "-p", "no:cacheprovider", "--import-mode=append", "--gate", FLAG,
            f"--color={color}"]
    if json_path:
        argv += ["--dod-json", json_path]
    if md_path:
        argv += ["--dod-markdown", md_path]
    return argv + ["--", *nodeids]


def run_gate(root: Path, workspace_rel: str, json_path: str | None, md_path: str | None, color: str,
             write: Callable[[str], None]) -> int:
    """Run the DoD checks of the workspace under ``root`` in the isolated sub-session; 0 only when the gate
    passed by the verdict :func:`finish` re-derives from the sub-session's report.

    The sub-session writes its JSON report to a folder of this process's, and ends itself with
    ``os._exit`` right after (no atexit hook of lab code runs there, red-team A01); this process reads the
    report once it and what it left behind are gone, re-derives the verdict
    (:func:`~pytest_distcheck.dod.report.rederive`) and writes the reports the learner asked for itself. It
    records the repository before and after (:func:`repo_state`, the after one while the leftover watch is still
    on): a commit, a changed tracked file, a new reflog entry, a changed config, hook or ``info/attributes``
    makes every item untrusted.
    While the sub-session runs this process is a child subreaper (:class:`~pytest_distcheck.dod.leftovers.Watch`,
    Linux only): a process the sub-session's tree left behind (a lab's double-forked daemon) is killed and
    reaped before the report is read, and makes every item untrusted, naming it. Every module :func:`finish`
    needs is imported before the sub-session starts: lab code may rewrite the kit's files meanwhile.

    Args:
        root: the workspace root (pytest rootdir); ``workspace_rel``: its workspace file, relative.
        json_path, md_path: absolute report paths, or ``None``.
        color: ``yes``, ``no`` or ``auto``.
        write: where the sub-session's output goes, line by line (the terminal).
    """
    import_dod_modules()
    for path in (json_path, md_path):  # a report of an earlier run must not stand in for this one
        if path and Path(path).is_file():
            Path(path).unlink()
    foreign = foreign_check_code(root, workspace_rel)
    if foreign:
        why = (f"the gate did not start: {', '.join(foreign)} would run inside its sub-session (a checks folder "
               "holds no package and nothing Python would import in place of a registered check: remove "
               f"{'it' if len(foreign) == 1 else 'them'})")
        if md_path:
            Path(md_path).write_text(f"**gate: FAILED**: {why}\n", encoding="utf-8")
        write(f"distcheck gate: FAILED ({why})\n")
        return 1
    start = repo_state(root)  # taken out here, where lab code cannot reach
    watch = leftovers.Watch()
    with tempfile.TemporaryDirectory(prefix="distcheck-gate-") as tmp:
        ini = Path(tmp) / INI_NAME
        ini.write_text(ini_text(root, workspace_rel), encoding="utf-8")
        child_json = Path(tmp) / "dod-report.json"
        argv = command(root, ini, targets(root, workspace_rel), str(child_json), None, color)
        watch.start()
        try:
            proc = subprocess.Popen(argv, cwd=root, env=clean_env(dict(os.environ)), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace")
            # A thread relays the output: a process left behind may hold the pipe open until it is killed.
            relay = threading.Thread(target=_relay, args=(proc.stdout, write), daemon=True)
            relay.start()
            rc = proc.wait()
            # Still watched: a program git may start (red team t4 A4) is this process's, killed and named.
            end = repo_state(root)
        finally:
            left = watch.end()  # also the sub-session itself, if this process was interrupted
        relay.join(RELAY_S)
        try:
            text = child_json.read_text(encoding="utf-8")
        except OSError:
            text = None
    seen = repo_changes(start, end) + ([leftovers.verdict_text(left)] if left else [])
    return finish(root, workspace_rel, text, rc, json_path, md_path, write, seen)


def expose_root(root: Path) -> None:
    """Put the workspace root last on ``sys.path``, once: only for a phase the kit ships no DoD for, whose
    checks may import the project's code (its gate is at best "unverified"). A shipped phase's checks never
    import the learner's code, and there the root stays off ``sys.path``."""
    if str(root) not in sys.path:
        sys.path.append(str(root))


def foreign_check_code(root: Path, workspace_rel: str) -> list[str]:
    """Files, relative to ``root``, in a registered check's folder that Python could import in the sub-session
    in place of, or beside, the registered checks (the folder is appended to ``sys.path``); ``[]`` if none.

    Always refused: an ``__init__`` of any importable suffix (the folder would be a package: red team t4 A1),
    and anything named like a registered check's module other than the check itself: a package
    ``NAME/__init__.*`` or an extension module, which Python's ``FileFinder`` finds before ``NAME.py``
    (red team t6 A7, A7b). For a phase whose DoD the kit ships (:func:`~pytest_distcheck.dod.manifest.shipped`),
    whose checks import nothing from their folder, also every other package and every other file of an
    importable suffix (``importlib.machinery.all_suffixes()``) but a ``test_*.py`` source (a test module, like
    the kit's paid check: no library the checks import is named so). ``__pycache__`` is never refused: the
    sub-session reads no bytecode from it (``-X pycache_prefix``).
    """
    from importlib.machinery import all_suffixes

    from pytest_distcheck.dod import manifest
    from pytest_distcheck.errors import ConfigError
    from pytest_distcheck.workspace import load_workspace

    try:
        shipped = manifest.shipped(load_workspace(root / workspace_rel, root=root).phase_id) is not None
    except (ConfigError, OSError):
        shipped = False
    suffixes = sorted(all_suffixes(), key=len, reverse=True)  # the longest first: .cpython-311-...so before .so
    paths = [root / t.split("::", 1)[0] for t in targets(root, workspace_rel)]
    checks = {p.resolve() for p in paths if p.is_file()}
    names = {p.name.removesuffix(".py") for p in paths if p.is_file()}  # the module names pytest imports

    def module(name: str) -> str | None:
        return next((name[: -len(s)] for s in suffixes if name.endswith(s) and len(name) > len(s)), None)

    found = []
    for folder in sorted({p if p.is_dir() else p.parent for p in paths}):
        for entry in sorted(folder.iterdir()):
            if entry.name == "__pycache__" or entry.resolve() in checks:
                continue
            if entry.is_dir():
                try:
                    inits = sorted(f for f in entry.iterdir() if f.is_file() and module(f.name) == "__init__")
                except OSError:  # unreadable to this process, not necessarily to Python's import system
                    inits = [entry]
                if inits and (shipped or entry.name in names):
                    found += inits
                continue
            name = module(entry.name)
            if name is None:
                continue
            if name == "__init__" or name in names or (
                    shipped and not (name.startswith("test_") and entry.name == name + ".py")):
                found.append(entry)
    return [f.relative_to(root).as_posix() for f in found]


def _relay(stream, write: Callable[[str], None]) -> None:
    for line in stream:
        write(line)


def repo_state(root: Path) -> dict[str, str] | None:
    """The git repository holding ``root`` as the gate sees it: ``head`` (the commit), ``tracked`` (``git status
    --porcelain`` of tracked files), ``reflog`` (HEAD's last reflog entry), ``config`` (the repository's own
    config entries, ``key\\nvalue`` each, NUL-separated: red team t4 A4 set ``core.fsmonitor`` there), ``hooks``
    and ``attributes`` (sha256 of the hooks folder and of ``info/attributes``, ``path:digest``); ``None``
    outside a repository or without git."""
    def git(*args: str) -> str | None:
        try:
            out = run_git(root, *args)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.rstrip("\n") if out.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if head is None:
        return None
    fields = (git("config", "--list", "-z", "--show-scope") or "").split("\0")
    config = "\0".join(entry for scope, entry in zip(fields[::2], fields[1::2], strict=False) if scope != "command")
    common = git("rev-parse", "--git-common-dir") or ".git"  # not --git-path hooks: the kit's core.hooksPath
    hooks, attributes = f"{common}/hooks", f"{common}/info/attributes"
    return {"head": head, "tracked": git("status", "--porcelain", "--untracked-files=no") or "",
            "reflog": git("reflog", "-n", "1", "--format=%gd: %gs", "HEAD") or "", "config": config,
            "hooks": f"{hooks}:{_digest(root / hooks)}", "attributes": f"{attributes}:{_digest(root / attributes)}"}


def _digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files (names, contents, link targets, executable bits); ``""``
    when there is nothing."""
    h = hashlib.sha256()
    found = sorted(p for p in path.rglob("*") if not p.is_dir() or p.is_symlink()) if path.is_dir() else \
        [path] if path.exists() or path.is_symlink() else []
    for p in found:
        h.update(f"{p.relative_to(path).as_posix() if p != path else ''}\0{os.access(p, os.X_OK)}\0".encode())
        try:
            h.update(os.readlink(p).encode() if p.is_symlink() else hashlib.sha256(p.read_bytes()).digest())
        except OSError as exc:
            h.update(str(exc.errno).encode())
    return h.hexdigest() if found else ""


def _config_keys_changed(before: str, after: str) -> list[str]:
    def entries(text: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for entry in filter(None, text.split("\0")):
            key, _, value = entry.partition("\n")
            out.setdefault(key, []).append(value)
        return out

    b, a = entries(before), entries(after)
    return sorted(k for k in b.keys() | a.keys() if b.get(k) != a.get(k))


def repo_changes(before: dict[str, str] | None, after: dict[str, str] | None) -> list[str]:
    """``[why]`` when the repository changed between two :func:`repo_state` (red-team t2 B3: lab code that
    commits a made-up log while the checks run; t4 A4: lab code that points the repository's config at a
    program of its own); ``[]`` when it did not. A config change names the keys, never their values."""
    if before is None:
        return []
    if after is None:
        why = "it is no longer a git repository"
    elif after["head"] != before["head"]:
        why = f"HEAD moved from {before['head'][:12]} to {after['head'][:12]}"
    elif after["tracked"] != before["tracked"]:
        files = "; ".join(f.strip() for f in after["tracked"].splitlines()[:3])
        why = f"tracked files changed ({files or 'now clean'})"
    elif after["reflog"] != before["reflog"]:
        why = f"HEAD's reflog changed (last entry now: {after['reflog']})"
    elif after["config"] != before["config"]:
        why = f"the repository's config changed ({', '.join(_config_keys_changed(before['config'], after['config']))})"
    elif after["hooks"] != before["hooks"]:
        why = f"the repository's hooks changed ({after['hooks'].rpartition(':')[0]})"
    elif after["attributes"] != before["attributes"]:
        why = f"the repository's attributes changed ({after['attributes'].rpartition(':')[0]})"
    else:
        return []
    return ["the repository changed while the gate ran: " + why]


def finish(root: Path, workspace_rel: str, text: str | None, rc: int, json_path: str | None,
           md_path: str | None, write: Callable[[str], None], repo: list[str] | None = None) -> int:
    """The gate's verdict from the sub-session's JSON report ``text`` and exit status ``rc``: re-derived
    from the items, written into the ``gate`` section of the reports at ``json_path``/``md_path``, said on
    the last line; returns the exit status (0 only when passed). ``repo``: what this process saw happen while
    the sub-session ran (:func:`repo_changes`, processes it left behind): every item becomes untrusted,
    naming it."""
    from pytest_distcheck.dod import markdown
    from pytest_distcheck.dod.report import FAILED, PASSED, UNVERIFIED, rederive
    from pytest_distcheck.errors import ConfigError
    from pytest_distcheck.workspace import load_workspace

    try:
        doc = json.loads(text) if text is not None else None
    except ValueError:
        doc = None
    try:
        item_ids = [it.id for it in load_workspace(root / workspace_rel, root=root).items]
    except (ConfigError, OSError):
        item_ids = []
    if repo and isinstance(doc, dict) and isinstance(doc.get("items"), list):
        _untrust(doc, "; ".join(repo))
    whys = rederive(doc, item_ids, rc) if item_ids else ["the workspace file cannot be read"]
    whys += repo or []
    whys += kit_inside(root)
    if isinstance(doc, dict) and isinstance(doc.get("gate"), dict):
        said = doc["gate"].get("verdict")
        doc["gate"].update(passed=not whys, verdict=PASSED if not whys else UNVERIFIED if said == UNVERIFIED
                           else FAILED, rederived=whys)
        outputs = ((json_path, lambda: json.dumps(doc, indent=2) + "\n"), (md_path, lambda: markdown.render(doc)))
    else:
        outputs = ((md_path, lambda: "**gate: FAILED**: " + "; ".join(whys) + "\n"),)
    status = 0 if not whys else rc or 1
    for path, render in outputs:
        if path:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(render(), encoding="utf-8")
            except OSError as exc:
                write(f"distcheck gate: cannot write {path}: {exc.strerror or exc}\n")
                status = status or 1
    write("distcheck gate: verdict re-derived from the sub-session's report: "
          + ("PASSED\n" if not whys else "FAILED (" + "; ".join(whys) + ")\n"))
    return status


def _untrust(doc: dict, why: str) -> None:
    """Every item of the report ``doc`` untrusted for ``why`` (its own reason kept after it)."""
    for it in doc["items"]:
        if isinstance(it, dict):
            it.update(state="untrusted", reason=f"{why} (the check's own: {it.get('state')}: {it.get('reason')})",
                      command=None)
    if isinstance(doc.get("summary"), dict):
        n = len(doc["items"])
        doc["summary"].update(done=0, by_state={**dict.fromkeys(doc["summary"].get("by_state") or {}, 0),
                                                "untrusted": n})


def ignored_args(args: Iterable[str]) -> list[str]:
    """The learner's command-line arguments the sub-session does not receive."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in CARRIED:
            skip = "=" not in arg and name != "--gate"
            continue
        out.append(arg)
    return out


# -- inside the sub-session ----------------------------------------------------------------------------


def _imported_kit_names(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return {n for n in names if n == "pytest_distcheck" or n.startswith("pytest_distcheck.")}


def kit_modules_used(files: Iterable[Path]) -> list[str]:
    """The kit modules ``files`` import, at any depth of the code and through the kit's own imports.

    Found by reading the source (``ast``), so nothing of the learner's runs; a name that is not a module
    (``from pytest_distcheck import pending``) is skipped.
    """
    todo = set().union(*(_imported_kit_names(Path(f)) for f in files)) if files else set()
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        seen.add(name)
        todo |= _imported_kit_names(Path(spec.origin)) - seen
    return sorted(seen)


def preimport(files: Iterable[Path]) -> list[str]:
    """Import the kit modules ``files`` use (see :func:`kit_modules_used`), and those the kit modules already
    loaded import inside functions (the plugins' fixtures and hooks); names of those that failed.

    After this the sub-session imports no kit module for the first time (:class:`LateKitImports`): lab code on
    the ranks could have rewritten its source or planted its bytecode by then (red team t4 A3).
    """
    loaded = [Path(m.__file__) for n, m in list(sys.modules.items())
              if n.split(".", 1)[0] == "pytest_distcheck" and getattr(m, "__file__", None)]
    failed = []
    for name in kit_modules_used([*files, *loaded]):
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing optional dependency: the check itself will say so
            failed.append(f"{name} ({type(exc).__name__})")
    return failed


class LateKitImports:
    """A meta-path finder that refuses (``ImportError``) and names any kit module imported for the first time
    once armed, i.e. after :func:`preimport`: lab code on the ranks may have rewritten its ``.py`` in a
    writable install by then, or planted bytecode for it (red team t4 A3). Modules are found by reading their
    imports, so a dynamic ``importlib.import_module`` a check reaches is refused here, never loaded late; so is
    a kit module a check imports only through a workspace module that is not a check file (a phase's checks
    import the kit modules they use themselves, by name).
    """

    def __init__(self) -> None:
        self.refused: dict[str, None] = {}

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        """Raise ``ImportError`` for a ``pytest_distcheck`` module (only called for one not imported yet)."""
        if name.split(".", 1)[0] == "pytest_distcheck":
            self.refused[name] = None
            raise ImportError(f"{name} was not imported before the checks started: the gate's sub-session "
                              "imports no kit module after lab code may have run", name=name)

    def arm(self) -> None:
        """Refuse from now on (first on ``sys.meta_path``)."""
        sys.meta_path.insert(0, self)

    def disarm(self) -> None:
        """Stop refusing (the end of the session: the kit's in-process tests go on in this process)."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def problems(self) -> list[str]:
        """One sentence per refused module (``[]`` if none)."""
        return [f"the kit module {n} was first imported after the checks started (lab code on the ranks may have "
                "rewritten it): refused" for n in self.refused]


def import_dod_modules() -> None:
    """Import every module of :mod:`pytest_distcheck.dod`, so the snapshot holds those that make the verdict
    before lab code can import one and change it (red-team A12: ``report.FAILED = "passed"``)."""
    import pkgutil

    import pytest_distcheck.dod as dod

    for info in pkgutil.iter_modules(dod.__path__, dod.__name__ + "."):
        importlib.import_module(info.name)


def _plugin_file(plugin: object) -> str | None:
    from pytest_distcheck.dod.integrity import code_file

    return getattr(plugin, "__file__", None) or code_file(type(plugin))


def problems(config: pytest.Config) -> list[str]:
    """Why this process is not the isolated sub-session :func:`run_gate` starts; ``[]`` when it is.

    Checked: Python's ``-I`` and ``-X pycache_prefix``; ``--noconftest``; plugin autoload off; no
    ``PYTEST_ADDOPTS``/``PYTEST_PLUGINS``; no ``-o``; the ini file is the kit's, for this rootdir; every
    registered plugin is pytest's or the kit's.
    """
    from pytest_distcheck.dod.integrity import _PYTEST_DIRS, KIT_DIR, _inside

    out = []
    if not sys.flags.isolated:
        out.append("Python was not started with -I (PYTHONPATH, the user site or the current folder may load code)")
    if not config.getoption("noconftest"):
        out.append("conftest.py files may load (no --noconftest)")
    if not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        out.append("installed pytest plugins may autoload (PYTEST_DISABLE_PLUGIN_AUTOLOAD not set)")
    out += [f"{var} is set" for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS") if os.environ.get(var)]
    if config.getoption("importmode") != "append":
        out.append(f"--import-mode={config.getoption('importmode')} puts test folders first on sys.path")
    if config.getoption("override_ini"):
        out.append(f"-o {' '.join(config.getoption('override_ini'))} was given")
    ini = config.inipath
    expected = ini_text(config.rootpath, str(config.getini("distcheck_config")))
    if ini is None or ini.name != INI_NAME or ini.read_text(encoding="utf-8") != expected:
        out.append(f"the ini file {ini} is not the kit's")
    if sys.pycache_prefix != NO_BYTECODE:
        out.append(f"cached bytecode may be read (-X pycache_prefix is not {NO_BYTECODE})")
    out += kit_inside(config.rootpath)
    trusted = (KIT_DIR, *_PYTEST_DIRS)
    for name, plugin in config.pluginmanager.list_name_plugin():
        if plugin is None:
            continue
        where = _plugin_file(plugin)
        if not where or not any(_inside(Path(where).resolve(), d) for d in trusted):
            out.append(f"plugin {name!r} from {where or 'an unknown place'} is loaded")
    return out


def kit_inside(root: Path, kit_dir: Path | None = None, prefix: str | None = None) -> list[str]:
    """``[why]`` when the kit imported here is the workspace's own source: under the workspace ``root`` but
    outside the Python environment running it (``sys.prefix``): an editable install of the learner's fork,
    whose kit source they can edit (red-team A07). A virtual environment inside the workspace (``.venv/``,
    as the README sets one up) holds an installed kit, as one outside it does. Else ``[]``."""
    from pytest_distcheck.dod.integrity import KIT_DIR, _inside

    kit = Path(kit_dir or KIT_DIR).resolve()
    if _inside(kit, Path(root).resolve()) and not _inside(kit, Path(prefix or sys.prefix).resolve()):
        return [f"the kit is installed from inside the workspace (editable: {kit}): a grader cannot trust it"]
    return []


class RootWatch:
    """Code from the workspace root, other than the registered ``checks`` files and installed packages, that
    ran in this process: seen by an audit hook (``exec`` of a module's code) and in ``sys.modules`` (its
    ``__file__`` and its spec's origin). Any other file of the checks folder is named too (red team t6 A7b).

    A module that removes itself from ``sys.modules`` after running (red-team R1's shadow) is still seen by
    the hook. ``problems()`` names each file, relative to the root.
    """

    _current: RootWatch | None = None
    _hooked = False

    def __init__(self, root: Path, origins: object, checks: Iterable[Path]) -> None:
        self.root = root.resolve()
        self.allowed = [Path(c).resolve() for c in checks]  # check files, or a checks folder collected whole
        self.origins = origins
        self.seen: dict[str, None] = {}
        RootWatch._current = self
        if not RootWatch._hooked:  # audit hooks cannot be removed: one per process, pointing at the current
            sys.addaudithook(_audit)
            RootWatch._hooked = True

    def note(self, filename: str | None) -> None:
        """Record ``filename`` when it is workspace code outside the allowed folders."""
        if not filename or not os.path.isabs(filename) or filename in self.seen:
            return  # relative names are code compiled from strings (torch's), not files imported
        from pytest_distcheck.dod.integrity import _inside

        path = Path(filename).resolve()
        if not _inside(path, self.root) or any(_inside(path, a) for a in self.allowed):
            return
        # The checks folder is trusted code to the in-process origin checks, not here: only its registered
        # checks may run in the sub-session (red team t6 A7b); installed packages under the root (.venv/) may.
        if self.origins.trusted(filename) and not self.origins.in_checks(filename):  # type: ignore[attr-defined]
            return
        self.seen[filename] = None

    def problems(self) -> list[str]:
        """One sentence per foreign file that ran (``[]`` if none)."""
        for mod in list(sys.modules.values()):
            self.note(getattr(mod, "__file__", None))
            self.note(getattr(getattr(mod, "__spec__", None), "origin", None))  # a module may rewrite __file__ (A7)
        return [f"{Path(f).resolve().relative_to(self.root).as_posix()} (workspace code other than the registered "
                "checks) ran inside the gate's sub-session" for f in self.seen]


def _audit(event: str, args: tuple) -> None:
    if event == "exec" and RootWatch._current is not None:
        RootWatch._current.note(getattr(args[0], "co_filename", None))
