"""Nothing in a registered check's folder runs in the gate's sub-session in place of, or beside, the check.

Red team t6 A7/A7b: with ``--import-mode=append`` a check is imported by its basename from the checks folder
appended to ``sys.path``, and Python's ``FileFinder`` finds a package ``checks/test_quiz_passed/__init__.py``
(or a sourceless ``__init__.pyc``, or an extension module) before ``checks/test_quiz_passed.py``. The package
set ``__file__`` to the registered check, ran its source and turned every outcome DONE: gate PASSED 6/6. The
parent now refuses to start (``isolation.foreign_check_code``), and the sub-session's ``RootWatch`` names any
file of the checks folder other than the registered checks that ran.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import marshal
import shutil
import textwrap
from pathlib import Path

from dod_support import git_commit_all
from test_gate_redteam import phase35

from pytest_distcheck.dod import isolation

REPO = Path(__file__).resolve().parents[1]
# A7b's package, as the red team wrote it, with a marker instead of the outcome rewrite.
SHADOW_INIT = '''
import os as _os, pathlib
_py = _os.path.dirname(_os.path.abspath(__file__)) + ".py"
__file__ = _py
with open(_py, encoding="utf-8") as _f:
    exec(compile(_f.read(), _py, "exec"), globals())
pathlib.Path(%r).write_text("ran")
'''
REFUSED = "*FAILED (the gate did not start: {} would run inside its sub-session*"


def test_t6_a7b_a_package_shadowing_a_check_never_runs(pytester):
    root = phase35(pytester)
    marker = root / "ran-in-the-sub-session"
    (root / "checks" / "test_quiz_passed").mkdir()
    (root / "checks" / "test_quiz_passed" / "__init__.py").write_text(SHADOW_INIT % str(marker))
    git_commit_all(root)
    result = pytester.runpytest("-p", "no:cacheprovider", "--gate", "--dod-markdown", "summary.md")
    assert result.ret != 0
    assert not marker.exists()
    result.stdout.fnmatch_lines([REFUSED.format("checks/test_quiz_passed/__init__.py")])
    assert "gate: FAILED" in (root / "summary.md").read_text()


def test_t6_a7_a_sourceless_package_shadowing_a_check_never_runs(pytester):
    root = phase35(pytester)
    marker = root / "ran-in-the-sub-session"
    (root / "checks" / "test_quiz_passed").mkdir()
    code = compile(SHADOW_INIT % str(marker), "test_quiz_passed.py", "exec", dont_inherit=True)
    (root / "checks" / "test_quiz_passed" / "__init__.pyc").write_bytes(
        importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code))
    git_commit_all(root)
    result = pytester.runpytest("-p", "no:cacheprovider", "--gate")
    assert result.ret != 0
    assert not marker.exists()
    result.stdout.fnmatch_lines([REFUSED.format("checks/test_quiz_passed/__init__.pyc")])


# -- the refusal itself (no sub-session) ---------------------------------------------------------------


def shipped_workspace(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "checks", tmp_path / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def custom_workspace(tmp_path: Path) -> Path:
    (tmp_path / "checks").mkdir(parents=True)
    (tmp_path / "checks" / "distcheck.toml").write_text(textwrap.dedent('''
        [phase]
        id = "c1"
        title = "a course's own phase"

        [[items]]
        id = "alpha"
        title = "first"
        how = "make alpha"
        checks = ["checks/test_alpha.py::test_alpha"]
        '''))
    (tmp_path / "checks" / "test_alpha.py").write_text("import helpers\ndef test_alpha():\n    pass\n")
    return tmp_path


def foreign(root: Path) -> list[str]:
    return isolation.foreign_check_code(root, "checks/distcheck.toml")


def test_a_shipped_phase_as_the_kit_ships_it_and_its_bytecode_cache_are_not_refused(tmp_path):
    root = shipped_workspace(tmp_path)
    (root / "checks" / "__pycache__").mkdir()
    (root / "checks" / "__pycache__" / "test_quiz_passed.cpython-311.pyc").write_bytes(b"written by pytest")
    assert foreign(root) == []  # test_tp_speedup_gpu.py, the paid check, is no registered check: still fine


def test_an_extension_module_named_like_a_check_is_refused_in_every_phase(tmp_path):
    ext = importlib.machinery.EXTENSION_SUFFIXES[0]
    shipped = shipped_workspace(tmp_path / "s")
    (shipped / "checks" / f"test_quiz_passed{ext}").write_bytes(b"\x7fELF")
    assert foreign(shipped) == [f"checks/test_quiz_passed{ext}"]
    custom = custom_workspace(tmp_path / "c")
    (custom / "checks" / f"test_alpha{ext}").write_bytes(b"\x7fELF")
    assert foreign(custom) == [f"checks/test_alpha{ext}"]


def test_a_shipped_phase_refuses_every_other_importable_file_and_package(tmp_path):
    root = shipped_workspace(tmp_path)
    (root / "checks" / "numpy.py").write_text("")  # would catch an import miss of a missing extra
    (root / "checks" / "helper.pyc").write_bytes(b"")
    (root / "checks" / "termaid").mkdir()
    (root / "checks" / "termaid" / "__init__.py").write_text("")
    (root / "checks" / "notes").mkdir()  # no __init__: no package of its own (a namespace portion runs nothing)
    (root / "checks" / "notes" / "x.py").write_text("")
    (root / "checks" / "__init__.abi3.so").write_bytes(b"")
    assert foreign(root) == ["checks/__init__.abi3.so", "checks/helper.pyc", "checks/numpy.py",
                             "checks/termaid/__init__.py"]


def test_a_custom_phase_keeps_its_helper_modules_but_not_a_shadow_or_a_package_init(tmp_path):
    root = custom_workspace(tmp_path)
    (root / "checks" / "helpers.py").write_text("")
    (root / "checks" / "helpers_pkg").mkdir()
    (root / "checks" / "helpers_pkg" / "__init__.py").write_text("")
    (root / "checks" / "__pycache__").mkdir()
    (root / "checks" / "__pycache__" / "helpers.cpython-311.pyc").write_bytes(b"")
    assert foreign(root) == []
    (root / "checks" / "test_alpha").mkdir()
    (root / "checks" / "test_alpha" / "__init__.py").write_text("")
    (root / "checks" / "__init__.py").write_text("")
    assert foreign(root) == ["checks/__init__.py", "checks/test_alpha/__init__.py"]


class _Origins:
    """What integrity.Origins says: the checks folder and an installed package's folder are trusted."""

    def __init__(self, root: Path) -> None:
        self.checks, self.venv = root / "checks", root / ".venv"

    def trusted(self, filename: str) -> bool:
        return any(Path(filename).is_relative_to(d) for d in (self.checks, self.venv))

    def in_checks(self, filename: str) -> bool:
        return Path(filename).is_relative_to(self.checks)


