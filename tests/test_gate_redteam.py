"""Bypasses a red-team tester found after issue 13's sub-session landed, each now failing the gate.

R1. a root-level module shadowing one the kit imports late (``statistics.py``) runs in the sub-session
    before the kit's snapshot and replaces ``pytest_distcheck.pending/broken/stale`` with callable
    instances;
R2. ``experiments/__init__.py`` (imported by the live DDP check) replaces ``__new__`` of the outcome classes
    so that ``pending(...)`` raises ``Done``;
R3. the reference work of ``solutions/`` (notes, diagram page and SVG, DDP log, TP results) copied into the
    learner's paths: each item whose evidence is a copy is untrusted, "copied from the kit",
    and the JSON report names the files, their hashes and the flag ``copied`` (R7);
R6. a workspace file whose phase has no shipped DoD (``id = "36"``) with one trivial item: the gate says
    "unverified" and exits non-zero (a phase the kit ships no DoD for is never "passed").

Each runs the documented gate (``pytest --gate``, one isolated sub-session) on a bare copy of the Phase 35
checks folder (nothing done) carrying the bypass.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from dod_support import git_commit_all, workflow_accepts

from pytest_distcheck.diagram.markdown import DRAWING_ASIDE
from pytest_distcheck.dod import manifest

REPO = Path(__file__).resolve().parents[1]

SHADOW = """
import importlib, sys
_here = sys.path.pop(0); del sys.modules[__name__]
_real = importlib.import_module(__name__); sys.path.insert(0, _here); sys.modules[__name__] = _real
import pytest_distcheck
from pytest_distcheck.dod.outcome import Done
class _Done:
    def __call__(self, reason, command=None): raise Done("evidence checked")
for _n in ("pending", "broken", "stale"): setattr(pytest_distcheck, _n, _Done())
"""

NEW_DONE = """
from pytest_distcheck.dod import outcome as _o
for _c in (_o.Pending, _o.Broken, _o.Stale):
    _c.__new__ = staticmethod(lambda cls, *a, **k: _o.Done("evidence checked"))
"""


def phase35(pytester: pytest.Pytester) -> Path:
    """A bare copy of the Phase 35 workspace (workspace file, checks, quiz bank, lab code): nothing done."""
    shutil.copytree(REPO / "checks", pytester.path / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "experiments", pytester.path / "experiments",
                    ignore=shutil.ignore_patterns("__pycache__", "results"))
    return pytester.path


def gate(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict]:
    """The learner's `pytest --gate` with the JSON report the example workflow judges."""
    result = pytester.runpytest("-p", "no:cacheprovider", "--gate", "--dod-json", "report.json", *args)
    report = pytester.path / "report.json"
    assert result.ret != 0, result.stdout.str()
    assert "gate: PASSED" not in result.stdout.str()
    assert not workflow_accepts(report)
    return result, json.loads(report.read_text())


def test_r1_a_root_module_shadowing_a_late_stdlib_import_is_untrusted(pytester):
    root = phase35(pytester)
    (root / "statistics.py").write_text(SHADOW)
    result, report = gate(pytester)
    text = result.stdout.str()
    assert "DONE     quiz-passed" not in text, text  # the shadow never runs: the root is last on sys.path
    result.stdout.fnmatch_lines(["PENDING*quiz-passed*"])


def test_r2_lab_code_replacing_an_outcome_class_constructor_never_runs_in_the_sub_session(pytester):
    """R2 ran in the sub-session when the live DDP check imported the lab there (the snapshot then named the
    patch). The lab now runs on the ranks only (tests/test_gate_lab_on_ranks.py) and the diagram check reads
    the plan without importing it: the patch and the root-level module it imports run on the ranks, and the
    sub-session's outcomes are the kit's."""
    root = phase35(pytester)
    init = root / "experiments" / "__init__.py"
    init.write_text(init.read_text() + NEW_DONE + "import zz_helper\n")
    (root / "zz_helper.py").write_text("import sys\ndel sys.modules[__name__]\n")
    result, report = gate(pytester)
    text = result.stdout.str()
    assert "DONE " not in text and "UNTRUSTED" not in text, text
    result.stdout.fnmatch_lines(["*rank 0: error (KeyError: 'zz_helper')*",
                                 "ERROR    ddp-allreduce-logged  check crashed in call: RankError: rank(s) 0, 1 failed",
                                 "PENDING  reading-notes-cited*"])


