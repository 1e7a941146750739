"""The spend ledger: a Markdown table of charge events that people read and the kit parses and appends to.

Free text, then one table whose columns are ``COLUMNS`` (a hash chain in the last two), then blank lines at most.
A run's rows: ``open``, ``started``, ``settled``, ``overrun``, ``reconciled``, and the events
``rate-unknown`` and ``terminate-failed`` (no cost). ``cost = rate_per_hour * billed_s / 3600``.
Writes only append, under one lock, one ``write`` per append: a row lands whole or the file is cut
back to what it was. A ledger that does not parse is an error naming each bad line, and nothing is
written to it. The format, the chain and what each guard keeps: docs/design/ledger.md.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_distcheck.errors import ConfigError, at_line
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.textfile import LEDGER, read_text

COLUMNS = (
    "time_utc", "run_id", "status", "provider", "resource", "billed_s", "rate_per_hour", "cost", "currency",
    "experiment", "purpose", "resource_id", "prev_hash", "row_hash",
)
STATUSES = ("open", "started", "settled", "overrun", "reconciled", "rate-unknown", "terminate-failed")
EVENTS = ("rate-unknown", "terminate-failed")  # rows that record what happened and cost nothing
ONCE = ("open", "started", "settled", "overrun", "rate-unknown")  # at most one row of each per run
CURRENCY = "USD"
COST_PLACES = Decimal("0.0001")
# A written cost may differ from rate * seconds / 3600 by its rounding to 4 places, no more.
COST_TOLERANCE = Decimal("0.00005")
GENESIS = "0" * 16
# Rows dated later than this past the reader's clock are refused (two machines' clocks may differ a little).
FUTURE_TOLERANCE = timedelta(days=1)
MAX_DIGITS = 12  # billed_s, rate and cost: more digits than any real bill
MAX_BYTES = 64 * 2**20  # 64 MiB: some 250,000 rows
LOCK_WAIT_S = 120.0  # a writer that cannot have the lock by then is refused (before anything is created)
LOCK_WAIT_AFTER_CREATE_S = 900.0  # a pod exists: its row waits this long for the lock
LOCK_NOTICE_S = 2.0  # a writer waiting this long says who holds the lock
FREE_MARGIN = 4096  # bytes free beyond the row itself before an append is tried
REPAIR_COMMAND = "distcheck budget --repair-torn-line"

TORN = N_("cut short: the last line has no line end and does not parse (a write interrupted by a kill or a "
          "power cut); the {rows} row(s) above it are whole. Repair: `{command}` moves this line's bytes to "
          "{where} and leaves every other row as it is")
TORN_WHERE = N_("{name}.torn-<time>.txt beside the ledger lock")
WRITE_FAILED = N_("could not append to the ledger ({reason}; the disk holding {folder} has {free:,} bytes free, "
                  "{need:,} needed). The ledger is as it was: its {rows} row(s) are untouched and none of the new "
                  "row's bytes were kept")
DISK_FULL = N_("the disk is full")
NO_FOLDER = N_("could not append to the ledger: its folder {folder} does not exist (a misspelt budget.ledger in the "
               "workspace file? else create the folder); nothing was written")
SHORT_WRITE = N_("only {done} of {size} bytes were written")
READ_BACK_DIFFERS = N_("the row read back differs from the row written")
CUT_BACK_FAILED = N_("could not append to the ledger ({reason}) and could not cut the partial row back ({cut}): "
                     "its last line may be torn; `{command}` repairs it")
LOCK_WAITING = N_("distcheck budget: waiting for the ledger lock {lock}, held by {holder}")
LOCK_REFUSED = N_("could not lock the ledger within {wait:g} s: it is held by {holder}; {kept}. Run again once that "
                  "process is done (or end it)")
NOTHING_WRITTEN = N_("nothing was written")
UNKNOWN_HOLDER = N_("another process (it recorded no pid)")

# What a read finds wrong with a line: the column names and status keywords stay as they are.
CELL_COUNT = N_("{cells} cells, expected {expected} ({columns}){missing}")
MISSING_COLUMNS = N_("missing column(s) {columns}")
# A row short of cells: which ones, when the cells it has fit their columns only one way (or, one short, a few).
LOOKS_MISSING = N_("the {columns} cell(s) look missing (every other cell fits its column)")
ONE_OF_MISSING = N_("one cell of {columns} looks missing (every other cell fits its column either way)")
BAD_TIME = N_("time_utc {value!r} is not YYYY-MM-DDTHH:MM:SSZ")
INVALID_TIME = N_("time_utc {value!r} is not a valid date and time")
FUTURE_TIME = N_("time_utc {value} is in the future (now {now}); rows are written when they happen")
BAD_RUN_ID = N_("run_id {value!r} must be letters, digits, '.', '_', ':' or '-'")
BAD_STATUS = N_("status {value!r} must be one of {statuses}")
BAD_PROVIDER = N_("provider {value!r} must be one word")
BAD_RESOURCE = N_("resource {value!r} must read '<gpu type> x <count>', e.g. 'RTX 4090 x 2'")
NEGATIVE = N_("negative {name} {value!r}")
NOT_WHOLE_SECONDS = N_("billed_s {value!r} is not a whole number of seconds (ASCII digits 0-9)")
NOT_A_NUMBER = N_("{name} {value!r} is not a number (ASCII digits 0-9, at most {digits} before and after a '.' "
                  "decimal point, no currency sign)")
DECIMAL_COMMA = N_("{name} {value!r} is not a number: use '.' as the decimal point ({fixed})")
BAD_CURRENCY = N_("unknown currency {value!r} (this ledger records {currency} only)")
BAD_EXPERIMENT = N_("experiment {value!r} must be an id or '-'")
BAD_RESOURCE_ID = N_("resource_id {value!r} must be the provider's id or '-'")
BAD_HASH = N_("{name} {value!r} is not 16 hex digits")
COST_MISMATCH = N_("cost {cost} does not match rate_per_hour {rate} x billed_s {billed} / 3600 = {exact}")
# A run's rows against each other; ROW_OF_RUN is the {what} of the messages after it.
ROW_OF_RUN = N_("{status} row of run {run!r}")
DUPLICATE_RUN = N_("duplicate run id {run!r} with status {status} (first on line {line})")
NO_OPEN_ROW = N_("{what} has no open row before it (an open row is written before anything is created; "
                 "was it deleted?)")
DIFFERS_FROM_OPEN = N_("{what} has {field} {value!r}, its open row (line {line}) {opened!r}")
STARTED_AFTER_SETTLED = N_("{what} comes after the run was settled (line {line})")
STARTED_NO_POD = N_("{what} names no pod (resource_id '-')")
OPEN_HAS_POD = N_("{what} follows an open row that already names pod {pod}")
BELOW_PRICED_RATE = N_("{what} meters at {rate}/h, below its open row's priced rate {priced}/h (line {line}); the "
                       "kit meters at the higher")
WORST_ABOVE_OPEN = N_("{what}'s worst case {cost} is above its open row's {opened} (line {line})")
OTHER_POD = N_("{what} names pod {pod}, line {line} names {other}")
OTHER_RATE = N_("{what} has rate_per_hour {rate}, line {line} {other}")
AFTER_OVERRUN = N_("{what} comes after its overrun row (line {line})")
BILLS_ABOVE_RESERVED = N_("{what} bills {seconds} s, above the {reserved} s reserved (line {line}); the seconds "
                          "beyond go in an overrun row")
NO_SETTLED_ROW = N_("{what} has no settled row before it")
SHORT_SETTLEMENT = N_("{what} follows a settlement of {seconds} s (line {line}), short of the {reserved} s reserved: "
                      "an overrun only counts seconds beyond them")
BILLS_ZERO = N_("{what} bills 0 s")
NAMES_NO_POD = N_("{what} names no pod")
EVENT_BILLS = N_("{what} bills {seconds} s: an event row records what happened and costs nothing")
# The table's shape and its hash chain.
BAD_HEADER = N_("table header must be | {columns} |, found {found!r} ({what})")
COLUMNS_REORDERED = N_("columns in another order or extra")
NO_SEPARATOR = N_("the header must be followed by a |---|---|... separator line")
BLANK_LINE = N_("blank line in the table (rows after it would not join the table)")
NOT_A_ROW = N_("not a table row: the table must be the last thing in the file")
EDITED_ROW = N_("this row is not as the kit wrote it: edited since, or typed by hand (its row_hash does not match "
                 "its cells)")
CHAIN_START = N_("prev_hash does not start the chain: a row above it was deleted")
CHAIN_MOVED = N_("prev_hash points at line {line}, not at the row above (line {above}): rows were moved or inserted")
CHAIN_BROKEN = N_("prev_hash is not the row_hash of the row above (line {above}): a row between them was deleted, "
                  "or line {above} was rewritten with a new hash")
HEAD_GONE = N_("the row this machine appended last (line {line}, row_hash {hash}) is gone or changed: rows were "
               "removed from the end of the ledger (this check's record: {record})")
# A LedgerError's text: one problem, or each (at most 10) after its line.
PROBLEMS = N_("{n} problems")
AND_MORE = N_(" (and {n} more)")
NOTHING_WRITTEN_TORN = N_(". Nothing was written to it")
NOTHING_WRITTEN_RESTORE = N_(". Nothing was written to it; the kit only appends: undo the change to those lines "
                             "(git diff, or once committed git log -p -- {ledger}, shows it) rather than editing them "
                             "further; a plain git checkout of the file would also drop the rows appended since its "
                             "last commit")
NOT_TORN = N_("not cut: the last line has all {n} cells, so it is a whole row, not a write cut short (`{command}` "
              "cuts only a line an interrupted write left without all its cells); fix what is named instead")

_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
_RESOURCE = re.compile(r"^(?P<gpu>\S(?:.*\S)?) x (?P<count>[1-9][0-9]*)$")
_DECIMAL = re.compile(r"^[0-9]{1,%d}(\.[0-9]{1,%d})?$" % (MAX_DIGITS, MAX_DIGITS))
_WHOLE = re.compile(r"^[0-9]{1,%d}$" % MAX_DIGITS)
_NEGATIVE = re.compile(r"^-[0-9]+(\.[0-9]+)?$")
_HASH = re.compile(r"^[0-9a-f]{16}$")
_SEPARATOR_CELL = re.compile(r"^:?-{3,}:?$")
_COMMA_DECIMAL = re.compile(r"^[0-9]+,[0-9]+$")
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
        prev_hash, row_hash: the hash chain (empty for a row not yet written).
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
    """The ledger does not parse. ``problems`` is a list of (line number, what is wrong); ``torn`` is the
    line cut short by an interrupted write, when that is the only problem."""

    def __init__(self, path: Path, problems: list[tuple[int, str]], torn: int | None = None) -> None:
        self.problems = problems
        self.torn = torn
        shown = "; ".join(f"{at_line(n)}: {p}" for n, p in problems[:10])
        more = _(AND_MORE).format(n=len(problems) - 10) if len(problems) > 10 else ""
        where = at_line(problems[0][0]) if len(problems) == 1 else _(PROBLEMS).format(n=len(problems))
        advice = _(NOTHING_WRITTEN_TORN) if torn is not None else _(NOTHING_WRITTEN_RESTORE).format(
            ledger=_shown(path))
        super().__init__(path, where, (problems[0][1] if len(problems) == 1 else shown + more) + advice)


def _shown(path: Path) -> str:
    """``path`` as a git command in the working directory takes it (relative when it is below it), quoted."""
    try:
        path = Path(path).resolve().relative_to(Path.cwd().resolve())
    except (OSError, ValueError):
        pass
    return shlex.quote(path.as_posix())


class LedgerWriteError(ConfigError):
    """An append failed (a full disk, a short write); the ledger is as it was before it."""


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


def format_row(row: LedgerRow, prev_hash: str) -> str:
    """The row as one Markdown table line (no newline), chained to ``prev_hash`` (the row above's hash)."""
    cells = _cells(row)
    cells += [prev_hash, row_hash(prev_hash, cells)]
    return "| " + " | ".join(cells) + " |"


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


def header_lines() -> list[str]:
    """The table's header and separator lines."""
    return ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]


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
        return None, _(NEGATIVE).format(name=name, value=text)
    if _COMMA_DECIMAL.match(text):
        return None, _(DECIMAL_COMMA).format(name=name, value=text, fixed=text.replace(",", "."))
    if not _DECIMAL.match(text):
        return None, _(NOT_A_NUMBER).format(name=name, value=text, digits=MAX_DIGITS)
    return Decimal(text), None


