"""Which DoD checks a run collected, which it selected, and why the others did not run.

Built where collection happens (the single pytest process, or every pytest-xdist worker) and sent
to the controller as JSON, so that an item whose checks did not all run can say which and why
(deselected by ``-k``/``-m``, not selected by ``--dod``, removed by a hook, not collected).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from pytest_distcheck.i18n import N_, _

# Why a selected check did not run: the session ended before it.
# The English texts travel (xdist's workeroutput, CollectionRecord.stopped) and are translated where spoken.
STOPPED_EARLY = N_("the session stopped early: -x, --maxfail or a crash")
INTERRUPTED = N_("the run was interrupted (Ctrl-C) before it ended")  # before it started, or while it ran
DID_NOT_RUN = N_("selected but did not run ({why})")
NOT_SELECTED = N_("not selected")
PASSED_UNCLASSIFIED = N_("{nodeid} reported passed without the kit's classification (its report was made or replaced "
                         "outside the kit's hooks)")
FAILED_UNCLASSIFIED = N_("{nodeid} {outcome} outside the kit's classification (e.g. its pytest-xdist worker crashed)")
# Every reason of a check that was not collected starts with NOT_COLLECTED (dod.table.not_checked_at_all reads it).
NOT_COLLECTED = N_("not collected")
REGISTERED_NOT_COLLECTED = N_("registered check {pattern} ({why})")
NO_MARKED_TEST = N_("no test marked @pytest.mark.dod({item_id!r}) under {checks_dir}/")


@dataclass
class CheckInfo:
    """One collected DoD check.

    Attributes:
        item_id: the DoD item of its ``dod`` marker.
        file: the file that defines its function, relative to the rootdir when inside it.
        function: the function's qualified name.
        selected: whether it was left in the run after deselection.
        not_run: why it is not in the run (``None`` when selected).
        problems: why the kit cannot trust its outcome (found at collection), each a sentence.
    """

    item_id: str
    file: str
    function: str
    selected: bool = True
    not_run: str | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class CollectionRecord:
    """The DoD checks of one run, keyed by node id.

    Attributes:
        checks: every collected DoD check.
        missing_registered: per item, registered checks (workspace ``checks``) that were not
            collected, each with why (file missing, function missing, file not collected).
        checks_dir: the workspace's checks folder, relative to the rootdir, for messages.
        unclassified: node id -> outcome of a report for a selected check that did not carry the
            kit's classification (filled in by the controller; e.g. an xdist worker crash).
        stopped: why selected checks that did not run did not (filled in by the controller: :data:`INTERRUPTED`,
            pytest's ``-x``/``--maxfail`` message, or :data:`STOPPED_EARLY` when it does not know).
    """

    checks: dict[str, CheckInfo] = field(default_factory=dict)
    missing_registered: dict[str, dict[str, str]] = field(default_factory=dict)
    checks_dir: str = "checks"
    unclassified: dict[str, str] = field(default_factory=dict)
    stopped: str = STOPPED_EARLY

    def selected(self, item_id: str) -> list[str]:
        """Node ids of the item's checks that are in the run."""
        return [n for n, c in self.checks.items() if c.item_id == item_id and c.selected]

    def no_check_reason(self, item_id: str) -> str:
        """Why an item has no check at all in this run."""
        return f"{_(NOT_COLLECTED)}: " + _(NO_MARKED_TEST).format(item_id=item_id, checks_dir=self.checks_dir)

    def to_json(self) -> str:
        """The record as JSON (for pytest-xdist's ``workeroutput``)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> CollectionRecord:
        """Inverse of :meth:`to_json`."""
        data = json.loads(text)
        data["checks"] = {k: CheckInfo(**v) for k, v in data["checks"].items()}
        return cls(**data)
