"""What the diagram check reads beside a TP plan, and a plan written inline.

The plan itself is data in :mod:`pytest_distcheck.tp.plan` (module path -> style), the one source a
model, this check and the docs read. Diagrams drawn from other code bases name its layers their own
way; :class:`LayerNames` holds what a plan module declares about that (aliases, fused groups,
residual sublayers), and :func:`parse_inline` reads a plan typed on the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.tp.plan import validate_plan

ALIAS_NOT_IN_PLAN = N_("alias entry {path!r}: not a module path of the plan ({paths})")
FUSED_TOO_FEW = N_("fused entry {name!r}: needs two or more module paths of the plan, found {members}")
FUSED_STYLES_DIFFER = N_("fused entry {name!r}: {members} do not share one style")
RESIDUAL_NOT_IN_PLAN = N_("residual entry {parent!r}: no module path of the plan is inside it")
NOT_A_NAME_MAP = N_("{name} must map str to a list of str")
NOT_A_NAME_LIST = N_("{name} must be a list of str")
NOT_PATH_STYLE = N_("plan entry {entry!r}: expected path=style, e.g. attn.qkv=colwise")
GIVEN_TWICE = N_("plan entry {entry!r}: {path} given twice")
NO_PLAN_ENTRIES = N_("no plan entries in {text!r}")


@dataclass(frozen=True)
class LayerNames:
    """How diagrams may name a plan's layers besides their module paths, declared beside the plan.

    A plan module may define, next to ``PLAN`` (module path -> style), ``PLAN_ALIASES``,
    ``PLAN_FUSED`` and ``PLAN_RESIDUAL`` (:func:`layer_names_of`); a workspace may add aliases.

    Attributes:
        aliases: module path -> other names a diagram may give that layer (``"attn.qkv": ("c_attn",)``).
        fused: a fused layer's name -> the module paths it computes in one matmul (vLLM's
            ``gate_up_proj`` = ``mlp.gate`` + ``mlp.up``); a node with that name stands for each of them.
        residual: parent modules (``attn``, ``mlp``) whose input is added back to their output.
    """

    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fused: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    residual: tuple[str, ...] = ()

    def validate(self, plan: Mapping[str, str]) -> LayerNames:
        """This object, checked against ``plan``.

        Raises:
            ValueError: an alias, fused group or residual module names no layer of the plan, or a
                fused group mixes styles (names the entry at fault).
        """
        for path in self.aliases:
            if path not in plan:
                raise ValueError(_(ALIAS_NOT_IN_PLAN).format(path=path, paths=", ".join(plan)))
        for name, members in self.fused.items():
            unknown = [m for m in members if m not in plan]
            if unknown or len(members) < 2:
                raise ValueError(_(FUSED_TOO_FEW).format(name=name, members=list(members)))
            if len({plan[m] for m in members}) > 1:
                raise ValueError(_(FUSED_STYLES_DIFFER).format(name=name, members=", ".join(members)))
        for parent in self.residual:
            if not any(p.startswith(parent + ".") for p in plan):
                raise ValueError(_(RESIDUAL_NOT_IN_PLAN).format(parent=parent))
        return self


def layer_names_of(values: Mapping[str, object], attr: str) -> LayerNames:
    """The :class:`LayerNames` a plan module declares beside its plan ``attr``: ``<attr>_ALIASES``
    (path -> names), ``<attr>_FUSED`` (name -> paths), ``<attr>_RESIDUAL`` (parent modules); each
    optional.

    Args:
        values: the module's top-level names -> values (those read from its source, or ``vars(module)``).
        attr: the plan's name, e.g. ``BLOCK_PLAN``.

    Raises:
        ValueError: one of them has the wrong shape (names the attribute).
    """
    aliases = values.get(f"{attr}_ALIASES", {})
    fused = values.get(f"{attr}_FUSED", {})
    residual = values.get(f"{attr}_RESIDUAL", ())
    for name, value in ((f"{attr}_ALIASES", aliases), (f"{attr}_FUSED", fused)):
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)
            for k, v in value.items()
        ):
            raise ValueError(_(NOT_A_NAME_MAP).format(name=name))
    if not isinstance(residual, (list, tuple)) or not all(isinstance(x, str) for x in residual):
        raise ValueError(_(NOT_A_NAME_LIST).format(name=f"{attr}_RESIDUAL"))
    return LayerNames(
        {k: tuple(v) for k, v in aliases.items()}, {k: tuple(v) for k, v in fused.items()}, tuple(residual)
    )


def parse_inline(text: str) -> dict[str, str]:
    """A plan written inline, ``'attn.qkv=colwise,attn.out=rowwise'`` (style names as in
    :data:`STYLES`, also ``column``/``row``), in that order.

    Raises:
        ValueError: an entry is not ``path=style``, a path repeats, or a style is unknown.
    """
    spellings = {"colwise": "colwise", "column": "colwise", "col": "colwise", "rowwise": "rowwise", "row": "rowwise"}
    plan: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        path, eq, style = (s.strip() for s in entry.partition("="))
        if not eq or not path or not style:
            raise ValueError(_(NOT_PATH_STYLE).format(entry=entry))
        if path in plan:
            raise ValueError(_(GIVEN_TWICE).format(entry=entry, path=path))
        plan[path] = spellings.get(style.lower(), style)
    if not plan:
        raise ValueError(_(NO_PLAN_ENTRIES).format(text=text))
    validate_plan(plan)
    return plan
