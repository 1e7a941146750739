"""The workspace's ``[quiz]`` section: where the bank and the attempt log are, the pass mark, attempt size.

    [quiz]
    bank = "checks/quiz/35.json"            # the bank file (quiz-bank.schema.json)
    log = "experiments/quiz/35-attempts.jsonl"  # append-only attempt log
    pass_mark = 0.7                         # share of items right to pass, in (0, 1]
    items_per_attempt = 10
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.workspace import Workspace

NO_SECTION = N_("no [quiz] section (needs bank, log, pass_mark, items_per_attempt)")
NOT_A_PATH = N_("must be a path (string), found {value!r}")
NOT_A_MARK = N_("must be a number in (0, 1], found {value!r}")
NOT_A_COUNT = N_("must be a whole number >= 1, found {value!r}")


@dataclass(frozen=True)
class QuizConfig:
    """The ``[quiz]`` section, paths resolved against the workspace root (``*_rel`` as written)."""

    bank_path: Path
    bank_rel: str
    log_path: Path
    log_rel: str
    pass_mark: float
    items_per_attempt: int


def quiz_config(ws: Workspace) -> QuizConfig:
    """Read and check ``[quiz]`` of ``ws``.

    Raises:
        ConfigError: the section is missing, or a key is missing or of the wrong type or range
            (naming ``quiz.KEY``).
    """
    sec = ws.section("quiz")
    if not sec:
        raise ConfigError(ws.path, "quiz", _(NO_SECTION))
    for key in ("bank", "log"):
        if not isinstance(sec.get(key), str) or not sec[key]:
            raise ConfigError(ws.path, f"quiz.{key}", _(NOT_A_PATH).format(value=sec.get(key)))
    mark = sec.get("pass_mark")
    if isinstance(mark, bool) or not isinstance(mark, int | float) or not 0 < mark <= 1:
        raise ConfigError(ws.path, "quiz.pass_mark", _(NOT_A_MARK).format(value=mark))
    n = sec.get("items_per_attempt")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(ws.path, "quiz.items_per_attempt", _(NOT_A_COUNT).format(value=n))
    return QuizConfig(ws.resolve(sec["bank"]), sec["bank"], ws.resolve(sec["log"]), sec["log"], float(mark), n)
