"""Hand edits a learner makes to the spend ledger: a whole last row saved without a line end is never taken
for a torn write (nor cut), blank lines at the end of the file are harmless, a missing cell is blamed on the
column it looks like, and the advice names where the change shows once it is committed."""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_distcheck.budget.ledger import (
    BLANK_LINE,
    CELL_COUNT,
    COLUMNS,
    DECIMAL_COMMA,
    EDITED_ROW,
    LOOKS_MISSING,
    NOT_TORN,
    NOTHING_WRITTEN_RESTORE,
    ONE_OF_MISSING,
    REPAIR_COMMAND,
    TORN,
    Ledger,
    LedgerError,
    header_lines,
    make_row,
)

NOW = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
RUN = dict(provider="runpod", gpu_type="RTX 4090", gpu_count=2, rate_per_hour=1.18, experiment="tp-inference",
           purpose="tests/test_tp.py::test_speedup", now=NOW)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    """The tester's ledger: run abcd1234-01 open, started and settled (780 s at $1.18/h = $0.2557), lines 7-9."""
    book = Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock", clock=lambda: LATER)
    book.append(make_row(run_id="abcd1234-01", status="open", billed_s=2220, resource_id="-", **RUN),
                make_row(run_id="abcd1234-01", status="started", billed_s=2220, resource_id="pod1", **RUN),
                make_row(run_id="abcd1234-01", status="settled", billed_s=780, resource_id="pod1", **RUN))
    return book


def _next_run(run_id: str = "abcd1234-02"):
    return make_row(run_id=run_id, status="open", billed_s=600, resource_id="-", **RUN)


# -- a whole last row without a line end is not a torn write ----------------------------------------------

def test_a_whole_last_row_without_a_line_end_reads_and_the_next_append_starts_a_new_line(ledger: Ledger):
    ledger.path.write_bytes(ledger.path.read_bytes().rstrip(b"\n"))
    before = ledger.path.read_bytes()
    assert [r.status for r in ledger.read()] == ["open", "started", "settled"]
    ledger.append(_next_run())
    assert ledger.path.read_bytes().startswith(before + b"\n")
    assert [r.run_id for r in ledger.read()][-1] == "abcd1234-02"


def test_a_decimal_comma_in_a_whole_last_row_without_a_line_end_is_named_and_never_cut(ledger: Ledger):
    text = ledger.path.read_text()
    assert "| 0.2557 |" in text.splitlines()[-1]
    ledger.path.write_text(text.rstrip("\n").replace("| 0.2557 |", "| 0,2557 |"))
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert exc.value.torn is None
    assert (9, DECIMAL_COMMA.format(name="cost", value="0,2557", fixed="0.2557")) in exc.value.problems
    assert (9, EDITED_ROW) in exc.value.problems  # what the sed did, with its line
    assert "cut short" not in str(exc.value) and REPAIR_COMMAND not in str(exc.value)
    with pytest.raises(LedgerError) as refused:
        ledger.repair_torn_line()
    assert refused.value.problems[0] == (9, NOT_TORN.format(n=len(COLUMNS), command=REPAIR_COMMAND))
    assert ledger.path.read_bytes() == before
    assert not list(ledger.lock_path.parent.glob("*.torn-*"))


def test_no_row_with_all_its_cells_is_ever_cut_however_its_write_or_edit_ended(ledger: Ledger):
    """Every prefix of a row as the kit writes it, with no line end: short of its 14 cells it is a torn write
    that the repair cuts back to the whole rows; with all 14 (a cut inside row_hash, or a whole row) it is
    never cut."""
    whole = ledger.path.read_bytes()
    line = ledger.path.read_text().splitlines()[-1]
    last_cell = line.rindex(" | ") + len(" | ")  # where row_hash starts: from one of its digits on, 14 cells
    cut, kept = 0, 0
    for end in range(1, len(line) + 1):
        ledger.path.write_bytes(whole + line[:end].encode())
        if end <= last_cell:
            assert ledger.repair_torn_line()[0] == 10, line[:end]
            assert ledger.path.read_bytes() == whole
            cut += 1
            continue
        before = ledger.path.read_bytes()
        try:
            assert ledger.repair_torn_line() is None, line[:end]  # it parses: nothing to repair
        except LedgerError as exc:
            assert exc.problems[0] == (10, NOT_TORN.format(n=len(COLUMNS), command=REPAIR_COMMAND)), line[:end]
        assert ledger.path.read_bytes() == before
        kept += 1
    assert cut > 100 and kept == len(line) - last_cell


