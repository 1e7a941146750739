"""The ``[budget]`` section of a workspace file: where the ledger is and the ceilings in USD
(``ledger``, ``phase_ceiling_usd``, ``[budget.experiment_ceilings_usd]``, ``uncapped_experiments``).

A paid run may name only a declared experiment (a key of ``experiment_ceilings_usd`` or an entry of
``uncapped_experiments``): a misspelt id would otherwise escape its ceiling. A ``ledger`` that does not exist
while another ledger lies in its folder is refused when read or written (a misspelt path would start a
second ledger and count none of the real one's spend). Example: docs/design/budget.md.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _

_EXPERIMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")  # as the ledger's experiment column
# A ceiling above this is a typo (an extra digit, a number meant as cents): more than a course phase costs.
MAX_CEILING_USD = Decimal(10_000)
NOT_FINITE = N_("must be a finite number of USD, got {value!r}")
ABSURD_CEILING = N_("{value} USD is above {max} USD, more than a course phase costs: a typo? (amounts are in USD, "
                    "e.g. 5 or 0.5)")
CURRENCY_SIGN = N_("{text!r} is not a number of USD: write {plain} (no currency sign or unit)")
NOT_USD = N_("must be a number of USD, found {value!r}")
NOT_POSITIVE = N_("must be > 0 USD, found {value!r}")
NOT_LEDGER_PATH = N_("must be the ledger's path relative to the root, found {value!r}")
NO_PHASE_CEILING = N_("missing: the most the phase may spend, in USD")
NOT_CEILING_TABLE = N_("must be a table of experiment id = USD")
ABOVE_PHASE = N_("{usd} USD is more than the phase ceiling {phase} USD")
NOT_ID_LIST = N_("must be a list of experiment ids (letters, digits, '.', '_', ':' or '-'), found {value!r}")
BAD_ID = N_("an experiment id is letters, digits, '.', '_', ':' or '-'")
CAPPED_TOO = N_("{id!r} also has a ceiling; declare it once")
MISNAMED_LEDGER = N_("{ledger} does not exist, but {folder} holds the ledger {others}: a paid run would start a "
                     "second ledger beside it, and what is left would count none of its spend. Nothing was read or "
                     "written; fix the path, or move the other ledger out of {folder} to start a new one on "
                     "purpose{hint}")
DID_YOU_MEAN = N_("; did you mean {name!r}?")
STATE_DIR = ".distcheck"  # gitignored: reservations and the lock live here, never in the ledger
LOCK_FILE = "budget.lock"


@dataclass(frozen=True)
class BudgetConfig:
    """A validated ``[budget]`` section.

    Attributes:
        ledger: the ledger file (absolute).
        ledger_rel: the path as the workspace file writes it (for messages).
        phase_ceiling_usd: the most the phase may spend, USD.
        experiment_ceilings_usd: experiment id -> the most its runs may spend, USD.
        uncapped_experiments: experiment ids declared without a ceiling (only the phase's applies).
        state_dir: folder for the reservations file and the lock (``<root>/.distcheck``).
        source: the workspace file, for messages.
    """

    ledger: Path
    ledger_rel: str
    phase_ceiling_usd: Decimal
    experiment_ceilings_usd: dict[str, Decimal] = field(default_factory=dict)
    uncapped_experiments: tuple[str, ...] = ()
    state_dir: Path = Path(STATE_DIR)
    source: Path = Path("distcheck.toml")

    def open_ledger(self):
        """The :class:`~pytest_distcheck.budget.ledger.Ledger`, under the lock every writer shares; reading or
        writing it raises :meth:`misnamed_ledger`'s error."""
        from pytest_distcheck.budget.ledger import Ledger

        return Ledger(self.ledger, self.state_dir / LOCK_FILE, on_missing=self._refuse_misnamed)

    def misnamed_ledger(self) -> ConfigError | None:
        """The error naming ``budget.ledger`` when the ledger does not exist but another ledger (a Markdown file
        with the ledger's header) lies in its folder, with the closest one's path; else None (a new workspace's
        ledger is created with its first row)."""
        from pytest_distcheck.budget.ledger import ledgers_beside

        if self.ledger.exists() or self.ledger.is_symlink():
            return None
        others = [p.name for p in ledgers_beside(self.ledger)]
        if not others:
            return None
        rel = PurePosixPath(self.ledger_rel.replace("\\", "/"))
        close = difflib.get_close_matches(self.ledger.name, others, n=1, cutoff=0.6)
        hint = _(DID_YOU_MEAN).format(name=str(rel.with_name(close[0]))) if close else ""
        folder = str(rel.parent) if str(rel.parent) != "." else str(self.ledger.parent)
        return ConfigError(self.source, "budget.ledger", _(MISNAMED_LEDGER).format(
            ledger=self.ledger_rel, folder=folder, others=", ".join(others), hint=hint))

    def _refuse_misnamed(self) -> None:
        error = self.misnamed_ledger()
        if error is not None:
            raise error


def ceiling_problem(value: Decimal, shown: str | None = None) -> str | None:
    """What is wrong with a ceiling of ``value`` USD that is not negative: not finite, or absurdly large
    (``shown``: the value as the user wrote it)."""
    if not value.is_finite():
        return _(NOT_FINITE).format(value=shown if shown is not None else str(value))
    if value > MAX_CEILING_USD:
        return _(ABSURD_CEILING).format(value=f"{value:g}", max=MAX_CEILING_USD)
    return None


def _amount(path: Path, where: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(path, where, _(NOT_USD).format(value=value))
    if not value > 0:
        raise ConfigError(path, where, _(NOT_POSITIVE).format(value=value))
    amount = Decimal(str(value))
    problem = ceiling_problem(amount)
    if problem:
        raise ConfigError(path, where, problem)
    return amount


def budget_config(ws) -> BudgetConfig | None:
    """The ``[budget]`` section of a :class:`pytest_distcheck.workspace.Workspace`, or None when absent.

    Raises:
        ConfigError: naming the field (``budget.ledger``, ``budget.phase_ceiling_usd``,
            ``budget.experiment_ceilings_usd.<id>``) when a value is missing or of the wrong kind. (An unknown
            key is the workspace schema's error, at load.)
    """
    section = ws.section("budget")
    if not section:
        return None
    path = ws.path
    ledger = section.get("ledger")
    if not isinstance(ledger, str) or not ledger.strip():
        raise ConfigError(path, "budget.ledger", _(NOT_LEDGER_PATH).format(value=ledger))
    if "phase_ceiling_usd" not in section:
        raise ConfigError(path, "budget.phase_ceiling_usd", _(NO_PHASE_CEILING))
    phase = _amount(path, "budget.phase_ceiling_usd", section["phase_ceiling_usd"])
    exp_raw = section.get("experiment_ceilings_usd", {})
    if not isinstance(exp_raw, dict):
        raise ConfigError(path, "budget.experiment_ceilings_usd", _(NOT_CEILING_TABLE))
    experiments = {k: _amount(path, f"budget.experiment_ceilings_usd.{k}", v) for k, v in exp_raw.items()}
    for k, v in experiments.items():
        if v > phase:
            raise ConfigError(path, f"budget.experiment_ceilings_usd.{k}",
                              _(ABOVE_PHASE).format(usd=v, phase=phase))
    uncapped = section.get("uncapped_experiments", [])
    if not isinstance(uncapped, list) or not all(isinstance(u, str) and _EXPERIMENT.match(u) for u in uncapped):
        raise ConfigError(path, "budget.uncapped_experiments", _(NOT_ID_LIST).format(value=uncapped))
    for k in [*experiments, *uncapped]:
        if not _EXPERIMENT.match(k):
            raise ConfigError(path, f"budget.experiment_ceilings_usd.{k}", _(BAD_ID))
    both = sorted(set(experiments) & set(uncapped))
    if both:
        raise ConfigError(path, "budget.uncapped_experiments", _(CAPPED_TOO).format(id=both[0]))
    return BudgetConfig(ws.resolve(ledger, "budget.ledger"), ledger, phase, experiments, tuple(uncapped),
                        ws.root / STATE_DIR, path)
