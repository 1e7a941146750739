"""Text for people: one line per citation, and the verdict on a set of notes for the DoD check."""

from __future__ import annotations

from pytest_distcheck.citations.verifier import CitationResult, NoteReport, Status


def describe(result: CitationResult) -> str:
    """``line 12  [cite: ...]  -> file lines 870-960`` or ``line 12  [cite: ...]: why it fails``."""
    cit = result.citation
    head = f"line {cit.line}  {cit.text}"
    if result.status is Status.COUNTED and result.span is not None:
        return f"{head}  -> {result.span.name} lines {result.span.start}-{result.span.end}"
    return f"{head}: {result.reason}"


def note_lines(report: NoteReport) -> list[str]:
    """The report of one note, as printed by ``distcheck cite``: a header, one line per citation, the
    malformed ones, the version warnings and a count."""
    recorded = report.checked_against
    header = (
        "checked against " + ", ".join(f"{p} {v}" for p, v in recorded.items())
        if recorded
        else "no checked-against versions recorded"
    )
    out = [f"{report.label}  ({header})"]
    for res in report.results:
        out.append(f"  {res.status.value:<11} {describe(res)}")
    for bad in report.malformed:
        out.append(f"  {'FAILED':<11} line {bad.line}  {bad.text}: {bad.problem}")
    for warning in report.warnings:
        out.append(f"  warning: {warning}")
    out.append(f"  {summary(report)}")
    return out


def plural(n: int, noun: str) -> str:
    """``1 citation``, ``2 citations``: ``n`` and ``noun``, plural unless ``n`` is 1."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def summary(report: NoteReport) -> str:
    """``9 cited statements; 12 citations: 11 ok, 1 not counted, 0 failed`` (``1 cited statement``)."""
    counted = sum(r.status is Status.COUNTED for r in report.results)
    uncounted = sum(r.status is Status.UNCOUNTED for r in report.results)
    failed = len(report.failures) + len(report.malformed)
    total = len(report.results) + len(report.malformed)
    return (
        f"{plural(report.cited_statements, 'cited statement')}; {plural(total, 'citation')}: "
        f"{counted} ok, {uncounted} not counted, {failed} failed"
    )


def failure_lines(report: NoteReport, skip_codes: tuple[str, ...] = ()) -> list[str]:
    """``NOTE:LINE [cite: ...]: reason`` for every citation of the note that fails (except those whose
    code is in ``skip_codes``) or is malformed."""
    out = [
        f"{report.label}:{r.citation.line} {r.citation.text}: {r.reason}"
        for r in report.failures
        if r.code not in skip_codes
    ]
    out += [f"{report.label}:{m.line} {m.text}: {m.problem}" for m in report.malformed]
    return out


def uncounted_lines(report: NoteReport) -> list[str]:
    """``NOTE:LINE [cite: ...]: not counted: reason`` for every citation that resolves but does not count,
    then one line for the citations a reader cannot see (in HTML comments or code), if any."""
    out = [
        f"{report.label}:{r.citation.line} {r.citation.text}: not counted: {r.reason}"
        for r in report.results
        if r.status is Status.UNCOUNTED
    ]
    if report.unseen:
        out.append(f"{report.label}: {report.unseen} [cite: ...] in HTML comments or code blocks not counted: "
                   "a reader of the rendered note does not see them")
    return out
