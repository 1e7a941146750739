"""Every command and kit path the docs show exists (issue 21): each `distcheck SUB --option` names a subcommand
and options of that subcommand, each `pytest --option` an option pytest or an installed plugin registers,
each `-m experiments.X --option` an option of that experiment's command line, and each path into the kit's
own folders is there.

The pages are read as CommonMark (markdown-it-py): code spans, fenced and indented code and link targets,
so a command quoted in prose counts and an example in an HTML comment does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from pytest_distcheck.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
IDS = [str(p.relative_to(ROOT)) for p in PAGES]
# the pages whose kit paths are checked; README.md also names files of an installed wheel and a learner's own
PATH_PAGES = [p for p in PAGES if p.parent.name in ("theory", "lab", "notes") or p == ROOT / "docs" / "README.md"]
# the kit's manual (not shipped to a workspace): its paths are checked in this repository; its index, like
# README.md, also names the files of an installed wheel
MANUAL_PAGES = [*sorted(p for p in (ROOT / "docs" / "kit").glob("*.md") if p.name != "README.md"),
                ROOT / "docs" / "ci" / "gate.md"]

EXPERIMENT = re.compile(r"-m\s+(experiments\.[\w.]+)((?:\s+[^\s|;&#]+)*)")
DISTCHECK = re.compile(r"(?:^|\s)distcheck\s+([a-z][\w-]*)(?![\w:-])((?:\s+[^\s|;&#]+)*)")
PYTEST = re.compile(r"(?:^|\s)pytest((?:\s+[^\s|;&#]+)*)")
# the kit's own folders; experiments/ only for code (its results/ are the learner's to write)
KIT_PATH = re.compile(r"(?<![\w/.-])((?:pytest_distcheck|tests|fixtures|solutions|checks|benchmarks)/[\w./-]*"
                      r"|experiments/[\w/-]+\.(?:py|sh))")


def snippets(markdown: str) -> list[str]:
    """The code a reader sees: each line of fenced/indented code, each code span, each link target."""
    out: list[str] = []
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type in ("fence", "code_block"):
            out += token.content.splitlines()
        elif token.type == "inline":
            out += [c.content for c in token.children or [] if c.type == "code_inline"]
            out += [c.attrs.get("href", "") for c in token.children or [] if c.type == "link_open"]
    return out


def _subparsers() -> dict:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0]))).choices


def _pytest_options() -> set[str]:
    from _pytest.config import get_config

    config = get_config()
    config.pluginmanager.load_setuptools_entrypoints("pytest11")
    parser = config._parser
    return {name for group in [parser._anonymous, *parser._groups] for o in group.options for name in o.names()}


def experiment_options(module: str) -> set[str]:
    """The options an experiment's command line accepts, read from its --help (the module is imported, not
    run: its parser exits on --help)."""
    import contextlib
    import importlib
    import io
    import sys
    from unittest import mock

    mod = importlib.import_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), mock.patch.object(sys, "argv", [module, "--help"]):
        try:
            if hasattr(mod, "parse_args"):
                mod.parse_args(["--help"])
            else:
                mod.main()
        except SystemExit:
            pass
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", out.getvalue()))


def unknown_commands(markdown: str, subparsers: dict, pytest_options: set[str],
                     experiment: Callable[[str], set[str]] = experiment_options) -> list[str]:
    """One line per `distcheck` subcommand or option, `pytest` option or `-m experiments.X` option that does
    not exist."""
    problems = []
    for snippet in snippets(markdown):
        code = snippet.split(" #")[0]
        for m in EXPERIMENT.finditer(code):
            known = experiment(m.group(1))
            problems += [f"`-m {m.group(1)} {a.split('=')[0]}`: no such option"
                         for a in m.group(2).split() if a.startswith("-") and a.split("=")[0] not in known]
        for m in DISTCHECK.finditer(code):
            sub, args = m.group(1), m.group(2).split()
            if sub not in subparsers:
                problems.append(f"`distcheck {sub}`: no such subcommand")
                continue
            known = subparsers[sub]._option_string_actions
            problems += [f"`distcheck {sub} {a.split('=')[0]}`: no such option"
                         for a in args if a.startswith("-") and a.split("=")[0] not in known]
        for m in PYTEST.finditer(code):
            problems += [f"`pytest {a.split('=')[0]}`: no such option"
                         for a in m.group(1).split() if a.startswith("-") and a.split("=")[0] not in pytest_options]
    return problems


def missing_paths(markdown: str, root: Path) -> list[str]:
    """The paths into the kit's folders that a page names and that do not exist, but for a file the page says is
    the learner's own to write."""
    own = {code for code, context in shown_with_context(markdown) if OWN_FILE.search(context)}
    found = {m.group(1).rstrip(".") for s in snippets(markdown) if s not in own for m in KIT_PATH.finditer(s)}
    return sorted(p for p in found if "<" not in p and not (root / p).exists())