def parse_row(cells: list[str], line: int, now: datetime | None = None) -> tuple[LedgerRow | None, list[str]]:
    """A row from its cells, or the problems found (each in words, naming the column).

    ``now`` (default: the clock) is what "in the future" is measured against."""
    if len(cells) != len(COLUMNS):
        missing = _missing_cells(cells)
        return None, [_(CELL_COUNT).format(cells=len(cells), expected=len(COLUMNS), columns=" | ".join(COLUMNS),
                                           missing=missing)]
    c = dict(zip(COLUMNS, cells, strict=True))
    problems: list[str] = []
    when = None
    if not _TIME.match(c["time_utc"]):
        problems.append(_(BAD_TIME).format(value=c["time_utc"]))
    else:
        try:
            when = datetime.strptime(c["time_utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            problems.append(_(INVALID_TIME).format(value=c["time_utc"]))
    if when is not None:
        now = now or datetime.now(UTC)
        if when > now + FUTURE_TOLERANCE:
            problems.append(_(FUTURE_TIME).format(value=c["time_utc"], now=f"{now:%Y-%m-%dT%H:%M:%SZ}"))
    if not _ID.match(c["run_id"]):
        problems.append(_(BAD_RUN_ID).format(value=c["run_id"]))
    if c["status"] not in STATUSES:
        problems.append(_(BAD_STATUS).format(value=c["status"], statuses=", ".join(STATUSES)))
    if not _ID.match(c["provider"]):
        problems.append(_(BAD_PROVIDER).format(value=c["provider"]))
    res = _RESOURCE.match(c["resource"])
    if res is None:
        problems.append(_(BAD_RESOURCE).format(value=c["resource"]))
    billed = None
    if _NEGATIVE.match(c["billed_s"]):
        problems.append(_(NEGATIVE).format(name="billed_s", value=c["billed_s"]))
    elif not _WHOLE.match(c["billed_s"]):
        problems.append(_(NOT_WHOLE_SECONDS).format(value=c["billed_s"]))
    else:
        billed = int(c["billed_s"])
    rate, err = _money(c["rate_per_hour"], "rate_per_hour")
    if err:
        problems.append(err)
    cost, err = _money(c["cost"], "cost")
    if err:
        problems.append(err)
    if c["currency"] != CURRENCY:
        problems.append(_(BAD_CURRENCY).format(value=c["currency"], currency=CURRENCY))
    if c["experiment"] != "-" and not _ID.match(c["experiment"]):
        problems.append(_(BAD_EXPERIMENT).format(value=c["experiment"]))
    if c["resource_id"] != "-" and not _ID.match(c["resource_id"]):
        problems.append(_(BAD_RESOURCE_ID).format(value=c["resource_id"]))
    for name in ("prev_hash", "row_hash"):
        if not _HASH.match(c[name]):
            problems.append(_(BAD_HASH).format(name=name, value=c[name]))
    if problems:
        return None, problems
    assert when is not None and res is not None and billed is not None and rate is not None and cost is not None
    row = LedgerRow(
        when, c["run_id"], c["status"], c["provider"], res["gpu"], int(res["count"]), billed, rate, cost,
        None if c["experiment"] == "-" else c["experiment"], c["purpose"], c["resource_id"],
        currency=c["currency"], line=line, prev_hash=c["prev_hash"], row_hash=c["row_hash"],
    )
    if abs(row.cost - row.recomputed_cost) > COST_TOLERANCE:
        exact = row.recomputed_cost.quantize(COST_PLACES, rounding=ROUND_HALF_UP)
        return None, [_(COST_MISMATCH).format(cost=c["cost"], rate=c["rate_per_hour"], billed=billed, exact=exact)]
    return row, []


def _fits(column: str, value: str) -> bool:
    """Whether ``value`` has the form of ``column``'s cells (not whether it is right)."""
    form = _FORMS[column]
    return form(value) if callable(form) else form.match(value) is not None


_FORMS: dict[str, re.Pattern[str] | Callable[[str], bool]] = {
    "time_utc": _TIME, "run_id": _ID, "status": STATUSES.__contains__, "provider": _ID, "resource": _RESOURCE,
    "billed_s": _WHOLE, "rate_per_hour": _DECIMAL, "cost": _DECIMAL, "currency": re.compile(r"^[A-Z]{3}$"),
    "experiment": lambda v: v == "-" or _ID.match(v) is not None, "purpose": lambda v: True,
    "resource_id": lambda v: v == "-" or _ID.match(v) is not None, "prev_hash": _HASH, "row_hash": _HASH,
}


def _missing_cells(cells: list[str]) -> str:
    """``", "`` and which columns a row short of cells lacks, when its cells fit the columns in order only one
    way (one cell short: or which few it could be); else ``""`` (the count says it all)."""
    short = len(COLUMNS) - len(cells)
    if short <= 0:
        return ""
    fits = [[_fits(col, v) for col in COLUMNS] for v in cells]
    ways = [gap for gap in itertools.combinations(range(len(COLUMNS)), short)
            if all(fits[i][j] for i, j in enumerate(j for j in range(len(COLUMNS)) if j not in gap))]
    if len(ways) == 1:
        return ", " + _(LOOKS_MISSING).format(columns=", ".join(COLUMNS[j] for j in ways[0]))
    if ways and short == 1:
        return ", " + _(ONE_OF_MISSING).format(columns=", ".join(COLUMNS[gap[0]] for gap in ways))
    return ""


def _run_problems(row: LedgerRow, earlier: list[LedgerRow]) -> list[str]:
    """What is wrong with ``row`` given the earlier rows of its run (file order)."""
    by = {r.status: r for r in earlier}
    what = _(ROW_OF_RUN).format(status=row.status, run=row.run_id)
    if row.status in ONCE and row.status in by:
        return [_(DUPLICATE_RUN).format(run=row.run_id, status=row.status, line=by[row.status].line)]
    opened = by.get("open")
    if opened is None:
        if row.status == "open":
            return []
        return [_(NO_OPEN_ROW).format(what=what)]
    if row.status == "open":
        return []
    problems = []
    pod_row = by.get("started") or opened
    for field in ("provider", "resource", "experiment", "purpose"):
        if getattr(row, field) != getattr(opened, field):
            problems.append(_(DIFFERS_FROM_OPEN).format(what=what, field=field, value=getattr(row, field) or "-",
                                                        line=opened.line, opened=getattr(opened, field) or "-"))
    if row.status == "started":
        if "settled" in by or "overrun" in by:
            problems.append(_(STARTED_AFTER_SETTLED).format(what=what, line=by.get("settled", opened).line))
        if not row.has_pod:
            problems.append(_(STARTED_NO_POD).format(what=what))
        if opened.has_pod:
            problems.append(_(OPEN_HAS_POD).format(what=what, pod=opened.resource_id))
        if row.rate_per_hour < opened.rate_per_hour:
            problems.append(_(BELOW_PRICED_RATE).format(what=what, rate=row.rate_per_hour, priced=opened.rate_per_hour,
                                                        line=opened.line))
        if row.recomputed_cost > opened.recomputed_cost + COST_TOLERANCE:
            problems.append(_(WORST_ABOVE_OPEN).format(what=what, cost=row.cost, opened=opened.cost, line=opened.line))
        return problems
    if row.resource_id != pod_row.resource_id:
        problems.append(_(OTHER_POD).format(what=what, pod=row.resource_id, line=pod_row.line,
                                            other=pod_row.resource_id))
    if row.status in ("settled", "overrun") and row.rate_per_hour != pod_row.rate_per_hour:
        problems.append(_(OTHER_RATE).format(what=what, rate=row.rate_per_hour, line=pod_row.line,
                                             other=pod_row.rate_per_hour))
    if row.status == "settled":
        if "overrun" in by:
            problems.append(_(AFTER_OVERRUN).format(what=what, line=by["overrun"].line))
        if row.billed_s > pod_row.billed_s:
            problems.append(_(BILLS_ABOVE_RESERVED).format(what=what, seconds=row.billed_s, reserved=pod_row.billed_s,
                                                           line=pod_row.line))
    if row.status == "overrun":
        settled = by.get("settled")
        if settled is None:
            problems.append(_(NO_SETTLED_ROW).format(what=what))
        elif settled.billed_s != pod_row.billed_s:
            problems.append(_(SHORT_SETTLEMENT).format(what=what, seconds=settled.billed_s, line=settled.line,
                                                       reserved=pod_row.billed_s))
        if row.billed_s < 1:
            problems.append(_(BILLS_ZERO).format(what=what))
    if row.status in ("reconciled", *EVENTS) and not row.has_pod:
        problems.append(_(NAMES_NO_POD).format(what=what))
    if row.status in EVENTS and row.billed_s != 0:
        problems.append(_(EVENT_BILLS).format(what=what, seconds=row.billed_s))
    return problems


def parse(text: str, path: Path, now: datetime | None = None) -> list[LedgerRow]:
    """Every row of a ledger's text, in file order.

    Args:
        now: what "in the future" is measured against (default: the clock).

    Raises:
        LedgerError: naming each bad line: no or wrong header, a row with missing cells, a bad number,
            a negative amount, an unknown currency or status, a cost that is not rate x seconds,
            a date in the future, a run's rows out of order or disagreeing with its open row, an edited
            row (its hash), a deleted or inserted row (the link of the next), a last line cut short.
    """
    return _Table.read(text, path, now).rows


class _Table:
    """A ledger's table as parsed so far: its rows, each run's rows, and the hash the next row chains to.

    :meth:`read` parses a whole text; :meth:`add` checks one more line against what came before, so an
    append validates its new rows without parsing the file again. Blank lines may end the file; as Markdown
    ends a table there, rows after them come under the header again (:meth:`Ledger.append` writes it)."""

    def __init__(self, path: Path, now: datetime, first_row_line: int | None) -> None:
        self.path = path
        self.now = now
        self.next_line = first_row_line  # 1-based line the next row goes on; None: no table yet
        self.rows: list[LedgerRow] = []
        self.runs: dict[str, list[LedgerRow]] = {}
        self.prev: tuple[str, int] | None = None  # (row_hash as written, line) of the last row
        self.hashes: dict[str, int] = {}
        self.gap: int | None = None  # the first of the blank lines just read, before any line that is not
        self.resumed = False  # the last line was the header again, after blank lines: its separator is next

    @property
    def tail(self) -> str:
        """The prev_hash the next appended row carries."""
        return self.prev[0] if self.prev is not None else GENESIS

    @classmethod
    def read(cls, text: str, path: Path, now: datetime | None = None) -> _Table:
        lines = text.splitlines()
        now = now or datetime.now(UTC)
        start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("|")), None)
        if start is None:
            return cls(path, now, None)  # free text only (or empty): no charges yet
        if tuple(_split(lines[start])) != COLUMNS:
            header = _split(lines[start])
            missing = [c for c in COLUMNS if c not in header]
            what = _(MISSING_COLUMNS).format(columns=", ".join(missing)) if missing else _(COLUMNS_REORDERED)
            raise LedgerError(path, [(start + 1, _(BAD_HEADER).format(columns=" | ".join(COLUMNS),
                                                                      found=lines[start].strip(), what=what))])
        if start + 1 >= len(lines) or not _is_separator(lines[start + 1]):
            raise LedgerError(path, [(start + 2, _(NO_SEPARATOR))])
        table = cls(path, now, start + 3)
        problems: list[tuple[int, str]] = []
        for i in range(start + 2, len(lines)):
            problems.extend(table.add(lines[i]))
        if table.resumed:
            problems.append((len(lines) + 1, _(NO_SEPARATOR)))
        last = len(lines)
        if problems and not text.endswith(("\n", "\r")) and problems[-1][0] == last > start + 2 \
                and lines[-1].lstrip().startswith("|") and all(n == last for n, _p in problems) \
                and len(_split(lines[-1])) < len(COLUMNS):
            # Only the last line is wrong, it has no line end and lacks cells: a row whose write was interrupted.
            # A line with all its cells is a whole row (perhaps edited): never taken for torn, never cut.
            where = _(TORN_WHERE).format(name=path.name)
            raise LedgerError(path, [(last, _(TORN).format(rows=len(table.rows), command=REPAIR_COMMAND,
                                                           where=where))], torn=last)
        if problems:
            raise LedgerError(path, problems)
        return table

    def add(self, text_line: str) -> list[tuple[int, str]]:
        """Check the table's next line; a row without problems joins the table. Returns the problems, each
        with its line."""
        assert self.next_line is not None, "no table to add to"
        n = self.next_line
        self.next_line += 1
        if self.resumed:
            self.resumed = False
            return [] if _is_separator(text_line) else [(n, _(NO_SEPARATOR))]
        if not text_line.strip():
            self.gap = n if self.gap is None else self.gap
            return []
        gap, self.gap = self.gap, None
        if not text_line.lstrip().startswith("|"):
            return [(n, _(NOT_A_ROW))]
        cells = _split(text_line)
        if gap is not None and tuple(cells) == COLUMNS:
            self.resumed = True
            return []
        found = [(gap, _(BLANK_LINE))] if gap is not None else []
        return found + [(n, p) for p in self._row_problems(text_line, cells, n)]

    def _row_problems(self, text_line: str, cells: list[str], n: int) -> list[str]:
        row, problems = parse_row(cells, n, self.now)
        if len(cells) == len(COLUMNS):
            problems += _chain_problems(_raw_cells(text_line), self.prev, self.hashes)
            self.prev = (cells[-1], n)
            self.hashes.setdefault(cells[-1], n)
        if row is not None:
            errs = _run_problems(row, self.runs.get(row.run_id, []))
            problems += errs
            if not errs:
                self.runs.setdefault(row.run_id, []).append(row)
                self.rows.append(row)
        return problems


