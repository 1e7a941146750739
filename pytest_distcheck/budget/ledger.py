"""The spend ledger: a Markdown table of charges that people read and the kit parses and appends to.

Format: the file is free text up to its first line that starts with ``|``: the table header with the
columns of ``COLUMNS`` in that order, a ``|---|...`` separator, then one line per row, e.g.::

    | 2026-12-01T10:00:00Z | 1a2b3c4d-9f00 | open | runpod | RTX 4090 x 2 | 1800 | 1.18 | 0.5900 | USD
      | tp-inference | tests/test_tp.py::test_speedup | pod123 |      (one line in the file)

One row per charge event. ``open`` is written as soon as a resource exists (worst case: billed_s is
the most it may run, cost what that costs); ``settled`` is written once it is gone (actual billed
seconds). A run counts its settled row, or its open row while it has none (see ``accounting``).
``cost`` must equal ``rate_per_hour * billed_s / 3600`` to 4 decimals; ``rate_per_hour`` is for the
whole resource (all its GPUs); ``billed_s`` is after the provider's billing granularity.

Writes only append, under a file lock (filelock), one ``write`` per call; a ledger that does not
parse is an error naming each bad line, and then nothing is written to it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_distcheck.errors import ConfigError

COLUMNS = (
    "time_utc", "run_id", "status", "provider", "resource", "billed_s",
    "rate_per_hour", "cost", "currency", "experiment", "purpose", "resource_id",
)
STATUSES = ("open", "settled")
CURRENCY = "USD"
COST_PLACES = Decimal("0.0001")
# A written cost may differ from rate * seconds / 3600 by its rounding to 4 places, no more.
COST_TOLERANCE = Decimal("0.00005")
LOCK_TIMEOUT_S = 60.0

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
_RESOURCE = re.compile(r"^(?P<gpu>\S(?:.*\S)?) x (?P<count>[1-9]\d*)$")
_DECIMAL = re.compile(r"^\d+(\.\d+)?$")
_NEGATIVE = re.compile(r"^-\d+(\.\d+)?$")
_SEPARATOR_CELL = re.compile(r"^:?-{3,}:?$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class LedgerRow:
    """One charge event.

    Attributes:
        time_utc: when it was written (UTC, whole seconds).
        run_id: the paid run (one reservation); at most one open and one settled row per run id.
        status: "open" (worst case while the resource may exist) or "settled" (actual).
        provider: e.g. "runpod", "local".
        gpu_type, gpu_count: the resource, written ``"<gpu_type> x <gpu_count>"``.
        billed_s: seconds billed, whole, after the billing granularity.
        rate_per_hour: USD per hour for the whole resource.
        cost: USD, rate_per_hour * billed_s / 3600 rounded half-up to 4 places.
        experiment: the experiment id whose ceiling this counts against, or None ("-").
        purpose: the test id or what the run was for.
        resource_id: the provider's id (the pod id), or "-" when none exists.
        line: 1-based line in the file (0 for a row not yet written).
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

    @property
    def resource(self) -> str:
        return f"{self.gpu_type} x {self.gpu_count}"

    @property
    def recomputed_cost(self) -> Decimal:
        """rate_per_hour * billed_s / 3600, exact (not rounded): what the row costs."""
        return self.rate_per_hour * self.billed_s / Decimal(3600)


def make_row(
    *, run_id: str, status: str, provider: str, gpu_type: str, gpu_count: int, billed_s: int,
    rate_per_hour: float | Decimal, experiment: str | None, purpose: str, resource_id: str,
    now: datetime | None = None,
) -> LedgerRow:
    """A new row with its cost computed (rate_per_hour * billed_s / 3600, 4 places, half-up)."""
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
                         + ". Nothing was written to it; fix those lines by hand")


def _escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") or "-"


def format_row(row: LedgerRow) -> str:
    """The row as one Markdown table line (no newline)."""
    cells = (
        row.time_utc.strftime("%Y-%m-%dT%H:%M:%SZ"), row.run_id, row.status, row.provider, row.resource,
        str(row.billed_s), _plain(row.rate_per_hour), str(row.cost.quantize(COST_PLACES)), row.currency,
        row.experiment or "-", row.purpose, row.resource_id or "-",
    )
    return "| " + " | ".join(_escape(c) for c in cells) + " |"


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


def header_lines() -> list[str]:
    return ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]


def _split(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(body)]


def _money(text: str, name: str) -> tuple[Decimal | None, str | None]:
    if _NEGATIVE.match(text):
        return None, f"negative {name} {text!r}"
    if not _DECIMAL.match(text):
        return None, f"{name} {text!r} is not a number (write digits with a '.' decimal point, no currency sign)"
    return Decimal(text), None