# What a learner's workspace may lack: paths into these folders, on the pages `distcheck init` copies.
WORKSPACE_PATH = re.compile(r"(?<![\w/.-])((?:tests|fixtures|solutions|checks|benchmarks)/[\w./-]*"
                            r"|experiments/[\w/-]+\.(?:py|sh))")
# `from fixtures.tp_faults.zoo import MLP` in an example: the module must be there too.
WORKSPACE_IMPORT = re.compile(r"(?:^|\s)(?:from|import)\s+((?:tests|fixtures|checks|experiments)(?:\.\w+)+)")
KIT_REPO = re.compile(r"kit['\u2019]s\s+(?:own\s+)?repository|repositorio\s+del\s+kit", re.IGNORECASE)  # en, es
# A file the page asks the learner to write (lab 02's own TP test), which no workspace has before they do.
OWN_FILE = re.compile(r"a\s+file\s+of\s+your\s+own|un\s+fichero\s+tuyo", re.IGNORECASE)  # en, es


def shown_with_context(markdown: str) -> list[tuple[str, str]]:
    """(code a reader sees, the text it stands in): a code span with its paragraph, list item or table
    cell; a line of a code block with itself (its comment)."""
    out: list[tuple[str, str]] = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type in ("fence", "code_block"):
            out += [(line, line) for line in token.content.splitlines()]
        elif token.type == "inline":
            out += [(c.content, token.content) for c in token.children or [] if c.type == "code_inline"]
    return out


def not_in_workspace(markdown: str, workspace: Path) -> list[str]:
    """Paths into tests/, fixtures/, checks/, solutions/, benchmarks/ or the labs' code, and modules of those
    folders an example imports, that a page shows, that a fresh workspace lacks, and that the page does not
    say are the kit's repository's or a file of the learner's own (in the same paragraph, list item, table
    cell or code line)."""
    shown = [code for code, context in shown_with_context(markdown)
             if not KIT_REPO.search(context) and not OWN_FILE.search(context)]
    found = {m.group(1).rstrip(".") for code in shown for m in WORKSPACE_PATH.finditer(code)}
    modules = {m.group(1) for code in shown for m in WORKSPACE_IMPORT.finditer(code)}
    missing = [p for p in found if "<" not in p and not (workspace / p).exists()]
    missing += [m for m in modules if not (workspace / (m.replace(".", "/") + ".py")).exists()
                and not (workspace / m.replace(".", "/")).is_dir()]
    return sorted(missing)


@pytest.fixture(scope="module")
def fresh_workspace(tmp_path_factory) -> Path:
    from pytest_distcheck.workspace_init import init_workspace

    dest = tmp_path_factory.mktemp("learner")
    assert init_workspace(dest).conflicts == []
    return dest


@pytest.mark.parametrize("page", PATH_PAGES, ids=[str(p.relative_to(ROOT)) for p in PATH_PAGES])
def test_every_path_a_shipped_page_shows_is_in_a_fresh_workspace_or_said_to_be_the_kit_s(page, fresh_workspace):
    """A learner reads these pages in a workspace made by `distcheck init`: what they are told to run or
    open is there (the TP exercise, its fault zoo and tests ship with it), and the kit's own tests are
    named as files of the kit's repository (fresh-user trial: `pytest tests/test_tp_equivalence.py`
    failed with "file or directory not found")."""
    missing = not_in_workspace((fresh_workspace / page.relative_to(ROOT)).read_text(), fresh_workspace)
    assert not missing, (f"{page.relative_to(ROOT)} shows paths a fresh workspace lacks; ship them (phase_pack.py "
                         f"PACK_GLOBS) or say they are in the kit's repository: {missing}")


def test_a_path_the_workspace_lacks_is_named_unless_marked(tmp_path):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "a.py").touch()
    text = ("Run `pytest tests/test_x.py checks/a.py`.\n\n"
            "The kit's repository holds `tests/test_y.py` and `solutions/z.md`.\n\n"
            "Write a file of your own, `tests/test_mine.py`.\n\n"
            "| a | `fixtures/f/` |\n|---|---|\n| b | in the kit's repository: `benchmarks/b.py` |\n\n"
            "```bash\nbash experiments/lab/run.sh   # in a workspace\n"
            "pytest tests/test_w.py   # in the kit's repository\n```\n\n"
            "```python\nfrom fixtures.zoo import MLP\nfrom checks.a import b\nfrom pytest_distcheck.tp import x\n```\n")
    assert not_in_workspace(text, tmp_path) == ["experiments/lab/run.sh", "fixtures.zoo", "fixtures/f/",
                                                "tests/test_x.py"]


@pytest.fixture(scope="module")
def known():
    return _subparsers(), _pytest_options()


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_command_shown_exists(page, known):
    problems = unknown_commands(page.read_text(), *known)
    assert not problems, f"{page.relative_to(ROOT)}: {problems}"


