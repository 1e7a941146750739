"""The tp-diagram-committed DoD check and the `distcheck diagram` command, on a copy of the phase's
workspace file with a learner's own page (a right diagram drawn by tests/diagram_support.py, and its SVG
rendered), the skeleton `distcheck diagram` prints, and the wrong pages of fixtures/diagrams/. The
reference page under solutions/ is never the learner's evidence (copied: tests/test_gate_redteam.py)."""

from __future__ import annotations

import io
import shutil
from contextlib import chdir, redirect_stdout
from pathlib import Path

import mermaidx  # noqa: F401  (see below)
import pytest
from diagram_support import right_diagram
from dod_support import git_commit_all

from pytest_distcheck.cli import main
from pytest_distcheck.diagram import concepts

# pytester's in-process runs put sys.modules back as it was before each run. mermaidx loads novasvg,
# a nanobind extension that cannot be initialised twice in one process; imported here, at collection,
# it is part of what every run starts from and is never dropped.

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "diagrams"
PAGE = "docs/tp-sharding.md"
SVG = "docs/tp-sharding.svg"
CHECK_COPY = "test_copy_of_tp_diagram_check.py"


def make_phase(root: Path) -> None:
    """The phase's workspace file, the diagram check and the plan module under ``root``; no page yet."""
    for folder in ("checks", "docs", "experiments/tp_inference"):
        (root / folder).mkdir(parents=True)
    shutil.copy(ROOT / "checks" / "distcheck.toml", root / "checks")
    # another basename: the real check may already be imported in this process (pytest checks tests)
    shutil.copy(ROOT / "checks" / "test_tp_diagram_committed.py", root / "checks" / CHECK_COPY)
    # the workspace registers the real check's node id (the gate requires it to run); point it at the copy
    toml = root / "checks" / "distcheck.toml"
    toml.write_text(toml.read_text().replace("checks/test_tp_diagram_committed.py::", f"checks/{CHECK_COPY}::"))
    # the plan alone (pure data), without the lab's heavier modules
    (root / "experiments" / "__init__.py").write_text("")
    (root / "experiments" / "tp_inference" / "__init__.py").write_text("")
    shutil.copy(ROOT / "experiments" / "tp_inference" / "plan.py", root / "experiments" / "tp_inference")


@pytest.fixture
def phase(pytester: pytest.Pytester) -> pytest.Pytester:
    """The phase's workspace file, the diagram check and the plan module; no page yet. The plan is read
    from this copy's source (never imported), so an `experiments` package another test imported is not it."""
    make_phase(pytester.path)
    return pytester


PLAN = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}
EXPLAINED = ("\nEach rank holds half of the heads and half of the MLP's hidden units; the all-reduce after each "
             "row-parallel layer sums the two partial outputs, so the residual stream is whole again on both.\n")
# the learner's own drawing: its Mermaid block opens at line 3
OWN_PAGE = f"# My block\n\n```mermaid\n{right_diagram(PLAN, 2)}```\n\n![The block](tp-sharding.svg)\n{EXPLAINED}"