R6_TOML = """
[phase]
id = "36"
title = "my own phase"

[[items]]
id = "quiz-passed"
title = "Phase quiz passed"
how = "nothing"
checks = ["checks/test_mine.py::test_quiz"]
"""


def test_r6_a_phase_without_a_shipped_dod_is_unverified_never_passed(pytester):
    root = phase35(pytester)
    (root / "checks" / "distcheck.toml").write_text(R6_TOML)
    (root / "checks" / "test_mine.py").write_text(
        'import pytest\n\n@pytest.mark.dod("quiz-passed")\ndef test_quiz():\n    pass\n')
    result, report = gate(pytester)
    result.stdout.fnmatch_lines(["DONE     quiz-passed  evidence checked",
                                 "gate: UNVERIFIED (1/1 items done; no DoD shipped with the kit for phase 36; --gate "
                                 "only vouches for phases whose DoD ships with the kit: 35)"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert report["gate"]["verdict"] == "unverified" and report["gate"]["passed"] is False
    assert report["canonical"] is None and report["isolation"]["isolated"]


COPIES = {"docs/notes/megatron.md": "docs/notes/megatron.md", "docs/notes/fsdp.md": "docs/notes/fsdp.md",
          "docs/tp-sharding.md": "docs/tp-sharding.md", "docs/tp-sharding.svg": "docs/tp-sharding.svg",
          "experiments/ddp_cpu/results/allreduce-cpu.json": "experiments/ddp_cpu/results/allreduce-cpu.json",
          "experiments/ddp_cpu/results/allreduce-cpu.png": "experiments/ddp_cpu/results/allreduce-cpu.png",
          "experiments/tp_inference/results/speedup-cpu-gloo-2.json":
              "experiments/tp_inference/results/speedup-cpu-gloo-2.json",
          "experiments/tp_inference/results/speedup-cpu-gloo-2.png":
              "experiments/tp_inference/results/speedup-cpu-gloo-2.png"}


def test_r3_the_reference_solutions_copied_into_the_learners_paths_are_untrusted(pytester):
    root = phase35(pytester)
    for src, dst in COPIES.items():
        (root / dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "solutions" / src, root / dst)
    notes = root / "docs" / "notes" / "fsdp.md"  # reflowed: still the reference's statements
    notes.write_text(notes.read_text().replace("\n", "\n ").replace(". ", ".  "))
    git_commit_all(root)  # committed, as the items ask: only the copies stand between them and done
    result, report = gate(pytester)
    for item in ("ddp-allreduce-logged", "tp-speedup-committed", "reading-notes-cited", "tp-diagram-committed"):
        result.stdout.fnmatch_lines([f"UNTRUSTED  {item}*copied from the kit: *"])
    result.stdout.fnmatch_lines(["*docs/notes/fsdp.md: * of its * paragraphs are those of the reference solution "
                                 "solutions/docs/notes/fsdp.md*",
                                 "*docs/tp-sharding.svg: it is the reference solution solutions/docs/tp-sharding.svg, "
                                 "byte for byte*"])
    items = {it["id"]: it for it in report["items"]}
    ddp = items["ddp-allreduce-logged"]
    assert ddp["state"] == "untrusted" and "copied" in ddp["flags"]
    assert {"path": "experiments/ddp_cpu/results/allreduce-cpu.json",
            "sha256": manifest.sha256_file(REPO / "solutions/experiments/ddp_cpu/results/allreduce-cpu.json"),
            "copied": "it is the reference solution solutions/experiments/ddp_cpu/results/allreduce-cpu.json, "
                      "byte for byte"} in ddp["evidence"]
    assert items["spend-within-budget"]["evidence"][0]["copied"] is None  # the starting ledger is the learner's
    assert "self-reported" in items["spend-within-budget"]["flags"]


def test_r2_a_kit_class_patched_in_place_or_a_swapped_code_object_is_named(tmp_path, monkeypatch):
    """In-process, instant: the snapshot covers the members of the kit's classes and its functions' code."""
    from pytest_distcheck.dod import outcome
    from pytest_distcheck.dod.integrity import ModuleSnapshot, Origins

    snap = ModuleSnapshot(Origins(tmp_path / "checks", tmp_path), [], since="after the start")
    assert not [p for p in snap.problems() if "outcome" in p]
    monkeypatch.setattr(outcome.DodOutcome, "__init__", lambda self, *a, **k: None)
    monkeypatch.setattr(outcome.Pending, "__new__", staticmethod(lambda cls, *a, **k: outcome.Done("x")))
    monkeypatch.delattr(outcome.Blocked, "state")  # data: watched since red-team A12
    monkeypatch.setattr(outcome.pending, "__code__", (lambda reason, command=None: None).__code__)
    problems = "\n".join(snap.problems())
    assert "pytest_distcheck.dod.outcome.DodOutcome.__init__ was replaced after the start (now " in problems
    assert "pytest_distcheck.dod.outcome.Pending.__new__ was added after the start (now " in problems
    assert "pytest_distcheck.dod.outcome.pending.__code__ was replaced after the start (now code from " in problems
    assert "pytest_distcheck.dod.outcome.Blocked.state was removed after the start" in problems


def test_a12_lab_code_changing_kit_data_or_the_ways_out_is_named(tmp_path, monkeypatch):
    """In-process: red-team A12's ``Pending.state = "done"`` and ``report.FAILED = "passed"``, a class
    attribute added over an inherited one, and ``os._exit`` replaced (the sub-session ends through it)."""
    import importlib
    import os

    from pytest_distcheck.dod.integrity import ModuleSnapshot, Origins

    # sys.modules' own (another test may have imported a module afresh): the snapshot reads sys.modules
    outcome, report = (importlib.import_module(f"pytest_distcheck.dod.{m}") for m in ("outcome", "report"))

    monkeypatch.setattr(report, "PASSED", "pa" + "ssed")  # an equal str rebound is not a change
    snap = ModuleSnapshot(Origins(tmp_path / "checks", tmp_path), [], since="after the start")
    monkeypatch.setattr(report, "PASSED", "pa" + "ssed")
    assert not snap.problems()
    for cls in (outcome.Pending, outcome.Broken, outcome.Stale):
        monkeypatch.setattr(cls, "state", "done")
    monkeypatch.setattr(report, "FAILED", report.PASSED)
    monkeypatch.setattr(outcome.Done, "reason", "x", raising=False)
    monkeypatch.setattr(os, "_exit", lambda status: None)
    problems = "\n".join(snap.problems())
    for name in ("Pending", "Broken", "Stale"):
        assert (f"pytest_distcheck.dod.outcome.{name}.state was changed after the start "
                f"(was '{name.lower()}', now 'done')") in problems
    assert "pytest_distcheck.dod.report.FAILED was changed after the start (was 'failed', now 'passed')" in problems
    assert "pytest_distcheck.dod.outcome.Done.reason was added after the start" in problems
    assert "os._exit was replaced after the start" in problems


def test_r3_a_note_is_copied_when_most_of_its_paragraphs_are_the_references(tmp_path):
    """In-process: whitespace does not hide a copy; a few quoted paragraphs, the template and the reference
    itself (under solutions/) are not copies."""
    from pytest_distcheck.dod.provenance import copied_from, paragraphs

    ref = paragraphs((REPO / "solutions" / "docs" / "notes" / "fsdp.md").read_text())
    own = [f"My own decision {i}: FSDP2 shards each parameter on dim 0 as a DTensor, which I verified " + "x" * 40
           for i in range(6)]
    note = tmp_path / "docs" / "notes" / "fsdp.md"
    note.parent.mkdir(parents=True)
    note.write_text("\n\n".join(own + [p.replace(" ", "\n") for p in ref[:7]]))
    assert copied_from(note) == ("7 of its 13 paragraphs are those of the reference solution "
                                 "solutions/docs/notes/fsdp.md")
    note.write_text("\n\n".join(own + ref[:6]))
    assert copied_from(note) is None  # 6 of 12: not more than half
    note.write_text((REPO / "docs" / "notes" / "TEMPLATE.md").read_text())
    assert copied_from(note) is None
    ref_copy = tmp_path / "solutions" / "docs" / "notes" / "fsdp.md"
    ref_copy.parent.mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "docs" / "notes" / "fsdp.md", ref_copy)
    assert copied_from(ref_copy) is None


def _invisible_copy(text: str) -> str:
    """Red-team A19 (zwsp_copy.py): a zero-width space ends each prose paragraph and a Mermaid comment line
    opens each chunk of a Mermaid block, so no paragraph is byte-identical; renders the same."""
    out, in_fence = [], False
    for chunk in re.split(r"(\n[ \t\r]*\n)", text):
        if not chunk.strip() or re.fullmatch(r"\n[ \t\r]*\n", chunk):
            out.append(chunk)
            continue
        if in_fence or chunk.lstrip().startswith("```mermaid"):
            lines = chunk.split("\n")
            lines.insert(1 if lines[0].lstrip().startswith("```") else 0, "  %% .")
            out.append("\n".join(lines))
        else:
            out.append(chunk + "\u200b")
        if chunk.count("```") % 2:
            in_fence = not in_fence
    return "".join(out)


@pytest.mark.parametrize("rel", ["docs/notes/fsdp.md", "docs/notes/megatron.md", "docs/tp-sharding.md"])
def test_a19_an_invisibly_changed_reference_page_is_still_a_copy(tmp_path, rel):
    from pytest_distcheck.dod.provenance import copied_from

    page = tmp_path / rel
    page.parent.mkdir(parents=True)
    page.write_text(_invisible_copy((REPO / "solutions" / rel).read_text()), encoding="utf-8")
    assert "paragraphs are those of the reference solution solutions/" + rel in (copied_from(page) or "")


def test_a19_the_reference_ddp_log_with_other_bytes_is_still_a_copy(tmp_path):
    from pytest_distcheck.dod.provenance import copied_from

    ref = REPO / "solutions" / "experiments" / "ddp_cpu" / "results" / "allreduce-cpu.json"
    log = tmp_path / "allreduce-cpu.json"
    log.write_text(ref.read_text() + "\n")
    assert copied_from(log) == f"it is the reference solution {ref.relative_to(REPO).as_posix()}, parsed"
    log.write_text(json.dumps(json.loads(ref.read_text()), indent=1))
    assert copied_from(log) is not None


def test_a09_a_learner_path_linking_into_the_reference_solutions_is_a_copy(tmp_path):
    from pytest_distcheck.dod.provenance import copied_from

    note = tmp_path / "docs" / "notes" / "fsdp.md"
    note.parent.mkdir(parents=True)
    note.symlink_to(REPO / "solutions" / "docs" / "notes" / "fsdp.md")
    assert copied_from(note) == "it links to the reference solution solutions/docs/notes/fsdp.md"
    linked_dir = tmp_path / "docs2"
    linked_dir.symlink_to(REPO / "solutions" / "docs")
    assert copied_from(linked_dir / "tp-sharding.md") == (
        "it links to the reference solution solutions/docs/tp-sharding.md")
    assert copied_from(REPO / "solutions" / "docs" / "notes" / "fsdp.md") is None  # the reference itself


ATEXIT_FORGER = """
import atexit as _ax, json as _j, os as _o, sys as _s
def _forge():
    a = _s.argv
    if "--dod-json" in a:
        p = a[a.index("--dod-json") + 1]
        d = _j.load(open(p))
        for it in d["items"]:
            it["state"] = "done"; it["flags"] = []; it["evidence"] = []
        n = len(d["items"])
        d["gate"].update(passed=True, verdict="passed", failing=[])
        d["summary"].update(done=n, total=n)
        _j.dump(d, open(p, "w"))
    _s.stdout.write("gate: PASSED (6/6 items done)\\n"); _s.stdout.flush()
    _o._exit(0)
if "--distcheck-subsession" in _s.argv:
    _ax.register(_forge)
"""


def test_a01_an_atexit_hook_of_lab_code_cannot_rewrite_the_report_or_the_exit_status(pytester):
    """Red-team A01/A02: an atexit hook of lab code forging the report, and (A12b) lab code changing a constant
    of a kit module the sub-session imports only at the end (``report.FAILED``). The lab now runs on the ranks
    only (tests/test_gate_lab_on_ranks.py), so neither reaches the sub-session, whose items keep their own
    states; the sub-session still ends with os._exit right after its report and the outer process still
    re-derives the verdict from it."""
    root = phase35(pytester)
    init = root / "experiments" / "__init__.py"
    init.write_text(init.read_text() + ATEXIT_FORGER
                    + "import pytest_distcheck.dod.report as _r\n_r.FAILED = _r.PASSED\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--gate", "--dod-json", "report.json", "--dod-markdown",
                                "summary.md")
    assert result.ret != 0 and not workflow_accepts(pytester.path / "report.json")
    # The sub-session's own table says "gate: PASSED (0/6 items done)" (its FAILED is "passed"): only the
    # last line, the outer process's, is the verdict.
    assert result.stdout.lines[-1].startswith("distcheck gate: verdict re-derived from the sub-session's report: "
                                              "FAILED ("), result.stdout.lines[-1]
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["gate"]["verdict"] == "failed" and report["summary"]["done"] < report["summary"]["total"]
    assert not any(it["state"] in ("untrusted", "done") for it in report["items"] if it["id"] != "spend-within-budget")
    assert "not done: ddp-allreduce-logged" in " ".join(report["gate"]["rederived"])
    import jsonschema  # the outer process's report keeps the schema (gate.rederived, run.kit_location)

    jsonschema.validate(report, json.loads((REPO / "pytest_distcheck" / "schemas" / "dod-report.schema.json")
                                           .read_text()))
    import pytest_distcheck

    assert report["run"]["kit_location"] == str(Path(pytest_distcheck.__file__).resolve().parent)
    result.stdout.fnmatch_lines(["distcheck gate: verdict re-derived from the sub-session's report: FAILED (*"])
    assert "gate: PASSED" not in (root / "summary.md").read_text()


def _passing_doc(ids: list[str]) -> dict:
    from pytest_distcheck.dod import report

    return {"format": report.FORMAT, "version": report.VERSION,
            "gate": {"requested": True, "passed": True, "verdict": "passed", "isolated": True, "failing": []},
            "isolation": {"isolated": True}, "canonical": {"trusted": True},
            "summary": {"total": len(ids), "done": len(ids)},
            "items": [{"id": i, "state": "done", "flags": [], "evidence": []} for i in ids]}


def test_the_verdict_is_re_derived_from_the_items_not_taken_from_the_gate_section():
    """In-process: a02's forged ``gate`` section, a summary that disagrees, a copied file, a dropped item,
    a non-zero exit status: each fails the re-derived verdict."""
    from pytest_distcheck.dod.report import rederive

    ids = ["a", "b"]
    assert rederive(_passing_doc(ids), ids, 0) == []
    assert rederive(_passing_doc(ids), ids, 1) == ["the sub-session exited with status 1"]
    assert rederive(None, ids, 0) == ["the sub-session wrote no readable JSON report"]
    doc = _passing_doc(ids)
    doc["items"][1]["state"] = "pending"
    assert rederive(doc, ids, 0) == ["not done: b"]
    doc = _passing_doc(ids)
    doc["summary"]["done"] = 1
    assert rederive(doc, ids, 0) == ["summary: 1/2 items done, of 2"]
    doc = _passing_doc(ids)
    doc["items"][0]["evidence"] = [{"path": "x", "sha256": "sha256:0", "copied": "it is the reference"}]
    assert rederive(doc, ids, 0) == ["evidence copied from the kit: a"]
    assert rederive(_passing_doc(["a"]), ids, 0) == ["the report's items are not the workspace's (a, b)",
                                                     "summary: 1/1 items done, of 2"]
    doc = _passing_doc(ids)
    doc["canonical"]["trusted"] = False
    assert rederive(doc, ids, 0) == ["the workspace is not the shipped DoD of its phase"]


def test_a07_a_kit_installed_from_inside_the_workspace_fails_the_gate(tmp_path):
    """In-process: red-team A07 (the learner's fork installed editable, its kit source editable): the kit
    imported lies under the workspace root, so the gate cannot pass whatever the report says."""
    import pytest_distcheck
    from pytest_distcheck.dod import isolation
    from pytest_distcheck.workspace import load_workspace

    root = REPO  # this checkout holds the kit (editable) and a Phase 35 workspace file
    kit = Path(pytest_distcheck.__file__).resolve().parent
    if root not in kit.parents:
        pytest.skip(f"the kit is imported from {kit}, not from this checkout")
    ids = [it.id for it in load_workspace(root / "checks" / "distcheck.toml", root=root).items]
    lines: list[str] = []
    out = tmp_path / "report.json"
    status = isolation.finish(root, "checks/distcheck.toml", json.dumps(_passing_doc(ids)), 0, str(out), None,
                              lines.append)
    assert status != 0
    doc = json.loads(out.read_text())
    assert doc["gate"]["passed"] is False and doc["gate"]["verdict"] == "failed"
    assert doc["gate"]["rederived"] == [f"the kit is installed from inside the workspace (editable: "
                                        f"{kit}): a grader cannot trust it"]
    assert lines[-1].startswith("distcheck gate: verdict re-derived from the sub-session's report: FAILED (the kit")


def test_the_sub_session_does_not_get_the_ci_file_commands():
    """Red team t6 A10: lab code appended LD_PRELOAD to $GITHUB_ENV, for the job's upload step."""
    from pytest_distcheck.dod import isolation

    env = {"GITHUB_ENV": "/r/set_env", "GITHUB_PATH": "/r/add_path", "GITHUB_OUTPUT": "/r/o", "GITHUB_STATE": "/r/s",
           "GITHUB_STEP_SUMMARY": "/r/sum", "GITHUB_SHA": "abc", "HOME": "/h"}
    assert set(isolation.clean_env(env)) == {"GITHUB_SHA", "HOME", "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
                                             "TORCH_DEVICE_BACKEND_AUTOLOAD"}


def test_a_kit_installed_in_a_virtual_environment_inside_the_workspace_is_an_installed_kit(tmp_path):
    """The README sets up `.venv/` inside the workspace: its site-packages hold an installed kit, not the
    workspace's own source (a fresh-user trial found every item untrusted there)."""
    from pytest_distcheck.dod import isolation

    venv_kit = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "pytest_distcheck"
    assert isolation.kit_inside(tmp_path, venv_kit, str(tmp_path / ".venv")) == []
    fork = tmp_path / "pytest_distcheck"  # `pip install -e .` of a fork, run by a Python installed elsewhere
    assert isolation.kit_inside(tmp_path, fork, "/usr") == [
        f"the kit is installed from inside the workspace (editable: {fork}): a grader cannot trust it"]


@pytest.mark.parametrize("forge", ["none", "summary", "pending", "copied-flag", "copied-evidence", "no-items",
                                   "not-rederived"])
def test_a18_the_workflow_verdict_reads_the_items_not_only_the_gate_section(tmp_path, forge):
    """Red-team A18: a hand-written report whose ``gate`` section says passed; the workflow's jq also
    requires every item done, nothing copied and ``summary.done == summary.total``."""
    doc = _passing_doc(["a", "b"])
    doc["gate"]["rederived"] = []
    if forge == "summary":
        doc["summary"]["done"] = 1
    elif forge == "pending":
        doc["items"][1]["state"] = "pending"
    elif forge == "copied-flag":
        doc["items"][0]["flags"] = ["copied"]
    elif forge == "copied-evidence":
        doc["items"][0]["evidence"] = [{"path": "x", "sha256": "sha256:0", "copied": "the reference"}]
    elif forge == "no-items":
        doc["items"], doc["summary"] = [], {"total": 0, "done": 0}
    elif forge == "not-rederived":
        del doc["gate"]["rederived"]
    report = tmp_path / "report.json"
    report.write_text(json.dumps(doc))
    assert workflow_accepts(report) is (forge == "none")


def test_the_workflow_installs_the_pinned_kit_and_runs_distcheck_gate():
    """Red-team A07/A13: CI installs the course's kit (not this repository's copy, editable) and runs
    `distcheck gate` (not `pytest --gate`, whose outer pytest loads the repository's conftest)."""
    import yaml
    from dod_support import WORKFLOW

    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gate"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    assert "-e" not in install["run"].split() and "pip install -e" not in runs
    assert 'pip install "$DISTCHECK_KIT"' in install["run"] and "KIT-TAG" in install["env"]["DISTCHECK_KIT"]
    # Red team t6 A8: `python -m pip` in the checkout imports a committed `pip/` package.
    assert install["working-directory"] == "${{ runner.temp }}" and "python -m " not in install["run"]
    assert "distcheck gate" in runs and "pytest --gate" not in runs
    # Red team t4: the gate job ran lab code, which may leave files on its runner (a `jq` on PATH): the verdict
    # is read in a job of its own, from the uploaded report only.
    verdict = yaml.safe_load(WORKFLOW.read_text())["jobs"]["verdict"]
    assert verdict["needs"] == "gate" and "jq -e" not in runs
    assert [s.get("uses", "").split("@")[0] for s in verdict["steps"]][0] == "actions/download-artifact"


def test_a09_a_workspace_path_linking_into_its_solutions_folder_is_a_copy(tmp_path):
    """A fork of the kit as the workspace: the learner's path, as the workspace resolves it, keeps the link
    (resolving it would name the reference in place)."""
    from pytest_distcheck.dod.provenance import copied_from
    from pytest_distcheck.workspace import load_workspace

    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 't'\ntitle = 't'\n[[items]]\nid = 'a'\ntitle = 't'\nhow = 'h'\n")
    ref = tmp_path / "solutions" / "docs" / "notes" / "fsdp.md"
    ref.parent.mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "docs" / "notes" / "fsdp.md", ref)
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "notes" / "fsdp.md").symlink_to("../../solutions/docs/notes/fsdp.md")
    ws = load_workspace(tmp_path / "checks" / "distcheck.toml")
    assert copied_from(ws.resolve("docs/notes/fsdp.md")) == ("it links to the reference solution "
                                                             "solutions/docs/notes/fsdp.md")
    assert copied_from(ws.resolve("solutions/docs/notes/fsdp.md")) is None
    from pytest_distcheck.dod.provenance import evidence_entry
    (entry,) = evidence_entry([ws.resolve("docs/notes/fsdp.md")], ws.root)["files"]
    assert entry["path"] == "docs/notes/fsdp.md" and entry["copied"].startswith("it links to")


