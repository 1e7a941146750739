"""The spend-within-budget DoD check and the `distcheck budget` / `estimate` commands, on the phase's
real workspace file with synthetic ledgers from fixtures/budget/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dod_support import git_commit_all
from ledger_support import rechained

from pytest_distcheck.budget.pricing import NO_PRICE, PriceBook
from pytest_distcheck.cli import main
from pytest_distcheck.commands.budget import (
    EXPERIMENT_TOTAL,
    LEDGER_ROWS,
    OPEN_RUNS,
    OVER_CEILING,
    PHASE_TOTAL,
    load_guard,
)
from pytest_distcheck.commands.estimate import (
    BILLING_LINE,
    FOR_MINUTES,
    HEADLINE,
    LEFT_AFTER,
    PRICE_LINE,
    SHIPPED_TABLE,
    SHORT,
    UNDATED,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "budget"
LEDGER = "experiments/35-cloud-budget.md"
CHECK_COPY = "test_copy_of_spend_check.py"


@pytest.fixture
def phase(pytester: pytest.Pytester) -> pytest.Pytester:
    """A copy of the phase's workspace file and the spend check, with no ledger yet."""
    pytester.mkdir("checks")
    pytester.mkdir("experiments")
    toml = pytester.path / "checks" / "distcheck.toml"
    shutil.copy(ROOT / "checks" / "distcheck.toml", toml)
    # another basename, run in-process: the real check's module may already be imported in this process;
    # the workspace registers the real check's node id, so point it at the copy
    shutil.copy(ROOT / "checks" / "test_spend_within_budget.py", pytester.path / "checks" / CHECK_COPY)
    toml.write_text(toml.read_text().replace("checks/test_spend_within_budget.py::", f"checks/{CHECK_COPY}::"))
    return pytester


def use(pytester: pytest.Pytester, fixture: str) -> Path:
    dest = pytester.path / LEDGER
    shutil.copy(ROOT / fixture if fixture.startswith("experiments/") else FIXTURES / fixture, dest)
    return dest


def run_check(pytester: pytest.Pytester):
    return pytester.runpytest(f"checks/{CHECK_COPY}", "-p", "no:cacheprovider")


def test_committed_empty_ledger_is_done(phase: pytest.Pytester):
    """Lab 00: the ledger "is append-only and committed": right but not committed is pending, naming git."""
    use(phase, LEDGER)
    result = run_check(phase)
    result.stdout.fnmatch_lines([f"PENDING*spend-within-budget*{phase.path} is not in a git repository",
                                 f"*-> git init && git add {LEDGER} && git commit -m \"DoD evidence\" -- {LEDGER}"])
    git_commit_all(phase.path)
    result = run_check(phase)
    result.stdout.fnmatch_lines(["DONE*spend-within-budget*evidence checked, self-reported: *"])


def test_within_budget_ignores_a_written_total_and_counts_open_runs(phase: pytest.Pytester):
    use(phase, "ledger-within.md")
    git_commit_all(phase.path)
    result = run_check(phase)
    result.stdout.fnmatch_lines(["*8 rows, 3 runs; total $0.69 of $5.00*", "*tp-inference: $0.59 of $3.00*",
                                 "*open runs counted at their worst case: cccc3333-01*",
                                 "DONE*spend-within-budget*"])


@pytest.mark.parametrize("fixture, reason", [
    ("ledger-over-tp.md", "*BROKEN*spend-within-budget*35-cloud-budget.md: tp-inference rows (lines 10, 13) total "
                          "$3.54 > its ceiling $3.00*"),
    ("ledger-over-phase.md", "*BROKEN*spend-within-budget*total $5.97 > phase ceiling $5.00*"),
    ("ledger-malformed.md", "*BROKEN*spend-within-budget*35-cloud-budget.md, line 13: cost 0.0500 does not match "
                            "rate_per_hour 1.18 x billed_s 611 / 3600 = 0.2003*"),
])
def test_over_a_ceiling_or_malformed_is_broken_naming_what(phase: pytest.Pytester, fixture: str, reason: str):
    ledger = use(phase, fixture)
    before = ledger.read_bytes()
    result = run_check(phase)
    result.stdout.fnmatch_lines([reason])
    assert ledger.read_bytes() == before


