"""A right diagram of any TP plan, for the diagram check's tests: one block on N ranks, in Mermaid.

Test support only: the kit prints a skeleton (``pytest_distcheck.diagram.skeleton``) and leaves the drawing
to the learner; this oracle draws the whole block so the check can be tried on many plans.

Nothing about the layers is hard-coded: the plan's module paths are grouped by their parent module
(``attn.qkv`` and ``attn.out`` form the sublayer ``attn``), kept in plan order, and each sublayer is
drawn pre-LayerNorm GPT-style (LayerNorm -> sublayer -> residual add, Radford et al. 2019, sec. 2.3):

- a column-parallel layer (input replicated) takes the sublayer's replicated input; several in a row
  (``mlp.up``, ``mlp.gate``) are parallel branches on that same input;
- a row-parallel layer (input sharded) takes the sharded outputs before it, through one local-compute
  node (attention on the rank's heads, or the activation), and is followed by one all-reduce shared by
  all ranks (Megatron-LM's ``g``, Shoeybi et al. 2019, arXiv:1909.08053, sec. 3, Fig. 3);
- a sublayer that ends sharded is all-gathered before the residual add.

The labels follow :mod:`pytest_distcheck.diagram.labels`, so :func:`compare` accepts the result.
"""

from __future__ import annotations

import re
from typing import Mapping

from pytest_distcheck.diagram.labels import STYLE_CLASSES, STYLE_LABELS
from pytest_distcheck.tp.plan import validate_plan

# The local work between a sublayer's sharded outputs and its row-parallel layer, by common names.
_LOCAL_WORK = (
    (re.compile(r"attn|attention", re.IGNORECASE), "self-attention on this rank's heads"),
    (re.compile(r"mlp|ffn|feed_?forward|experts?", re.IGNORECASE), "activation, element-wise"),
)
_CLASS_DEFS = {
    "colwise": "fill:#dbeafe,stroke:#1d4ed8",
    "rowwise": "fill:#fde68a,stroke:#b45309",
    "comm": "fill:#fecaca,stroke:#b91c1c",
}


def _node_id(*parts: str) -> str:
    # prefixed so that no id is a Mermaid keyword such as "end"
    return "n_" + "_".join(re.sub(r"\W", "_", p) for p in parts)


def _local_work(group: str) -> str:
    return next((text for pat, text in _LOCAL_WORK if pat.search(group)), "local compute")


def right_diagram(plan: Mapping[str, str], world_size: int = 2) -> str:
    """The Mermaid source of a flowchart of one block sharded by ``plan`` over ``world_size`` ranks.

    Args:
        plan: module path -> style name (``colwise``/``rowwise``), in forward order.
        world_size: number of ranks to draw, >= 1.

    Raises:
        ValueError: an unknown style (from :func:`validate_plan`), or ``world_size < 1``.
    """
    styles = validate_plan(plan)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    groups: dict[str, list[str]] = {}
    for path in styles:
        groups.setdefault(path.rpartition(".")[0] or path, []).append(path)
    ranks = range(world_size)
    lines = [
        "flowchart TD",
        f"  %% one block of the plan on {world_size} ranks; blue = column-parallel, yellow = row-parallel,",
        "  %% red = collective. Edit labels freely but keep the module path and style words in them.",
        '  x(["x: hidden states, replicated on every rank"])',
    ]
    edges: list[str] = []
    classes: dict[str, list[str]] = {name: [] for name in _CLASS_DEFS}
    prev = "x"
    for group, paths in groups.items():
        ln = _node_id(group, "ln")
        lines.append(f'  {ln}["LayerNorm (replicated)"]')
        edges.append(f"  {prev} --> {ln}")
        replicated: str = ln  # the node whose output every rank holds whole
        sharded: list[str] = []  # node ids (less the "_r{rank}" suffix) of sharded outputs not yet consumed
        rank_nodes: dict[int, list[str]] = {r: [] for r in ranks}
        for path in paths:
            style = styles[path]
            words = STYLE_LABELS.get(style.name, style.name)
            base = _node_id(path)
            for r in ranks:
                label = (
                    f"{path}<br/>{words}<br/>weight split by {style.weight_split}<br/>shard {r} of {world_size}"
                )
                if style.input_layout == "replicated" and _local_work(group).startswith("self-attention"):
                    label += "<br/>(this rank's heads)"
                rank_nodes[r].append(f'    {base}_r{r}["{label}"]')
                classes.setdefault(STYLE_CLASSES.get(style.name, style.name), []).append(f"{base}_r{r}")
            if style.input_layout == "replicated":
                for r in ranks:
                    edges.append(f"  {replicated} --> {base}_r{r}")
                sharded.append(base)
            else:
                if sharded:
                    local = _node_id(path, "input")
                    for r in ranks:
                        rank_nodes[r].insert(
                            len(rank_nodes[r]) - 1, f'    {local}_r{r}["{_local_work(group)}<br/>(no communication)"]'
                        )
                        for src in sharded:
                            edges.append(f"  {src}_r{r} --> {local}_r{r}")
                        edges.append(f"  {local}_r{r} --> {base}_r{r}")
                else:
                    for r in ranks:
                        edges.append(f'  {replicated} -- "rank {r}\'s slice" --> {base}_r{r}')
                sharded = []
            if style.forward_comm == "all-reduce":
                ar = _node_id(path, "allreduce")
                lines.append(f'  {ar}(["all-reduce: sum of partial outputs"])')
                classes["comm"].append(ar)
                for r in ranks:
                    edges.append(f'  {base}_r{r} -- "partial sum" --> {ar}')
                replicated = ar
        if sharded:
            ag = _node_id(group, "allgather")
            lines.append(f'  {ag}(["all-gather of the sharded outputs"])')
            classes["comm"].append(ag)
            for src in sharded:
                for r in ranks:
                    edges.append(f"  {src}_r{r} --> {ag}")
            replicated = ag
        for r in ranks:
            lines.append(f'  subgraph {_node_id(group, "rank", str(r))}["rank {r}: {group}"]')
            lines.extend(rank_nodes[r])
            lines.append("  end")
        add = _node_id(group, "add")
        lines.append(f'  {add}(("+"))')
        edges.append(f"  {replicated} --> {add}")
        edges.append(f'  {prev} -- "residual" --> {add}')
        prev = add
    lines.append('  y(["output: hidden states, replicated on every rank"])')
    edges.append(f"  {prev} --> y")
    lines.extend(edges)
    for name, style_def in _CLASS_DEFS.items():
        lines.append(f"  classDef {name} {style_def}")
    lines.extend(f"  class {','.join(ids)} {name}" for name, ids in classes.items() if ids)
    return "\n".join(lines) + "\n"


def flow_text(finding: str, **fields: str) -> str:
    """What a data-flow message says is drawn (before its lesson): the kit's template for ``finding``
    (:data:`pytest_distcheck.diagram.flow.FLOW_MESSAGES`) with ``fields``."""
    from pytest_distcheck.diagram.flow import FLOW_MESSAGES

    return FLOW_MESSAGES[finding].template.format(**fields)
