"""Text for people: one line per citation, and the verdict on a set of notes for the DoD check."""

from __future__ import annotations

from pytest_distcheck.citations.verifier import CitationResult, NoteReport, Status
from pytest_distcheck.i18n import N_, _, ngettext

RESOLVED = N_("line {line}  {text}  -> {symbol} lines {start}-{end}")
NOT_RESOLVED = N_("line {line}  {text}: {reason}")
CHECKED_AGAINST = N_("checked against {versions}")
NO_VERSIONS = N_("no checked-against versions recorded")
NOTE_HEADER = "{label}  ({versions})"
WARNING_LINE = N_("  warning: {warning}")
SUMMARY = N_("{statements}; {citations}: {ok} ok, {uncounted} not counted, {failed} failed")
FAILURE = "{label}:{line} {text}: {reason}"
UNCOUNTED = N_("{label}:{line} {text}: not counted: {reason}")
UNSEEN = N_("{label}: {n} [cite: ...] in HTML comments or code blocks not counted: a reader of the rendered note does "
            "not see them")
# The listing's word for each status (a Status value is an identifier; these are for the reader).
LABELS = {Status.COUNTED: N_("ok"), Status.UNCOUNTED: N_("not counted"), Status.FAILED: N_("FAILED")}


def cited_statements(n: int) -> str:
    """``1 cited statement``, ``2 cited statements``, in the language in use."""
    return ngettext("{n} cited statement", "{n} cited statements", n).format(n=n)


def citations(n: int) -> str:
    """``1 citation``, ``2 citations``, in the language in use."""
    return ngettext("{n} citation", "{n} citations", n).format(n=n)


def describe(result: CitationResult) -> str:
    """``line 12  [cite: ...]  -> file lines 870-960`` or ``line 12  [cite: ...]: why it fails``."""
    cit = result.citation
    if result.status is Status.COUNTED and result.span is not None:
        return _(RESOLVED).format(line=cit.line, text=cit.text, symbol=result.span.name, start=result.span.start,
                                  end=result.span.end)
    return _(NOT_RESOLVED).format(line=cit.line, text=cit.text, reason=result.reason)


def note_lines(report: NoteReport) -> list[str]:
    """The report of one note, as printed by ``distcheck cite``: a header, one line per citation, the
    malformed ones, the version warnings and a count."""
    recorded = report.checked_against
    versions = (_(CHECKED_AGAINST).format(versions=", ".join(f"{p} {v}" for p, v in recorded.items())) if recorded
                else _(NO_VERSIONS))
    out = [NOTE_HEADER.format(label=report.label, versions=versions)]
    for res in report.results:
        out.append(f"  {_(LABELS[res.status]):<11} {describe(res)}")
    for bad in report.malformed:
        out.append(f"  {_(LABELS[Status.FAILED]):<11} " + _(NOT_RESOLVED).format(line=bad.line, text=bad.text,
                                                                                 reason=bad.problem))
    for warning in report.warnings:
        out.append(_(WARNING_LINE).format(warning=warning))
    out.append(f"  {summary(report)}")
    return out


def summary(report: NoteReport) -> str:
    """``9 cited statements; 12 citations: 11 ok, 1 not counted, 0 failed`` (``1 cited statement``)."""
    counted = sum(r.status is Status.COUNTED for r in report.results)
    uncounted = sum(r.status is Status.UNCOUNTED for r in report.results)
    failed = len(report.failures) + len(report.malformed)
    total = len(report.results) + len(report.malformed)
    return _(SUMMARY).format(statements=cited_statements(report.cited_statements), citations=citations(total),
                             ok=counted, uncounted=uncounted, failed=failed)


def failure_lines(report: NoteReport, skip_codes: tuple[str, ...] = ()) -> list[str]:
    """``NOTE:LINE [cite: ...]: reason`` for every citation of the note that fails (except those whose
    code is in ``skip_codes``) or is malformed."""
    out = [FAILURE.format(label=report.label, line=r.citation.line, text=r.citation.text, reason=r.reason)
           for r in report.failures if r.code not in skip_codes]
    out += [FAILURE.format(label=report.label, line=m.line, text=m.text, reason=m.problem) for m in report.malformed]
    return out


def uncounted_lines(report: NoteReport) -> list[str]:
    """``NOTE:LINE [cite: ...]: not counted: reason`` for every citation that resolves but does not count,
    then one line for the citations a reader cannot see (in HTML comments or code), if any."""
    out = [_(UNCOUNTED).format(label=report.label, line=r.citation.line, text=r.citation.text, reason=r.reason)
           for r in report.results if r.status is Status.UNCOUNTED]
    if report.unseen:
        out.append(_(UNSEEN).format(label=report.label, n=report.unseen))
    return out
