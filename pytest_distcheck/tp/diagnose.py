"""Name the fault of a TP module that does not match its dense original, from what every rank recorded.

Pure functions over plain CPU tensors (the records ``compare.py`` gathers from the ranks), so each
signature is unit-tested without a process group. A module is judged at its boundary first: its
output, dL/dx of its inputs, then each parameter's gradient. Only where one of those is wrong are the
recorded submodules (planned layers, their parents, parameter owners) searched for the place, so f
and g may sit anywhere on the path (inside a layer, in its parent, Megatron-LM's mappings). The
signatures follow from Megatron-LM's conjugate operators (Shoeybi et al. 2019, arXiv:1909.08053,
sec. 3, Fig. 3) and sequence parallelism (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2);
:data:`FAULTS` says what each means, the fix and its source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.tp.plan import Layer
from pytest_distcheck.tp.replicated import replication_error
from pytest_distcheck.tp.shards import (
    close,
    expected_shard,
    fused_fault,
    sequence_dim,
    shard_like,
    sliced_dim,
    what_is_held,
)

# Each fault name, and what it means / how to fix it (shown once per fault in the report).
FAULTS: dict[str, str] = {
    "non-replicated-input": N_(
        "an input meant to be replicated differs across the ranks: seed every rank's generator identically or "
        "dist.broadcast it from rank 0 (nothing else is compared until it is)"),
    "missing-g": N_(
        "g is missing after a row-parallel layer: each rank's output is a partial sum and the ranks' outputs add up "
        "to the dense one; all-reduce the output in forward (identity in backward)"),
    "missing-f": N_(
        "f is missing before a column-parallel layer: each rank's dL/dx is partial and the ranks' values add up to "
        "the dense one; all-reduce the input's gradient in backward (identity in forward), anywhere between the "
        "module's input and the layer (Megatron-LM's copy_to_tensor_model_parallel_region, "
        "megatron/core/tensor_parallel/mappings.py)"),
    "sequence-parallel-grad": N_(
        "a parameter applied to sequence-sharded activations needs its gradient all-reduced over the TP group: under "
        "sequence parallelism each rank's LayerNorm (and a row-parallel bias added after the reduce-scatter) sees "
        "only its slice of the sequence, so the ranks' gradients add up to the dense one; sum them over the TP group "
        "after backward, as megatron-core's finalize_model_grads does for parameters marked sequence_parallel "
        "(megatron/core/distributed/finalize_model_grads.py; NVIDIA/Megatron-LM#1446); give that step to "
        "assert_tp_matches_dense as after_backward="),
    "sliced-input": N_(
        "an input is split across the ranks in forward but its gradient is not all-gathered in backward: each rank's "
        "dL/dx is the dense one on its own slice and zero elsewhere; split it with an op whose backward all-gathers "
        "(Megatron-LM's scatter_to_tensor_model_parallel_region for the last dim, "
        "scatter_to_sequence_parallel_region for the sequence dim, megatron/core/tensor_parallel/mappings.py), or "
        "keep the input whole and start with f and a column-parallel layer"),
    "bias-on-every-rank": N_(
        "a row-parallel bias is added on every rank before the all-reduce, so it is counted t times (output = dense "
        "+ (t-1) bias); add it once after the all-reduce, or on rank 0 only"),
    "wrong-shard-dim": N_(
        "a weight is split along the wrong dim: column-parallel splits dim 0 of nn.Linear's [out_features, "
        "in_features] weight (and the bias), row-parallel dim 1"),
    "qkv-head-split": N_(
        "the fused QKV weight is split without following its layout, so a rank's q, k and v rows belong to different "
        "heads: for a [q | k | v] layout take each rank's chunk of q, of k and of v (plan: Layer('colwise', "
        "fused=3)); for a head-by-head [n_heads, 3, head_dim] layout, one contiguous chunk"),
    "fused-contiguous-split": N_(
        "a fused column-parallel weight (parts such as [gate | up] in one linear, split into its parts after it) is "
        "cut into contiguous chunks, so one rank holds only gate and another only up: shard each part separately and "
        "concatenate the shards per rank, as vLLM's MergedColumnParallelLinear does "
        "(vllm/model_executor/layers/linear.py), and declare it Layer('colwise', fused=2) (or the part sizes)"),
    "vocab-local-softmax": N_(
        "softmax (or argmax) over a vocab-sharded logit needs the global max and sum: each rank normalised over its "
        "own slice of the vocabulary; all-reduce the max (ReduceOp.MAX) and the sum of exp over the TP group, as "
        "Megatron-LM's VocabParallelCrossEntropy does (megatron/core/tensor_parallel/cross_entropy.py), or "
        "all-gather the logits first; for argmax, compare the ranks' local maxima across the group"),
    "wrong-rank-shard": N_("a rank holds another rank's chunk (rank r must hold chunk r)"),
    "not-sharded": N_("a parameter the plan splits is whole on the rank"),
    "wrong-values": N_("a parameter's values match no slice of the dense one: were the dense weights loaded?"),
    "missing-parameter": N_("the TP module lacks a parameter of the dense module (it must keep the dense names)"),
    "grad-none": N_("a gradient is None on some rank: the tensor took no part in that rank's loss"),
    "shape-mismatch": N_("a tensor's shape is neither the dense shape nor this rank's shard of it"),
    "mismatch": N_("values differ from the dense ones by more than the tolerance, with none of the signatures above"),
}

# What the report says, and where and what each finding saw (a ``where`` is a module path, a parameter
# name, or one of the labels below).
OUTPUT = N_("output")
INPUT_I = N_("input {i}")
DX_OF_INPUT = N_("dL/dx of input {i}")
GRAD_OF = N_("grad of {name}")
THE_INPUT_OF = N_("the input of {path}")
THE_MODULES_OUTPUT = N_("the module's output")
SHAPE = N_("shape")
SHAPE_VS = N_("shape {shape} vs expected {expected}")
SHAPE_VS_NONE = N_("shape {shape} vs expected none")
MAX_ABS_DIFF = N_("max abs diff {diff:.3g}")
NO_SUCH_PARAMETER = N_("no parameter of this name in the TP module")
NOT_IN_PLAN = N_("replicated (not in the plan)")
HELD = N_("plan: {style}; the rank {held}")
WRONG_VALUES = N_("plan: {style}; {diff} from its expected slice {shape}")
OUTPUT_SHAPE = N_("shape {shape} on rank {rank}, dense {dense} (whole) or one dim's shard")
OUTPUTS_ADD_UP = N_("the ranks' outputs add up to the dense output")
OUTPUTS_ADD_UP_WITH_BIAS = N_("the ranks' outputs add up to the dense output plus {n} x the bias of {path}: each rank "
                              "added the bias to its partial sum, with no all-reduce before it")
BIAS_ON_EVERY_RANK = N_("output - dense = {n} x the bias of {path} on every rank")
NEEDS_WHOLE_INPUT = N_("{error} (plan: {style}, which needs the whole input on every rank)")
LAYER_OUTPUTS_ADD_UP = N_("the ranks' outputs of {path} add up to the dense output (each rank holds a partial sum)")
LAYER_BIAS_ON_EVERY_RANK = N_("output of {path} - dense = {n} x its bias on every rank")
LAYER_DIFFERS = N_("output of this layer differs from the dense layer's: {ranks}")
SEQUENCE_HINT = N_("; each rank holds its chunk of dim {dim} (sequence parallelism): all-gather it before {path} "
                   "(Megatron-LM's gather_from_sequence_parallel_region, backward reduce-scatter)")
FUSED_BEFORE = N_("every rank's output of {path} is its contiguous chunk, as the plan (colwise) says, but {reader} "
                  "is wrong: {path} makes {n} features and what reads them has {width}, so the code between combines "
                  "{parts} fused parts of {size} into one, and each part must be split apiece "
                  "(plan: Layer('colwise', fused={parts}))")
VOCAB_LOCAL = N_("the module's output is the {kind} of each rank's own {width} logits of {path} (its vocabulary "
                 "slice), not of all {total}")
DX_NONE = N_("dL/dx is None (the input took no part in the TP loss)")
SLICED = N_("each rank's dL/dx of input {i} is the dense one on its own chunk of dim {dim} and zero elsewhere: the "
            "input was split with no all-gather in backward")
DX_PARTIAL = N_("dL/dx of input {i} is partial on each rank; the ranks' values add up to the dense dL/dx")
DX_PARTIAL_AT = N_("dL/dx of input {i} is partial on each rank; the ranks' values add up to the dense dL/dx (at the "
                   "input of {layer})")
F_MISSING_AT = N_("the gradient flowing back through {path} to its input is partial on each rank (the ranks' values "
                  "add up to the dense one), and nothing between it and the module's input all-reduces it")
F_MISSING_AT_INPUT = N_("the gradient flowing back through {path} to its input is partial on each rank (the ranks' "
                        "values add up to the dense one), and nothing between it and the module's input all-reduces "
                        "it: dL/dx of input {i} is wrong")
GRAD_NONE = N_("its gradient is None")
GRAD_NONE_RANK0_BIAS = N_("its gradient is None; a bias added by rank 0 only is the plan's "
                          "Layer('rowwise', bias='rank0')")
SEQUENCE_GRAD = N_("{path} ran on sequence-sharded activations, so each rank's gradient covers its slice of the "
                   "sequence only; the ranks' gradients add up to the dense one: all-reduce it over the TP group after "
                   "backward")
PARAM_GRAD_PARTIAL = N_("its gradient is partial on each rank; the ranks' gradients add up to the dense one (an f "
                        "missing between it and a column-parallel layer)")
GRAD_DIFFERS_PARTIAL = N_("{ranks} (partial: the ranks' gradients add up to the dense one)")
HEADLINE = N_("the TP module does not match the dense module (TP degree {size}; rtol {rtol:g}, atol {atol:g}): "
              "{faults}")
MORE = N_("- ... and {n} more")
ALSO_DIFFER = N_("- then also differ (likely consequences of the above): {where}")
WHAT_THESE_MEAN = N_("what these mean:")


@dataclass
class Finding:
    """One diagnosed fault: ``fault`` (a key of :data:`FAULTS`), ``where`` (a module path, parameter name,
    or a label such as :data:`OUTPUT` or :data:`INPUT_I`), ``detail`` (what was seen), ``ranks`` (where it
    was seen). Labels and details are in the language in use when the diagnosis ran; ``fault`` never is."""

    fault: str
    where: str
    detail: str
    ranks: list[int] = field(default_factory=list)

    def line(self) -> str:
        ranks = f", rank{'s' if len(self.ranks) > 1 else ''} {', '.join(map(str, self.ranks))}" if self.ranks else ""
        return f"- {self.fault} [{self.where}{ranks}]: {self.detail}"


def _maxdiff(a: torch.Tensor, b: torch.Tensor | None) -> str:
    if b is None:
        return _(SHAPE_VS_NONE).format(shape=tuple(a.shape))
    if a.shape != b.shape:
        return _(SHAPE_VS).format(shape=tuple(a.shape), expected=tuple(b.shape))
    return _(MAX_ABS_DIFF).format(diff=(a.double() - b.double()).abs().max().item())


def expected_like(tp: torch.Tensor, dense: torch.Tensor, layer: Layer | None, rank: int,
                  size: int) -> torch.Tensor | None:
    """The dense activation as rank ``rank`` should hold it (:func:`~pytest_distcheck.tp.shards.shard_like`,
    the last dim split by ``layer``'s fused parts); None when the shape fits no layout."""
    fused = layer.fused if layer is not None and layer.style == "colwise" else 1
    return shard_like(tp, dense, rank, size, fused)


def _ancestors(path: str) -> list[str]:
    """The proper, non-root prefixes of a module path, innermost first: ``a.b.c`` -> ``a.b``, ``a``."""
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)] if path else []


