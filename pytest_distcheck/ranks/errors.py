"""What a rank reports back, and the one error a test sees when any rank did not succeed (also in the form
``mp.spawn`` raises, for ``dist_world.spawn``). Imports no torch: the top-level package re-exports these."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from pytest_distcheck.i18n import N_, _, ngettext

# Labels of a rank's section in a RankError's message.
STACK_WHEN_KILLED = N_("stack when killed:")
STDOUT = N_("stdout:")
STDERR = N_("stderr:")


@dataclass
class RankOutcome:
    """How one rank's call ended.

    Attributes:
        rank: the rank (0 .. world_size-1).
        status: ``ok``, ``error``, ``skip``, ``timeout`` (did not finish in time, killed), ``died``
            (the process exited or was killed by a signal), or ``stopped`` (killed because a peer failed, or
            failed only with gloo's lost connection to that peer: :func:`pytest_distcheck.ranks.report.blame`).
        error: one line, e.g. ``ValueError: bad shape`` or ``killed by SIGSEGV``.
        traceback: the remote traceback text, when there is one.
        stdout, stderr: what the rank wrote to its stdout and stderr during the call (Python and C level,
            read from the rank's files, so also for a rank that hung or died).
        stack: the faulthandler dump of a rank that hung, taken before it was killed.
        warnings: the distinct warnings the call raised (``rank_warnings.Record``), for the pool to
            re-issue in the test process.
        phase: where an error came from: ``setup`` (context or group, before user code) or ``call``.
        note: what the rank knows of the error's likely cause, beyond the traceback (state an earlier
            call left: :mod:`pytest_distcheck.ranks.module_state`), or ''.
    """

    rank: int
    status: str
    error: str = ""
    traceback: str = ""
    stdout: str = ""
    stderr: str = ""
    stack: str = ""
    warnings: list = field(default_factory=list)
    phase: str = ""
    note: str = ""


class RankError(Exception):
    """One or more ranks did not return normally. The message shows every rank's outcome.

    Its first line names the ranks that failed of their own (``rank(s) 0 failed``, :meth:`headline`); a rank
    stopped because of them is listed below it (``rank 1: stopped after a peer failed``). The text is in the
    language in use when the error is made; each rank's ``status`` keyword stays as it is.

    Attributes:
        outcomes: one :class:`RankOutcome` per rank, in rank order.
        failed_ranks: ranks whose status is not ``ok``/``skip``.
    """

    @staticmethod
    def headline(n: int) -> str:
        """The first line's template, ``{ranks}`` naming ``n`` ranks, in the language in use."""
        return ngettext("rank(s) {ranks} failed", "rank(s) {ranks} failed", n)

    @staticmethod
    def note(n: int) -> str:
        """A note line's template, ``{ranks}`` naming the ``n`` ranks that gave ``{note}``, in the language in use."""
        return ngettext("note (rank {ranks}): {note}", "note (ranks {ranks}): {note}", n)

    def __init__(self, outcomes: list[RankOutcome], detail: str = "", hint: str = "") -> None:
        self.outcomes = outcomes
        self.failed_ranks = [o.rank for o in outcomes if o.status not in ("ok", "skip")]
        super().__init__(self._format(detail, hint))

    def _format(self, detail: str, hint: str) -> str:
        # The headline names the ranks that failed of their own, not those stopped because of them; where none
        # failed (the ranks disagreed on skipping), those that skipped.
        named = ([o.rank for o in self.outcomes if o.status not in ("ok", "skip", "stopped")] or self.failed_ranks
                 or [o.rank for o in self.outcomes if o.status == "skip"])
        lines = [self.headline(len(named)).format(ranks=", ".join(map(str, named)))
                 + (f": {detail}" if detail else "")]
        if hint:
            lines.append(hint)
        notes: dict[str, list[int]] = {}
        for o in self.outcomes:
            if o.note:
                notes.setdefault(o.note, []).append(o.rank)
        for note, ranks_ in notes.items():
            lines.append(self.note(len(ranks_)).format(ranks=", ".join(map(str, ranks_)), note=note))
        for o in self.outcomes:
            lines.append(f"  rank {o.rank}: " + (o.error if o.error.startswith(o.status) else o.status
                                                   + (f" ({o.error})" if o.error else "")))
        for o in self.outcomes:
            parts = []
            if o.traceback:
                parts.append(o.traceback.rstrip())
            if o.stack:
                parts.append(_(STACK_WHEN_KILLED) + "\n" + o.stack.rstrip())
            if o.stdout:
                parts.append(_(STDOUT) + "\n" + o.stdout.rstrip())
            if o.stderr:
                parts.append(_(STDERR) + "\n" + o.stderr.rstrip())
            if parts:
                lines.append(f"--- rank {o.rank} ---")
                lines.extend(parts)
        return "\n".join(lines)


class RankTimeout(RankError):
    """Some ranks did not finish within the call's timeout; they were stack-dumped and killed."""

    @staticmethod
    def headline(n: int) -> str:
        """The first line's template, ``{ranks}`` naming ``n`` ranks, in the language in use."""
        return ngettext("rank(s) {ranks} did not finish in time", "rank(s) {ranks} did not finish in time", n)


class PicklingError(TypeError):
    """The function, an argument or a result could not be sent between processes."""


class RanksOutOfStepWarning(UserWarning):
    """A call returned normally but the ranks ended it out of step (different collective counts).

    Usually a collective or send that only some ranks issued, or an ``async_op`` never waited on.
    The pool replaced its ranks, so the next call starts in step.
    """


# torch.multiprocessing.ProcessRaisedException -> the RankError that is also one (made on first use)
_SPAWN_ERRORS: dict[type, type] = {}


def spawn_error(err: RankError) -> RankError:
    """What ``dist_world.spawn`` raises for ``err``: also a ``torch.multiprocessing.ProcessRaisedException``
    when a rank raised, as ``mp.spawn`` does, so a ported ``pytest.raises(mp.ProcessRaisedException,
    match=...)`` still holds (the message has every rank's error text and traceback).

    The class is made from torch's only when this process has imported ``torch.multiprocessing``
    (every ``import torch`` does); otherwise ``err`` is returned as it is, and torch stays unimported.
    Its ``error_index`` is the first rank that raised; ``error_pid`` is None (the rank was replaced).
    """
    mp = sys.modules.get("torch.multiprocessing")
    raised = [o.rank for o in err.outcomes if o.status == "error"]
    if mp is None or not raised or type(err) is not RankError:
        return err
    base = mp.ProcessRaisedException
    cls = _SPAWN_ERRORS.get(base)
    if cls is None:
        cls = _SPAWN_ERRORS[base] = type("RankError", (RankError, base), {
            "__module__": "pytest_distcheck",
            # unpickled as torch's own (this class is made at run time)
            "__reduce__": lambda self: (base, (self.msg, self.error_index, self.error_pid)),
        })
    new = cls.__new__(cls, *err.args)
    new.args, new.outcomes, new.failed_ranks = err.args, err.outcomes, err.failed_ranks
    new.msg, new.error_index, new.error_pid = str(err), raised[0], None
    return new


# Tracebacks and pytest's short summary name them as users import and catch them (pytest_distcheck.RankError),
# not by this module's path.
for _public in (RankError, RankTimeout, PicklingError, RanksOutOfStepWarning):
    _public.__module__ = "pytest_distcheck"