def own_page(pytester: pytest.Pytester) -> None:
    """A right page of the learner's own, not rendered yet."""
    (pytester.path / PAGE).write_text(OWN_PAGE)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A right page of the learner's own and its SVG, made once per module by `distcheck diagram --render` in
    a phase of its own (rendering is most of a test's time; the SVG
    names only the page's basename and its block, so it is the same in any folder)."""
    root = tmp_path_factory.mktemp("rendered_phase")
    make_phase(root)
    out = io.StringIO()
    with chdir(root), redirect_stdout(out):
        (root / PAGE).write_text(OWN_PAGE)
        assert main(["diagram", "--render"]) == 0
    return {rel: (root / rel).read_text() for rel in (PAGE, SVG)}


def committed(pytester: pytest.Pytester, rendered: dict[str, str]) -> None:
    """A right page of the learner's own and its SVG, as `rendered` made them."""
    for rel, text in rendered.items():
        (pytester.path / rel).write_text(text)


def run_check(pytester: pytest.Pytester):
    return pytester.runpytest(f"checks/{CHECK_COPY}", "-p", "no:cacheprovider")


def test_the_committed_diagram_is_done(phase: pytest.Pytester, rendered, monkeypatch):
    """Right but not committed (issue 12): pending, naming git; committed: done."""
    committed(phase, rendered)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(phase.path.parent))  # whatever holds the temp folder
    run_check(phase).stdout.fnmatch_lines([
        f"PENDING  tp-diagram-committed  {phase.path} is not in a git repository",
        f"*-> git init && git add {PAGE} {SVG} && git commit -m \"DoD evidence\" -- {PAGE} {SVG}"])
    git_commit_all(phase.path)
    (phase.path / SVG).write_text((phase.path / SVG).read_text() + "\n")
    run_check(phase).stdout.fnmatch_lines([f"PENDING  tp-diagram-committed  {SVG} has uncommitted changes"])
    git_commit_all(phase.path)
    result = run_check(phase)
    result.stdout.fnmatch_lines([
        "*docs/tp-sharding.md:3 matches experiments.tp_inference.plan:BLOCK_PLAN (attn.qkv colwise, "
        "attn.out rowwise, mlp.up colwise, mlp.down rowwise) on 2 ranks; docs/tp-sharding.svg is current*",
        "DONE*tp-diagram-committed*evidence checked, confirmed: the diagram matches the plan",
    ])


@pytest.mark.parametrize("fixture, reason", [
    ("qkv-row-parallel.md", "docs/tp-sharding.md:15: attn.qkv is drawn row-parallel but the plan says "
                            "column-parallel (nodes qkv0, qkv1): a column-parallel layer holds*"),
    ("missing-all-reduce.md", "docs/tp-sharding.md:52: no all-reduce after mlp.down (row-parallel)*"),
    ("dropped-layer.md", "docs/tp-sharding.md:8: layer mlp.up missing*"),
    ("syntax-error.md", "docs/tp-sharding.md:17: Mermaid syntax error in the block at line 8*(the line where "
                        "Mermaid's parser stopped: an unclosed bracket or quote may be on an earlier line)"),
])
def test_a_wrong_diagram_is_broken_naming_the_difference(phase: pytest.Pytester, rendered, fixture: str,
                                                         reason: str):
    committed(phase, rendered)
    shutil.copy(FIXTURES / fixture, phase.path / PAGE)
    result = run_check(phase)
    result.stdout.fnmatch_lines([f"BROKEN*tp-diagram-committed*{reason}"])


def test_a_plan_that_is_not_a_literal_is_broken_not_a_crash(phase: pytest.Pytester):
    """The plan is the learner's input: a name where a style must be written out is broken evidence naming
    the file and line, not an error (which the README keeps for bugs of the kit)."""
    plan = phase.path / "experiments" / "tp_inference" / "plan.py"
    plan.write_text('COL = "colwise"\n' + plan.read_text().replace('"attn.qkv": "colwise"', '"attn.qkv": COL'))
    result = run_check(phase)
    result.stdout.fnmatch_lines(["BROKEN*tp-diagram-committed*experiments/tp_inference/plan.py:*: BLOCK_PLAN is "
                                 "not a literal (a name where a value must be written out)*"])


def test_no_page_is_pending_with_the_command(phase: pytest.Pytester):
    result = run_check(phase)
    result.stdout.fnmatch_lines([
        "PENDING*tp-diagram-committed*docs/tp-sharding.md not found: expected a page with a Mermaid flowchart "
        "of one block of experiments.tp_inference.plan:BLOCK_PLAN on 2 ranks",
        "*-> distcheck diagram > docs/tp-sharding.md",
    ])


def test_an_edited_block_makes_the_svg_stale(phase: pytest.Pytester, rendered):
    committed(phase, rendered)
    page = phase.path / PAGE
    page.write_text(page.read_text().replace("LayerNorm (replicated)", "the first LayerNorm (replicated)", 1))
    result = run_check(phase)
    result.stdout.fnmatch_lines([
        "STALE*tp-diagram-committed*docs/tp-sharding.svg was rendered from another version of the Mermaid "
        "block at docs/tp-sharding.md:3",
        "*-> distcheck diagram --render docs/tp-sharding.md",
    ])


