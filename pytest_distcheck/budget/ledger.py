"""The spend ledger: a Markdown table of charges that people read and the kit parses and appends to.

Format: the file is free text up to its first line that starts with ``|``: the table header with the
columns of ``COLUMNS`` in that order, a ``|---|...`` separator, then one line per row, e.g.::

    | 2026-12-01T10:00:00Z | 1a2b3c4d-9f00 | open | runpod | RTX 4090 x 2 | 1800 | 1.18 | 0.5900 | USD
      | tp-inference | tests/test_tp.py::test_speedup | - | 0000000000000000 | 5d0c...e1 |   (one line)

One row per charge event of a run (``run_id``), in this order:

- ``open``: written and read back BEFORE anything is created; the worst case at the priced rate
  (billed_s: the most it may run; ``resource_id`` "-": no pod yet).
- ``started``: the pod exists: its id, and the rate it is metered at (the higher of the priced rate and
  the provider's ``costPerHr``); billed_s shrinks so the worst case stays within the open row's.
- ``settled``: the pod is gone: the billed seconds, at most the reserved worst case.
- ``overrun``: the billed seconds beyond the worst case (a run that outlived its reservation), so the
  true seconds are always recorded; a row of its own so that nobody mistakes it for a settlement.
- ``reconciled``: what the provider billed for the pod (``distcheck budget --reconcile``); the latest
  such row is what the run counts (see ``accounting``).

``cost`` must equal ``rate_per_hour * billed_s / 3600`` to 4 decimals; ``rate_per_hour`` is for the
whole resource (all its GPUs); ``billed_s`` is after the provider's billing granularity.

Tamper evidence: ``prev_hash`` is the previous row's ``row_hash`` (``GENESIS`` for the first row) and
``row_hash`` is the first 16 hex digits of SHA-256 over ``prev_hash`` and the row's other cells
(:func:`row_hash`). An edited row fails its own hash; a deleted or inserted row breaks the link of the
row after it. The chain has no secret: it catches hand edits, not someone who recomputes every later
hash; reconciliation with the provider's bill catches that.

Old ledgers (``COLUMNS_V1``, without the two hash columns) stay readable. The kit never rewrites
them: its first append adds a blank line and a new table with the hash columns, whose first row
chains from a hash of every old row (:func:`legacy_genesis`), so an old row edited later is caught too.

Parsing is strict: ASCII digits only (``9²`` or ``٣`` are not numbers), no date more than
``FUTURE_TOLERANCE`` ahead of now, every row of a run agreeing with the run's earlier rows on what
was rented. Writes only append, under a file lock (filelock), one ``write`` per call; a ledger that
does not parse is an error naming each bad line, and then nothing is written to it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_distcheck.errors import ConfigError

COLUMNS_V1 = (
    "time_utc", "run_id", "status", "provider", "resource", "billed_s",
    "rate_per_hour", "cost", "currency", "experiment", "purpose", "resource_id",
)
COLUMNS = (*COLUMNS_V1, "prev_hash", "row_hash")
STATUSES = ("open", "started", "settled", "overrun", "reconciled")
ONCE = ("open", "started", "settled", "overrun")  # at most one row of each per run
CURRENCY = "USD"
COST_PLACES = Decimal("0.0001")
# A written cost may differ from rate * seconds / 3600 by its rounding to 4 places, no more.
COST_TOLERANCE = Decimal("0.00005")
LOCK_TIMEOUT_S = 60.0
GENESIS = "0" * 16
# Rows dated later than this past the reader's clock are refused (two machines' clocks may differ a little).
FUTURE_TOLERANCE = timedelta(days=1)
MAX_DIGITS = 12  # billed_s, rate and cost: more digits than any real bill

_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
_RESOURCE = re.compile(r"^(?P<gpu>\S(?:.*\S)?) x (?P<count>[1-9][0-9]*)$")
_DECIMAL = re.compile(r"^[0-9]{1,%d}(\.[0-9]{1,%d})?$" % (MAX_DIGITS, MAX_DIGITS))
_WHOLE = re.compile(r"^[0-9]{1,%d}$" % MAX_DIGITS)
_NEGATIVE = re.compile(r"^-[0-9]+(\.[0-9]+)?$")
_HASH = re.compile(r"^[0-9a-f]{16}$")
_SEPARATOR_CELL = re.compile(r"^:?-{3,}:?$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class LedgerRow:
    """One charge event.

    Attributes:
        time_utc: when it was written (UTC, whole seconds).
        run_id: the paid run (one reservation).
        status: one of ``STATUSES`` (see the module docstring).
        provider: e.g. "runpod", "local".
        gpu_type, gpu_count: the resource, written ``"<gpu_type> x <gpu_count>"``.
        billed_s: seconds billed, whole, after the billing granularity.
        rate_per_hour: USD per hour for the whole resource.
        cost: USD, rate_per_hour * billed_s / 3600 rounded half-up to 4 places.
        experiment: the experiment id whose ceiling this counts against, or None ("-").
        purpose: the test id or what the run was for.
        resource_id: the provider's id (the pod id), or "-" when none exists yet.
        line: 1-based line in the file (0 for a row not yet written).
        prev_hash, row_hash: the hash chain (empty for a row of an old ledger without it).
    """

    time_utc: datetime
    run_id: str
    status: str
    provider: str
    gpu_type: str
    gpu_count: int
    billed_s: int
    rate_per_hour: Decimal
    cost: Decimal
    experiment: str | None
    purpose: str
    resource_id: str
    currency: str = CURRENCY
    line: int = 0
    prev_hash: str = ""
    row_hash: str = ""

    @property
    def resource(self) -> str:
        return f"{self.gpu_type} x {self.gpu_count}"

    @property
    def recomputed_cost(self) -> Decimal:
        """rate_per_hour * billed_s / 3600, exact (not rounded): what the row costs."""
        return self.rate_per_hour * self.billed_s / Decimal(3600)

    @property
    def has_pod(self) -> bool:
        return bool(self.resource_id) and self.resource_id != "-"


def make_row(
    *, run_id: str, status: str, provider: str, gpu_type: str, gpu_count: int, billed_s: int,
    rate_per_hour: float | Decimal, experiment: str | None, purpose: str, resource_id: str,
    now: datetime | None = None,
) -> LedgerRow:
    """A new row with its cost computed (rate_per_hour * billed_s / 3600, 4 places, half-up).
    Its hashes are filled in by :meth:`Ledger.append`."""
    rate = Decimal(str(rate_per_hour))
    cost = (rate * int(billed_s) / Decimal(3600)).quantize(COST_PLACES, rounding=ROUND_HALF_UP)
    when = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    return LedgerRow(when, run_id, status, provider, gpu_type, int(gpu_count), int(billed_s), rate, cost,
                     experiment, purpose, resource_id)


class LedgerError(ConfigError):
    """The ledger does not parse. ``problems`` is a list of (line number, what is wrong)."""

    def __init__(self, path: Path, problems: list[tuple[int, str]]) -> None:
        self.problems = problems
        shown = "; ".join(f"line {n}: {p}" for n, p in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        where = f"line {problems[0][0]}" if len(problems) == 1 else f"{len(problems)} problems"
        super().__init__(path, where, (problems[0][1] if len(problems) == 1 else shown + more)
                         + ". Nothing was written to it; the kit only appends: restore those lines from git "
                           "(git diff / git checkout) rather than editing them")


def _escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") or "-"


def _cells(row: LedgerRow) -> list[str]:
    """The row's first 12 cells as written (escaped)."""
    cells = (
        row.time_utc.strftime("%Y-%m-%dT%H:%M:%SZ"), row.run_id, row.status, row.provider, row.resource,
        str(row.billed_s), _plain(row.rate_per_hour), str(row.cost.quantize(COST_PLACES)), row.currency,
        row.experiment or "-", row.purpose, row.resource_id or "-",
    )
    return [_escape(c) for c in cells]