def test_missing_ledger_is_pending_with_the_command(phase: pytest.Pytester):
    result = run_check(phase)
    result.stdout.fnmatch_lines(["PENDING*spend-within-budget*no spend ledger at experiments/35-cloud-budget.md*",
                                 "*-> distcheck budget"])


def test_budget_command_lists_rows_totals_and_what_is_left(phase: pytest.Pytester, monkeypatch, capsys):
    use(phase, "ledger-within.md")
    monkeypatch.chdir(phase.path)
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    ledger = load_guard("checks/distcheck.toml").ledger.path
    assert out.startswith(LEDGER_ROWS.format(path=ledger, n=8) + "\n") and "aaaa1111-01" in out and "podC" in out
    assert EXPERIMENT_TOTAL.format(name="tp-inference", spent="$0.59", ceiling="$3.00", left="$2.41") + "\n" in out
    assert PHASE_TOTAL.format(spent="$0.69", ceiling="$5.00", left="$4.31", runs=3) + "\n" in out
    assert OPEN_RUNS.format(runs="cccc3333-01") + "\n" in out


def test_rows_of_an_experiment_whose_ceiling_key_is_misspelt_are_said(phase: pytest.Pytester, monkeypatch, capsys):
    # tp_inference = 3.0 for tp-inference: the TP runs were counted under no ceiling, silently
    from pytest_distcheck.commands.budget import DID_YOU_MEAN_KEY, UNDECLARED

    use(phase, "ledger-within.md")
    toml = phase.path / "checks" / "distcheck.toml"
    assert "tp-inference = " in toml.read_text()
    toml.write_text(toml.read_text().replace("tp-inference = ", "tp_inference = ", 1))
    monkeypatch.chdir(phase.path)
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    hint = DID_YOU_MEAN_KEY.format(name="tp_inference")
    assert UNDECLARED.format(experiment="tp-inference", n=5, hint=hint).split("(")[0] in out, out
    assert hint in out


@pytest.mark.parametrize("fixture, code, text", [("ledger-over-tp.md", 1, OVER_CEILING),
                                                  ("ledger-malformed.md", 2, "line 13: cost 0.0500")])
def test_budget_command_exit_status(phase: pytest.Pytester, monkeypatch, capsys, fixture, code, text):
    use(phase, fixture)
    monkeypatch.chdir(phase.path)
    assert main(["budget"]) == code
    cap = capsys.readouterr()
    assert text in cap.out + cap.err