def test_no_svg_is_pending_with_the_render_command(phase: pytest.Pytester):
    own_page(phase)
    result = run_check(phase)
    result.stdout.fnmatch_lines(["PENDING*tp-diagram-committed*docs/tp-sharding.svg not found*",
                                 "*-> distcheck diagram --render docs/tp-sharding.md"])


# ---- the command -------------------------------------------------------------------------------


def test_the_command_prints_a_skeleton_that_leaves_the_item_pending_saying_what_to_decide(phase, monkeypatch,
                                                                                            capsys):
    from pytest_distcheck.diagram.skeleton import UNDRAWN

    monkeypatch.chdir(phase.path)
    assert main(["diagram"]) == 0
    page = capsys.readouterr().out
    assert "```mermaid\nflowchart TD\n" in page and "![The same diagram, rendered](tp-sharding.svg)" in page
    for layer in PLAN:
        assert f'["{layer}"]' in page
    (phase.path / PAGE).write_text(page)
    undrawn = UNDRAWN.format(line=6)  # the skeleton's block opens at line 6, under its comment
    assert main(["diagram", "--check"]) == 1
    assert capsys.readouterr().out == f"docs/tp-sharding.md:6: {undrawn}\n"
    git_commit_all(phase.path)
    result = run_check(phase)  # committed as is: the kit's skeleton decides nothing
    result.stdout.fnmatch_lines([f"PENDING*tp-diagram-committed*docs/tp-sharding.md: {undrawn[:60]}*",
                                 "*-> distcheck diagram --check docs/tp-sharding.md"])


def test_the_spanish_skeleton_committed_as_is_leaves_the_item_pending_too(phase, monkeypatch, capsys):
    from pytest_distcheck import i18n
    from pytest_distcheck.diagram.skeleton import UNDRAWN

    monkeypatch.chdir(phase.path)
    try:
        assert main(["diagram", "--lang", "es"]) == 0
    finally:
        i18n.use(i18n.DEFAULT)
    page = capsys.readouterr().out
    assert "<!-- Un esqueleto que imprimió `distcheck diagram` con experiments.tp_inference.plan:BLOCK_PLAN\n" in page
    (phase.path / PAGE).write_text(page, encoding="utf-8")
    git_commit_all(phase.path)
    undrawn = UNDRAWN.format(line=8)  # under its six lines of comment
    run_check(phase).stdout.fnmatch_lines([f"PENDING*tp-diagram-committed*docs/tp-sharding.md: {undrawn[:60]}*"])


def test_a_drawn_page_checks_renders_and_goes_stale_when_edited(phase, monkeypatch, capsys):
    monkeypatch.chdir(phase.path)
    own_page(phase)
    matches = "docs/tp-sharding.md: the diagram at line 3 matches experiments.tp_inference.plan:BLOCK_PLAN on 2 ranks\n"
    assert main(["diagram", "--check"]) == 0  # the diagram is right; its SVG is what is missing
    assert capsys.readouterr().out == matches + (
        "docs/tp-sharding.md: docs/tp-sharding.svg not found (the rendered diagram of docs/tp-sharding.md): "
        "render it: distcheck diagram --render docs/tp-sharding.md\n"
    )
    assert main(["diagram", "--render"]) == 0
    assert capsys.readouterr().out == (
        "wrote tp-sharding.svg beside docs/tp-sharding.md, from its Mermaid block at line 3\n"
        "then commit the page and its SVG (a DoD check reads them as committed): git init && git add "
        'docs/tp-sharding.md docs/tp-sharding.svg && git commit -m "diagram and its SVG" -- docs/tp-sharding.md '
        "docs/tp-sharding.svg\n"
    )
    assert main(["diagram", "--check"]) == 0
    assert capsys.readouterr().out == matches
    (phase.path / PAGE).write_text(OWN_PAGE.replace("flowchart TD\n", "flowchart TD\n  %% my own note\n", 1))
    assert main(["diagram", "--check"]) == 0  # stale, as the DoD check says, not wrong: exit 0
    assert capsys.readouterr().out == matches + (
        "docs/tp-sharding.md: docs/tp-sharding.svg was rendered from another version of the Mermaid block at "
        "docs/tp-sharding.md:3; the DoD item is stale until you run: distcheck diagram --render docs/tp-sharding.md\n"
    )
    own_page(phase)
    git_commit_all(phase.path)
    run_check(phase).stdout.fnmatch_lines(["DONE*tp-diagram-committed*"])


