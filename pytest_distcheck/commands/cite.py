"""Verify the citations of reading notes against the installed sources, or find a symbol to cite.

  distcheck cite docs/notes/megatron.md        each citation with its status; exit 1 if any fails
  distcheck cite                               the notes listed in [notes] of the workspace file
  distcheck cite --record NOTE                 also write the verified versions into NOTE's front matter
  distcheck cite --find ColumnParallelLinear.forward --package megatron-core

Citation syntax: [cite: PACKAGE PATH::SYMBOL "QUOTE"]; see docs/lab/03-megatron-fsdp-reading.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from pytest_distcheck.commands import DEFAULT_CONFIG, add_config_argument
from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.workspace import NOT_FOUND_HINT

NO_WORKSPACE = N_("workspace file {path} not found")
GIVE_NOTES = N_("give note files (distcheck cite NOTE.md ...); {hint}")
GIVE_OR_LIST_NOTES = N_("give note files, or list them in [notes] paths of {config}")
NO_SUCH_NOTE = N_("{path}: no such note; {next}")
FROM_TEMPLATE = N_("start it from the template: cp {template} {path}")
WRITE_IT = N_("write it, or check the path")
INSTALL = N_("  install the cited packages with: {install}")
TOO_FEW = N_("  too few: {statements}, at least {minimum} needed")
NOT_RECORDED = N_("  not recorded: versions are recorded only when every citation resolves")
RECORDED = N_("  recorded: {recorded}")
FIND_NEEDS_PACKAGE = N_("--find needs --package P (or packages = [...] in [notes] of the workspace file)")
FOUND = N_("{name} {version}  {path}::{symbol}  lines {start}-{end}\n    {citation}")
NOT_DEFINED = N_("{symbol}: not defined in {packages}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("files", nargs="*", metavar="FILE", help="Markdown notes (default: [notes] paths)")
    parser.add_argument("--find", metavar="SYMBOL", help="print where SYMBOL (dotted, e.g. Class.method) is defined")
    parser.add_argument(
        "--package", action="append", metavar="P",
        help="distribution to search with --find (repeatable; default: [notes] packages)",
    )
    parser.add_argument(
        "--record", action="store_true", help="write checked-against versions (PEP 503 names) into each note"
    )
    parser.add_argument(
        "--min", type=int, metavar="N", dest="minimum",
        help="cited statements each note needs (default: [notes] min_cited_decisions, else none)",
    )
    add_config_argument(parser)


def _notes_config(path: str):
    """(the workspace's [notes] section or None, the workspace root or None); (None, None) when no
    workspace file was named and none was found."""
    from pytest_distcheck.citations.config import notes_config
    from pytest_distcheck.workspace import load_workspace

    if not Path(path).is_file():
        if path != DEFAULT_CONFIG:
            raise DistcheckError(_(NO_WORKSPACE).format(path=path))
        return None, None
    ws = load_workspace(Path(path))
    return (notes_config(ws) if ws.section("notes") else None), ws.root


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.citations.resolver import Resolver

    cfg, root = _notes_config(args.config)
    resolver = Resolver()
    if args.find:
        return _find(resolver, args.find, args.package or (list(cfg.packages) if cfg else []))
    # [notes] paths are relative to the workspace root; shown relative to here (run from any subfolder).
    files = args.files or ([os.path.relpath(root / p) for p in cfg.paths] if cfg else [])
    if not files:
        if root is None:
            raise DistcheckError(_(GIVE_NOTES).format(hint=_(NOT_FOUND_HINT)))
        raise DistcheckError(_(GIVE_OR_LIST_NOTES).format(config=args.config))
    minimum = args.minimum if args.minimum is not None else (cfg.min_cited_decisions if cfg else 0)
    return _verify(
        resolver, [Path(f) for f in files], minimum, args.record,
        cfg.install if cfg else None, cfg.packages if cfg else (),
    )


def _verify(
    resolver, files: list[Path], minimum: int, record: bool, install: str | None, packages: tuple[str, ...]
) -> int:
    """Print each note's report; ``packages`` ([notes] packages) are the names citations may use."""
    from pytest_distcheck.citations.record import record_versions
    from pytest_distcheck.citations.report import cited_statements, note_lines
    from pytest_distcheck.citations.verifier import verify_note

    status = 0
    for n, path in enumerate(files):
        if not path.is_file():
            raise DistcheckError(_(NO_SUCH_NOTE).format(path=path, next=_start_note(path)))
        report = verify_note(path, resolver, packages=packages)
        recorded = None
        if record and report.ok:
            recorded = record_versions(report)
            report = verify_note(path, resolver, packages=packages)  # parsed files are cached: cheap
        print(("\n" if n else "") + "\n".join(note_lines(report)))
        if any(r.code == "not-installed" for r in report.failures) and install:
            print(_(INSTALL).format(install=install))
        if minimum and report.cited_statements < minimum:
            print(_(TOO_FEW).format(statements=cited_statements(report.cited_statements), minimum=minimum))
            status = 1
        if not report.ok:
            status = 1
            if record:
                print(_(NOT_RECORDED))
        elif recorded:
            print(_(RECORDED).format(recorded=recorded))
    return status


def _start_note(path: Path) -> str:
    """The next step for a note that does not exist: copy the template (:func:`~pytest_distcheck.citations.config.
    note_template`), else write it."""
    from pytest_distcheck.citations.config import note_template

    template = note_template(path)
    if template is not None:
        return _(FROM_TEMPLATE).format(template=shlex.quote(str(template)), path=shlex.quote(str(path)))
    return _(WRITE_IT)


def _find(resolver, symbol: str, packages: list[str]) -> int:
    from pytest_distcheck.citations.find import find_symbol
    from pytest_distcheck.citations.resolver import Problem

    if not packages:
        raise DistcheckError(_(FIND_NEEDS_PACKAGE))
    total = 0
    for package in packages:
        try:
            found = find_symbol(resolver, symbol, package)
        except Problem as exc:
            raise DistcheckError(exc.message) from None
        for hit in found:
            print(_(FOUND).format(name=hit.dist.name, version=hit.dist.public_version, path=hit.path,
                                  symbol=hit.span.name, start=hit.span.start, end=hit.span.end,
                                  citation=hit.citation()))
        total += len(found)
    if not total:
        print(_(NOT_DEFINED).format(symbol=symbol, packages=", ".join(packages)))
        return 1
    return 0
