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
from pytest_distcheck.budget.ledger import (
    COLUMNS,
    GENESIS,
    LOOKS_MISSING,
    Ledger,
    LedgerError,
    header_lines,
    make_row,
)

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


def _valid(**over) -> dict[str, str]:
    """The cells of a settled row of run s1-a (its open row is OPEN), with some changed."""
    cells = {"time_utc": "2026-12-01T10:00:00Z", "run_id": "s1-a", "status": "settled", "provider": "runpod",
             "resource": "RTX 4090 x 2", "billed_s": "600", "rate_per_hour": "1.18", "cost": "0.1967",
             "currency": "USD", "experiment": "tp-inference", "purpose": "t::x", "resource_id": "pod1"}
    cells.update(over)
    return cells


def _table(*rows: dict[str, str] | str) -> str:
    """Table lines chained as the kit chains them (so only the case's own problem shows); a str is kept as is."""
    from pytest_distcheck.budget.ledger import row_hash

    out, prev = [], GENESIS
    for r in rows:
        if isinstance(r, str):
            out.append(r)
            continue
        cells = [r[c] for c in COLUMNS[:-2]]
        h = row_hash(prev, cells)
        out.append("| " + " | ".join([*cells, prev, h]) + " |")
        prev = h
    return "\n".join(out)