def _is_separator(line: str) -> bool:
    return all(_SEPARATOR_CELL.match(c) for c in _split(line))


def _chain_problems(cells: list[str], prev: tuple[str, int] | None, hashes: dict[str, int]) -> list[str]:
    written_prev, written_hash = cells[-2], cells[-1]
    problems = []
    if _HASH.match(written_prev) and _HASH.match(written_hash) and row_hash(written_prev, cells[:-2]) != written_hash:
        problems.append(_(EDITED_ROW))
    expected, above = (GENESIS, None) if prev is None else prev
    if written_prev != expected:
        if above is None:
            problems.append(_(CHAIN_START))
        elif written_prev in hashes:
            problems.append(_(CHAIN_MOVED).format(line=hashes[written_prev], above=above))
        else:
            problems.append(_(CHAIN_BROKEN).format(above=above))
    return problems


class Ledger:
    """The ledger file and its lock.

    Args:
        path: the Markdown file (need not exist yet: it is created with a header on first append).
        lock_path: the lock file shared by every writer of this ledger (and the reservations).
        title: heading for a newly created file.
        clock: ``() -> datetime`` (UTC) the future-date check measures against; injectable for tests.
        notify: receives one line while a writer waits for the lock (default: standard error).
        on_missing: called before a file that does not exist is read as empty or created; it may raise
            (a workspace whose path names no ledger while another lies beside it).
    """

    def __init__(self, path: Path | str, lock_path: Path | str, title: str = "Cloud spend ledger",
                 clock: Callable[[], datetime] | None = None, notify: Callable[[str], object] | None = None,
                 on_missing: Callable[[], None] | None = None) -> None:
        self.path = Path(path)
        self.lock_path = Path(lock_path)
        self.title = title
        self.clock = clock or (lambda: datetime.now(UTC))
        self.notify = notify or (lambda line: sys.stderr.write(line + "\n"))
        self.on_missing = on_missing
        # One FileLock object per ledger: it is re-entrant in a thread, two objects on one file are not.
        self.lock = FileLock(str(self.lock_path), timeout=LOCK_WAIT_S)

    def locked(self, wait_s: float | None = None, kept: str | None = None):
        """Context manager holding the ledger lock, waiting with backoff up to ``wait_s`` seconds (default
        ``LOCK_WAIT_S``) and saying who holds it after ``LOCK_NOTICE_S``. Raises ConfigError naming the
        holder's pid and command, ending in ``kept`` (what the refusal left as it was, in the language in use;
        default :data:`NOTHING_WRITTEN`)."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        return _Locked(self, LOCK_WAIT_S if wait_s is None else wait_s, _(NOTHING_WRITTEN) if kept is None else kept)

    @property
    def holder_path(self) -> Path:
        """Where the lock's holder notes its pid and command (beside the lock; not in git)."""
        return self.lock_path.with_name(self.lock_path.name + ".holder")

    def read(self) -> list[LedgerRow]:
        """The rows (``[]`` when the file does not exist), read under the lock so that a row being
        appended is never seen half-written. Raises :class:`LedgerError`, or ConfigError for a file
        that is not UTF-8 text, a folder, or larger than ``MAX_BYTES``."""
        with self.locked():
            return self._table().rows

    def _table(self, text: str | None = None) -> _Table:
        if text is None:
            text = self._text()
        table = _Table.read(text, self.path, self.clock())
        self._check_head(table.rows)
        return table

    def _text(self) -> str:
        if not self.path.exists() and not self.path.is_symlink():
            if self.on_missing is not None:
                self.on_missing()
            return ""
        return read_text(self.path, LEDGER, limit=MAX_BYTES)

    @property
    def head_path(self) -> Path:
        """Where this machine notes the last row it appended (beside the lock; not in git)."""
        return self.lock_path.parent / f"{self.path.name}.head"

    def _check_head(self, rows: list[LedgerRow]) -> None:
        """A chain cannot show that rows were cut from its end: the last row this machine wrote must still
        be there, with the same hash."""
        try:
            line_text, _sep, want = self.head_path.read_text(encoding="utf-8").strip().partition(" ")
            line = int(line_text)
        except (OSError, ValueError):
            return
        if not any(r.line == line and r.row_hash == want for r in rows):
            raise LedgerError(self.path, [(line, _(HEAD_GONE).format(line=line, hash=want, record=self.head_path))])

    def _write_head(self, row: LedgerRow) -> None:
        tmp = self.head_path.with_name(f".{self.head_path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(f"{row.line} {row.row_hash}\n", encoding="utf-8")
            os.replace(tmp, self.head_path)
        except OSError:  # a full disk: the record stays at an earlier row, which is still there
            tmp.unlink(missing_ok=True)

    def append(self, *new: LedgerRow, wait_s: float | None = None) -> list[LedgerRow]:
        """Append rows under the lock, chained to the last row, and return them with their line numbers
        and hashes. The ledger and the new rows are validated first; on any problem nothing is written.
        The rows go in one ``write``; a failed or short write is cut back, so the file is whole either way.

        Raises:
            LedgerError: the ledger or a new row is malformed (a duplicate run id and status included).
            LedgerWriteError: the disk is full or the write failed (the ledger is as it was).
            ConfigError: the lock could not be had within ``wait_s`` seconds (default ``LOCK_WAIT_S``).
        """
        with self.locked(wait_s):
            old_text = self._text()
            table = self._table(old_text)  # refuses a broken ledger before anything else
            prefix = "" if not old_text or old_text.endswith("\n") else "\n"
            if not old_text:
                prefix = f"# {self.title}\n\nAppend-only: the kit adds rows; never edit or remove one.\n\n"
            body, problems = [], []
            if table.next_line is None:
                prefix += ("" if not old_text.strip() else "\n") + "\n".join(header_lines()) + "\n"
                table.next_line = (old_text + prefix).count("\n") + 1
            elif table.gap is not None:  # blank lines end the table: the header again, and the rows under it
                body += [h + "\n" for h in header_lines()]
                problems += [p for h in header_lines() for p in table.add(h)]
            for r in new:
                line = format_row(r, table.tail)
                problems += table.add(line)
                body.append(line + "\n")
            if problems:
                raise LedgerError(self.path, problems)
            self._write_whole((prefix + "".join(body)).encode("utf-8"), len(table.rows) - len(new))
            written = table.rows[len(table.rows) - len(new):]
            if written:
                self._write_head(written[-1])
            return written

    def _write_whole(self, data: bytes, rows: int) -> None:
        """Append ``data`` in one write, or leave the file as it was. Raises LedgerWriteError."""
        folder = self.path.parent
        need = len(data) + FREE_MARGIN
        if not folder.is_dir():
            raise LedgerWriteError(self.path, "", _(NO_FOLDER).format(folder=folder))
        try:
            free = shutil.disk_usage(folder).free
        except OSError as exc:
            raise LedgerWriteError(self.path, "", _(WRITE_FAILED).format(
                reason=exc.strerror or exc, folder=folder, free=0, need=need, rows=rows)) from None
        if free < need:
            raise LedgerWriteError(self.path, "", _(WRITE_FAILED).format(
                reason=_(DISK_FULL), folder=folder, free=free, need=need, rows=rows))
        existed = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.fstat(fd).st_size
            try:
                done = os.write(fd, data)
                if done != len(data):
                    raise OSError(errno.ENOSPC, _(SHORT_WRITE).format(done=done, size=len(data)))
                os.fsync(fd)
                if os.pread(fd, len(data), start) != data:  # read back: a pod is only created once its row is in
                    raise OSError(errno.EIO, _(READ_BACK_DIFFERS))
            except OSError as exc:
                reason = exc.strerror or str(exc)
                try:
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                except OSError as cut:
                    raise LedgerWriteError(self.path, "", _(CUT_BACK_FAILED).format(
                        reason=reason, cut=cut.strerror or cut, command=REPAIR_COMMAND)) from None
                if not existed:
                    self.path.unlink(missing_ok=True)
                raise LedgerWriteError(self.path, "", _(WRITE_FAILED).format(
                    reason=reason, folder=folder, free=_free(folder), need=need, rows=rows)) from None
        finally:
            os.close(fd)

    def repair_torn_line(self) -> tuple[int, Path] | None:
        """Cut a last line left torn by an interrupted write: its bytes move to a file beside the lock,
        every other byte stays. Returns (its line number, where its bytes went), or None when the last
        line is not torn (nothing is done). Raises LedgerError when the ledger has other problems (led by
        :data:`NOT_TORN` when the last line is among them with all its cells: a whole row is never cut)."""
        with self.locked():
            text = self._text()
            try:
                self._table(text)
                return None
            except LedgerError as exc:
                if exc.torn is None:
                    raise _not_torn(exc, text) from None
                line = exc.torn
            data = self.path.read_bytes()
            keep = data.rfind(b"\n") + 1
            saved = self.lock_path.parent / f"{self.path.name}.torn-{self.clock():%Y%m%dT%H%M%SZ}.txt"
            saved.write_bytes(data[keep:])
            os.truncate(self.path, keep)
            return line, saved


def _not_torn(exc: LedgerError, text: str) -> LedgerError:
    """``exc``, led by why the repair cuts nothing when the last line it names is a whole row (all its cells)."""
    lines = text.splitlines()
    last = len(lines)
    if not lines or not any(n == last for n, _p in exc.problems) or len(_split(lines[-1])) < len(COLUMNS):
        return exc
    return LedgerError(exc.path, [(last, _(NOT_TORN).format(n=len(COLUMNS), command=REPAIR_COMMAND)), *exc.problems])


def ledgers_beside(path: Path) -> list[Path]:
    """The other ledgers in ``path``'s folder: its ``*.md`` files with the ledger's header line."""
    found = []
    for other in sorted(Path(path).parent.glob("*.md")):
        try:
            if other == path or not other.is_file() or other.stat().st_size > MAX_BYTES:
                continue
            text = other.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(ln.lstrip().startswith("|") and tuple(_split(ln)) == COLUMNS for ln in text.splitlines()):
            found.append(other)
    return found


def _free(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0


def _holder_text() -> str:
    """This process as the lock's holder: ``pid<TAB>start time<TAB>command``."""
    import psutil

    try:
        proc = psutil.Process()
        args = [" ".join(a.split()) for a in proc.cmdline()]
        cmd = " ".join(a if len(a) <= 80 else a[:77] + "..." for a in args)[:400]
        started = proc.create_time()
    except psutil.Error:
        cmd, started = "?", 0.0
    return f"{os.getpid()}\t{started}\t{cmd}\n"


def holder(ledger: Ledger) -> str:
    """Who holds the ledger's lock, in words ("pid 123 (pytest -m gpu ...)"), from its holder note."""
    import psutil

    try:
        pid_text, started, cmd = ledger.holder_path.read_text(encoding="utf-8").rstrip("\n").split("\t", 2)
        pid = int(pid_text)
        alive = abs(psutil.Process(pid).create_time() - float(started)) < 1.0
    except (OSError, ValueError, psutil.Error):
        return _(UNKNOWN_HOLDER)
    return f"pid {pid} ({cmd})" if alive else _(UNKNOWN_HOLDER)


class _Locked:
    def __init__(self, ledger: Ledger, wait_s: float, kept: str) -> None:
        self.ledger = ledger
        self.wait_s = wait_s
        self.kept = kept
        self.outer = False

    def __enter__(self) -> Ledger:
        lock = self.ledger.lock
        self.outer = not lock.is_locked
        start = time.monotonic()
        delay, said = 0.01, False
        while True:
            try:
                lock.acquire(timeout=0)
                break
            except Timeout:
                waited = time.monotonic() - start
                if waited >= self.wait_s:
                    raise ConfigError(self.ledger.lock_path, "", _(LOCK_REFUSED).format(
                        wait=self.wait_s, holder=holder(self.ledger), kept=self.kept)) from None
                if waited >= LOCK_NOTICE_S and not said:
                    said = True
                    self.ledger.notify(_(LOCK_WAITING).format(lock=self.ledger.lock_path,
                                                              holder=holder(self.ledger)))
                time.sleep(min(delay, max(self.wait_s - waited, 0.0)))
                delay = min(delay * 2, 1.0)
        if self.outer:
            _note_holder(self.ledger)
        return self.ledger

    def __exit__(self, *exc: object) -> None:
        self.ledger.lock.release()


_HOLDER_TEXT: list[str] = []


def _note_holder(ledger: Ledger) -> None:
    if not _HOLDER_TEXT or not _HOLDER_TEXT[0].startswith(f"{os.getpid()}\t"):
        _HOLDER_TEXT[:] = [_holder_text()]
    tmp = ledger.holder_path.with_name(f".{ledger.holder_path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(_HOLDER_TEXT[0], encoding="utf-8")
        os.replace(tmp, ledger.holder_path)
    except OSError:  # a full disk: waiters say "another process"
        tmp.unlink(missing_ok=True)
