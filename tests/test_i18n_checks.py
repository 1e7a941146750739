"""The reasons Phase 35's own checks give the DoD table, in Spanish on a fresh `distcheck init` workspace."""

from __future__ import annotations

import json
import subprocess

import pytest
from dod_support import git_commit_all

from pytest_distcheck import i18n
from pytest_distcheck.budget.accounting import NOTHING_SPENT
from pytest_distcheck.budget.errors import rows as count_rows
from pytest_distcheck.budget.errors import runs as count_runs
from pytest_distcheck.committed import NOT_A_REPOSITORY, NOT_COMMITTED, STAGED, uncommitted
from pytest_distcheck.dod.provenance import SELF_REPORTED_WORD
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35 import messages as m
from pytest_distcheck.workspace_init import init_workspace


@pytest.fixture(autouse=True)
def _english_after():
    """An in-process run in Spanish leaves the kit speaking Spanish: the session's own summary must not."""
    yield
    i18n.use(i18n.DEFAULT)


LIVE = "checks/test_ddp_allreduce_logged.py::test_ddp_lab_runs_live_on_two_gloo_ranks"  # gloo ranks: not needed here


def test_a_fresh_workspace_under_lang_es_gives_the_checks_reasons_in_spanish(pytester):
    """Committed as init leaves it: the spend item is done, every other item pending, each reason in Spanish, and
    the checks' logs too."""
    assert init_workspace(pytester.path).conflicts == []
    git_commit_all(pytester.path)
    result = pytester.runpytest("-m", "local", "--lang", "es", "-p", "no:cacheprovider", "--deselect", LIVE,
                                "--dod-json=dod.json")
    assert result.ret == 0, result.stdout.str()[-3000:]
    reasons = {c["nodeid"]: c["reason"]
               for item in json.loads((pytester.path / "dod.json").read_text())["items"] for c in item["checks"]}
    commands = {c["nodeid"]: c["command"]
                for item in json.loads((pytester.path / "dod.json").read_text())["items"] for c in item["checks"]}
    # The notes' first step is one command (the reason says what to write), from the Spanish template.
    assert commands["checks/test_reading_notes_cited.py::test_reading_notes_cite_design_decisions"] == (
        "cp docs/es/notes/TEMPLATE.md docs/notes/megatron.md && cp docs/es/notes/TEMPLATE.md docs/notes/fsdp.md")
    i18n.use("es")
    summary = _(m.SPEND_SUMMARY).format(rows=count_rows(0), runs=count_runs(0), total="$0.00", ceiling="$5.00")
    assert summary == "0 filas, 0 ejecuciones; total $0.00 de $5.00"
    expected = {
        "test_ddp_allreduce_logged.py::test_committed_allreduce_log_is_valid": _(m.NO_DDP_LOG).format(
            rel="experiments/ddp_cpu/results/allreduce-cpu.json"),
        "test_reading_notes_cited.py::test_reading_notes_cite_design_decisions": _(m.NO_NOTE).format(
            paths="docs/notes/megatron.md, docs/notes/fsdp.md", n=5),
        "test_spend_within_budget.py::test_spend_within_budget": _(m.SPEND_DONE).format(
            label=_(SELF_REPORTED_WORD), summary=summary),
        "test_tp_diagram_committed.py::test_tp_diagram_matches_the_plan": _(m.NO_DIAGRAM_PAGE).format(
            page="docs/tp-sharding.md", plan="experiments.tp_inference.plan:BLOCK_PLAN", n=2),
        "test_tp_speedup_committed.py::test_tp_speedup_committed": _(m.NO_TP_RESULT).format(
            dir="experiments/tp_inference/results"),
        "test_quiz_passed.py::test_quiz_passed": _(m.NO_GRADED_ATTEMPT).format(
            log="experiments/quiz/35-attempts.jsonl", mark=_(m.PASS_MARK).format(mark="70%"), not_counted=""),
    }
    assert {k: reasons.get(f"checks/{k}") for k in expected} == expected
    result.stdout.fnmatch_lines(["*" + _(m.SPEND_TITLE).format(ledger="experiments/35-cloud-budget.md") + "*",
                                 _(m.EXPERIMENT_SPENT).format(experiment="tp-inference", spent="$0.00",
                                                              ceiling="$3.00"),
                                 _(m.LEDGER_LINE).format(confirmation=_(NOTHING_SPENT))])
    assert _(m.NO_DDP_LOG) != m.NO_DDP_LOG and _(m.SPEND_DONE) != m.SPEND_DONE and _(m.DIAGRAM_DONE) != m.DIAGRAM_DONE


def test_why_a_deliverable_is_not_committed_is_said_in_spanish(tmp_path):
    (tmp_path / "log.json").write_text("{}\n")
    i18n.use("es")
    assert uncommitted(["log.json"], tmp_path) == [_(NOT_A_REPOSITORY).format(root=tmp_path)]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert uncommitted(["log.json"], tmp_path) == [_(NOT_COMMITTED).format(path="log.json")]
    assert _(NOT_COMMITTED) != NOT_COMMITTED
    subprocess.run(["git", "add", "log.json"], cwd=tmp_path, check=True)
    assert uncommitted(["log.json"], tmp_path) == [_(STAGED).format(path="log.json")]
    assert _(STAGED) != STAGED


def test_the_missing_notes_point_to_the_lab_page_in_the_language_in_use():
    """Under es the Spanish page, which docs/es/lab holds under the English page's name."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    english = m.NO_NOTE.format(paths="docs/notes/megatron.md", n=5)
    assert english.endswith("(how: docs/lab/03-megatron-fsdp-reading.md)")
    i18n.use("es")
    assert _(m.NO_NOTE).format(paths="docs/notes/megatron.md", n=5) == (
        "no hay ninguna nota en docs/notes/megatron.md: escribe al menos 5 decisiones de diseño (qué, por qué, coste), "
        "cada una con un [cite: PACKAGE PATH::SYMBOL \"QUOTE\"] (cómo: docs/es/lab/03-megatron-fsdp-reading.md)")
    assert (repo / "docs" / "lab" / "03-megatron-fsdp-reading.md").is_file()
    assert (repo / "docs" / "es" / "lab" / "03-megatron-fsdp-reading.md").is_file()
