"""Build a tensor-parallel model from the dense one by reading the sharding plan.

Two ways, from the same plan (``plan.py``):

- :func:`shard_model`: this lab's own layers (``layers.py``), each cut from the dense layer's weights;
- :func:`shard_with_torch`: PyTorch's ``parallelize_module`` with ``ColwiseParallel`` /
  ``RowwiseParallel`` (``torch.distributed.tensor.parallel``), the reference the tests compare with.

Only the layers the plan names are sharded; embeddings, LayerNorms and the LM head stay replicated
(Megatron-LM also splits the embedding by vocabulary, sec. 3; this lab keeps it whole for brevity).
"""

from __future__ import annotations

import copy
from typing import Mapping

from torch import nn

from experiments.tp_inference.comm import TPGroup
from experiments.tp_inference.layers import PARALLEL_LINEARS
from experiments.tp_inference.model import GPT
from experiments.tp_inference.plan import BLOCK_PLAN
from pytest_distcheck.tp.plan import validate_plan


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


def shard_model(dense: GPT, tp: TPGroup, plan: Mapping[str, str] = BLOCK_PLAN) -> GPT:
    """A copy of ``dense`` with the plan's layers replaced by this rank's column-/row-parallel shards.

    Every rank of ``tp`` calls this with the same dense model; each keeps its own slice.

    Raises:
        ValueError: the plan is wrong for this model (see :func:`planned_layers`), or a sharded
            dimension is not divisible by ``tp.size``.
    """
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
        ValueError: the plan is wrong for this model (checked before PyTorch sees it).
    """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    model = copy.deepcopy(dense)
    torch_plan = {path: styles[plan[path.split(".", 2)[2]]]() for path in planned_layers(model, plan)}
    return parallelize_module(model, mesh, torch_plan)
