"""Print the skeleton of a TP block's Mermaid diagram from the workspace's plan; check or render a page's diagram.

  distcheck diagram                  print a skeleton page: the plan's layers on each rank, nothing decided
  distcheck diagram --check [PAGE]   compare PAGE's diagram (default [diagram].page) with the plan
  distcheck diagram --render [PAGE]  write PAGE's diagram as SVG beside it (PAGE with .svg)
  distcheck diagram --check my-block.md --plan mymodel.plan:PLAN   (or --plan 'attn.qkv=colwise,...' --world-size 2)

--check names the idea at fault in each message, never the right diagram, and says when the SVG beside a right
diagram is missing, unlinked or stale. The labelling convention and --plan: docs/kit/tools.md and lab 02.
Exit status: 0 right, 1 the diagram differs from the plan or does not parse, 2 bad input.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_distcheck.commands import add_config_argument
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.textfile import DIAGRAM_PAGE, PAGE_BYTES, read_text
from pytest_distcheck.workspace import at_root

WORLD_SIZE_BELOW_1 = N_("must be >= 1, found {n}")
INLINE_PLAN = N_("the plan given inline")
PLAN_NEEDS_PAGE = N_("with --plan give the page too: distcheck diagram --check PAGE --plan ...")
WORLD_SIZE_WITHOUT_PLAN = N_("only with --plan (the workspace's [diagram] world_size applies)")
# {command}: distcheck diagram > PAGE, as typed where the learner is (workspace.at_root for the workspace's page).
PAGE_MISSING = N_("page not found (start one with: {command})")
PAGE_WITHOUT_MD = N_("page not found; {page}.md is there: distcheck diagram {mode} {page}.md")
RANKS = N_("{n} ranks")
RANKS_IT_DRAWS = N_("the ranks it draws")
MATCHES = N_("{page}: the diagram at line {line} matches {plan} on {ranks}")
# A diagram with no subgraph titled `rank N` (`rango 0` is none): read as a summary, so no rank count is claimed.
MATCHES_SUMMARY = N_("{page}: the diagram at line {line} matches {plan}, read as a summary: no subgraph is titled "
                     "`rank N`, so nothing asked for each layer on every rank")
RENDER_IT = N_(": render it: {render}")
STALE_UNTIL = N_("; the DoD item is stale until you run: {render}")
WROTE = N_("wrote {svg} beside {page}, from its Mermaid block at line {line}")
THEN_COMMIT = N_("then commit the page and its SVG (a DoD check reads them as committed): {command}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", nargs="?", const="", metavar="PAGE", help="check PAGE against the plan")
    mode.add_argument("--render", nargs="?", const="", metavar="PAGE", help="render PAGE's diagram to SVG")
    parser.add_argument("--plan", metavar="PLAN",
                        help="module:NAME or 'path=colwise,path=rowwise,...' instead of the workspace's plan")
    parser.add_argument("--world-size", type=int, metavar="N", help="ranks the diagram draws (with --plan)")
    add_config_argument(parser)


@dataclass(frozen=True)
class _Own:
    """A plan given with --plan: what the commands below read of a DiagramConfig."""

    plan_ref: str
    plan: dict
    names: object
    world_size: int | None


def _own_plan(args: argparse.Namespace) -> _Own:
    from pytest_distcheck.diagram.config import load_plan_names
    from pytest_distcheck.diagram.plan import LayerNames, parse_inline
    from pytest_distcheck.errors import ConfigError

    if args.world_size is not None and args.world_size < 1:
        raise ConfigError("--world-size", "", _(WORLD_SIZE_BELOW_1).format(n=args.world_size))
    if "=" in args.plan:
        try:
            plan = parse_inline(args.plan)
        except ValueError as exc:
            raise ConfigError("--plan", "", str(exc)) from None
        return _Own(_(INLINE_PLAN), plan, LayerNames(), args.world_size)
    plan, names = load_plan_names(args.plan, Path.cwd(), Path("--plan"), "")
    return _Own(args.plan, plan, names, args.world_size)


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.errors import ConfigError

    if args.plan is not None:
        cfg = _own_plan(args)
        page_arg = args.check if args.check is not None else args.render
        if page_arg is None:
            return _print_start(cfg, cfg.world_size or 2, "diagram.svg")
        if not page_arg:
            raise ConfigError("--plan", "", _(PLAN_NEEDS_PAGE))
        page, shown, shell = Path(page_arg), page_arg, str
    else:
        from pytest_distcheck.diagram.config import diagram_config
        from pytest_distcheck.workspace import load_workspace

        if args.world_size is not None:
            raise ConfigError("--world-size", "", _(WORLD_SIZE_WITHOUT_PLAN))
        ws = load_workspace(Path(args.config))
        cfg = diagram_config(ws)
        if args.check is None and args.render is None:
            return _print_start(cfg, cfg.world_size, cfg.svg.name)
        page_arg = args.check if args.check is not None else args.render
        page = Path(page_arg) if page_arg else cfg.page
        shown = page_arg or cfg.page_rel  # as the user would type it, for messages
        # A page given runs from here; the workspace's page is relative to its root, where its command runs.
        shell = str if page_arg else functools.partial(at_root, root=ws.root)
    if not page.is_file():
        raise ConfigError(shown, "", _not_found(page, shown, "--check" if args.check is not None else "--render",
                                                shell))
    if args.check is not None:
        return _check(page, shown, cfg, svg=args.plan is None)
    return _render(page, shown, cfg)


def _not_found(page: Path, shown: str, mode: str, shell: Callable[[str], str] = str) -> str:
    """What to do about a page that is not there: the Markdown page of that name when there is one (the
    ``.md`` left out), else how to start it (``shell``: that command as the learner types it here)."""
    if page.suffix != ".md" and page.with_name(page.name + ".md").is_file():
        return _(PAGE_WITHOUT_MD).format(page=shown, mode=mode)
    return _(PAGE_MISSING).format(command=shell(f"distcheck diagram > {shlex.quote(shown)}"))


def _print_start(cfg, world_size: int, svg_name: str) -> int:
    from pytest_distcheck.diagram.skeleton import skeleton_page

    print(skeleton_page(cfg.plan_ref, cfg.plan, world_size, svg_name), end="")
    return 0


def _check(page: Path, shown: str, cfg, svg: bool) -> int:
    from pytest_distcheck.diagram.check import check_page, svg_state
    from pytest_distcheck.diagram.mermaid import MermaidParser

    markdown = read_text(page, DIAGRAM_PAGE, limit=PAGE_BYTES)
    with MermaidParser() as parser:
        result = check_page(markdown, cfg.plan, cfg.world_size, parser, cfg.names)
    for f in result.findings:
        print(f"{shown}:{f.line}: {f.message}")
    if result.findings:
        return 1
    ranks = _(RANKS).format(n=cfg.world_size) if cfg.world_size is not None else _(RANKS_IT_DRAWS)
    if result.per_rank:
        print(_(MATCHES).format(page=shown, line=result.diagram.fence_line, plan=cfg.plan_ref, ranks=ranks))
    else:
        print(_(MATCHES_SUMMARY).format(page=shown, line=result.diagram.fence_line, plan=cfg.plan_ref))
    if svg:  # the SVG as the DoD check (checks/test_tp_diagram_committed.py) judges it
        state = svg_state(markdown, shown, page.with_suffix(".svg"), result.diagram)
        render = f"distcheck diagram --render {shown}"
        fix = {"missing": _(RENDER_IT).format(render=render), "unlinked": "",
               "unstamped": _(STALE_UNTIL).format(render=render), "stale": _(STALE_UNTIL).format(render=render)}
        if state.state != "ok":
            print(f"{shown}: {state.message}{fix[state.state]}")
    return 0


def _render(page: Path, shown: str, cfg) -> int:
    from pytest_distcheck.diagram.check import check_page, write_svg
    from pytest_distcheck.diagram.mermaid import MermaidParser

    with MermaidParser() as parser:
        result = check_page(read_text(page, DIAGRAM_PAGE, limit=PAGE_BYTES), cfg.plan, cfg.world_size, parser,
                            cfg.names)
    if result.diagram is None:
        for f in result.findings:
            print(f"{shown}:{f.line}: {f.message}")
        return 1
    out = write_svg(page, result.diagram)
    print(_(WROTE).format(svg=out.name, page=shown, line=result.diagram.fence_line))
    for f in result.findings:  # rendered anyway, so a person can look at what is wrong
        print(f"{shown}:{f.line}: {f.message}")
    if result.findings:
        return 1
    from pytest_distcheck.committed import commit_command

    both = [os.path.relpath(page), os.path.relpath(out)]
    print(_(THEN_COMMIT).format(command=commit_command(both, 'diagram and its SVG')))
    return 0