def test_a_page_named_without_md_points_at_the_markdown_page(phase, monkeypatch, capsys):
    """Issue 34: `--check docs/tp-sharding` names the existing docs/tp-sharding.md instead of offering to create
    a page without an extension."""
    from pytest_distcheck.commands.diagram import PAGE_MISSING, PAGE_WITHOUT_MD

    monkeypatch.chdir(phase.path)
    own_page(phase)
    for mode in ("--check", "--render"):
        assert main(["diagram", mode, "docs/tp-sharding"]) == 2
        hint = PAGE_WITHOUT_MD.format(page="docs/tp-sharding", mode=mode)
        assert capsys.readouterr().err == f"distcheck diagram: docs/tp-sharding: {hint}\n"
    assert main(["diagram", "--check", "docs/other"]) == 2
    assert PAGE_MISSING.format(command="distcheck diagram > docs/other") in capsys.readouterr().err


def test_check_of_a_wrong_page_exits_1_with_file_and_line(phase, monkeypatch, capsys):
    monkeypatch.chdir(phase.path)
    assert main(["diagram", "--check", str(FIXTURES / "dropped-layer.md")]) == 1
    assert capsys.readouterr().out == (
        f"{FIXTURES / 'dropped-layer.md'}:8: layer mlp.up missing: no node's label names it "
        f"(the plan says column-parallel): {concepts.NAMING.lesson}\n"
    )


def test_a_missing_page_is_a_one_line_error(phase, monkeypatch, capsys):
    monkeypatch.chdir(phase.path)
    assert main(["diagram", "--check"]) == 2
    assert capsys.readouterr().err == (
        "distcheck diagram: docs/tp-sharding.md: page not found (start one with: distcheck diagram > "
        "docs/tp-sharding.md)\n"
    )


@pytest.mark.parametrize("old, new, message", [
    ('plan = "experiments.tp_inference.plan:BLOCK_PLAN"', 'plan = "experiments.tp_inference.plan"',
     "diagram.plan: expected 'module:attribute', found 'experiments.tp_inference.plan'"),
    ('plan = "experiments.tp_inference.plan:BLOCK_PLAN"', 'plan = "experiments.tp_inference.plan:NOPE"',
     "diagram.plan: module 'experiments.tp_inference.plan' has no attribute 'NOPE' (no top-level assignment in "
     "experiments/tp_inference/plan.py)"),
    ('plan = "experiments.tp_inference.plan:BLOCK_PLAN"', 'plan = "no_such_plan_module:PLAN"',
     "diagram.plan: module 'no_such_plan_module' not found: neither "
     "no_such_plan_module/__init__.py nor no_such_plan_module.py under {root}"),
    ("world_size = 2", "world_size = 0", "diagram.world_size: must be >= 1, found 0"),
    ('page = "docs/tp-sharding.md"', "page = 3", "diagram.page: expected a str, found 3"),
    ("[diagram]", "[diagram_old]", "[diagram]: section missing (needs page, plan, world_size)"),
])
def test_bad_diagram_settings_name_the_field(phase, monkeypatch, capsys, old, new, message):
    toml = phase.path / "checks" / "distcheck.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))
    monkeypatch.chdir(phase.path)
    assert main(["diagram"]) == 2
    message = message.format(root=phase.path.resolve())
    assert capsys.readouterr().err == f"distcheck diagram: checks/distcheck.toml, {message}\n"


