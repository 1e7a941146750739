"""Reading a TP plan named ``module:attribute`` from its source, never running the module or its packages.

The gate classifies every DoD item in one process; the learner's code imported there can
reach the verdict (docs/ci/known-limitations.md). The plan is data, so the kit reads its literal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_distcheck.diagram.config import load_plan_names
from pytest_distcheck.diagram.plan import LayerNames
from pytest_distcheck.errors import ConfigError

PLAN = '{"attn.qkv": "colwise", "attn.out": "rowwise"}'
TOML = Path("checks/distcheck.toml")


def touch_marker(marker: Path) -> str:
    """Python source that, run, leaves ``marker`` and then fails."""
    return f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\nraise SystemExit('ran')\n"


def load(root: Path, ref: str):
    return load_plan_names(ref, root, TOML, "diagram.plan")


def error(root: Path, ref: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(root, ref)
    assert info.value.path == TOML and info.value.where == "diagram.plan"
    return info.value.problem


def test_a_plan_is_read_without_running_its_module_or_packages(tmp_path):
    marker = tmp_path / "marker"
    pkg = tmp_path / "labpkg" / "tp"
    pkg.mkdir(parents=True)
    (tmp_path / "labpkg" / "__init__.py").write_text(touch_marker(marker))
    (pkg / "__init__.py").write_text(touch_marker(marker))
    (pkg / "plan.py").write_text(touch_marker(marker).replace("raise SystemExit('ran')\n", "")
                                 + f"PLAN = {PLAN}\nPLAN_RESIDUAL = ('attn',)\n")
    plan, names = load(tmp_path, "labpkg.tp.plan:PLAN")
    assert plan == {"attn.qkv": "colwise", "attn.out": "rowwise"}
    assert names == LayerNames({}, {}, ("attn",))
    assert not marker.exists()
    assert not [m for m in sys.modules if m == "labpkg" or m.startswith("labpkg.")]


def test_a_package_module_is_read_from_its_init(tmp_path):
    (tmp_path / "myplan").mkdir()
    (tmp_path / "myplan" / "__init__.py").write_text(f"PLAN = {PLAN}\n")
    (tmp_path / "myplan.py").write_text('PLAN = {"mlp.up": "colwise"}\n')  # the package wins, as in Python
    assert load(tmp_path, "myplan:PLAN")[0] == {"attn.qkv": "colwise", "attn.out": "rowwise"}


def test_annotated_and_repeated_assignments_read_as_python_would(tmp_path):
    (tmp_path / "p.py").write_text(
        '"""doc"""\nfrom __future__ import annotations\n\nPLAN: dict[str, str]\n'
        'PLAN: dict[str, str] = {"mlp.up": "colwise"}\n'
        f"PLAN = {PLAN}\n"
        'PLAN_ALIASES: dict[str, list[str]] = {"attn.qkv": ["c_attn"]}\n'
        'PLAN_FUSED = {}\nPLAN_RESIDUAL: tuple[str, ...] = ()\n'
        "OTHER: dict\n"
        "def helper():\n    PLAN = 3\n    return PLAN\n"
    )
    plan, names = load(tmp_path, "p:PLAN")
    assert list(plan) == ["attn.qkv", "attn.out"]
    assert names == LayerNames({"attn.qkv": ("c_attn",)}, {}, ())


@pytest.mark.parametrize("source, line, found", [
    ('STYLES = ("colwise", "rowwise")\nPLAN = {f"l{i}": s for i, s in enumerate(STYLES)}\n', 2, "a comprehension"),
    ("BASE = {}\n\nPLAN = BASE\n", 3, "a name"),
    ('PLAN = dict(qkv="colwise")\n', 1, "a call"),
    ('PLAN = {"attn.qkv": "col" + "wise"}\n', 1, "an operation"),
])
def test_a_plan_that_is_not_a_literal_names_file_line_and_attribute(tmp_path, source, line, found):
    (tmp_path / "p.py").write_text(source)
    message = error(tmp_path, "p:PLAN")
    assert message.startswith(f"p.py:{line}: PLAN is not a literal ({found} where a value must be written out): ")
    assert "without running code" in message


def test_layer_names_beside_the_plan_must_be_literals_too(tmp_path):
    (tmp_path / "p.py").write_text(f"PLAN = {PLAN}\nPARENTS = ['attn']\nPLAN_RESIDUAL = tuple(PARENTS)\n")
    assert error(tmp_path, "p:PLAN").startswith(
        "p.py:3: PLAN_RESIDUAL is not a literal (a call where a value must be written out): ")


@pytest.mark.parametrize("later, line", [
    ('PLAN["mlp.down"] = "colwise"\n', 2),
    ('PLAN |= {"mlp.down": "colwise"}\n', 2),
    ("del PLAN\n", 2),
    ('if True:\n    PLAN = {"mlp.down": "colwise"}\n', 3),
    ("from other import PLAN\n", 2),
    ("for PLAN in [{}]:\n    pass\n", 2),
    ("def f():\n    global PLAN\n    PLAN = {}\n", 3),
])
def test_a_plan_changed_after_its_literal_is_named(tmp_path, later, line):
    """What the kit reads must be what the module holds: no later statement may rebind or edit it."""
    (tmp_path / "p.py").write_text(f"PLAN = {PLAN}\n{later}")
    message = error(tmp_path, "p:PLAN")
    assert message.startswith(f"p.py:{line}: PLAN is bound or changed here other than by a literal assignment "
                              "at the top level"), message


def test_a_missing_module_names_the_paths_it_looked_for(tmp_path):
    (tmp_path / "a").mkdir()
    message = error(tmp_path, "a.b:PLAN")
    assert message == f"module 'a.b' not found: neither a/b/__init__.py nor a/b.py under {tmp_path.resolve()}"


def test_a_missing_attribute_names_the_file(tmp_path):
    (tmp_path / "p.py").write_text(f"PLAN = {PLAN}\n")
    assert error(tmp_path, "p:NOPE") == "module 'p' has no attribute 'NOPE' (no top-level assignment in p.py)"


def test_a_plan_module_that_does_not_parse_names_the_line(tmp_path):
    (tmp_path / "p.py").write_text(f"PLAN = {PLAN}\nPLAN_RESIDUAL = (\n")
    assert error(tmp_path, "p:PLAN").startswith("p.py:2: not valid Python: ")


@pytest.mark.parametrize("ref", ["../p:PLAN", "a..b:PLAN", "/abs/p:PLAN", "p:PL AN", "p-q:PLAN"])
def test_a_reference_that_is_not_dotted_names_is_rejected(tmp_path, ref):
    assert error(tmp_path, ref) == f"expected 'module:attribute', found {ref!r}"


@pytest.mark.parametrize("source, message", [
    ('PLAN = {"attn.qkv": 1}\n', "p:PLAN must map module paths (str) to style names (str)"),
    ('PLAN = ["attn.qkv"]\n', "p:PLAN must map module paths (str) to style names (str)"),
    ("PLAN = {}\n", "p:PLAN is empty"),
    ('PLAN = {"attn.qkv": "diagonal"}\n',
     "p:PLAN: plan entry 'attn.qkv': unknown style 'diagonal' (known: colwise, rowwise)"),
    (f'PLAN = {PLAN}\nPLAN_RESIDUAL = "attn"\n', "p:PLAN: PLAN_RESIDUAL must be a list of str"),
    (f'PLAN = {PLAN}\nPLAN_RESIDUAL = 3\n', "p:PLAN: PLAN_RESIDUAL must be a list of str"),
    (f'PLAN = {PLAN}\nPLAN_FUSED = {{"qkv": "attn.qkv"}}\n', "p:PLAN: PLAN_FUSED must map str to a list of str"),
    (f'PLAN = {PLAN}\nPLAN_RESIDUAL = ["mlp"]\n',
     "p:PLAN: residual entry 'mlp': no module path of the plan is inside it"),
])
def test_a_literal_of_the_wrong_shape_keeps_its_error(tmp_path, source, message):
    (tmp_path / "p.py").write_text(source)
    assert error(tmp_path, "p:PLAN") == message
