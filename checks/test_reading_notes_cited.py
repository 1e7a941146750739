"""DoD item reading-notes-cited: reading notes on Megatron-LM and FSDP, each with cited design decisions.

The notes and the minimum come from ``[notes]`` of the workspace file. Each citation is verified
against the installed sources (``pytest_distcheck.citations``); see docs/lab/03-megatron-fsdp-reading.md.
"""

from __future__ import annotations

import shlex
import warnings

import pytest

import pytest_distcheck
from pytest_distcheck.citations.config import note_template, notes_config
from pytest_distcheck.citations.resolver import Resolver
from pytest_distcheck.citations.verdict import notes_verdict
from pytest_distcheck.citations.verifier import verify_note
from pytest_distcheck.committed import require_committed
from pytest_distcheck.dod import provenance
from pytest_distcheck.i18n import _
from pytest_distcheck.phase35.messages import NO_NOTE, NOTES_DONE, NOTES_TITLE
from pytest_distcheck.workspace import display_path


@pytest.mark.local
@pytest.mark.dod("reading-notes-cited")
def test_reading_notes_cite_design_decisions(distcheck_workspace, distcheck_log, distcheck_evidence):
    ws = distcheck_workspace
    cfg = notes_config(ws)
    item = ws.item("reading-notes-cited")
    missing = [rel for rel in cfg.paths if not ws.resolve(rel).is_file()]
    # The one command to start the missing notes (the reason says what to write), when a template exists.
    templates = [note_template(ws.resolve(rel)) for rel in missing]
    start = " && ".join(f"cp {shlex.quote(display_path(t, ws.root))} {shlex.quote(rel)}"
                        for t, rel in zip(templates, missing, strict=True)) if missing and all(templates) else ""
    if len(missing) == len(cfg.paths):
        pytest_distcheck.pending(_(NO_NOTE).format(paths=", ".join(missing), n=cfg.min_cited_decisions),
                                 start or item.how)
    distcheck_evidence(*(ws.resolve(rel) for rel in cfg.paths))
    resolver = Resolver()
    reports = [verify_note(ws.resolve(rel), resolver, label=rel, packages=cfg.packages)
               for rel in cfg.paths if rel not in missing]
    for rep in reports:
        for warning in rep.warnings:
            warnings.warn(warning, UserWarning, stacklevel=1)
    # Wrong evidence (a citation that fails) is broken; a note in progress (too few statements) is pending.
    verdict = notes_verdict(reports, cfg.min_cited_decisions, missing=missing)
    if verdict.state == "pending":
        pytest_distcheck.pending(verdict.reason, (verdict.command and start) or verdict.command or cfg.install)
    if verdict.state == "broken":
        pytest_distcheck.broken(verdict.reason)
    # The gate judges the commit: notes only in the working tree count for nothing there.
    require_committed([ws.resolve(rel) for rel in cfg.paths], ws.root)
    distcheck_log(_(NOTES_TITLE), verdict.reason)
    distcheck_evidence(flags=[provenance.CONFIRMED])
    pytest_distcheck.done(_(NOTES_DONE))