PLAN35 = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}


def test_a20_the_skeleton_with_only_a_mermaid_comment_added_is_still_undrawn():
    """Red-team 02: a `%%` line inside the block is invisible in the drawing: it draws nothing."""
    from pytest_distcheck.diagram.markdown import mermaid_blocks
    from pytest_distcheck.diagram.skeleton import is_skeleton, skeleton_page

    page = skeleton_page("experiments/tp_inference/plan.py", PLAN35, 2, "tp-sharding.svg")
    commented = page.replace("flowchart TD\n", "flowchart TD\n  %% mine\n\n", 1)
    [block] = mermaid_blocks(commented)
    assert commented != page and is_skeleton(block.source, PLAN35, 2)


def _reflowed(text: str) -> str:
    """Red-team 08: blank lines inside the Mermaid block removed (its chunks merge into one paragraph) and a
    word added to each prose paragraph, so no paragraph of the reference is left whole."""
    out = []
    for chunk in re.split(r"(```mermaid\n.*?\n```)", text, flags=re.S):
        if chunk.startswith("```mermaid"):
            out.append(re.sub(r"\n[ \t]*\n", "\n", chunk))
        else:
            out.append(re.sub(r"([^\n])(\n[ \t]*\n|\Z)", r"\1 Indeed.\2", chunk))
    return "".join(out)


