"""The verdict of a set of notes for a DoD check: done, pending (a package to install) or broken."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_distcheck.citations.report import cited_statements, failure_lines, summary, uncounted_lines
from pytest_distcheck.citations.verifier import NoteReport
from pytest_distcheck.i18n import N_, _

VERSION_DRIFT = N_("{label} was checked against {package} {want}, but {package} {have} is installed: its citations "
                   "hold for {want} (paths and quotes move between releases); pip install '{package}=={want}' to "
                   "check it as written")
NOT_INSTALLED = N_("not installed: {packages}; the citations need its sources")
OTHERS_FAIL = N_("; {n} other citation(s) do not resolve")
TOO_FEW = N_("{label} has {statements}, at least {minimum} expected")
DO_NOT_RESOLVE = N_("{n} citation(s) do not resolve")
COUNT_OF = N_("{label} {n} of {minimum}")
ENOUGH = N_(" (enough)")
HAS_OF = N_("{label} has {n} of {minimum} cited statements")
NO_NOTE_YET = N_("{label}: no note yet (0 of {minimum})")


@dataclass(frozen=True)
class Verdict:
    """``state`` is ``"done"``, ``"pending"`` or ``"broken"``; ``reason`` is for a person: a first line
    that sums up, then one line per failing (or not counted) citation (``NOTE:LINE [cite: ...]: why``);
    ``command`` is what to run next when pending (``""``: install the cited packages)."""

    state: str
    reason: str
    command: str = ""


def version_lines(reports: list[NoteReport]) -> list[str]:
    """One line per cited package whose installed version is not the one a note was checked against: a
    likely cause of citations that do not resolve (files and quotes move between releases), with the
    install that matches the note."""
    from packaging.utils import canonicalize_name

    out = []
    for rep in reports:
        for package, want in sorted((rep.checked_against or {}).items()):
            have = rep.installed.get(canonicalize_name(package))
            if have is not None and have != want:
                out.append(_(VERSION_DRIFT).format(label=rep.label, package=package, want=want, have=have))
    return out


def notes_verdict(reports: list[NoteReport], minimum: int, missing: Sequence[str] = ()) -> Verdict:
    """Decide what the reports of all notes mean together: is the evidence wrong, or only not enough yet?

    Args:
        reports: one per note that exists.
        minimum: cited statements each note needs.
        missing: labels of the notes that do not exist yet (each counts 0).

    - pending: a cited package is not installed (nothing can be checked against it); the reason
      still lists every other failing citation, so installing is not the only fix a person sees;
    - broken: a citation fails or is malformed (wrong evidence); the reason lists each, what a short note
      did not count, and (first line) each note still missing;
    - pending (``distcheck cite``): every citation resolves but a note has fewer than ``minimum``
      cited statements or is missing (a note in progress); the first line gives every note's count,
      then why each citation of a short note that was not counted (hidden, filler) did not count;
    - done: otherwise. The reason then lists each note's count.

    A pending or broken reason also names every cited package installed at another version than the
    note's ``checked-against`` (:func:`version_lines`), right after its first line.

    Which names may be cited is decided before (``unknown-package`` failures, see
    :func:`pytest_distcheck.citations.verifier.check_citation`): those are broken, not pending.
    """
    missing_pkgs = sorted(
        {r.citation.package for rep in reports for r in rep.failures if r.code == "not-installed"}
    )
    if missing_pkgs:
        others = [
            line for rep in reports
            for line in failure_lines(rep, skip_codes=("not-installed",))
        ]
        head = _(NOT_INSTALLED).format(packages=", ".join(missing_pkgs))
        if others:
            head += _(OTHERS_FAIL).format(n=len(others))
        return Verdict("pending", "\n".join([head, *version_lines(reports), *others]))
    failures = [line for rep in reports for line in failure_lines(rep)]
    short = [rep for rep in reports if rep.cited_statements < minimum]
    counts = "; ".join(f"{rep.label}: {summary(rep)}" for rep in reports)
    # A short note also says why each citation it has did not count.
    uncounted = [line for rep in short for line in uncounted_lines(rep)]
    if failures:
        heads = [_(TOO_FEW).format(label=rep.label, statements=cited_statements(rep.cited_statements), minimum=minimum)
                 for rep in short]
        heads += [_(NO_NOTE_YET).format(label=label, minimum=minimum) for label in missing]
        heads.append(_(DO_NOT_RESOLVE).format(n=len(failures)))
        lines = ["; ".join(heads), *version_lines(reports), *failures, *uncounted, counts]
        return Verdict("broken", "\n".join(lines))
    if short or missing:
        parts = [_(COUNT_OF).format(label=rep.label, n=rep.cited_statements, minimum=minimum)
                 + ("" if rep in short else _(ENOUGH)) for rep in reports]
        if reports and reports[0] in short:
            parts[0] = _(HAS_OF).format(label=reports[0].label, n=reports[0].cited_statements, minimum=minimum)
        parts += [_(NO_NOTE_YET).format(label=label, minimum=minimum) for label in missing]
        lines = ["; ".join(parts), *version_lines(reports), *uncounted]
        return Verdict("pending", "\n".join(lines), "distcheck cite")
    return Verdict("done", counts)
