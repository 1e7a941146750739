"""The budget's pytest wiring, through pytester: --max-usd (flag, env, ini), the gpu skip, the budget
marker, the header line, the budget fixture under xdist, and an API key that never shows."""

from __future__ import annotations

import sys
import textwrap

import pytest

from pytest_distcheck.budget.errors import paid_runs
from pytest_distcheck.budget.plugin import (
    HEADER,
    HEADER_PROBLEM,
    NEGATIVE_USD,
    NOT_USD,
    PAID_OFF,
    PAID_ON,
    PAID_TEST,
    PAID_WORK,
    SPENT,
    SPENT_UNSETTLED,
    enable_hint,
)

WORKSPACE = """
[phase]
id = "b1"
title = "budget test phase"

[[items]]
id = "spend"
title = "spend within budget"
how = "distcheck budget"

[budget]
ledger = "experiments/ledger.md"
phase_ceiling_usd = 5.0

[budget.experiment_ceilings_usd]
tp-inference = 3.0
"""
SECRET = "rpa_SECRETKEY_DO_NOT_PRINT_42"


@pytest.fixture
def ws(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.mkdir("checks")
    pytester.mkdir("experiments")
    (pytester.path / "checks" / "distcheck.toml").write_text(textwrap.dedent(WORKSPACE))
    return pytester


GPU_TEST = """
import pytest

@pytest.mark.gpu
def test_paid():
    pass

def test_free():
    pass
"""


def test_gpu_tests_are_skipped_without_a_budget_with_how_to_enable(ws: pytest.Pytester):
    ws.makepyfile(GPU_TEST)
    result = ws.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert enable_hint() == ("give this session a budget to run it: pytest -m gpu --max-usd 3 (or DISTCHECK_MAX_USD=3, "
                             "or ini distcheck_max_usd = 3)")
    result.stdout.fnmatch_lines(["*SKIPPED*" + PAID_TEST.format(hint=enable_hint()) + "*"])


@pytest.mark.parametrize("how", ["flag", "env", "ini"])
def test_max_usd_enables_gpu_tests_by_flag_env_or_ini(ws: pytest.Pytester, monkeypatch, how: str):
    ws.makepyfile(GPU_TEST)
    args = ["--max-usd", "2.5"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("DISTCHECK_MAX_USD", "2.5")
    if how == "ini":
        ws.makeini("[pytest]\ndistcheck_max_usd = 2.5\n")
    result = ws.runpytest(*args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([HEADER.format(paid=PAID_ON.format(usd="$2.50"), left="$5.00", ceiling="$5.00",
                                               spent="$0.00", ledger="experiments/ledger.md", held="")])


@pytest.mark.parametrize("value, message", [
    ("lots", "*" + NOT_USD.format(source="command line --max-usd", text="lots")),
    ("-1", "*" + NEGATIVE_USD.format(source="command line --max-usd", text="-1")),
])
def test_bad_max_usd_is_a_usage_error_naming_its_source(ws: pytest.Pytester, value: str, message: str):
    ws.makepyfile(GPU_TEST)
    result = ws.runpytest(f"--max-usd={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_header_shows_the_budget_off_and_what_is_left(ws: pytest.Pytester):
    ws.makepyfile(GPU_TEST)
    result = ws.runpytest()
    result.stdout.fnmatch_lines([HEADER.format(paid=PAID_OFF, left="$5.00", ceiling="$5.00", spent="$0.00",
                                               ledger="experiments/ledger.md", held="")])


def test_header_reports_a_malformed_ledger_and_the_ledger_is_untouched(ws: pytest.Pytester):
    ledger = ws.path / "experiments" / "ledger.md"
    ledger.write_text("# L\n\n| time_utc | run_id |\n|---|---|\n")
    before = ledger.read_bytes()
    ws.makepyfile(GPU_TEST)
    result = ws.runpytest("--max-usd", "1")
    result.stdout.fnmatch_lines([HEADER_PROBLEM.format(paid=PAID_ON.format(usd="$1.00"),
                                                       problem="*ledger.md, line 3: table header must be*")])
    assert ledger.read_bytes() == before


@pytest.mark.parametrize("marker", ["budget(usd=0)", "budget(usd='1')", "budget(1, 2)", "budget(dollars=1)"])
def test_a_bad_budget_marker_is_a_usage_error(ws: pytest.Pytester, marker: str):
    ws.makepyfile(f"import pytest\n\n@pytest.mark.{marker}\ndef test_x():\n    pass\n")
    result = ws.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_x: @pytest.mark.budget*"])


def test_budget_fixture_caps_by_marker_and_prices_the_time_limit(ws: pytest.Pytester):
    ws.makepyfile("""
        import pytest
        from decimal import Decimal

        @pytest.mark.gpu
        @pytest.mark.budget(usd=0.25)
        def test_capped(budget):
            res = budget.reserve("runpod", "RTX 4090", 2, 3600)
            assert res.usd <= Decimal("0.25") and res.max_seconds < 3600
            assert res.purpose.endswith("::test_capped")

        @pytest.mark.gpu
        @pytest.mark.timeout(600)
        def test_time_limit(budget):
            res = budget.reserve("runpod", "RTX 4090", 2)
            assert res.max_seconds == 600 and res.usd == Decimal("0.1967")

        @pytest.mark.gpu
        def test_no_time_limit(budget, request):
            from pytest_distcheck.budget import BudgetRefused
            from pytest_distcheck.budget.plugin import NO_TIME_LIMIT
            with pytest.raises(BudgetRefused) as exc:
                budget.reserve("runpod", "RTX 4090", 2)
            assert str(exc.value) == NO_TIME_LIMIT.format(purpose=request.node.nodeid)

        def test_guard_released_everything(budget_guard):
            st = budget_guard.status()
            assert st.in_progress == {} and st.totals.unsettled == () and st.totals.total == 0
    """)
    result = ws.runpytest("--max-usd", "1", "-p", "no:randomly")
    result.assert_outcomes(passed=4)


def test_budget_guard_fixture_skips_without_max_usd(ws: pytest.Pytester):
    ws.makepyfile("def test_x(budget_guard):\n    pass\n")
    result = ws.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*" + PAID_WORK.format(hint=enable_hint()) + "*"])


XDIST_TESTS = """
import pytest

@pytest.mark.gpu
@pytest.mark.parametrize("n", range(4))
def test_launch(budget, n):
    res = budget.reserve("runpod", "RTX 4090", 2, 4000, usd_per_gpu_hour=0.5)  # $1.1112 worst case
    res.record_pod(f"pod-{n}", usd_per_hour=1.0)  # open row: its worst case counts for the session
"""


def test_session_ceiling_holds_across_xdist_workers(ws: pytest.Pytester):
    ws.makepyfile(XDIST_TESTS)
    result = ws.runpytest_subprocess("-n", "2", "--max-usd", "2.5", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*BudgetRefused*would cost up to $1.11; $0.28 left of $2.50 (session ceiling*"])
    result.stdout.fnmatch_lines([SPENT.format(spent="$2.22", runs=paid_runs(2), unsettled=SPENT_UNSETTLED.format(n=2),
                                              left="$2.78", ceiling="$5.00")])
    from pytest_distcheck.budget.ledger import Ledger

    rows = Ledger(ws.path / "experiments" / "ledger.md", ws.path / ".distcheck" / "budget.lock").read()
    assert [r.status for r in rows].count("started") == 2 and len(rows) == 4  # open + started of each winner
    assert len({r.run_id.split("-")[0] for r in rows}) == 1  # one session id for both workers


def test_api_key_appears_in_no_output_ledger_or_error(ws: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", SECRET)
    monkeypatch.setenv("RUNPOD_API_BASE_URL", "http://127.0.0.1:9")  # live prices fail: connection refused
    ws.makepyfile("""
        import pytest

        @pytest.mark.gpu
        def test_paid(budget):
            res = budget.reserve("runpod", "RTX 4090", 2, 600)
            print("price:", res.price)
            res.record_pod("pod-1", usd_per_hour=1.18, started_at=0)
            res.settle(60)
            raise AssertionError(f"fail on purpose to show output; warning={res.price.warning}")

        @pytest.mark.gpu
        def test_refused(budget):
            budget.reserve("runpod", "NVIDIA B300", 8, 36000)
    """)
    result = ws.runpytest_subprocess("--max-usd", "1", "-rA", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    out = "\n".join(result.outlines + result.errlines)
    assert "live RunPod price lookup failed" in out  # the path that handles the key did run
    assert SECRET not in out
    ledger = ws.path / "experiments" / "ledger.md"  # without a live price nothing is reserved or written
    assert not ledger.exists() or SECRET not in ledger.read_text()
    assert "no live runpod price" in out
    cli = ws.run(sys.executable, "-m", "pytest_distcheck.cli", "estimate", "--gpu", "RTX 4090", "--count", "2",
                 "--minutes", "10")
    assert cli.ret == 0 and SECRET not in "\n".join(cli.outlines + cli.errlines)
    assert "warning: live RunPod price lookup failed" in "\n".join(cli.errlines)