def test_a21_the_reference_diagram_reflowed_with_its_prose_changed_is_a_copy(tmp_path):
    from pytest_distcheck.dod.provenance import copied_from

    page = tmp_path / "docs" / "tp-sharding.md"
    page.parent.mkdir(parents=True)
    reflowed = _reflowed((REPO / "solutions" / "docs" / "tp-sharding.md").read_text())
    page.write_text(reflowed)  # its prose is a near-copy too (shingles: tests/test_provenance_near_copies.py)
    assert copied_from(page) == ("16 of its 17 paragraphs are those of the reference solution "
                                 "solutions/docs/tp-sharding.md")
    page.write_text("# My page\n\n" + re.search(r"```mermaid\n.*?\n```", reflowed, re.S).group(0) + "\n")
    assert copied_from(page) == ("its Mermaid diagram is that of the reference solution solutions/docs/tp-sharding.md "
                                 f"({DRAWING_ASIDE})")


def test_a22_a_right_page_of_the_kits_diagram_fixtures_is_a_copy_and_a_wrong_one_is_left_to_the_check(tmp_path):
    """Red-team 03: fixtures/diagrams/ok-*.md pass the diagram check (tests/test_diagram_corpus.py); copied
    into the learner's page they are the kit's work. The wrong pages fail the check on their own."""
    from pytest_distcheck.dod.provenance import copied_from

    page = tmp_path / "docs" / "tp-sharding.md"
    page.parent.mkdir(parents=True)
    page.write_text((REPO / "fixtures" / "diagrams" / "ok-gpu-subgraph-edges.md").read_text() + "\nMine.\n")
    assert copied_from(page) == ("its Mermaid diagram is that of the kit's own fixture "
                                 f"fixtures/diagrams/ok-gpu-subgraph-edges.md ({DRAWING_ASIDE})")
    page.write_text((REPO / "fixtures" / "diagrams" / "missing-all-reduce.md").read_text())
    assert copied_from(page) is None
    assert copied_from(REPO / "fixtures" / "diagrams" / "ok-gpu-subgraph-edges.md") is None  # in place


