"""The verdict of a set of notes for a DoD check: done, pending (a package to install) or broken."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_distcheck.citations.report import failure_lines, summary, uncounted_lines
from pytest_distcheck.citations.verifier import NoteReport


@dataclass(frozen=True)
class Verdict:
    """``state`` is ``"done"``, ``"pending"`` or ``"broken"``; ``reason`` is for a person: a first line
    that sums up, then one line per failing citation (``NOTE:LINE [cite: ...]: why``)."""

    state: str
    reason: str


def notes_verdict(reports: list[NoteReport], minimum: int) -> Verdict:
    """Decide what the reports of all notes mean together.

    - pending: a cited package is not installed (nothing can be checked against it); the reason
      still lists every other failing citation, so installing is not the only fix a person sees;
    - broken: a citation fails or is malformed, or a note has fewer than ``minimum`` cited statements
      (the reason then also lists that note's citations that were not counted, and why);
    - done: otherwise. The reason then lists each note's count.

    Which names may be cited is decided before (``unknown-package`` failures, see
    :func:`pytest_distcheck.citations.verifier.check_citation`): those are broken, not pending.
    """
    missing = sorted(
        {r.citation.package for rep in reports for r in rep.failures if r.code == "not-installed"}
    )
    if missing:
        others = [
            line for rep in reports
            for line in failure_lines(rep, skip_codes=("not-installed",))
        ]
        head = f"not installed: {', '.join(missing)}; the citations need its sources"
        if others:
            head += f"; {len(others)} other citation(s) do not resolve\n" + "\n".join(others)
        return Verdict("pending", head)
    failures = [line for rep in reports for line in failure_lines(rep)]
    short = [rep for rep in reports if rep.cited_statements < minimum]
    counts = "; ".join(f"{rep.label}: {summary(rep)}" for rep in reports)
    if failures or short:
        heads = [
            f"{rep.label} has {rep.cited_statements} cited statements, at least {minimum} expected"
            for rep in short
        ]
        if failures:
            heads.append(f"{len(failures)} citation(s) do not resolve")
        # A short note also says why each citation it has did not count.
        uncounted = [line for rep in short for line in uncounted_lines(rep)]
        return Verdict("broken", "; ".join(heads) + "\n" + "\n".join(failures + uncounted + [counts]))
    return Verdict("done", counts)