OPEN = _valid(status="open", billed_s="1800", cost="0.5900")  # line 7 of every case
GOOD = _valid()
MALFORMED = {
    "bad number": ((GOOD, _valid(run_id="s1-b", billed_s="6o0")), 9, "billed_s '6o0' is not a whole"),
    "superscript digit": ((_valid(billed_s="9\u00b2", cost="0.0030"),), 8, "billed_s '9\u00b2' is not a whole"),
    "arabic-indic digit": ((_valid(rate_per_hour="\u0661.18"),), 8, "rate_per_hour '\u0661.18' is not a number"),
    "bad rate": ((_valid(rate_per_hour="1,18"),), 8, "rate_per_hour '1,18' is not a number"),
    "nan rate": ((_valid(rate_per_hour="NaN"),), 8, "rate_per_hour 'NaN' is not a number"),
    "missing column": (("| 2026-12-01T10:00:00Z | s1-a | settled | runpod | RTX 4090 x 2 | 600 | 1.18 | 0.1967 "
                        "| tp-inference | t::x | pod1 |",), 8,
                       LOOKS_MISSING.format(columns="currency, prev_hash, row_hash")),
    "negative cost": ((_valid(cost="-0.1967"),), 8, "negative cost '-0.1967'"),
    "unknown currency": ((_valid(currency="EUR"),), 8, "unknown currency 'EUR'"),
    "unknown status": ((_valid(status="paid"),), 8, "status 'paid' must be one of"),
    "duplicate run id": ((GOOD, _valid(time_utc="2026-12-01T11:00:00Z")), 9,
                         "duplicate run id 's1-a' with status settled (first on line 8)"),
    "cost not rate x seconds": ((_valid(cost="0.5000"),), 8, "does not match rate_per_hour 1.18 x billed_s 600"),
    "blank line in table": ((GOOD, "", _valid(run_id="s1-b", status="open")), 9, "blank line"),
    "bad time": ((_valid(time_utc="2026-13-01T10:00:00Z"),), 8, "not a valid date"),
    "future time": ((_valid(time_utc="2027-12-01T10:00:00Z"),), 8, "is in the future"),
    "bad resource": ((_valid(resource="RTX 4090"),), 8, "resource 'RTX 4090' must read"),
    "settled rate differs from open": ((_valid(rate_per_hour="2.36", cost="0.3933"),), 8,
                                       "settled row of run 's1-a' has rate_per_hour 2.36, line 7 1.18"),
    "settled experiment differs from open": ((_valid(experiment="-"),), 8,
                                             "has experiment '-', its open row (line 7) 'tp-inference'"),
    "an event that bills seconds": ((_valid(status="terminate-failed"),), 8, "an event row records what happened"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_ledger_names_line_and_problem_and_stays_byte_for_byte(ledger: Ledger, case: str):
    body, line, problem = MALFORMED[case]
    ledger.path.write_bytes(("# Ledger\n\nFree text.\n\n" + HEADER + _table(OPEN, *body) + "\n").encode())
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
EDITED = "this row is not as the kit wrote it: edited since, or typed by hand"
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
    # The writers stamp rows with the real clock, so read them against it (the fixture's clock is pinned).
    rows = Ledger(ledger.path, ledger.lock_path).read()  # parses: no torn line, the chain holds
    ids = [r.run_id for r in rows]
    assert len(ids) == len(set(ids)) and confirmed <= set(ids)
    assert len(confirmed) >= (writers - len(victims)) * per
    assert ledger.path.read_text().count("| time_utc |") == 1


# -- a full disk, a short write, a torn line: an append lands whole or the file stays as it was -------------

def _failing_write(mode: str):
    """An os.write that fails the ledger's next append as ``mode`` says (other writes pass through)."""
    import errno
    import os

    real = os.write

    def write(fd, data):
        if b"| s1-b |" not in bytes(data):
            return real(fd, data)
        if mode == "partial then ENOSPC":
            real(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        if mode == "short write":
            return real(fd, bytes(data)[: len(data) // 3])
        raise OSError(errno.EIO, "Input/output error")

    return write


@pytest.mark.parametrize("mode", ["partial then ENOSPC", "short write", "EIO"])
def test_a_failed_or_short_write_is_cut_back_and_the_next_session_reads_every_row(ledger: Ledger, monkeypatch,
                                                                                  mode: str):
    import os

    from pytest_distcheck.budget.ledger import LedgerWriteError

    ledger.append(row("s1-a"))
    before = ledger.path.read_bytes()
    with monkeypatch.context() as m:
        m.setattr(os, "write", _failing_write(mode))
        with pytest.raises(LedgerWriteError) as exc:
            ledger.append(row("s1-b"))
    assert ledger.path.read_bytes() == before  # none of the new row's bytes were kept
    text = str(exc.value)
    assert str(ledger.path) in text and str(ledger.path.parent) in text and "its 1 row(s) are untouched" in text
    assert [r.run_id for r in ledger.read()] == ["s1-a"]
    ledger.append(row("s1-b"))  # the disk has room again: the next writer appends as usual
    assert [r.run_id for r in ledger.read()] == ["s1-a", "s1-b"]


def test_a_ledger_in_a_folder_that_does_not_exist_says_so(tmp_path: Path):
    from pytest_distcheck.budget.ledger import NO_FOLDER, LedgerWriteError

    missing = tmp_path / "experimnts"  # a misspelt folder in budget.ledger: not "0 bytes free"
    ledger = Ledger(missing / "ledger.md", tmp_path / ".distcheck" / "budget.lock", clock=lambda: LATER)
    with pytest.raises(LedgerWriteError) as exc:
        ledger.append(row("s1-a"))
    assert exc.value.problem == NO_FOLDER.format(folder=missing) and not missing.exists()


def test_a_disk_without_room_for_the_row_refuses_before_writing(ledger: Ledger, monkeypatch):
    import shutil
    from collections import namedtuple

    from pytest_distcheck.budget.ledger import LedgerWriteError

    ledger.append(row("s1-a"))
    before = ledger.path.read_bytes()
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 100, 100))
    with pytest.raises(LedgerWriteError, match=r"the disk is full; the disk holding .* has 100 bytes free"):
        ledger.append(row("s1-b"))
    assert ledger.path.read_bytes() == before


def test_a_first_append_that_fails_leaves_no_ledger_file_behind(ledger: Ledger, monkeypatch):
    import os

    from pytest_distcheck.budget.ledger import LedgerWriteError

    monkeypatch.setattr(os, "write", _failing_write("EIO"))
    with pytest.raises(LedgerWriteError):
        ledger.append(row("s1-b"))
    assert not ledger.path.exists()


def test_a_torn_last_line_is_named_with_the_one_command_that_repairs_it_keeping_every_other_byte(ledger: Ledger):
    from pytest_distcheck.budget.ledger import REPAIR_COMMAND, format_row

    ledger.append(row("s1-a"), row("s1-b"))
    whole = ledger.path.read_bytes()
    torn = format_row(row("s1-c"), "0" * 16)[:57].encode()  # a kill in the middle of the write
    ledger.path.write_bytes(whole + torn)
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert exc.value.torn == 9 and "line 9: cut short" in str(exc.value) and REPAIR_COMMAND in str(exc.value)
    assert "the 2 row(s) above it are whole" in str(exc.value)
    with pytest.raises(LedgerError):
        ledger.append(row("s1-d"))  # nothing is appended after a torn line
    line, saved = ledger.repair_torn_line()
    assert line == 9 and ledger.path.read_bytes() == whole and saved.read_bytes() == torn
    assert ledger.repair_torn_line() is None  # nothing more to repair
    ledger.append(row("s1-c"))
    assert [r.run_id for r in ledger.read()] == ["s1-a", "s1-b", "s1-c"]


def test_a_hand_edited_last_line_is_not_taken_for_a_torn_one(ledger: Ledger):
    ledger.append(row("s1-a"), row("s1-b"))
    ledger.path.write_text(ledger.path.read_text().replace("| 600 |", "| 60 |"))  # ends with a newline
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert exc.value.torn is None
    with pytest.raises(LedgerError):
        ledger.repair_torn_line()


# -- the lock: a writer waits with backoff, says who holds it, and is refused naming the holder --------------

HOLDER = textwrap.dedent("""
    import sys, time
    from pytest_distcheck.budget.ledger import Ledger
    led = Ledger(sys.argv[1], sys.argv[2])
    with led.locked():
        print("held", flush=True)
        time.sleep(float(sys.argv[3]))
""")


def _hold_lock(ledger: Ledger, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(ledger.path), str(ledger.lock_path), str(seconds),
                             "--holder-marker"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_writer_waiting_for_the_lock_says_who_holds_it_then_appends(ledger: Ledger, monkeypatch):
    from pytest_distcheck.budget import ledger as ledger_mod

    monkeypatch.setattr(ledger_mod, "LOCK_NOTICE_S", 0.2)
    said: list[str] = []
    ledger.notify = said.append
    proc = _hold_lock(ledger, 1.5)
    ledger.append(row("s1-a"))
    proc.wait(10)
    assert len(said) == 1 and f"held by pid {proc.pid} (" in said[0] and "--holder-marker" in said[0]
    assert [r.run_id for r in ledger.read()] == ["s1-a"]


def test_a_writer_refused_for_the_lock_names_the_holder_and_writes_nothing(ledger: Ledger):
    from pytest_distcheck.errors import ConfigError

    proc = _hold_lock(ledger, 5)
    try:
        with pytest.raises(ConfigError, match=rf"within 0.5 s: it is held by pid {proc.pid} \(.*--holder-marker"):
            ledger.append(row("s1-a"), wait_s=0.5)
    finally:
        proc.kill()
        proc.wait()
    assert not ledger.path.exists()
