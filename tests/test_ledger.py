"""The spend ledger: format, round trip, append-only writes, malformed ledgers left untouched."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from pytest_distcheck.budget import accounting
from pytest_distcheck.budget.ledger import COLUMNS, Ledger, LedgerError, header_lines, make_row

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
HEADER = "\n".join(header_lines()) + "\n"


def row(run_id="s1-a", status="settled", billed_s=600, rate=1.18, experiment="tp-inference",
        purpose="tests/test_tp.py::test_speedup", pod="pod1"):
    return make_row(run_id=run_id, status=status, provider="runpod", gpu_type="RTX 4090", gpu_count=2,
                    billed_s=billed_s, rate_per_hour=rate, experiment=experiment, purpose=purpose,
                    resource_id=pod, now=NOW)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock")


def test_first_append_creates_a_readable_table_and_rows_round_trip(ledger: Ledger):
    written = ledger.append(row("s1-a", "open", billed_s=1800), row("s1-a", "settled", billed_s=611))
    text = ledger.path.read_text()
    assert "| " + " | ".join(COLUMNS) + " |" in text
    assert "| 2026-12-01T10:00:00Z | s1-a | settled | runpod | RTX 4090 x 2 | 611 | 1.18 | 0.2003 | USD |" in text
    back = ledger.read()
    assert [(r.run_id, r.status, r.billed_s, r.cost, r.line) for r in back] == [
        ("s1-a", "open", 1800, Decimal("0.5900"), 7), ("s1-a", "settled", 611, Decimal("0.2003"), 8)]
    assert [r.line for r in written] == [7, 8]


def test_appending_keeps_every_existing_byte(ledger: Ledger):
    ledger.append(row("s1-a"))
    before = ledger.path.read_bytes()
    ledger.append(row("s1-b"))
    after = ledger.path.read_bytes()
    assert after.startswith(before) and len(after) > len(before)


def test_pipes_and_newlines_in_a_purpose_do_not_break_the_table(ledger: Ledger):
    ledger.append(row(purpose="tests/t.py::test[a|b]\nsecond line"))
    (back,) = ledger.read()
    assert back.purpose == "tests/t.py::test[a|b] second line"


def test_free_text_ledger_without_table_gets_the_header_then_rows(ledger: Ledger):
    ledger.path.write_text("# My ledger\n\nNothing spent yet.")
    ledger.append(row())
    assert ledger.path.read_text().startswith("# My ledger\n\nNothing spent yet.\n\n| time_utc |")
    assert len(ledger.read()) == 1


def test_open_row_counts_until_settled(ledger: Ledger):
    ledger.append(row("s1-a", "open", billed_s=3600), row("s1-b", "open", billed_s=1800, experiment=None))
    ledger.append(row("s1-a", "settled", billed_s=360))
    t = accounting.totals(ledger.read())
    assert t.total == Decimal("1.18") * 360 / 3600 + Decimal("1.18") * 1800 / 3600
    assert t.experiment("tp-inference") == Decimal("0.118")
    assert t.unsettled == ("s1-b",)
    assert accounting.totals(ledger.read(), run_prefix="s2-").total == 0


def _valid_line(**over) -> str:
    cells = {"time_utc": "2026-12-01T10:00:00Z", "run_id": "s1-a", "status": "settled", "provider": "runpod",
             "resource": "RTX 4090 x 2", "billed_s": "600", "rate_per_hour": "1.18", "cost": "0.1967",
             "currency": "USD", "experiment": "tp-inference", "purpose": "t::x", "resource_id": "pod1"}
    cells.update(over)
    return "| " + " | ".join(cells[c] for c in COLUMNS) + " |"


GOOD = _valid_line()
MALFORMED = {
    "bad number": (GOOD + "\n" + _valid_line(run_id="s1-b", billed_s="6o0"), 8, "billed_s '6o0' is not a whole"),
    "bad rate": (_valid_line(rate_per_hour="1,18"), 7, "rate_per_hour '1,18' is not a number"),
    "missing column": ("| 2026-12-01T10:00:00Z | s1-a | settled | runpod | RTX 4090 x 2 | 600 | 1.18 | 0.1967 "
                       "| tp-inference | t::x | pod1 |", 7, "missing column(s) resource_id"),
    "negative cost": (_valid_line(cost="-0.1967"), 7, "negative cost '-0.1967'"),
    "unknown currency": (_valid_line(currency="EUR"), 7, "unknown currency 'EUR'"),
    "duplicate run id": (GOOD + "\n" + _valid_line(time_utc="2026-12-01T11:00:00Z"), 8,
                         "duplicate run id 's1-a' with status settled (first on line 7)"),
    "cost not rate x seconds": (_valid_line(cost="0.5000"), 7, "does not match rate_per_hour 1.18 x billed_s 600"),
    "blank line in table": (GOOD + "\n\n" + _valid_line(run_id="s1-b"), 8, "blank line"),
    "bad time": (_valid_line(time_utc="2026-13-01T10:00:00Z"), 7, "not a valid date"),
    "bad resource": (_valid_line(resource="RTX 4090"), 7, "resource 'RTX 4090' must read"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_ledger_names_line_and_problem_and_stays_byte_for_byte(ledger: Ledger, case: str):
    body, line, problem = MALFORMED[case]
    ledger.path.write_bytes(("# Ledger\n\nFree text.\n\n" + HEADER + body + "\n").encode())
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert f"line {line}" in str(exc.value) and problem in str(exc.value), str(exc.value)
    assert str(ledger.path) in str(exc.value)
    with pytest.raises(LedgerError):
        ledger.append(row("s9-z"))
    assert ledger.path.read_bytes() == before


def test_wrong_header_is_reported_with_its_line(ledger: Ledger):
    ledger.path.write_text("# L\n| time | run | cost |\n|---|---|---|\n")
    with pytest.raises(LedgerError, match=r"line 2: .*missing column\(s\) time_utc, run_id"):
        ledger.read()


def test_a_new_row_that_duplicates_a_run_id_is_refused_and_nothing_written(ledger: Ledger):
    ledger.append(row("s1-a"))
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError, match="duplicate run id 's1-a'"):
        ledger.append(row("s1-b"), row("s1-a"))
    assert ledger.path.read_bytes() == before


def test_settled_row_must_name_the_same_pod_as_its_open_row(ledger: Ledger):
    ledger.append(row("s1-a", "open", pod="pod1"))
    with pytest.raises(LedgerError, match="its open row"):
        ledger.append(row("s1-a", "settled", pod="pod2"))


WRITER = textwrap.dedent("""
    import sys
    from datetime import datetime, UTC
    from pytest_distcheck.budget.ledger import Ledger, make_row
    path, lock, who, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    led = Ledger(path, lock)
    for i in range(n):
        led.append(make_row(run_id=f"{who}-{i}", status="settled", provider="runpod", gpu_type="L4",
                            gpu_count=1, billed_s=60 + i, rate_per_hour=0.39, experiment=None,
                            purpose=f"writer {who}", resource_id=f"pod-{who}-{i}"))
""")


def test_concurrent_writers_lose_no_rows(ledger: Ledger):
    writers, per = 6, 15
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(ledger.path), str(ledger.lock_path), f"w{k}",
                               str(per)]) for k in range(writers)]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    rows = ledger.read()  # parses: no interleaved or torn lines
    assert sorted(r.run_id for r in rows) == sorted(f"w{k}-{i}" for k in range(writers) for i in range(per))
    assert ledger.path.read_text().count("| time_utc |") == 1
