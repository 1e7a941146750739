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
from pytest_distcheck.budget.ledger import COLUMNS, COLUMNS_V1, GENESIS, Ledger, LedgerError, header_lines, make_row

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
HEADER = "\n".join(header_lines()) + "\n"


def row(run_id="s1-a", status="open", billed_s=600, rate=1.18, experiment="tp-inference",
        purpose="tests/test_tp.py::test_speedup", pod="pod1"):
    return make_row(run_id=run_id, status=status, provider="runpod", gpu_type="RTX 4090", gpu_count=2,
                    billed_s=billed_s, rate_per_hour=rate, experiment=experiment, purpose=purpose,
                    resource_id=pod, now=NOW)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock", clock=lambda: LATER)


def test_first_append_creates_a_readable_table_and_rows_round_trip(ledger: Ledger):
    written = ledger.append(row("s1-a", "open", billed_s=1800, pod="-"), row("s1-a", "settled", billed_s=611, pod="-"))
    text = ledger.path.read_text()
    assert "| " + " | ".join(COLUMNS) + " |" in text
    assert "| 2026-12-01T10:00:00Z | s1-a | settled | runpod | RTX 4090 x 2 | 611 | 1.18 | 0.2003 | USD |" in text
    assert written[0].prev_hash == GENESIS and written[1].prev_hash == written[0].row_hash
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
    """An old-format (unchained) row line."""
    cells = {"time_utc": "2026-12-01T10:00:00Z", "run_id": "s1-a", "status": "settled", "provider": "runpod",
             "resource": "RTX 4090 x 2", "billed_s": "600", "rate_per_hour": "1.18", "cost": "0.1967",
             "currency": "USD", "experiment": "tp-inference", "purpose": "t::x", "resource_id": "pod1"}
    cells.update(over)
    return "| " + " | ".join(cells[c] for c in COLUMNS_V1) + " |"


