"""The gate's sub-session never runs bytecode it did not compile itself in this run (red team t4, A2 and A3).

A2. ``checks/__pycache__/*.pyc`` committed: pytest's assertion-rewrite cache trusts a cached test module whose
    source hash matches, so the check files stay byte-identical to the shipped ones while the code that runs
    is the attacker's (each check reduced to ``done()``). ``distcheck gate`` said PASSED 6/6 on a fresh clone.
A3. the lab, on a rank, writes a timestamp-valid ``.pyc`` beside a kit module the sub-session imported only
    later (``pytest_distcheck.calc.pipeline``, which the quiz calculators imported by name): PASSED 6/6.

The sub-session now runs with ``-X pycache_prefix=/dev/null/distcheck-gate`` (imports and pytest's rewrite
cache read and write no bytecode at all: a folder of the parent's was found and written by lab code, t6 A9),
and imports every kit module the checks use before any
lab code runs: the A3 test also records, in the real Phase 35 gate, that no ``pytest_distcheck`` module is
first imported after the first call on the ranks.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import _pytest.assertion.rewrite as rewrite
import pytest
from dod_support import git_commit_all
from test_gate_redteam import gate, phase35

from pytest_distcheck.dod import isolation

CHECKS = ("test_ddp_allreduce_logged.py", "test_tp_speedup_committed.py", "test_reading_notes_cited.py",
          "test_spend_within_budget.py", "test_tp_diagram_committed.py", "test_quiz_passed.py")


def _forge_rewrite_cache(check: Path, marker: Path) -> None:
    """A2 as the red team ran it: the check's rewritten-module cache, each test body replaced by done()."""
    data = check.read_bytes()
    tree = ast.parse(data)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            node.args.args = [a for a in node.args.args if a.arg != "dist_world"]
            node.body = ast.parse(f"import pathlib, pytest_distcheck\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                                  "pytest_distcheck.done('evidence checked')").body
    code = compile(ast.fix_missing_locations(tree), str(check), "exec", dont_inherit=True)
    pyc = check.parent / "__pycache__" / (check.name[:-3] + rewrite.PYC_TAIL)
    pyc.parent.mkdir(exist_ok=True)
    with open(pyc, "wb") as fp:
        rewrite._write_pyc_fp(fp, importlib.util.source_hash(data), code)


def test_a2_a_committed_rewrite_cache_of_the_checks_never_runs(pytester):
    root = phase35(pytester)
    marker = root / "forged-check-ran"
    for name in CHECKS:
        _forge_rewrite_cache(root / "checks" / name, marker)
    git_commit_all(root)
    result, report = gate(pytester)  # asserts the gate failed and the example workflow rejects its report
    assert not marker.exists()
    assert report["summary"]["done"] <= 1, report["summary"]  # spend-within-budget: nothing spent


# A3, appended to experiments/__init__.py (imported on the ranks with the lab): a pyc of the kit's
# calc/pipeline.py beside it, its own code plus a payload that marks it ran and turns every outcome DONE.
# The payload acts only in the test's workspace (the gate runs there): this test's kit is the checkout the
# other tests import, and the pyc is removed after the test.
PLANTS_A_KIT_PYC = '''
def _a3_plant():
    import importlib.util, marshal, os, struct
    spec = importlib.util.find_spec("pytest_distcheck.calc.pipeline")
    pyc = importlib.util.cache_from_source(spec.origin)
    payload = """
def _a3_poison():
    import gc, os, pathlib
    if os.getcwd() != %(root)r:
        return
    pathlib.Path(%(marker)r).write_text("ran")
    from pytest_distcheck.dod.state import CheckOutcome, State, GATE_NODEID
    for o in gc.get_objects():
        if type(o).__name__ == "DodPlugin":
            class L(list):
                def __add__(self, other):
                    return [CheckOutcome(c.item_id, c.nodeid, State.DONE, "evidence checked")
                            for c in list(self) + list(other) if c.nodeid != GATE_NODEID]
            o.outcomes = L(o.outcomes)
_a3_poison()
del _a3_poison
"""
    text = open(spec.origin, encoding="utf-8").read()
    code = compile(text + "\\n" + payload, spec.origin, "exec", dont_inherit=True)
    st = os.stat(spec.origin)
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    with open(pyc + ".a3", "wb") as f:
        f.write(importlib.util.MAGIC_NUMBER + b"\\0\\0\\0\\0" + struct.pack("<II", int(st.st_mtime) & 0xFFFFFFFF,
                st.st_size & 0xFFFFFFFF) + marshal.dumps(code))
    os.replace(pyc + ".a3", pyc)
    open(%(planted)r, "w").write(pyc)
_a3_plant()
del _a3_plant
'''

# Test-only: the sub-session started through this script records each first import of a kit module and each
# call on the ranks, in order (its own process ends with os._exit: the log is written as it goes).
RECORDS_IMPORTS = '''
import sys
log = open(sys.argv.pop(1), "w", buffering=1)

class _First:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.startswith("pytest_distcheck"):
            log.write("import " + name + "\\n")

sys.meta_path.insert(0, _First)
from pytest_distcheck.ranks import pool

_run = pool.RankPool.run

def run(self, *args, **kwargs):
    log.write("call\\n")
    return _run(self, *args, **kwargs)

pool.RankPool.run = run
import pytest
sys.exit(pytest.main(sys.argv[1:]))
'''


@pytest.fixture
def kit_pyc():
    """The kit's cached bytecode of calc/pipeline.py, put back as it was after the test."""
    spec = importlib.util.find_spec("pytest_distcheck.calc.pipeline")
    pyc = Path(importlib.util.cache_from_source(spec.origin))
    before = pyc.read_bytes() if pyc.is_file() else None
    yield pyc
    if before is None:
        pyc.unlink(missing_ok=True)
    else:
        pyc.write_bytes(before)


def test_a3_a_kit_pyc_the_lab_plants_never_runs_and_no_kit_module_loads_after_the_lab(pytester, monkeypatch,
                                                                                       kit_pyc):
    root = phase35(pytester)
    marker, planted, log = root / "forged-kit-module-ran", root / "planted", root / "imports.log"
    init = root / "experiments" / "__init__.py"
    init.write_text(init.read_text() + PLANTS_A_KIT_PYC % {"root": os.path.realpath(root), "marker": str(marker),
                                                            "planted": str(planted)})
    git_commit_all(root)
    wrapper = pytester.path.parent / "records_imports.py"
    wrapper.write_text(RECORDS_IMPORTS)
    real = isolation.command

    def recorded(*args, **kwargs):
        argv = real(*args, **kwargs)
        at = argv.index("-m")
        return [*argv[:at], str(wrapper), str(log), *argv[at + 2:]]

    monkeypatch.setattr(isolation, "command", recorded)
    result, report = gate(pytester)
    assert planted.read_text() == str(kit_pyc)  # the lab did plant it
    assert not marker.exists()
    assert report["summary"]["done"] <= 1, report["summary"]
    events = log.read_text().split("\n")
    assert "call" in events, events  # the live DDP check ran the lab
    late = [e for e in events[events.index("call"):] if e.startswith("import ")]
    assert late == [], late
    assert "first imported after the checks started" not in result.stdout.str()  # nor refused before the log


def test_a_kit_module_first_imported_once_armed_is_refused_and_named():
    late = isolation.LateKitImports()
    late.arm()
    try:
        with pytest.raises(ImportError, match="imports no kit module after lab code may have run"):
            importlib.import_module("pytest_distcheck.dod.not_loaded_yet")
        importlib.import_module("json.decoder")  # not the kit's: left alone
    finally:
        late.disarm()
    assert late not in sys.meta_path
    assert late.problems() == ["the kit module pytest_distcheck.dod.not_loaded_yet was first imported after the "
                               "checks started (lab code on the ranks may have rewritten it): refused"]


def test_the_sub_session_reads_and_writes_no_bytecode_at_all():
    """Red team t6 A9: lab code on a rank read the prefix folder from the sub-session's command line and
    planted a .pyc there for a module the diagram check imports late (mermaidx). Under /dev/null no folder
    or file can be made, by anyone."""
    argv = isolation.command(Path("/w"), Path("/t/distcheck-gate.ini"), ["checks/test_x.py::test_y"], None, None)
    assert argv[1:5] == ["-I", "-X", f"pycache_prefix={isolation.NO_BYTECODE}", "-m"], argv
    with pytest.raises(OSError):
        os.makedirs(os.path.join(isolation.NO_BYTECODE, "usr", "lib"))
    code = ("import importlib.util, sys; print(sys.pycache_prefix); "
            "print(importlib.util.cache_from_source('/usr/lib/mermaidx/__init__.py'))")
    out = subprocess.run([sys.executable, "-I", "-X", f"pycache_prefix={isolation.NO_BYTECODE}", "-c", code],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == isolation.NO_BYTECODE and out[1].startswith(isolation.NO_BYTECODE + "/")