def test_estimate_prices_with_source_and_what_is_left(phase: pytest.Pytester, monkeypatch, capsys):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    use(phase, "ledger-within.md")
    monkeypatch.chdir(phase.path)
    assert main(["estimate", "--gpu", "RTX 4090", "--count", "2", "--minutes", "30",
                 "--experiment", "tp-inference"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(HEADLINE.format(count=2, gpu="RTX 4090", where="runpod secure",
                                          span=FOR_MINUTES.format(minutes=30), cost="$0.59") + "\n")
    book = PriceBook.shipped()
    p, b = book.price("runpod", "RTX 4090", "secure"), book.billing("runpod")
    assert p.source.startswith("skypilot-org/skypilot-catalog") and p.date == "undated"
    assert PRICE_LINE.format(rate="$0.59", origin=SHIPPED_TABLE, source=p.source, date=UNDATED, recorded=p.recorded,
                             confidence=p.confidence) + "\n" in out
    assert BILLING_LINE.format(granularity=b.granularity_s, minimum=b.minimum_s, billed=1800, source=b.source) in out
    limits = load_guard("checks/distcheck.toml").status().limits
    assert LEFT_AFTER.format(after="$3.72", left="$4.31", limit=limits["phase"].name) + "\n" in out
    assert LEFT_AFTER.format(after="$1.82", left="$2.41", limit=limits["experiment tp-inference"].name) + "\n" in out


def test_estimate_refuses_an_unknown_gpu_and_flags_what_does_not_fit(phase: pytest.Pytester, monkeypatch, capsys):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    monkeypatch.chdir(phase.path)
    assert main(["estimate", "--gpu", "B300", "--count", "2", "--minutes", "30"]) == 2
    book = PriceBook.shipped()
    assert capsys.readouterr().err == "distcheck estimate: " + NO_PRICE.format(
        cloud="secure", gpu="B300", provider="runpod", path=book.path, known=", ".join(book.known("runpod", "secure")),
        hint="set RUNPOD_API_KEY for live prices") + "\n"
    assert main(["estimate", "--gpu", "H100", "--count", "2", "--minutes", "120"]) == 1
    assert SHORT.format(usd="$4.56") in capsys.readouterr().out


SUPERSCRIPT = ("| 2026-12-01T10:00:00Z | zzzz1111-01 | open | runpod | RTX 4090 x 2 | 9\u00b2 | 1.18 | 0.0295 | USD "
               "| tp-inference | tests/test_tp.py::test_speedup | - |\n")


def test_a_superscript_digit_is_a_clear_error_never_an_internal_error(phase: pytest.Pytester, monkeypatch, capsys):
    ledger = use(phase, "ledger-within.md")
    ledger.write_text(rechained(ledger.read_text() + SUPERSCRIPT))
    line = ledger.read_text().count("\n")
    # (no --gate: this partial copy of the phase, one check of six, is not the shipped DoD the gate requires)
    result = run_check(phase)
    assert result.ret not in (3, 4) and "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"distcheck budget: *35-cloud-budget.md, line {line}: billed_s '9\u00b2' is not a "
                                 "whole number*(paid tests will be refused)*",
                                 f"BROKEN*spend-within-budget*line {line}: billed_s '9\u00b2'*"])
    monkeypatch.chdir(phase.path)
    assert main(["budget"]) == 2
    err = capsys.readouterr().err
    assert f"line {line}: billed_s '9\u00b2' is not a whole number" in err and "Traceback" not in err