@pytest.mark.parametrize("page", PATH_PAGES + MANUAL_PAGES,
                         ids=[str(p.relative_to(ROOT)) for p in PATH_PAGES + MANUAL_PAGES])
def test_every_kit_path_shown_exists(page):
    missing = missing_paths(page.read_text(), ROOT)
    if page.name == "writing-checks.md":  # its workspace file is the example phase's, beside the page
        missing = [p for p in missing if not (page.parent / "example-phase" / p).exists()]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_a_stale_command_or_path_is_named(known, tmp_path):
    text = ("Run `distcheck estimate --gpu X --minutes 3` and `distcheck budjet`, then\n\n"
            "```bash\ndistcheck memory --params 7B --zero3   # comment --not-an-option\n"
            "pytest -m gpu --max-usd 3 --max-dollars 3\n"
            "torchrun --nproc_per_node 2 -m experiments.ddp_cpu.lab --out x.json --size 3\n```\n\n"
            "The fake is in `tests/fake_runpod/`; the guard in `pytest_distcheck/budget/guard.py`.\n"
            "<!-- `distcheck hidden` -->\n`distcheck budget: paid GPU tests off` is a header line.\n")
    assert unknown_commands(text, *known) == [
        "`distcheck budjet`: no such subcommand",
        "`distcheck memory --zero3`: no such option",
        "`pytest --max-dollars`: no such option",
        "`-m experiments.ddp_cpu.lab --size`: no such option",
    ]
    (tmp_path / "pytest_distcheck" / "budget").mkdir(parents=True)
    (tmp_path / "pytest_distcheck" / "budget" / "guard.py").touch()
    assert missing_paths(text, tmp_path) == ["tests/fake_runpod/"]
    own = "\nWrite `tests/test_mine.py`, a file of your own.\n"
    assert missing_paths(text + own, tmp_path) == ["tests/fake_runpod/"]


def test_the_note_template_points_to_the_rule_of_what_counts():
    """docs/notes/TEMPLATE.md links to lab 03's section 3, and that section exists (issue 21, e)."""
    from docs_support import headings

    template = (ROOT / "docs" / "notes" / "TEMPLATE.md").read_text()
    assert "(../lab/03-megatron-fsdp-reading.md#3-what-counts)" in template
    assert "3. What counts" in headings((ROOT / "docs" / "lab" / "03-megatron-fsdp-reading.md").read_text())


def test_the_exercise_code_a_workspace_gets_imports_only_what_it_has(fresh_workspace):
    """The shipped tests and fixtures of lab 02 import the workspace's own modules (experiments/, fixtures/,
    tests/, checks/) only where the workspace has them (run by hand in a fresh workspace: 35 passed)."""
    import ast

    missing = []
    for path in [*(fresh_workspace / "tests").glob("*.py"), *(fresh_workspace / "fixtures").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                rel = name.replace(".", "/")
                if name.split(".")[0] in ("experiments", "fixtures", "tests", "checks") and not (
                        (fresh_workspace / f"{rel}.py").is_file() or (fresh_workspace / rel).is_dir()):
                    missing.append(f"{path.relative_to(fresh_workspace)}: {name}")
    assert (fresh_workspace / "tests" / "test_tp_equivalence.py").is_file()
    assert not missing, missing


def _section(page: str, heading: str) -> str:
    text = (ROOT / "docs" / "lab" / page).read_text()
    start = text.index(heading)
    return text[start:text.find("\n## ", start + 1)]


def test_lab_02_names_the_files_the_cpu_run_writes():
    """The CPU run writes speedup-cpu-gloo-2-<run id>.json (run id local-<UTC start>) and its PNG, not
    speedup-cpu-gloo-2.json (fresh-user trial: the page named a file that never appeared)."""
    from experiments.tp_inference.speedup import result_name

    section = _section("02-tp-inference-cloud.md", "## 2. Run the experiment locally on CPU")
    shown = [c for c in snippets(section) if c.startswith(("experiments/tp_inference/results/", "speedup-cpu"))]
    assert "experiments/tp_inference/results/speedup-cpu-gloo-2-<run id>.json" in shown, shown
    (example,) = [c for c in shown if re.fullmatch(r"speedup-cpu-gloo-2-local-\d{8}T\d{6}Z\.json", c)]
    assert result_name("cpu", "gloo", 2, example.removeprefix("speedup-cpu-gloo-2-").removesuffix(".json")) == example
    assert "experiments/tp_inference/results/speedup-cpu-gloo-2.json" not in shown
    assert "`.png`" in section


def test_lab_01_says_the_torchrun_run_writes_the_plot_too():
    """lab.py writes the PNG beside the JSON under torchrun as on the rank pool (main() -> save_plot)."""
    section = _section("01-ddp-on-cpu.md", "## Running it by hand")
    torchrun = section[section.index("`torchrun` starts"):section.index("Without torchrun")]
    assert "`experiments/ddp_cpu/results/allreduce-cpu.png`" in torchrun
    assert "also saves" not in section