OLD_HEADER = "\n".join(header_lines(COLUMNS_V1)) + "\n"
GOOD = _valid_line()
MALFORMED = {
    "bad number": (GOOD + "\n" + _valid_line(run_id="s1-b", billed_s="6o0"), 8, "billed_s '6o0' is not a whole"),
    "superscript digit": (_valid_line(billed_s="9\u00b2", cost="0.0030"), 7, "billed_s '9\u00b2' is not a whole"),
    "arabic-indic digit": (_valid_line(rate_per_hour="\u0661.18"), 7, "rate_per_hour '\u0661.18' is not a number"),
    "bad rate": (_valid_line(rate_per_hour="1,18"), 7, "rate_per_hour '1,18' is not a number"),
    "nan rate": (_valid_line(rate_per_hour="NaN"), 7, "rate_per_hour 'NaN' is not a number"),
    "missing column": ("| 2026-12-01T10:00:00Z | s1-a | settled | runpod | RTX 4090 x 2 | 600 | 1.18 | 0.1967 "
                       "| tp-inference | t::x | pod1 |", 7, "missing column(s) resource_id"),
    "negative cost": (_valid_line(cost="-0.1967"), 7, "negative cost '-0.1967'"),
    "unknown currency": (_valid_line(currency="EUR"), 7, "unknown currency 'EUR'"),
    "duplicate run id": (GOOD + "\n" + _valid_line(time_utc="2026-12-01T11:00:00Z"), 8,
                         "duplicate run id 's1-a' with status settled (first on line 7)"),
    "cost not rate x seconds": (_valid_line(cost="0.5000"), 7, "does not match rate_per_hour 1.18 x billed_s 600"),
    "blank line in table": (GOOD + "\n\n" + _valid_line(run_id="s1-b"), 8, "blank line"),
    "bad time": (_valid_line(time_utc="2026-13-01T10:00:00Z"), 7, "not a valid date"),
    "future time": (_valid_line(time_utc="2027-12-01T10:00:00Z"), 7, "is in the future"),
    "bad resource": (_valid_line(resource="RTX 4090"), 7, "resource 'RTX 4090' must read"),
    "settled rate differs from open": (
        _valid_line(status="open", billed_s="1800", cost="0.5900") + "\n" + _valid_line(rate_per_hour="2.36",
                                                                                     cost="0.3933"),
        8, "settled row of run 's1-a' has rate_per_hour 2.36, line 7 1.18"),
    "settled experiment differs from open": (
        _valid_line(status="open", billed_s="1800", cost="0.5900") + "\n" + _valid_line(experiment="-"),
        8, "has experiment '-', its open row (line 7) 'tp-inference'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_old_ledger_names_line_and_problem_and_stays_byte_for_byte(ledger: Ledger, case: str):
    body, line, problem = MALFORMED[case]
    ledger.path.write_bytes(("# Ledger\n\nFree text.\n\n" + OLD_HEADER + body + "\n").encode())
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
    with pytest.raises(LedgerError, match="names pod pod2, line 7 names pod1"):
        ledger.append(row("s1-a", "settled", pod="pod2"))


def test_an_old_ledger_is_read_as_it_is_and_continued_by_a_chained_table_never_rewritten(ledger: Ledger):
    old = ("# Old\n\n" + OLD_HEADER + _valid_line(status="open", billed_s="1800", cost="0.5900") + "\n"
           + GOOD + "\n")
    ledger.path.write_text(old)
    assert [r.status for r in ledger.read()] == ["open", "settled"]
    (new,) = ledger.append(row("s1-b"))
    text = ledger.path.read_text()
    assert text.startswith(old) and new.line == 10 and new.prev_hash != GENESIS
    assert text[len(old):].startswith("\n| time_utc |") and [r.run_id for r in ledger.read()] == ["s1-a", "s1-a",
                                                                                                  "s1-b"]
    # an old row edited after the chained table began is caught, on the chained table's first row
    ledger.path.write_text(text.replace("| 600 | 1.18 | 0.1967 |", "| 60 | 1.18 | 0.0197 |"))
    with pytest.raises(LedgerError, match="line 10: prev_hash does not start the chain.*rows of the old table"):
        ledger.read()


# -- hand edits: every one is named (line and what) -------------------------------------------------------

def _chained(ledger: Ledger) -> list[str]:
    """A chained ledger written by the kit: run a (open, started, settled), b (open, started, settled,
    overrun), c (open, started: in progress). Returns its lines."""
    r = dict(provider="runpod", gpu_type="RTX 4090", gpu_count=2, experiment="tp-inference", purpose="t::x", now=NOW)
    ledger.append(make_row(run_id="s1-a", status="open", billed_s=1800, rate_per_hour=1.18, resource_id="-", **r))
    ledger.append(make_row(run_id="s1-a", status="started", billed_s=1800, rate_per_hour=1.18, resource_id="podA", **r))
    ledger.append(make_row(run_id="s1-a", status="settled", billed_s=611, rate_per_hour=1.18, resource_id="podA", **r))
    ledger.append(make_row(run_id="s1-b", status="open", billed_s=900, rate_per_hour=1.18, resource_id="-", **r))
    ledger.append(make_row(run_id="s1-b", status="started", billed_s=900, rate_per_hour=1.18, resource_id="podB", **r))
    ledger.append(make_row(run_id="s1-b", status="settled", billed_s=900, rate_per_hour=1.18, resource_id="podB", **r))
    ledger.append(make_row(run_id="s1-b", status="overrun", billed_s=300, rate_per_hour=1.18, resource_id="podB", **r))
    ledger.append(make_row(run_id="s1-c", status="open", billed_s=600, rate_per_hour=1.18, resource_id="-", **r))
    ledger.append(make_row(run_id="s1-c", status="started", billed_s=600, rate_per_hour=1.18, resource_id="podC", **r))
    return ledger.path.read_text().splitlines()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _set(lines: list[str], n: int, rehash: bool = False, **cells) -> list[str]:
    """Line n (1-based) with some cells changed; with rehash, its row_hash recomputed as a forger would."""
    from pytest_distcheck.budget.ledger import row_hash

    c = _cells(lines[n - 1])
    for name, value in cells.items():
        c[COLUMNS.index(name)] = value
    if rehash:
        c[-1] = row_hash(c[-2], c[:-2])
    out = list(lines)
    out[n - 1] = _line(c)
    return out


# Lines of _chained: header 5, separator 6, a: 7-9, b: 10-13, c: 14-15.
EDITED = "this row was edited after it was written"
HAND_EDITS = {
    "delete a middle row": (lambda ls: ls[:7] + ls[8:], 8, "prev_hash is not the row_hash of the row above (line 7)"),
    "delete the first row": (lambda ls: ls[:6] + ls[7:], 7, "prev_hash does not start the chain"),
    "delete a run's open row": (lambda ls: ls[:9] + ls[10:], 10, "has no open row before it"),
    "delete an overrun row": (lambda ls: ls[:12] + ls[13:], 13, "prev_hash is not the row_hash of the row above"),
    "delete the last row": (lambda ls: ls[:14], 15, "rows were removed from the end"),
    "delete the last run": (lambda ls: ls[:13], 15, "rows were removed from the end"),
    "rate and seconds edited consistently": (
        lambda ls: _set(ls, 9, billed_s="305", rate_per_hour="2.36", cost="0.2000"), 9, EDITED),
    "rate and seconds edited, hash recomputed": (
        lambda ls: _set(ls, 9, rehash=True, billed_s="305", rate_per_hour="2.36", cost="0.2000"), 10,
        "prev_hash is not the row_hash of the row above (line 9)"),
    "last row edited, hash recomputed": (
        lambda ls: _set(ls, 15, rehash=True, billed_s="60", cost="0.0197"), 15, "rows were removed from the end"),
    "a date in the future": (lambda ls: _set(ls, 9, rehash=True, time_utc="2027-12-01T10:00:00Z"), 9,
                             "is in the future"),
    "a date moved back": (lambda ls: _set(ls, 9, time_utc="2026-11-01T10:00:00Z"), 9, EDITED),
    "settled rate differs from its started row": (
        lambda ls: _set(ls, 9, rehash=True, rate_per_hour="0.59", cost="0.1001"), 9,
        "has rate_per_hour 0.59, line 8 1.18"),
    "settled experiment differs from its open row": (
        lambda ls: _set(ls, 9, rehash=True, experiment="-"), 9, "has experiment '-', its open row (line 7)"),
    "settled pod differs from its started row": (
        lambda ls: _set(ls, 9, rehash=True, resource_id="podZ"), 9, "names pod podZ, line 8 names podA"),
    "open row moved to another experiment": (
        lambda ls: _set(ls, 14, rehash=True, experiment="other"), 15, "has experiment 'tp-inference', its open row"),
    "purpose edited": (lambda ls: _set(ls, 7, purpose="t::y"), 7, EDITED),
    "cost edited alone": (lambda ls: _set(ls, 9, cost="0.0100"), 9, "does not match rate_per_hour"),
    "seconds above the reservation in a settled row": (
        lambda ls: _set(ls, 9, rehash=True, billed_s="2000", cost="0.6556"), 9, "above the 1800 s reserved"),
    "two rows swapped": (lambda ls: ls[:7] + [ls[8], ls[7]] + ls[9:], 8, "prev_hash"),
    "a row copied": (lambda ls: ls[:9] + [ls[8]] + ls[9:], 10, "duplicate run id 's1-a' with status settled"),
    "a row invented with its hash": (
        lambda ls: _set(ls[:15] + [ls[14]], 16, rehash=True, run_id="s1-d"), 16, "has no open row before it"),
    "prev_hash edited": (lambda ls: _set(ls, 8, prev_hash="0123456789abcdef"), 8, "prev_hash"),
    "hash not hex": (lambda ls: _set(ls, 8, row_hash="ZZZZ"), 8, "row_hash 'ZZZZ' is not 16 hex digits"),
    "status changed open to settled": (lambda ls: _set(ls, 14, status="settled"), 14, EDITED),
    "overrun without its settlement": (lambda ls: _set(ls, 12, rehash=True, status="started"), 12,
                                       "duplicate run id 's1-b' with status started"),
    "superscript digit": (lambda ls: _set(ls, 9, billed_s="9\u00b2"), 9, "billed_s '9\u00b2' is not a whole number"),
}


@pytest.mark.parametrize("edit", sorted(HAND_EDITS))
def test_every_hand_edit_is_named_with_its_line_and_nothing_is_written(ledger: Ledger, edit: str):
    change, line, problem = HAND_EDITS[edit]
    lines = _chained(ledger)
    assert [len(_cells(ln)) for ln in lines[6:]] == [len(COLUMNS)] * 9 and len(lines) == 15
    ledger.path.write_text("\n".join(change(lines)) + "\n")
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert any(n == line and problem in p for n, p in exc.value.problems), exc.value.problems
    with pytest.raises(LedgerError):
        ledger.append(row("s9-z"))
    assert ledger.path.read_bytes() == before


def test_the_untouched_chained_ledger_parses(ledger: Ledger):
    _chained(ledger)
    rows = ledger.read()
    assert [r.status for r in rows][-3:] == ["overrun", "open", "started"]
    t = accounting.totals(rows)
    assert t.overruns == ("s1-b",) and t.unsettled == ("s1-c",)
    assert t.total == Decimal("1.18") * (611 + 900 + 300 + 600) / 3600


WRITER = textwrap.dedent("""
    import sys
    from pytest_distcheck.budget.ledger import Ledger, make_row
    path, lock, who, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    led = Ledger(path, lock)
    for i in range(n):
        led.append(make_row(run_id=f"{who}-{i}", status="open", provider="runpod", gpu_type="L4",
                            gpu_count=1, billed_s=60 + i, rate_per_hour=0.39, experiment=None,
                            purpose=f"writer {who}", resource_id="-"))
        print(f"{who}-{i}", flush=True)   # written and fsynced before this line
""")


def test_sixteen_writers_with_random_sigkills_lose_no_written_row(ledger: Ledger):
    import random
    import signal
    import time

    writers, per = 16, 12
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(ledger.path), str(ledger.lock_path), f"w{k}",
                               str(per)], stdout=subprocess.PIPE, text=True) for k in range(writers)]
    rng = random.Random(18)
    victims = rng.sample(procs, 6)
    time.sleep(0.3)
    for p in victims:
        time.sleep(rng.uniform(0.0, 0.2))
        p.send_signal(signal.SIGKILL)
    confirmed = set()
    for p in procs:
        out, _ = p.communicate(timeout=120)
        confirmed |= set(out.split())
        assert p.returncode == (0 if p not in victims else p.returncode)
    rows = ledger.read()  # parses: no torn line, the chain holds
    ids = [r.run_id for r in rows]
    assert len(ids) == len(set(ids)) and confirmed <= set(ids)
    assert len(confirmed) >= (writers - len(victims)) * per
    assert ledger.path.read_text().count("| time_utc |") == 1
