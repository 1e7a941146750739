"""The ``[diagram]`` section of a workspace file: which page holds the diagram, which plan it draws.

Keys: ``page`` (relative to the workspace root), ``plan`` (``module:attribute``, a .py file under the root),
``world_size`` (ranks the diagram shows), optional ``aliases`` (more names of a layer). The rendered SVG lives beside
the page. The plan and its ``<NAME>_ALIASES``/``_FUSED``/``_RESIDUAL`` are read from the module's source as literals,
never imported (:mod:`.source`). An example section: docs/design/diagram.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_distcheck.diagram.plan import LayerNames, layer_names_of
from pytest_distcheck.diagram.source import SourceError, module_sources, read_literals
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.tp.plan import validate_plan
from pytest_distcheck.workspace import Workspace

SECTION = "diagram"
NO_SECTION = N_("section missing (needs page, plan, world_size)")
WRONG_TYPE = N_("expected a {kind}, found {value!r}")
WORLD_SIZE = N_("must be >= 1, found {value}")
NOT_ALIASES = N_("expected a table of module path = [names], found {value!r}")
NOT_A_REF = N_("expected 'module:attribute', found {ref!r}")
NO_MODULE = N_("module {module!r} not found: neither {looked} under {root}")
NOR = N_("nor")
NO_ATTRIBUTE = N_("module {module!r} has no attribute {attribute!r} (no top-level assignment in {file})")
NOT_A_PLAN = N_("{ref} must map module paths (str) to style names (str)")
EMPTY_PLAN = N_("{ref} is empty")


@dataclass(frozen=True)
class DiagramConfig:
    """A workspace's diagram settings, paths resolved.

    Attributes:
        page_rel: the page as written in the file (POSIX, relative to the root).
        page: the page, absolute.
        svg: the rendered diagram beside the page (``.svg``), absolute.
        plan_ref: ``module:attribute`` of the plan.
        plan: the loaded plan, module path -> style name.
        world_size: ranks the diagram must show.
        names: aliases, fused groups and residual sublayers declared with the plan and in ``aliases``.
    """

    page_rel: str
    page: Path
    svg: Path
    plan_ref: str
    plan: dict[str, str]
    world_size: int
    names: LayerNames = LayerNames()

    @property
    def svg_rel(self) -> str:
        """The SVG's path relative to the root, as a person would type it."""
        return str(Path(self.page_rel).with_suffix(".svg").as_posix())


def diagram_config(ws: Workspace) -> DiagramConfig:
    """Read and check ``[diagram]``, reading the plan it names from its source (nothing is imported).

    Raises:
        ConfigError: the section or a key is missing or of the wrong type, the plan cannot be read
            (:func:`load_plan_names`), is not a mapping of module path -> style name, or names an unknown
            style (each naming the file and ``diagram.<key>``).
    """
    sec = ws.section(SECTION)
    if not sec:
        raise ConfigError(ws.path, f"[{SECTION}]", _(NO_SECTION))
    for key, kind in (("page", str), ("plan", str), ("world_size", int)):
        value = sec.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(ws.path, f"{SECTION}.{key}", _(WRONG_TYPE).format(kind=kind.__name__, value=value))
    if sec["world_size"] < 1:
        raise ConfigError(ws.path, f"{SECTION}.world_size", _(WORLD_SIZE).format(value=sec["world_size"]))
    plan, names = load_plan_names(sec["plan"], ws.root, ws.path, f"{SECTION}.plan")
    extra = sec.get("aliases", {})
    if not isinstance(extra, Mapping) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()
    ):
        raise ConfigError(ws.path, f"{SECTION}.aliases", _(NOT_ALIASES).format(value=extra))
    merged = {**names.aliases}
    for path, more in extra.items():
        merged[path] = (*merged.get(path, ()), *more)
    try:
        names = LayerNames(merged, names.fused, names.residual).validate(plan)
    except ValueError as exc:
        raise ConfigError(ws.path, f"{SECTION}.aliases", str(exc)) from None
    page = ws.resolve(sec["page"])
    return DiagramConfig(
        page_rel=sec["page"],
        page=page,
        svg=page.with_suffix(".svg"),
        plan_ref=sec["plan"],
        plan=plan,
        world_size=sec["world_size"],
        names=names,
    )


def load_plan(ref: str, root: Path, file: Path, field: str) -> dict[str, str]:
    """The plan of :func:`load_plan_names`, without its layer names."""
    return load_plan_names(ref, root, file, field)[0]


def load_plan_names(ref: str, root: Path, file: Path, field: str) -> tuple[dict[str, str], LayerNames]:
    """A plan named ``module:attribute`` and the layer names declared beside it (``<attribute>_ALIASES``,
    ``_FUSED``, ``_RESIDUAL``), read from the module's source under ``root`` without running any code:
    neither the module nor the packages above it are imported (:mod:`pytest_distcheck.diagram.source`).

    Args:
        ref: e.g. ``experiments.tp_inference.plan:BLOCK_PLAN`` (``experiments/tp_inference/plan.py``, or
            ``.../plan/__init__.py``, under ``root``).
        root: folder the dotted module name starts from.
        file, field: where ``ref`` was written, for errors.

    Raises:
        ConfigError: malformed ``ref``; no source file for the module (names the paths looked for); the file
            does not parse, a value is not a literal, or is changed by another statement (names the file,
            line and attribute); missing attribute; not a mapping of str -> str; an unknown style; or
            layer names that do not fit the plan.
    """
    module_name, _colon, attr = ref.partition(":")
    if not attr.isidentifier() or not all(part.isidentifier() for part in module_name.split(".")):
        raise ConfigError(file, field, _(NOT_A_REF).format(ref=ref))
    candidates = module_sources(module_name)
    rel = next((c for c in candidates if (root / c).is_file()), None)
    if rel is None:
        looked = f" {_(NOR)} ".join(c.as_posix() for c in candidates)
        raise ConfigError(file, field, _(NO_MODULE).format(module=module_name, looked=looked,
                                                           root=Path(root).resolve()))
    names = (attr, f"{attr}_ALIASES", f"{attr}_FUSED", f"{attr}_RESIDUAL")
    try:
        found = read_literals(root / rel, names)
    except SourceError as exc:
        raise ConfigError(file, field, f"{rel.as_posix()}:{exc.line}: {exc.problem}") from None
    if attr not in found:
        raise ConfigError(file, field, _(NO_ATTRIBUTE).format(module=module_name, attribute=attr,
                                                              file=rel.as_posix()))
    values = {name: value for name, (_line, value) in found.items()}
    plan = values[attr]
    if not isinstance(plan, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in plan.items()
    ):
        raise ConfigError(file, field, _(NOT_A_PLAN).format(ref=ref))
    if not plan:
        raise ConfigError(file, field, _(EMPTY_PLAN).format(ref=ref))
    try:
        validate_plan(plan)
        layer_names = layer_names_of(values, attr).validate(plan)
    except ValueError as exc:
        raise ConfigError(file, field, f"{ref}: {exc}") from None
    return dict(plan), layer_names
