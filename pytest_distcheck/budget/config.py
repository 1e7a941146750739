"""The ``[budget]`` section of a workspace file: where the ledger is and the ceilings in USD.

    [budget]
    ledger = "experiments/35-cloud-budget.md"   # relative to the workspace root
    phase_ceiling_usd = 5.0                     # all runs of the phase together
    [budget.experiment_ceilings_usd]
    tp-inference = 3.0                          # runs reserved with experiment="tp-inference"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from pytest_distcheck.errors import ConfigError

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
        state_dir: folder for the reservations file and the lock (``<root>/.distcheck``).
        source: the workspace file, for messages.
    """

    ledger: Path
    ledger_rel: str
    phase_ceiling_usd: Decimal
    experiment_ceilings_usd: dict[str, Decimal] = field(default_factory=dict)
    state_dir: Path = Path(STATE_DIR)
    source: Path = Path("distcheck.toml")

    def open_ledger(self):
        """The :class:`~pytest_distcheck.budget.ledger.Ledger`, under the lock every writer shares."""
        from pytest_distcheck.budget.ledger import Ledger

        return Ledger(self.ledger, self.state_dir / LOCK_FILE)


def _amount(path: Path, where: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(path, where, f"must be a number of USD, found {value!r}")
    if not value > 0:
        raise ConfigError(path, where, f"must be > 0 USD, found {value!r}")
    return Decimal(str(value))


def budget_config(ws) -> BudgetConfig | None:
    """The ``[budget]`` section of a :class:`pytest_distcheck.workspace.Workspace`, or None when absent.

    Raises:
        ConfigError: naming the field (``budget.ledger``, ``budget.phase_ceiling_usd``,
            ``budget.experiment_ceilings_usd.<id>``) when a value is missing or of the wrong kind.
    """
    section = ws.section("budget")
    if not section:
        return None
    path = ws.path
    ledger = section.get("ledger")
    if not isinstance(ledger, str) or not ledger.strip():
        raise ConfigError(path, "budget.ledger", f"must be the ledger's path relative to the root, found {ledger!r}")
    if "phase_ceiling_usd" not in section:
        raise ConfigError(path, "budget.phase_ceiling_usd", "missing: the most the phase may spend, in USD")
    phase = _amount(path, "budget.phase_ceiling_usd", section["phase_ceiling_usd"])
    exp_raw = section.get("experiment_ceilings_usd", {})
    if not isinstance(exp_raw, dict):
        raise ConfigError(path, "budget.experiment_ceilings_usd", "must be a table of experiment id = USD")
    experiments = {k: _amount(path, f"budget.experiment_ceilings_usd.{k}", v) for k, v in exp_raw.items()}
    for k, v in experiments.items():
        if v > phase:
            raise ConfigError(path, f"budget.experiment_ceilings_usd.{k}",
                              f"{v} USD is more than the phase ceiling {phase} USD")
    unknown = sorted(set(section) - {"ledger", "phase_ceiling_usd", "experiment_ceilings_usd"})
    if unknown:
        raise ConfigError(path, f"budget.{unknown[0]}", "unknown key (known: ledger, phase_ceiling_usd, "
                          "experiment_ceilings_usd)")
    return BudgetConfig(ws.resolve(ledger), ledger, phase, experiments, ws.root / STATE_DIR, path)
