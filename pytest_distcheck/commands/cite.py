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
from pytest_distcheck.workspace import NOT_FOUND_HINT


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
            raise DistcheckError(f"workspace file {path} not found")
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
            raise DistcheckError(f"give note files (distcheck cite NOTE.md ...); {NOT_FOUND_HINT}")
        raise DistcheckError(f"give note files, or list them in [notes] paths of {args.config}")
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
    from pytest_distcheck.citations.report import note_lines, plural
    from pytest_distcheck.citations.verifier import verify_note

    status = 0
    for n, path in enumerate(files):
        if not path.is_file():
            raise DistcheckError(f"{path}: no such note; {_start_note(path)}")
        report = verify_note(path, resolver, packages=packages)
        recorded = None
        if record and report.ok:
            recorded = record_versions(report)
            report = verify_note(path, resolver, packages=packages)  # parsed files are cached: cheap
        print(("\n" if n else "") + "\n".join(note_lines(report)))
        if any(r.code == "not-installed" for r in report.failures) and install:
            print(f"  install the cited packages with: {install}")
        if minimum and report.cited_statements < minimum:
            print(f"  too few: {plural(report.cited_statements, 'cited statement')}, at least {minimum} needed")
            status = 1
        if not report.ok:
            status = 1
            if record:
                print("  not recorded: versions are recorded only when every citation resolves")
        elif recorded:
            print(f"  recorded: {recorded}")
    return status


def _start_note(path: Path) -> str:
    """The next step for a note that does not exist: copy the template beside it (``TEMPLATE.md``, as
    ``distcheck init`` lays out ``docs/notes/``), else write it."""
    template = path.parent / "TEMPLATE.md"
    if template.is_file():
        return f"start it from the template: cp {shlex.quote(str(template))} {shlex.quote(str(path))}"
    return "write it, or check the path"


def _find(resolver, symbol: str, packages: list[str]) -> int:
    from pytest_distcheck.citations.find import find_symbol
    from pytest_distcheck.citations.resolver import Problem

    if not packages:
        raise DistcheckError("--find needs --package P (or packages = [...] in [notes] of the workspace file)")
    total = 0
    for package in packages:
        try:
            found = find_symbol(resolver, symbol, package)
        except Problem as exc:
            raise DistcheckError(exc.message) from None
        for hit in found:
            print(
                f"{hit.dist.name} {hit.dist.public_version}  {hit.path}::{hit.span.name}  "
                f"lines {hit.span.start}-{hit.span.end}\n    {hit.citation()}"
            )
        total += len(found)
    if not total:
        print(f"{symbol}: not defined in {', '.join(packages)}")
        return 1
    return 0