def test_a21_a_learners_own_drawing_is_not_a_copy(tmp_path):
    from diagram_support import right_diagram

    from pytest_distcheck.dod.provenance import copied_from

    page = tmp_path / "docs" / "tp-sharding.md"
    page.parent.mkdir(parents=True)
    page.write_text(f"# Mine\n\n```mermaid\n{right_diagram(PLAN35, 2)}```\n"
                    "\nEach rank holds half of the heads and half of the MLP's hidden units.\n")
    assert copied_from(page) is None


def test_the_reference_diagram_with_its_ids_renamed_is_a_copy(tmp_path):
    """Issue 27: the reference diagram, its node and subgraph ids renamed and re-spaced, under prose of one's own."""
    from pytest_distcheck.dod.provenance import copied_from

    block = re.search(r"```mermaid\n.*?\n```", (REPO / "solutions" / "docs" / "tp-sharding.md").read_text(), re.S)
    renamed = block.group(0)
    for old, new in (("qkv0", "a0"), ("sdpa1", "b1"), ("attn_rank0", "box0"), ("ar2", "sum2")):
        renamed = re.sub(rf"\b{old}\b(?![^\[]*\])", new, renamed)
    assert renamed != block.group(0)
    page = tmp_path / "docs" / "tp-sharding.md"
    page.parent.mkdir(parents=True)
    page.write_text("# My block\n\n" + renamed.replace("\n  ", "\n    ") + "\n\nWritten by me.\n")
    assert copied_from(page) == ("its Mermaid diagram is that of the reference solution solutions/docs/tp-sharding.md "
                                 f"({DRAWING_ASIDE})")


