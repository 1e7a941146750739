"""Record in a note's front matter the package versions its citations were verified against."""

from __future__ import annotations

from pytest_distcheck.citations.verifier import NoteReport
from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, _, ngettext

KEY = "checked-against"
NOTHING_TO_RECORD = N_("{note}: cites no installed package; nothing to record")
UNCLOSED = N_("{note}: front matter opened with '---' is never closed")


def record_versions(report: NoteReport) -> str:
    """Write ``checked-against: PKG VERSION, ...`` (the installed versions of the cited packages, by
    their PEP 503 names) into the note's front matter, adding the front matter if there is none.
    A byte-order mark and CRLF line ends are kept. Returns the line written.

    Raises:
        DistcheckError: the note has failing or malformed citations (recording a version the note does
            not pass against would be false), or cites nothing.
    """
    if not report.ok:
        bad = len(report.failures) + len(report.malformed)
        raise DistcheckError(ngettext("{note}: {n} citation does not resolve; fix it before recording versions",
                                      "{note}: {n} citations do not resolve; fix them before recording versions",
                                      bad).format(note=report.label, n=bad))
    if not report.installed:
        raise DistcheckError(_(NOTHING_TO_RECORD).format(note=report.label))
    line = f"{KEY}: " + ", ".join(f"{p} {v}" for p, v in sorted(report.installed.items()))
    raw = report.path.read_bytes()
    bom = raw.startswith(b"\xef\xbb\xbf")
    newline = "\r\n" if b"\r\n" in raw else "\n"  # written back as the note has it
    lines = [ln + "\n" for ln in raw.decode("utf-8-sig").replace("\r\n", "\n").split("\n")]
    lines[-1] = lines[-1][:-1]
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is None:
            raise DistcheckError(_(UNCLOSED).format(note=report.label))
        at = next((i for i in range(1, end) if lines[i].split(":", 1)[0].strip() == KEY), None)
        if at is None:
            lines.insert(end, line + "\n")
        else:
            lines[at] = line + "\n"
    else:
        lines[:0] = ["---\n", line + "\n", "---\n", "\n"]
    text = "".join(lines).replace("\n", newline)
    report.path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return line