class _Diagnosis:
    def __init__(self, ranks: list[dict], dense: dict, plan: dict[str, Layer], embeddings: set[str],
                 rtol: float, atol: float) -> None:
        self.ranks, self.dense, self.plan, self.embeddings = ranks, dense, plan, embeddings
        self.t, self.rtol, self.atol = len(ranks), rtol, atol
        self.found: list[Finding] = []

    def add(self, fault: str, where: str, detail: str, ranks: list[int] | None = None) -> None:
        for f in self.found:  # the same finding on several ranks: one line naming them all
            if (f.fault, f.where, f.detail) == (fault, where, detail) and f.ranks and ranks:
                f.ranks = sorted(set(f.ranks) | set(ranks))
                return
        self.found.append(Finding(fault, where, detail, ranks or []))

    def named(self, fault: str) -> bool:
        return any(f.fault == fault for f in self.found)

    def close(self, a: Any, b: Any) -> bool:
        return close(a, b, self.rtol, self.atol)

    def _layer_of(self, name: str) -> tuple[str, Layer | None, str]:
        path, _dot, pname = name.rpartition(".")
        return path, self.plan.get(path), pname

    def _sum(self, tensors: list[torch.Tensor | None]) -> torch.Tensor | None:
        if any(x is None for x in tensors) or len({x.shape for x in tensors}) != 1:
            return None
        return torch.stack([x.double() for x in tensors]).sum(0)

    def _recs(self, path: str) -> tuple[list[dict | None], dict | None]:
        return [r["layers"].get(path) for r in self.ranks], self.dense["layers"].get(path)

    def _order(self, style: str | None = None) -> list[str]:
        """Planned paths in the order the TP module ran them (of one style, if given)."""
        return [p for p in self.ranks[0]["order"] if p in self.plan and (style is None or self.plan[p].style == style)]

    def _row_bias(self, path: str) -> torch.Tensor | None:
        layer = self.plan.get(path)
        return self.dense["params"].get(f"{path}.bias", {}).get("value") if layer and layer.style == "rowwise" else None

    def _outputs_right(self, path: str) -> bool:
        recs, d = self._recs(path)
        if d is None or d["out"] is None or any(x is None or x["out"] is None for x in recs):
            return False
        layer = self.plan.get(path)
        return all(self.close(x["out"], expected_like(x["out"], d["out"], layer, k, self.t))
                   for k, x in enumerate(recs))

    def grad_state(self, path: str) -> str | None:
        """How dL/d(input) through module ``path`` compares with dense on the ranks: ``whole`` (right),
        ``partial`` (the ranks' values add up to the dense one), ``wrong``, or None (not recorded)."""
        recs, d = self._recs(path)
        if d is None or d.get("in_grad") is None or any(x is None or x.get("in_grad") is None for x in recs):
            return None
        gs = [x["in_grad"] for x in recs]
        if all(self.close(g, shard_like(g, d["in_grad"], k, self.t)) for k, g in enumerate(gs)):
            return "whole"
        total = self._sum(gs)
        return "partial" if total is not None and self.close(total, d["in_grad"]) else "wrong"

    # -- 1. inputs -----------------------------------------------------------------------------
    def inputs(self) -> bool:
        for i in range(len(self.dense["inputs"])):
            if not isinstance(self.dense["inputs"][i], torch.Tensor):
                continue
            where = _(INPUT_I).format(i=i)
            err = replication_error([r["inputs"][i] for r in self.ranks], where)
            if err:
                self.add("non-replicated-input", where, err)
                return False
        return True

    # -- 2. parameters -------------------------------------------------------------------------
    def params(self) -> None:
        for name, d in self.dense["params"].items():
            path, layer, pname = self._layer_of(name)
            emb = path in self.embeddings
            for rank, rec in enumerate(self.ranks):
                p = rec["params"].get(name)
                if p is None:
                    self.add("missing-parameter", name, _(NO_SUCH_PARAMETER), [rank])
                    continue
                try:
                    want = expected_shard(d["value"], layer, pname, rank, self.t, emb)
                except ValueError as exc:
                    self.add("shape-mismatch", name, str(exc), [rank])
                    continue
                if self.close(p["value"], want):
                    continue
                held = what_is_held(p["value"], d["value"], layer, pname, rank, self.t, emb, self.rtol, self.atol)
                style = layer.style if layer else _(NOT_IN_PLAN)
                if held:
                    self.add(held[0], name, _(HELD).format(style=style, held=held[1]), [rank])
                else:
                    self.add("wrong-values", name, _(WRONG_VALUES).format(
                        style=style, diff=_maxdiff(p["value"], want), shape=tuple(want.shape)), [rank])

    # -- 3. forward ----------------------------------------------------------------------------
    def forward(self) -> None:
        outs = [r["out"] for r in self.ranks]
        dense_out = self.dense["out"]
        bad = []
        for rank, out in enumerate(outs):
            want = expected_like(out, dense_out, None, rank, self.t)
            if want is None:
                self.add("shape-mismatch", _(OUTPUT), _(OUTPUT_SHAPE).format(
                    shape=tuple(out.shape), rank=rank, dense=tuple(dense_out.shape)), [rank])
            elif not self.close(out, want):
                bad.append((rank, out, want))
        if not bad:
            return
        n = len(self.found)
        self._forward_layers()
        if len(self.found) > n:
            return
        total = self._sum(outs)
        if self.t > 1 and total is not None:
            if self.close(total, dense_out):
                self.add("missing-g", _(OUTPUT), _(OUTPUTS_ADD_UP))
                return
            for path in self.plan:  # the same, but each rank added a row-parallel bias before the missing g
                b = self._row_bias(path)
                if b is not None and self.close(total - (self.t - 1) * b, dense_out):
                    self.add("missing-g", _(OUTPUT), _(OUTPUTS_ADD_UP_WITH_BIAS).format(n=self.t - 1, path=path))
                    return
        for path in self.plan:
            b = self._row_bias(path)
            if b is not None and all(self.close(o - w, (self.t - 1) * b.expand_as(w)) for _k, o, w in bad):
                self.add("bias-on-every-rank", path, _(BIAS_ON_EVERY_RANK).format(n=self.t - 1, path=path))
                return
        if not self.found and (self._vocab_local_softmax(outs) or self._fused_before(None, dense_out.shape[-1])):
            return
        for rank, out, want in bad:
            self.add("mismatch", _(OUTPUT), _maxdiff(out, want), [rank])

    def _forward_layers(self) -> None:
        """Walk the planned layers in the order the TP module ran them; name the first that goes wrong."""
        for path in self._order():
            layer = self.plan[path]
            recs, d = self._recs(path)
            if d is None or d["in"] is None or d["out"] is None or any(
                    x is None or x["in"] is None or x["out"] is None for x in recs):
                continue
            ins, outs = [x["in"] for x in recs], [x["out"] for x in recs]
            if layer.style != "rowwise":
                err = replication_error(ins, _(THE_INPUT_OF).format(path=path))
                if err:
                    self.add("non-replicated-input", path, _(NEEDS_WHOLE_INPUT).format(error=err, style=layer.style)
                             + self._sequence_hint(ins, d["in"], path))
                    return
            ins_ok = all(self.close(x, expected_like(x, d["in"], None, k, self.t)) for k, x in enumerate(ins))
            if not ins_ok:
                # Wrong before this layer, outside the plan's layers: a fused column output cut contiguously
                # is one such cause (the code between the two layers splits it into parts).
                if not self.found:
                    self._fused_before(path, d["in"].shape[-1])
                return
            wants = [expected_like(o, d["out"], layer, k, self.t) for k, o in enumerate(outs)]
            if all(w is not None and self.close(o, w) for o, w in zip(outs, wants, strict=True)):
                continue
            if layer.style == "rowwise":
                total, b = self._sum(outs), self._row_bias(path)
                extra = (self.t - 1) * b if b is not None else 0  # a bias added after a missing all-reduce
                dense_out = d["out"].double()
                if total is not None and self.t > 1 and (
                        self.close(total, dense_out) or (b is not None and self.close(total - extra, dense_out))):
                    if any(self._outputs_right(a) for a in _ancestors(path)):
                        continue  # g sits outside the layer, in a parent whose output is right
                    self.add("missing-g", path, _(LAYER_OUTPUTS_ADD_UP).format(path=path))
                    return
                if b is not None and all(w is not None and self.close(o - w, extra.expand_as(o))
                                         for o, w in zip(outs, wants, strict=True)):
                    self.add("bias-on-every-rank", path, _(LAYER_BIAS_ON_EVERY_RANK).format(path=path, n=self.t - 1))
                    return
            if any(f.where.startswith(path + ".") for f in self.found):
                return  # its parameters are already named as the cause
            bad = [k for k, (o, w) in enumerate(zip(outs, wants, strict=True)) if w is None or not self.close(o, w)]
            self.add("mismatch", path, _(LAYER_DIFFERS).format(ranks="; ".join(
                f"rank {k}: {_maxdiff(outs[k], wants[k]) if wants[k] is not None else _(SHAPE)}" for k in bad)), bad)
            return

    def _sequence_hint(self, ins: list[torch.Tensor], dense_in: torch.Tensor, path: str) -> str:
        dims = {sequence_dim(x, dense_in, k, self.t, self.rtol, self.atol) for k, x in enumerate(ins)}
        if len(dims) != 1 or None in dims:
            return ""
        return _(SEQUENCE_HINT).format(dim=dims.pop(), path=path)

    def _fused_before(self, consumer: str | None, width: int) -> bool:
        """Name a fused column output cut contiguously: the last column-parallel layer (fused=1) before
        ``consumer`` (a planned layer, or None: the module's output) is right on every rank, what reads it
        is not, and its dense width is 2 or 3 times ``width`` (parts combined into one, as SwiGLU's
        ``silu(gate) * up`` or attention's q, k, v do)."""
        order = self._order()
        before = order[:order.index(consumer)] if consumer in order else order
        if not before or self.plan[before[-1]].style != "colwise":
            return False
        path = before[-1]
        if self.plan[path].fused != 1 or not self._outputs_right(path):
            return False
        n = self.dense["layers"][path]["out"].shape[-1]
        parts = n // width if width and n % width == 0 else 0
        if parts not in (2, 3) or (n // parts) % self.t:
            return False
        reader = _(THE_INPUT_OF).format(path=consumer) if consumer else _(THE_MODULES_OUTPUT)
        self.add(fused_fault(parts), path, _(FUSED_BEFORE).format(path=path, reader=reader, n=n, width=width,
                                                                  parts=parts, size=n // parts))
        return True

    def _vocab_local_softmax(self, outs: list[torch.Tensor]) -> bool:
        """Name a softmax or argmax taken on each rank's vocabulary slice alone: the module's output is
        that normalisation of the last column-parallel layer's (right) local output."""
        order = self._order()
        cols = [p for p in order[-1:] if self.plan[p].style == "colwise"]  # the last planned layer: the LM head
        if self.t < 2 or not cols or not self._outputs_right(cols[-1]):
            return False
        recs, _dense = self._recs(cols[-1])
        local = [x["out"].double() for x in recs]
        width = local[0].shape[-1]
        kinds: dict[str, Any] = {"softmax": lambda z: z.softmax(-1), "log_softmax": lambda z: z.log_softmax(-1),
                                 "argmax": lambda z: z.argmax(-1)}
        for kind, fn in kinds.items():
            per_rank = [fn(z) for z in local]
            gathered = torch.cat(per_rank, -1) if kind != "argmax" else None
            ok = True
            for k, out in enumerate(outs):
                cands = [per_rank[k]] + ([gathered] if gathered is not None else [per_rank[k] + k * width])
                if not any(c.shape == out.shape and self.close(out, c) for c in cands):
                    ok = False
                    break
            if ok:
                self.add("vocab-local-softmax", cols[-1], _(VOCAB_LOCAL).format(kind=kind, width=width, path=cols[-1],
                                                                                total=width * self.t))
                return True
        return False

    # -- 4. backward ---------------------------------------------------------------------------
    def _missing_f_layer(self) -> str | None:
        """The column-parallel layer closest to the loss whose input gradient is partial with no parent
        (between it and the module's input) making it whole: where an f is missing."""
        for path in reversed(self._order("colwise")):
            if self.grad_state(path) != "partial":
                continue
            if any(self.grad_state(a) == "whole" for a in _ancestors(path)):
                continue  # f sits in a parent, outside the layer
            return path
        return None

    def backward(self) -> None:
        for i, dg in enumerate(self.dense["xgrads"]):
            if dg is None:
                continue
            grads = [r["xgrads"][i] for r in self.ranks]
            none = [k for k, g in enumerate(grads) if g is None]
            where = _(INPUT_I).format(i=i)
            if none:
                self.add("grad-none", where, _(DX_NONE), none)
                continue
            bad = [k for k, g in enumerate(grads) if not self.close(g, dg)]
            if not bad:
                continue
            d = sliced_dim(grads, dg, self.rtol, self.atol) if self.t > 1 else None
            if d is not None:
                self.add("sliced-input", where, _(SLICED).format(i=i, dim=d))
                continue
            layer = self._missing_f_layer()
            total = self._sum(grads)
            if self.t > 1 and total is not None and self.close(total, dg):
                said = _(DX_PARTIAL_AT).format(i=i, layer=layer) if layer else _(DX_PARTIAL).format(i=i)
                self.add("missing-f", layer or where, said)
            elif layer is not None:
                self.add("missing-f", layer, _(F_MISSING_AT_INPUT).format(path=layer, i=i))
            else:
                self.add("mismatch", _(DX_OF_INPUT).format(i=i),
                         "; ".join(f"rank {k}: {_maxdiff(grads[k], dg)}" for k in bad), bad)
        self._param_grads()

    def _sequence_sharded(self, owner: str) -> bool:
        """Whether module ``owner`` ran on sequence-sharded activations (input or output) on every rank."""
        recs, d = self._recs(owner)
        if d is None or any(x is None for x in recs):
            return False
        return all(sequence_dim(x.get("in"), d.get("in"), k, self.t, self.rtol, self.atol) is not None
                   or sequence_dim(x.get("out"), d.get("out"), k, self.t, self.rtol, self.atol) is not None
                   for k, x in enumerate(recs))

    def _param_grads(self) -> None:
        for name, d in self.dense["params"].items():
            if d["grad"] is None:
                continue
            path, layer, pname = self._layer_of(name)
            rank0_bias = layer is not None and layer.bias == "rank0" and pname == "bias"
            grads = [r["params"].get(name, {}).get("grad") for r in self.ranks]
            none = [k for k, g in enumerate(grads) if g is None and not (rank0_bias and k > 0)
                    and name in self.ranks[k]["params"]]
            if none:
                rank0_hint = layer is not None and layer.style == "rowwise" and pname == "bias"
                self.add("grad-none", name, _(GRAD_NONE_RANK0_BIAS if rank0_hint else GRAD_NONE), none)
            wants = []
            for k, g in enumerate(grads):
                try:
                    want = expected_shard(d["grad"], layer, pname, k, self.t, path in self.embeddings)
                except ValueError:
                    want = None
                if rank0_bias and k > 0:
                    want = torch.zeros_like(d["grad"]) if g is not None else None
                wants.append(want)
            bad = [k for k, (g, w) in enumerate(zip(grads, wants, strict=True)) if g is not None and w is not None
                   and not self.close(g, w)]
            if not bad:
                continue
            total = self._sum([g for g in grads if g is not None]) if None not in grads else None
            partial = (self.t > 1 and total is not None and all(w is not None and w.shape == d["grad"].shape
                                                                  for w in wants) and self.close(total, d["grad"]))
            if partial and self._sequence_sharded(path):
                self.add("sequence-parallel-grad", name, _(SEQUENCE_GRAD).format(path=path))
                continue
            if partial and not self.named("missing-f"):
                layer_f = self._missing_f_layer()
                if layer_f is not None:
                    self._missing_f_at(layer_f)
                else:
                    self.add("missing-f", name, _(PARAM_GRAD_PARTIAL))
                    continue
            said = "; ".join(f"rank {k}: {_maxdiff(grads[k], wants[k])}" for k in bad)
            self.add("mismatch", _(GRAD_OF).format(name=name),
                     _(GRAD_DIFFERS_PARTIAL).format(ranks=said) if partial else said, bad)

    def _missing_f_at(self, path: str) -> None:
        self.add("missing-f", path, _(F_MISSING_AT).format(path=path))


def diagnose(ranks: list[dict], dense: dict, plan: dict[str, Layer], rtol: float, atol: float,
             embeddings: set[str] = frozenset(), backward: bool = True) -> list[Finding]:
    """Every fault seen, in the order: inputs, parameters, forward, dL/dx, gradients.

    Args:
        ranks: each rank's record (group-rank order): ``inputs`` (list), ``out`` (tensor, whole when it
            was a DTensor), ``xgrads`` (list, None for inputs without a gradient), ``params`` (name ->
            ``{"value", "grad"}``, local shards), ``layers`` (recorded module path -> ``{"in",
            "in_grad", "out"}``: planned layers, their parents, parameter owners) and ``order`` (those
            paths in the order they ran).
        dense: the same for the dense module (whole tensors).
        plan: parsed plan (:func:`pytest_distcheck.tp.plan.parse_plan`).
        embeddings: planned paths that are ``nn.Embedding`` (their split dims are swapped).

    A non-replicated input stops the diagnosis there: nothing after it can be compared.
    """
    dx = _Diagnosis(ranks, dense, plan, set(embeddings), rtol, atol)
    if dx.inputs():
        dx.params()
        dx.forward()
        if backward:
            dx.backward()
    return dx.found


def report(found: list[Finding], size: int, rtol: float, atol: float, limit: int = 12) -> str:
    """The failure message, in the language in use: a headline naming every fault (by its name, which stays as
    it is), one line per finding, then what each means (:data:`FAULTS`)."""
    named = [f for f in found if f.fault != "mismatch"]
    # Once a fault is named, the plain mismatches after it are mostly its consequences: list them in one line.
    shown, after = (named, [f for f in found if f.fault == "mismatch"]) if named else (found, [])
    names = list(dict.fromkeys(f.fault for f in shown))
    lines = [_(HEADLINE).format(size=size, rtol=rtol, atol=atol, faults=", ".join(names))]
    lines += [f.line() for f in shown[:limit]]
    if len(shown) > limit:
        lines.append(_(MORE).format(n=len(shown) - limit))
    if after:
        lines.append(_(ALSO_DIFFER).format(where=", ".join(dict.fromkeys(f.where for f in after))))
    lines.append(_(WHAT_THESE_MEAN))
    lines += [f"  {n}: {_(FAULTS[n])}" for n in names]
    return "\n".join(lines)