@pytest.mark.parametrize("column", [c for c in COLUMNS if c not in ("prev_hash", "row_hash")])
def test_an_edited_cell_of_a_last_row_without_a_line_end_is_never_cut(ledger: Ledger, column: str):
    lines = ledger.path.read_text().splitlines()
    cells = [c.strip() for c in lines[-1].strip().strip("|").split("|")]
    cells[COLUMNS.index(column)] = "x,y"
    ledger.path.write_text("\n".join([*lines[:-1], "| " + " | ".join(cells) + " |"]))
    before = ledger.path.read_bytes()
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert exc.value.torn is None and all(TORN.split(":")[0] not in p for _n, p in exc.value.problems)
    with pytest.raises(LedgerError, match="has all 14 cells"):
        ledger.repair_torn_line()
    assert ledger.path.read_bytes() == before


# -- blank lines at the end of the file ---------------------------------------------------------------------

@pytest.mark.parametrize("tail", ["\n", "\n\n", "  \n", "\n\t", "\n\n  \n"])
def test_blank_lines_at_the_end_are_accepted_and_an_append_after_them_resumes_the_table(ledger: Ledger, tail: str):
    ledger.path.write_text(ledger.path.read_text() + tail)
    before = ledger.path.read_bytes()
    assert len(ledger.read()) == 3
    written = ledger.append(_next_run(), _next_run("abcd1234-03"))
    after = ledger.path.read_bytes()
    assert after.startswith(before)  # nothing rewritten
    lines = after.decode().splitlines()
    # Markdown ends a table at a blank line: the new rows come under the header again, so they are table rows.
    assert lines[written[0].line - 3:written[0].line - 1] == header_lines()
    assert not lines[written[0].line - 4].strip()
    assert [r.run_id for r in ledger.read()] == ["abcd1234-01"] * 3 + ["abcd1234-02", "abcd1234-03"]
    assert [r.line for r in ledger.read()][-2:] == [r.line for r in written]
    ledger.append(_next_run("abcd1234-04"))  # right after a row: no header in between
    assert ledger.path.read_text().splitlines()[-2].startswith("| 2026-12-03T10:00:00Z | abcd1234-03 |")


def test_the_committed_empty_ledger_with_a_blank_line_after_it_is_accepted(tmp_path: Path):
    book = Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock", clock=lambda: LATER)
    book.path.write_text("# Ledger\n\nNo rows yet.\n\n" + "\n".join(header_lines()) + "\n\n")
    assert book.read() == []
    (written,) = book.append(_next_run())
    assert [r.run_id for r in book.read()] == ["abcd1234-02"] and written.line == 10


def test_a_row_after_a_blank_line_is_still_refused_naming_the_blank_line(ledger: Ledger):
    text = ledger.path.read_text()
    lines = text.splitlines()
    ledger.path.write_text("\n".join([*lines[:-1], "", lines[-1]]) + "\n")
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert (9, BLANK_LINE) in exc.value.problems


# -- a missing cell is blamed on the column it looks like -------------------------------------------------

def _without(ledger: Ledger, column: str) -> list[str]:
    lines = ledger.path.read_text().splitlines()
    cells = [c.strip() for c in lines[-1].strip().strip("|").split("|")]
    del cells[COLUMNS.index(column)]
    ledger.path.write_text("\n".join([*lines[:-1], "| " + " | ".join(cells) + " |"]) + "\n")
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    ((line, problem),) = exc.value.problems
    assert line == 9
    return problem


def test_a_removed_currency_cell_is_named_not_the_last_column(ledger: Ledger):
    problem = _without(ledger, "currency")
    assert problem == CELL_COUNT.format(cells=13, expected=14, columns=" | ".join(COLUMNS),
                                        missing=", " + LOOKS_MISSING.format(columns="currency"))
    assert "row_hash" not in problem.split(")")[-1]


@pytest.mark.parametrize("column", COLUMNS)
def test_a_removed_cell_is_named_alone_or_among_the_columns_it_could_be(ledger: Ledger, column: str):
    problem = _without(ledger, column)
    named = problem.split("), ", 1)[1]
    if named == LOOKS_MISSING.format(columns=column):
        return
    one_of = re.fullmatch(re.escape(ONE_OF_MISSING).replace(re.escape("{columns}"), "(.+)"), named)
    assert one_of is not None, problem
    assert column in one_of[1].split(", "), problem


def test_cells_that_fit_no_column_get_the_count_without_a_guess(ledger: Ledger):
    ledger.path.write_text(ledger.path.read_text() + "| what | is | this |\n")
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    assert exc.value.problems == [(10, CELL_COUNT.format(cells=3, expected=14, columns=" | ".join(COLUMNS),
                                                         missing=""))]


# -- the advice names where the change shows, committed or not ----------------------------------------------

def test_the_advice_names_git_log_for_a_change_already_committed(ledger: Ledger, monkeypatch):
    monkeypatch.chdir(ledger.path.parent)
    ledger.path.write_text(ledger.path.read_text().replace("| 780 |", "| 78 |"))
    with pytest.raises(LedgerError) as exc:
        ledger.read()
    advice = NOTHING_WRITTEN_RESTORE.format(ledger=shlex.quote(ledger.path.name))
    assert str(exc.value).endswith(advice) and "git log -p -- ledger.md" in advice
