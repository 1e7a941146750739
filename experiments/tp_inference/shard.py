"""Build a tensor-parallel model from the dense one by reading the sharding plan.

Two ways, from the same plan (``plan.py``):

- :func:`shard_model`: this lab's own layers (``layers.py``), each cut from the dense layer's weights;
- :func:`shard_with_torch`: PyTorch's ``parallelize_module`` with ``ColwiseParallel`` /
  ``RowwiseParallel`` (``torch.distributed.tensor.parallel``), the reference the tests compare with.

Only the layers the plan names are sharded; embeddings, LayerNorms and the LM head stay replicated
(Megatron-LM also splits the embedding by vocabulary, sec. 3; this lab keeps it whole for brevity).
Both refuse a TP degree that does not split every planned layer and the heads evenly
(:func:`tp_degree_problems`), before any weight is cut.
"""

from __future__ import annotations

import copy
from typing import Mapping

import torch
from torch import nn

from experiments.tp_inference.comm import TPGroup
from experiments.tp_inference.layers import PARALLEL_LINEARS
from experiments.tp_inference.model import GPT, GPTConfig
from experiments.tp_inference.plan import BLOCK_PLAN
from pytest_distcheck.tp.plan import does_not_fit, split_problems, validate_plan


def _linears(block: nn.Module) -> list[str]:
    return [name for name, m in block.named_modules() if isinstance(m, nn.Linear)]


def planned_layers(model: GPT, plan: Mapping[str, str] = BLOCK_PLAN) -> dict[str, tuple[nn.Module, str, nn.Linear]]:
    """Every layer the plan names, in every block: ``{"blocks.0.attn.qkv": (parent, "qkv", layer)}``.

    Raises:
        ValueError: a style is unknown, or the plan names a module a block does not have or one that
            is not an ``nn.Linear`` (the message names the plan entry, the block and the block's
            linear layers).
    """
    validate_plan(plan)
    found = {}
    for i, block in enumerate(model.blocks):
        for path in plan:
            parent_path, _, name = path.rpartition(".")
            try:
                parent = block.get_submodule(parent_path) if parent_path else block
                layer = getattr(parent, name)
            except AttributeError:
                raise ValueError(
                    f"plan entry {path!r}: block blocks.{i} has no module {path!r} "
                    f"(its linear layers: {', '.join(_linears(block))})"
                ) from None
            if not isinstance(layer, nn.Linear):
                raise ValueError(
                    f"plan entry {path!r}: blocks.{i}.{path} is a {type(layer).__name__}, not an nn.Linear "
                    f"(its linear layers: {', '.join(_linears(block))})"
                )
            found[f"blocks.{i}.{path}"] = (parent, name, layer)
    return found


def tp_degree_problems(cfg: GPTConfig, t: int, plan: Mapping[str, str] = BLOCK_PLAN) -> list[str]:
    """What keeps TP degree ``t`` from sharding the model of ``cfg`` by ``plan``: each planned layer's split
    size (``out_features`` of a column-parallel layer, ``in_features`` of a row-parallel one) and the
    number of heads must divide by ``t`` (each rank holds whole heads: the attention reshapes its QKV
    output head by head). Empty when ``t`` fits. The model is laid out on the meta device (no memory).

    Raises:
        ValueError: the plan is wrong for this model (see :func:`planned_layers`).
    """
    with torch.device("meta"):
        model = GPT(cfg)
    sizes = {}
    for path, (_, _, layer) in planned_layers(model, plan).items():
        if path.startswith("blocks.0."):
            local = path.removeprefix("blocks.0.")
            side = "out_features" if plan[local] == "colwise" else "in_features"
            sizes[f"{local} {side}"] = getattr(layer, side)
    return split_problems(sizes, t, cfg.n_heads)


def _refuse_uneven(cfg: GPTConfig, t: int, plan: Mapping[str, str]) -> None:
    problems = tp_degree_problems(cfg, t, plan)
    if problems:
        raise ValueError(does_not_fit(t, problems))  # the kit's sentence: one language, the kit's


def shard_model(dense: GPT, tp: TPGroup, plan: Mapping[str, str] = BLOCK_PLAN) -> GPT:
    """A copy of ``dense`` with the plan's layers replaced by this rank's column-/row-parallel shards.

    Every rank of ``tp`` calls this with the same dense model; each keeps its own slice.

    Raises:
        ValueError: the plan is wrong for this model (see :func:`planned_layers`), or ``tp.size`` does
            not divide a sharded dimension or the heads (:func:`tp_degree_problems`; nothing is cut).
    """
    _refuse_uneven(dense.cfg, tp.size, plan)
    model = copy.deepcopy(dense)
    for path, (parent, name, layer) in planned_layers(model, plan).items():
        style = plan[path.split(".", 2)[2]]
        setattr(parent, name, PARALLEL_LINEARS[style].from_dense(layer, tp))
    return model


def shard_with_torch(dense: GPT, mesh, plan: Mapping[str, str] = BLOCK_PLAN) -> GPT:
    """A copy of ``dense`` sharded by PyTorch's ``parallelize_module`` over the 1-D ``mesh``.

    ``colwise`` becomes ``ColwiseParallel()`` and ``rowwise`` ``RowwiseParallel()`` (their defaults:
    replicated input / sharded output, and sharded input / replicated output, returning local
    tensors), keyed by the full module path, as torchtitan's ``apply_tp`` does.

    Raises:
        ValueError: the plan is wrong for this model, or the mesh's size does not divide a sharded
            dimension or the heads (both checked before PyTorch sees them: torch's RowwiseParallel
            would fail inside the forward, pytorch/pytorch#141335).
    """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    planned_layers(dense, plan)  # a wrong plan is named first
    _refuse_uneven(dense.cfg, mesh.size(), plan)
    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    model = copy.deepcopy(dense)
    torch_plan = {path: styles[plan[path.split(".", 2)[2]]]() for path in planned_layers(model, plan)}
    return parallelize_module(model, mesh, torch_plan)