def parse_row(cells: list[str], line: int) -> tuple[LedgerRow | None, list[str]]:
    """A row from its cells, or the problems found (each in words, naming the column)."""
    if len(cells) != len(COLUMNS):
        missing = f", missing column(s) {', '.join(COLUMNS[len(cells):])}" if len(cells) < len(COLUMNS) else ""
        return None, [f"{len(cells)} cells, expected {len(COLUMNS)} ({' | '.join(COLUMNS)}){missing}"]
    c = dict(zip(COLUMNS, cells, strict=True))
    problems: list[str] = []
    when = None
    if not _TIME.match(c["time_utc"]):
        problems.append(f"time_utc {c['time_utc']!r} is not YYYY-MM-DDTHH:MM:SSZ")
    else:
        try:
            when = datetime.strptime(c["time_utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            problems.append(f"time_utc {c['time_utc']!r} is not a valid date and time")
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
    elif not c["billed_s"].isdigit():
        problems.append(f"billed_s {c['billed_s']!r} is not a whole number of seconds")
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
    if problems:
        return None, problems
    assert when is not None and res is not None and billed is not None and rate is not None and cost is not None
    row = LedgerRow(
        when, c["run_id"], c["status"], c["provider"], res["gpu"], int(res["count"]), billed, rate, cost,
        None if c["experiment"] == "-" else c["experiment"], c["purpose"], c["resource_id"],
        currency=c["currency"], line=line,
    )
    if abs(row.cost - row.recomputed_cost) > COST_TOLERANCE:
        exact = row.recomputed_cost.quantize(COST_PLACES, rounding=ROUND_HALF_UP)
        return None, [f"cost {c['cost']} does not match rate_per_hour {c['rate_per_hour']} x billed_s "
                      f"{billed} / 3600 = {exact}"]
    return row, []


def parse(text: str, path: Path) -> list[LedgerRow]:
    """Every row of a ledger's text, in file order.

    Raises:
        LedgerError: naming each bad line: no or wrong header, a row with missing cells, a bad number,
            a negative amount, an unknown currency or status, a cost that is not rate x seconds,
            a duplicate (run id, status), a settled row whose resource or id differs from its open row.
    """
    lines = text.splitlines()
    problems: list[tuple[int, str]] = []
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("|")), None)
    if start is None:
        return []  # free text only (or empty): no charges yet
    header = _split(lines[start])
    if tuple(header) != COLUMNS:
        missing = [c for c in COLUMNS if c not in header]
        what = f"missing column(s) {', '.join(missing)}" if missing else "columns in another order or extra"
        raise LedgerError(path, [(start + 1, f"table header must be | {' | '.join(COLUMNS)} |, found "
                                  f"{lines[start].strip()!r} ({what})")])
    if start + 1 >= len(lines) or not all(_SEPARATOR_CELL.match(c) for c in _split(lines[start + 1])):
        raise LedgerError(path, [(start + 2, "the header must be followed by a |---|---|... separator line")])
    rows: list[LedgerRow] = []
    seen: dict[tuple[str, str], int] = {}
    opened: dict[str, LedgerRow] = {}
    for i in range(start + 2, len(lines)):
        n, text_line = i + 1, lines[i]
        if not text_line.strip():
            problems.append((n, "blank line after the table header (rows after it would not join the table)"))
            continue
        if not text_line.lstrip().startswith("|"):
            problems.append((n, "not a table row: the table must be the last thing in the file"))
            continue
        row, errs = parse_row(_split(text_line), n)
        problems.extend((n, e) for e in errs)
        if row is None:
            continue
        key = (row.run_id, row.status)
        if key in seen:
            problems.append((n, f"duplicate run id {row.run_id!r} with status {row.status} (first on line "
                                f"{seen[key]})"))
            continue
        seen[key] = n
        if row.status == "open":
            opened[row.run_id] = row
        elif row.run_id in opened:
            first = opened[row.run_id]
            if (first.provider, first.resource, first.resource_id) != (row.provider, row.resource, row.resource_id):
                problems.append((n, f"settled row of run {row.run_id!r} names {row.provider} {row.resource} "
                                    f"{row.resource_id}, its open row (line {first.line}) {first.provider} "
                                    f"{first.resource} {first.resource_id}"))
        rows.append(row)
    if problems:
        raise LedgerError(path, problems)
    return rows


class Ledger:
    """The ledger file and its lock.

    Args:
        path: the Markdown file (need not exist yet: it is created with a header on first append).
        lock_path: the lock file shared by every writer of this ledger (and the reservations).
        title: heading for a newly created file.
    """

    def __init__(self, path: Path | str, lock_path: Path | str, title: str = "Cloud spend ledger") -> None:
        self.path = Path(path)
        self.lock_path = Path(lock_path)
        self.title = title
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
                return []
            return parse(self.path.read_text(encoding="utf-8"), self.path)

    def append(self, *new: LedgerRow) -> list[LedgerRow]:
        """Append rows under the lock and return them with their line numbers.

        The whole ledger, with the new rows, is validated first; on any problem nothing is written.

        Raises:
            LedgerError: the ledger or a new row is malformed (a duplicate run id and status included).
            ConfigError: the lock could not be taken.
        """
        with self.locked():
            old_text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
            prefix = "" if not old_text or old_text.endswith("\n") else "\n"
            if not old_text:
                prefix = f"# {self.title}\n\nAppend-only: the kit adds rows; never edit or remove one.\n\n"
            if not any(ln.lstrip().startswith("|") for ln in old_text.splitlines()):
                prefix += ("" if not old_text.strip() else "\n") + "\n".join(header_lines()) + "\n"
            addition = prefix + "".join(format_row(r) + "\n" for r in new)
            rows = parse(old_text + addition, self.path)  # validates old and new together
            with open(self.path, "a", encoding="utf-8", newline="\n") as fh:
                fh.write(addition)
                fh.flush()
                os.fsync(fh.fileno())
            return rows[len(rows) - len(new):]


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