def test_the_workspace_plan_is_read_without_running_the_learners_packages(tmp_path):
    """The check runs in the gate's verdict process: the plan module and the packages above it are the
    learner's code, so the kit reads the plan's literal and runs none of them (docs/ci/known-limitations.md)."""
    from pytest_distcheck.diagram.config import diagram_config
    from pytest_distcheck.workspace import load_workspace

    make_phase(tmp_path)
    marker = tmp_path / "ran"
    run = f"open({str(marker)!r}, 'w').close()\n"
    for init in ("experiments/__init__.py", "experiments/tp_inference/__init__.py"):
        (tmp_path / init).write_text(run)
    plan = tmp_path / "experiments" / "tp_inference" / "plan.py"
    plan.write_text(run + plan.read_text())
    cfg = diagram_config(load_workspace(tmp_path / "checks" / "distcheck.toml"))
    assert cfg.plan == {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise", "mlp.down": "rowwise"}
    assert not marker.exists()


def test_a_plan_with_an_unknown_style_is_a_config_error(phase, monkeypatch, capsys):
    plan = phase.path / "experiments" / "tp_inference" / "plan.py"
    (phase.path / "bad_plan.py").write_text('PLAN = {"attn.qkv": "diagonal"}\n')
    assert plan.is_file()
    toml = phase.path / "checks" / "distcheck.toml"
    toml.write_text(toml.read_text().replace("experiments.tp_inference.plan:BLOCK_PLAN", "bad_plan:PLAN"))
    monkeypatch.chdir(phase.path)
    assert main(["diagram"]) == 2
    assert capsys.readouterr().err == (
        "distcheck diagram: checks/distcheck.toml, diagram.plan: bad_plan:PLAN: plan entry 'attn.qkv': "
        "unknown style 'diagonal' (known: colwise, rowwise)\n"
    )


def test_render_needs_a_diagram_of_the_plan(phase, monkeypatch, capsys):
    (phase.path / PAGE).write_text("# no diagram yet\n\n```mermaid\nflowchart LR\n  A --> B\n```\n")
    monkeypatch.chdir(phase.path)
    assert main(["diagram", "--render"]) == 1
    assert capsys.readouterr().out.startswith(
        "docs/tp-sharding.md:3: no Mermaid flowchart on the page names a layer of the plan; looked for "
        "attn.qkv (qkv_proj, c_attn, query_key_value, ...); attn.out (o_proj, out_proj, c_proj, ...); "
    )
    assert not (phase.path / SVG).exists()


def test_check_and_render_exclude_each_other(phase, monkeypatch, capsys):
    monkeypatch.chdir(phase.path)
    with pytest.raises(SystemExit) as info:
        main(["diagram", "--check", "--render"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_workspace_aliases_name_layers(phase, monkeypatch, capsys):
    """[diagram] aliases adds names to those declared with the plan; a wrong one is a config error."""
    monkeypatch.chdir(phase.path)
    toml = phase.path / "checks" / "distcheck.toml"
    base = toml.read_text()
    aliases = 'aliases = { "mlp.up" = ["W1"], "mlp.down" = ["W2"] }\n'
    toml.write_text(base.replace("world_size = 2\n", "world_size = 2\n" + aliases, 1))
    page = (ROOT / "solutions" / PAGE).read_text().replace("mlp.up:", "W1:").replace("mlp.down:", "W2:")
    (phase.path / PAGE).write_text(page)
    assert main(["diagram", "--check"]) == 0
    capsys.readouterr()
    toml.write_text(base.replace("world_size = 2\n", 'world_size = 2\naliases = { "mlp.side" = ["W3"] }\n', 1))
    assert main(["diagram", "--check"]) == 2
    assert "diagram.aliases: alias entry 'mlp.side': not a module path of the plan" in capsys.readouterr().err


def test_a_plan_edited_away_from_the_dods_is_broken_naming_the_entry(phase: pytest.Pytester, rendered):
    """Red-team A17: the learner shrinks the plan the diagram is compared with; the DoD fixes it (QKV and MLP up
    column-parallel, attention output and MLP down row-parallel)."""
    committed(phase, rendered)
    plan = phase.path / "experiments" / "tp_inference" / "plan.py"
    plan.write_text(plan.read_text() + '\nBLOCK_PLAN = {"mlp.up": "colwise", "mlp.down": "colwise"}\n'
                    'BLOCK_PLAN_RESIDUAL = ()\n')
    run_check(phase).stdout.fnmatch_lines([
        "BROKEN*tp-diagram-committed*experiments.tp_inference.plan:BLOCK_PLAN is not the TP plan the DoD fixes: "
        "attn.qkv missing (expected colwise); attn.out missing (expected rowwise); "
        "mlp.down is colwise (expected rowwise)"])