def row_hash(prev_hash: str, cells: list[str]) -> str:
    """First 16 hex digits of SHA-256 over ``prev_hash`` and the 12 data cells as written, joined by
    the unit separator (U+001F, which no cell can hold)."""
    text = "\x1f".join([prev_hash, *cells])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def legacy_genesis(old_row_lines: list[str]) -> str:
    """The chain's start after an old (unchained) table: a hash of its row lines, stripped, in order."""
    text = "\n".join(["distcheck-ledger-v1", *(ln.strip() for ln in old_row_lines)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def format_row(row: LedgerRow, prev_hash: str | None = None) -> str:
    """The row as one Markdown table line (no newline). With ``prev_hash``, the row is chained to it
    (the two hash columns are added); without, it is an old-format line."""
    cells = _cells(row)
    if prev_hash is not None:
        cells += [prev_hash, row_hash(prev_hash, cells)]
    return "| " + " | ".join(cells) + " |"


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


def header_lines(columns: tuple[str, ...] = COLUMNS) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _split(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(body)]


def _raw_cells(line: str) -> list[str]:
    """Cells as written (escapes kept), for hashing."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip() for c in _CELL_SPLIT.split(body)]


def _money(text: str, name: str) -> tuple[Decimal | None, str | None]:
    if _NEGATIVE.match(text):
        return None, f"negative {name} {text!r}"
    if not _DECIMAL.match(text):
        return None, (f"{name} {text!r} is not a number (ASCII digits 0-9, at most {MAX_DIGITS} before and after "
                      "a '.' decimal point, no currency sign)")
    return Decimal(text), None


def parse_row(cells: list[str], line: int, now: datetime | None = None,
              columns: tuple[str, ...] = COLUMNS) -> tuple[LedgerRow | None, list[str]]:
    """A row from its cells, or the problems found (each in words, naming the column).

    ``now`` (default: the clock) is what "in the future" is measured against."""
    if len(cells) != len(columns):
        missing = f", missing column(s) {', '.join(columns[len(cells):])}" if len(cells) < len(columns) else ""
        return None, [f"{len(cells)} cells, expected {len(columns)} ({' | '.join(columns)}){missing}"]
    c = dict(zip(columns, cells, strict=True))
    problems: list[str] = []
    when = None
    if not _TIME.match(c["time_utc"]):
        problems.append(f"time_utc {c['time_utc']!r} is not YYYY-MM-DDTHH:MM:SSZ")
    else:
        try:
            when = datetime.strptime(c["time_utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            problems.append(f"time_utc {c['time_utc']!r} is not a valid date and time")
    if when is not None:
        now = now or datetime.now(UTC)
        if when > now + FUTURE_TOLERANCE:
            problems.append(f"time_utc {c['time_utc']} is in the future (now {now:%Y-%m-%dT%H:%M:%SZ}); rows are "
                            "written when they happen")
    if not _ID.match(c["run_id"]):
        problems.append(f"run_id {c['run_id']!r} must be letters, digits, '.', '_', ':' or '-'")
    if c["status"] not in STATUSES:
        problems.append(f"status {c['status']!r} must be one of {', '.join(STATUSES)}")
    if not _ID.match(c["provider"]):
        problems.append(f"provider {c['provider']!r} must be one word")
    res = _RESOURCE.match(c["resource"])
    if res is None:
        problems.append(f"resource {c['resource']!r} must read '<gpu type> x <count>', e.g. 'RTX 4090 x 2'")
    billed = None
    if _NEGATIVE.match(c["billed_s"]):
        problems.append(f"negative billed_s {c['billed_s']!r}")
    elif not _WHOLE.match(c["billed_s"]):
        problems.append(f"billed_s {c['billed_s']!r} is not a whole number of seconds (ASCII digits 0-9)")
    else:
        billed = int(c["billed_s"])
    rate, err = _money(c["rate_per_hour"], "rate_per_hour")
    if err:
        problems.append(err)
    cost, err = _money(c["cost"], "cost")
    if err:
        problems.append(err)
    if c["currency"] != CURRENCY:
        problems.append(f"unknown currency {c['currency']!r} (this ledger records {CURRENCY} only)")
    if c["experiment"] != "-" and not _ID.match(c["experiment"]):
        problems.append(f"experiment {c['experiment']!r} must be an id or '-'")
    if c["resource_id"] != "-" and not _ID.match(c["resource_id"]):
        problems.append(f"resource_id {c['resource_id']!r} must be the provider's id or '-'")
    for name in ("prev_hash", "row_hash"):
        if name in c and not _HASH.match(c[name]):
            problems.append(f"{name} {c[name]!r} is not 16 hex digits")
    if problems:
        return None, problems
    assert when is not None and res is not None and billed is not None and rate is not None and cost is not None
    row = LedgerRow(
        when, c["run_id"], c["status"], c["provider"], res["gpu"], int(res["count"]), billed, rate, cost,
        None if c["experiment"] == "-" else c["experiment"], c["purpose"], c["resource_id"],
        currency=c["currency"], line=line, prev_hash=c.get("prev_hash", ""), row_hash=c.get("row_hash", ""),
    )
    if abs(row.cost - row.recomputed_cost) > COST_TOLERANCE:
        exact = row.recomputed_cost.quantize(COST_PLACES, rounding=ROUND_HALF_UP)
        return None, [f"cost {c['cost']} does not match rate_per_hour {c['rate_per_hour']} x billed_s "
                      f"{billed} / 3600 = {exact}"]
    return row, []


def _header(cells: list[str]) -> tuple[str, ...] | None:
    return next((cols for cols in (COLUMNS, COLUMNS_V1) if tuple(cells) == cols), None)


def _run_problems(row: LedgerRow, earlier: list[LedgerRow], chained: bool) -> list[str]:
    """What is wrong with ``row`` given the earlier rows of its run (file order)."""
    by = {r.status: r for r in earlier}
    what = f"{row.status} row of run {row.run_id!r}"
    if row.status in ONCE and row.status in by:
        return [f"duplicate run id {row.run_id!r} with status {row.status} (first on line {by[row.status].line})"]
    opened = by.get("open")
    if opened is None:
        if row.status == "open" or not chained:
            return []  # old ledgers held settled rows without an open row
        return [f"{what} has no open row before it (an open row is written before anything is created; "
                "was it deleted?)"]
    if row.status == "open":
        return []
    problems = []
    pod_row = by.get("started") or opened
    for field in ("provider", "resource", "experiment", "purpose"):
        if getattr(row, field) != getattr(opened, field):
            problems.append(f"{what} has {field} {getattr(row, field) or '-'!r}, its open row (line {opened.line}) "
                            f"{getattr(opened, field) or '-'!r}")
    if row.status == "started":
        if "settled" in by or "overrun" in by:
            problems.append(f"{what} comes after the run was settled (line {by.get('settled', opened).line})")
        if not row.has_pod:
            problems.append(f"{what} names no pod (resource_id '-')")
        if opened.has_pod:
            problems.append(f"{what} follows an open row that already names pod {opened.resource_id}")
        if row.rate_per_hour < opened.rate_per_hour:
            problems.append(f"{what} meters at {row.rate_per_hour}/h, below its open row's priced rate "
                            f"{opened.rate_per_hour}/h (line {opened.line}); the kit meters at the higher")
        if row.recomputed_cost > opened.recomputed_cost + COST_TOLERANCE:
            problems.append(f"{what}'s worst case {row.cost} is above its open row's {opened.cost} (line "
                            f"{opened.line})")
        return problems
    if row.resource_id != pod_row.resource_id:
        problems.append(f"{what} names pod {row.resource_id}, line {pod_row.line} names {pod_row.resource_id}")
    if row.status in ("settled", "overrun") and row.rate_per_hour != pod_row.rate_per_hour:
        problems.append(f"{what} has rate_per_hour {row.rate_per_hour}, line {pod_row.line} "
                        f"{pod_row.rate_per_hour}")
    if row.status == "settled":
        if "overrun" in by:
            problems.append(f"{what} comes after its overrun row (line {by['overrun'].line})")
        if chained and row.billed_s > pod_row.billed_s:
            problems.append(f"{what} bills {row.billed_s} s, above the {pod_row.billed_s} s reserved (line "
                            f"{pod_row.line}); the seconds beyond go in an overrun row")
    if row.status == "overrun":
        settled = by.get("settled")
        if settled is None:
            problems.append(f"{what} has no settled row before it")
        elif settled.billed_s != pod_row.billed_s:
            problems.append(f"{what} follows a settlement of {settled.billed_s} s (line {settled.line}), short of "
                            f"the {pod_row.billed_s} s reserved: an overrun only counts seconds beyond them")
        if row.billed_s < 1:
            problems.append(f"{what} bills 0 s")
    if row.status == "reconciled" and not row.has_pod:
        problems.append(f"{what} names no pod")
    return problems


def parse(text: str, path: Path, now: datetime | None = None) -> list[LedgerRow]:
    """Every row of a ledger's text, in file order.

    Args:
        now: what "in the future" is measured against (default: the clock).

    Raises:
        LedgerError: naming each bad line: no or wrong header, a row with missing cells, a bad number,
            a negative amount, an unknown currency or status, a cost that is not rate x seconds,
            a date in the future, a run's rows out of order or disagreeing with its open row, and in a
            chained table an edited row (its hash), a deleted or inserted row (the link of the next).
    """
    return _parse(text, path, now)[0]


def _parse(text: str, path: Path, now: datetime | None) -> tuple[list[LedgerRow], str | None]:
    """(rows, tail): tail is the prev_hash the next appended row must carry, or None when the file has
    no chained table yet."""
    lines = text.splitlines()
    problems: list[tuple[int, str]] = []
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("|")), None)
    if start is None:
        return [], None  # free text only (or empty): no charges yet
    rows: list[LedgerRow] = []
    runs: dict[str, list[LedgerRow]] = {}
    i = start
    legacy_lines: list[str] = []
    prev: tuple[str, int] | None = None  # (row_hash as written, line) of the last chained row
    hashes: dict[str, int] = {}
    columns = _header(_split(lines[i]))
    if columns is None:
        header = _split(lines[i])
        missing = [c for c in COLUMNS if c not in header]
        what = f"missing column(s) {', '.join(missing)}" if missing else "columns in another order or extra"
        raise LedgerError(path, [(i + 1, f"table header must be | {' | '.join(COLUMNS)} |, found "
                                  f"{lines[i].strip()!r} ({what})")])
    while True:
        if i + 1 >= len(lines) or not all(_SEPARATOR_CELL.match(c) for c in _split(lines[i + 1])):
            raise LedgerError(path, [(i + 2, "the header must be followed by a |---|---|... separator line")])
        chained = columns == COLUMNS
        genesis = GENESIS if not legacy_lines else legacy_genesis(legacy_lines)
        i += 2
        next_table = None
        while i < len(lines):
            n, text_line = i + 1, lines[i]
            if not text_line.strip():
                # An old table may be followed by one blank line and the chained table the kit appended.
                if (not chained and i + 1 < len(lines) and _header(_split(lines[i + 1])) == COLUMNS):
                    next_table = i + 1
                    break
                problems.append((n, "blank line after the table header (rows after it would not join the table)"))
                i += 1
                continue
            if not text_line.lstrip().startswith("|"):
                problems.append((n, "not a table row: the table must be the last thing in the file"))
                i += 1
                continue
            cells = _split(text_line)
            row, errs = parse_row(cells, n, now, columns)
            problems.extend((n, e) for e in errs)
            if chained and len(cells) == len(COLUMNS):
                problems.extend((n, e) for e in _chain_problems(_raw_cells(text_line), n, genesis, prev, hashes))
                prev = (cells[-1], n)
                hashes.setdefault(cells[-1], n)
            elif not chained:
                legacy_lines.append(text_line)
            if row is not None:
                errs = _run_problems(row, runs.get(row.run_id, []), chained)
                problems.extend((n, e) for e in errs)
                if not errs:
                    runs.setdefault(row.run_id, []).append(row)
                    rows.append(row)
            i += 1
        if next_table is None:
            break
        i = next_table
        columns = COLUMNS
    if problems:
        raise LedgerError(path, sorted(problems, key=lambda p: p[0]))
    if columns != COLUMNS:
        return rows, None
    return rows, prev[0] if prev is not None else genesis


def _chain_problems(cells: list[str], n: int, genesis: str, prev: tuple[str, int] | None,
                    hashes: dict[str, int]) -> list[str]:
    written_prev, written_hash = cells[-2], cells[-1]
    problems = []
    if _HASH.match(written_prev) and _HASH.match(written_hash) and row_hash(written_prev, cells[:-2]) != written_hash:
        problems.append("this row was edited after it was written (its row_hash does not match its cells)")
    expected, above = (genesis, None) if prev is None else prev
    if written_prev != expected:
        if above is None:
            problems.append("prev_hash does not start the chain: a row above it was deleted, or the rows of the "
                            "old table above were edited" if genesis != GENESIS else
                            "prev_hash does not start the chain: a row above it was deleted")
        elif written_prev in hashes:
            problems.append(f"prev_hash points at line {hashes[written_prev]}, not at the row above (line {above}): "
                            "rows were moved or inserted")
        else:
            problems.append(f"prev_hash is not the row_hash of the row above (line {above}): a row between them was "
                            "deleted, or line {above} was rewritten with a new hash".replace("{above}", str(above)))
    return problems


class Ledger:
    """The ledger file and its lock.

    Args:
        path: the Markdown file (need not exist yet: it is created with a header on first append).
        lock_path: the lock file shared by every writer of this ledger (and the reservations).
        title: heading for a newly created file.
        clock: ``() -> datetime`` (UTC) the future-date check measures against; injectable for tests.
    """

    def __init__(self, path: Path | str, lock_path: Path | str, title: str = "Cloud spend ledger",
                 clock=None) -> None:
        self.path = Path(path)
        self.lock_path = Path(lock_path)
        self.title = title
        self.clock = clock or (lambda: datetime.now(UTC))
        # One FileLock object per ledger: it is re-entrant in a thread, two objects on one file are not.
        self.lock = FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT_S)

    def locked(self):
        """Context manager holding the ledger lock. Raises ConfigError when it cannot be had in 60 s."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        return _Locked(self)

    def read(self) -> list[LedgerRow]:
        """The rows (``[]`` when the file does not exist), read under the lock so that a row being
        appended is never seen half-written. Raises :class:`LedgerError`."""
        with self.locked():
            if not self.path.exists():
                rows: list[LedgerRow] = []
            else:
                rows = parse(self.path.read_text(encoding="utf-8"), self.path, self.clock())
            self._check_head(rows)
            return rows

    @property
    def head_path(self) -> Path:
        """Where this machine notes the last row it appended (beside the lock; not in git)."""
        return self.lock_path.parent / f"{self.path.name}.head"

    def _check_head(self, rows: list[LedgerRow]) -> None:
        """A chain cannot show that rows were cut from its end: the last row this machine wrote must still
        be there, with the same hash."""
        try:
            line_text, _, want = self.head_path.read_text(encoding="utf-8").strip().partition(" ")
            line = int(line_text)
        except (OSError, ValueError):
            return
        if not any(r.line == line and r.row_hash == want for r in rows):
            raise LedgerError(self.path, [(line, f"the row this machine appended last (line {line}, row_hash {want}) "
                                                 "is gone or changed: rows were removed from the end of the "
                                                 f"ledger (this check's record: {self.head_path})")])

    def _write_head(self, row: LedgerRow) -> None:
        tmp = self.head_path.with_name(f".{self.head_path.name}.{os.getpid()}.tmp")
        tmp.write_text(f"{row.line} {row.row_hash}\n", encoding="utf-8")
        os.replace(tmp, self.head_path)

    def append(self, *new: LedgerRow) -> list[LedgerRow]:
        """Append rows under the lock, chained to the last row, and return them with their line numbers
        and hashes. The whole ledger, with the new rows, is validated first; on any problem nothing is
        written. An old-format table is never rewritten: a chained table is appended after it.

        Raises:
            LedgerError: the ledger or a new row is malformed (a duplicate run id and status included).
            ConfigError: the lock could not be taken.
        """
        with self.locked():
            old_text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
            now = self.clock()
            old_rows, tail = _parse(old_text, self.path, now)  # refuses a broken ledger before anything else
            self._check_head(old_rows)
            prefix = "" if not old_text or old_text.endswith("\n") else "\n"
            if not old_text:
                prefix = f"# {self.title}\n\nAppend-only: the kit adds rows; never edit or remove one.\n\n"
            lines = old_text.splitlines()
            headers = [_header(_split(ln)) for ln in lines if ln.lstrip().startswith("|")]
            if not any(h is not None for h in headers):
                prefix += ("" if not old_text.strip() else "\n") + "\n".join(header_lines()) + "\n"
                prev = GENESIS
            elif COLUMNS not in headers:  # an old table: the chained one goes after it
                legacy = [ln for ln in lines if ln.lstrip().startswith("|")][2:]
                prefix += "\n" + "\n".join(header_lines()) + "\n"
                prev = legacy_genesis(legacy)
            else:
                assert tail is not None
                prev = tail
            body = []
            for r in new:
                line = format_row(r, prev)
                prev = line.rsplit("|", 2)[-2].strip()
                body.append(line + "\n")
            addition = prefix + "".join(body)
            rows = parse(old_text + addition, self.path, now)  # validates old and new together
            with open(self.path, "a", encoding="utf-8", newline="\n") as fh:
                fh.write(addition)
                fh.flush()
                os.fsync(fh.fileno())
            written = rows[len(rows) - len(new):]
            if written:
                self._write_head(written[-1])
            return written


class _Locked:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def __enter__(self) -> Ledger:
        try:
            self.ledger.lock.acquire()
        except Timeout:
            raise ConfigError(self.ledger.lock_path, "", f"could not lock the ledger within {LOCK_TIMEOUT_S:g} s; "
                              "another process holds it") from None
        return self.ledger

    def __exit__(self, *exc: object) -> None:
        self.ledger.lock.release()
