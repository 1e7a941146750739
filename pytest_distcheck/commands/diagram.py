"""Print a correct starting Mermaid diagram of the workspace's TP plan; check or render a page's diagram.

  distcheck diagram                  print a ```mermaid block drawn from [diagram].plan
  distcheck diagram --check [PAGE]   compare PAGE's diagram (default [diagram].page) with the plan
  distcheck diagram --render [PAGE]  write PAGE's diagram as SVG beside it (PAGE with .svg)

The labelling convention the check reads is in pytest_distcheck.diagram.labels and on the page.
Exit status: 0 right, 1 the diagram differs from the plan or does not parse, 2 bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_distcheck.commands import add_config_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", nargs="?", const="", metavar="PAGE", help="check PAGE against the plan")
    mode.add_argument("--render", nargs="?", const="", metavar="PAGE", help="render PAGE's diagram to SVG")
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.diagram.config import diagram_config
    from pytest_distcheck.workspace import load_workspace

    ws = load_workspace(Path(args.config))
    cfg = diagram_config(ws)
    if args.check is None and args.render is None:
        return _print_start(cfg)
    page_arg = args.check if args.check is not None else args.render
    page = Path(page_arg) if page_arg else cfg.page
    shown = page_arg or cfg.page_rel  # as the user would type it, for messages
    if not page.is_file():
        from pytest_distcheck.errors import ConfigError

        raise ConfigError(shown, "", f"page not found (start one with: distcheck diagram > {shown})")
    if args.check is not None:
        return _check(page, shown, cfg)
    return _render(page, shown, cfg)


def _print_start(cfg) -> int:
    from pytest_distcheck.diagram.generate import starting_diagram

    print(
        f"<!-- Drawn by `distcheck diagram` from {cfg.plan_ref} on {cfg.world_size} ranks. Edit freely;\n"
        f"     keep each layer's module path and its style (column-parallel / row-parallel) in its label,\n"
        f"     an all-reduce node after each row-parallel layer, and one subgraph titled 'rank N' per rank.\n"
        f"     Then: distcheck diagram --check && distcheck diagram --render -->\n"
    )
    print("```mermaid")
    print(starting_diagram(cfg.plan, cfg.world_size), end="")
    print("```")
    print(f"\n![The same diagram, rendered]({cfg.svg.name})")
    return 0


def _check(page: Path, shown: str, cfg) -> int:
    from pytest_distcheck.diagram.check import check_page
    from pytest_distcheck.diagram.mermaid import MermaidParser

    with MermaidParser() as parser:
        result = check_page(page.read_text(encoding="utf-8"), cfg.plan, cfg.world_size, parser, cfg.names)
    for f in result.findings:
        print(f"{shown}:{f.line}: {f.message}")
    if result.findings:
        return 1
    print(f"{shown}: the diagram at line {result.diagram.fence_line} matches {cfg.plan_ref} on {cfg.world_size} ranks")
    return 0


def _render(page: Path, shown: str, cfg) -> int:
    from pytest_distcheck.diagram.check import check_page, write_svg
    from pytest_distcheck.diagram.mermaid import MermaidParser

    with MermaidParser() as parser:
        result = check_page(page.read_text(encoding="utf-8"), cfg.plan, cfg.world_size, parser, cfg.names)
    if result.diagram is None:
        for f in result.findings:
            print(f"{shown}:{f.line}: {f.message}")
        return 1
    out = write_svg(page, result.diagram)
    print(f"wrote {out.name} beside {shown}, from its Mermaid block at line {result.diagram.fence_line}")
    for f in result.findings:  # rendered anyway, so a person can look at what is wrong
        print(f"{shown}:{f.line}: {f.message}")
    return 1 if result.findings else 0