def test_root_watch_names_checks_folder_code_other_than_the_registered_checks(tmp_path):
    root = tmp_path.resolve()
    check = root / "checks" / "test_alpha.py"
    watch = isolation.RootWatch(root, _Origins(root), [check])
    for f in (check, root / ".venv" / "lib" / "site-packages" / "torch" / "__init__.py",
              root / "checks" / "test_alpha" / "__init__.py"):
        watch.note(str(f))
    assert watch.problems() == ["checks/test_alpha/__init__.py (workspace code other than the registered checks) "
                                "ran inside the gate's sub-session"]


def test_t6_a7b_in_the_sub_session_the_shadow_is_named_if_it_ever_runs(pytester, monkeypatch):
    # The second line: the sub-session's own mode in this process (the parent's refusal is not involved).
    from pytest_distcheck.dod import isolation as iso

    monkeypatch.setattr(iso, "REQUIRED", False)
    root = phase35(pytester)
    marker = root / "ran-in-the-sub-session"
    (root / "checks" / "test_quiz_passed").mkdir()
    (root / "checks" / "test_quiz_passed" / "__init__.py").write_text(SHADOW_INIT % str(marker))
    result = pytester.runpytest("-p", "no:cacheprovider", "--gate", "--distcheck-subsession",
                                "checks/test_quiz_passed.py")
    assert marker.exists()  # it ran here ...
    result.stdout.fnmatch_lines(["*checks/test_quiz_passed/__init__.py (workspace code other than the registered "
                                 "checks) ran inside the gate's sub-session*"])  # ... and is named
    assert result.ret != 0