def test_a_paid_run_is_refused_on_a_corrupt_ledger_naming_the_line(phase: pytest.Pytester):
    ledger = use(phase, "ledger-within.md")
    ledger.write_text(rechained(ledger.read_text() + SUPERSCRIPT))
    phase.makepyfile(test_paid="""
        import pytest

        @pytest.mark.gpu
        def test_paid(budget):
            budget.reserve("runpod", "RTX 4090", 2, 600, experiment="tp-inference")
    """)
    result = phase.runpytest_subprocess("test_paid.py", "--max-usd", "1", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*LedgerError*35-cloud-budget.md, line *: billed_s '9\u00b2'*"])


def test_an_overrun_past_a_ceiling_is_broken_and_named(phase: pytest.Pytester):
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.workspace import load_workspace

    use(phase, LEDGER)
    g = BudgetGuard.from_workspace(load_workspace(phase.path / "checks" / "distcheck.toml"), session_id="abcd0001")
    res = g.reserve("runpod", "RTX 4090", 2, 7200, "t::paid", experiment="tp-inference")  # $2.36 reserved
    res.record_pod("podX", usd_per_hour=1.18, started_at=0)
    res.settle(3 * 3600)  # the pod ran an hour past its reservation: $3.54 in all
    result = run_check(phase)
    result.stdout.fnmatch_lines(["*BROKEN*spend-within-budget*tp-inference rows (lines *) total $3.54 > its ceiling "
                                 "$3.00*"])


def test_a_reconciled_row_read_from_the_ledger_is_not_confirmed(phase: pytest.Pytester):
    """A `reconciled` row typed into the ledger; the provider was not asked in this run."""
    ledger = use(phase, "ledger-within.md")
    kept = [line for line in ledger.read_text().splitlines() if "bbbb2222" not in line and "cccc3333" not in line]
    typed = ("| 2026-12-01T10:20:00Z | aaaa1111-01 | reconciled | runpod | RTX 4090 x 2 | 611 | 1.18 | 0.2003 | USD "
             "| tp-inference | tests/test_tp.py::test_speedup | podA |\n")
    ledger.write_text(rechained("\n".join(kept) + "\n" + typed))
    git_commit_all(phase.path)
    result = run_check(phase)
    result.stdout.fnmatch_lines(["DONE*spend-within-budget*evidence checked, self-reported (reconciled row in the "
                                 "ledger, not re-checked in this run): *"])


# -- a misspelt ledger path beside the real ledger -----------------------------------------------------------

TYPO = "experiments/35-cloud-budjet.md"


def _misspell(phase: pytest.Pytester) -> Path:
    """The phase's real ledger with rows, and a workspace file whose budget.ledger misspells its name."""
    ledger = use(phase, "ledger-within.md")
    toml = phase.path / "checks" / "distcheck.toml"
    toml.write_text(toml.read_text().replace(f'ledger = "{LEDGER}"', f'ledger = "{TYPO}"'))
    return ledger


def _misnamed_text(toml: Path | str = "checks/distcheck.toml") -> str:
    from pytest_distcheck.budget.config import DID_YOU_MEAN, MISNAMED_LEDGER

    return (f"{toml}, budget.ledger: " + MISNAMED_LEDGER.format(
        ledger=TYPO, others="35-cloud-budget.md", hint=DID_YOU_MEAN.format(name=LEDGER), folder="experiments"))


def test_a_misspelt_ledger_path_is_an_error_of_the_budget_command_naming_the_field(phase: pytest.Pytester,
                                                                                    monkeypatch, capsys):
    _misspell(phase)
    monkeypatch.chdir(phase.path)
    assert main(["budget"]) == 2
    cap = capsys.readouterr()
    assert cap.err == f"distcheck budget: {_misnamed_text()}\n" and "nothing spent" not in cap.out
    assert not (phase.path / TYPO).exists()


def test_a_misspelt_ledger_path_refuses_the_estimate_of_what_is_left(phase: pytest.Pytester, monkeypatch, capsys):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    _misspell(phase)
    monkeypatch.chdir(phase.path)
    assert main(["estimate", "--gpu", "RTX 4090", "--count", "2", "--minutes", "30", "--pod"]) == 2
    cap = capsys.readouterr()
    assert cap.err == f"distcheck estimate: {_misnamed_text()}\n" and "left after" not in cap.out


def test_a_misspelt_ledger_path_never_starts_a_second_ledger(phase: pytest.Pytester):
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.errors import ConfigError
    from pytest_distcheck.workspace import load_workspace

    ledger = _misspell(phase)
    before = ledger.read_bytes()
    guard = BudgetGuard.from_workspace(load_workspace(phase.path / "checks" / "distcheck.toml"), session_id="abcd0001")
    with pytest.raises(ConfigError) as exc:
        guard.reserve("runpod", "RTX 4090", 2, 600, "t::paid", experiment="tp-inference")
    assert str(exc.value) == _misnamed_text(phase.path / "checks" / "distcheck.toml")
    assert not (phase.path / TYPO).exists() and ledger.read_bytes() == before


def test_a_misspelt_ledger_path_is_broken_in_the_dod_not_pending(phase: pytest.Pytester):
    _misspell(phase)
    result = run_check(phase)
    result.stdout.fnmatch_lines([f"BROKEN*spend-within-budget*budget.ledger: {TYPO} does not exist*did you mean "
                                 f"'{LEDGER}'?*"])


def test_a_new_ledger_beside_other_markdown_that_is_no_ledger_is_still_created(phase: pytest.Pytester):
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.workspace import load_workspace

    (phase.path / "experiments" / "README.md").write_text("# Experiments\n\n| a | b |\n|---|---|\n")
    guard = BudgetGuard.from_workspace(load_workspace(phase.path / "checks" / "distcheck.toml"), session_id="abcd0001")
    assert guard.status().rows == []
    guard.reserve("runpod", "RTX 4090", 2, 600, "t::paid", experiment="tp-inference").settle(0)
    assert [r.status for r in guard.ledger.read()] == ["open", "settled"]