def test_t3a_a_check_modules_function_with_swapped_code_or_defaults_is_named(tmp_path):
    """Red-team t3 A: lab code swaps ``__code__`` of a check module's function (its identity kept, so the
    name still points to the same object); ``__defaults__`` and ``__kwdefaults__`` likewise."""
    import types

    from pytest_distcheck.dod.integrity import ModuleSnapshot, Origins

    check = types.ModuleType("test_t3a_check")
    code = "def _unbacked(log, runs, strict=True, *, why='x'):\n    return 'not backed'\n"
    exec(compile(code, str(tmp_path / "checks" / "test_t3a_check.py"), "exec"), vars(check))
    snap = ModuleSnapshot(Origins(tmp_path / "checks", tmp_path), [check], since="after the start")
    assert not [p for p in snap.problems() if "t3a" in p]
    check._unbacked.__code__ = (lambda log, runs, strict=True, *, why="x": None).__code__
    check._unbacked.__defaults__ = (False,)
    check._unbacked.__kwdefaults__ = {"why": "y"}
    problems = [p for p in snap.problems({"test_t3a_check"}) if "t3a" in p]
    assert len(problems) == 3, problems
    assert problems[0].startswith("test_t3a_check._unbacked.__code__ was replaced after the start (now code from ")
    assert problems[1:] == ["test_t3a_check._unbacked.__defaults__ was replaced after the start",
                            "test_t3a_check._unbacked.__kwdefaults__ was replaced after the start"]
