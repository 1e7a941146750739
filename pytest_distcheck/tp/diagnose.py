"""Name the fault of a TP module that does not match its dense original, from what every rank recorded.

Pure functions over plain CPU tensors (the records ``compare.py`` gathers from the ranks), so each
signature is unit-tested without a process group. The signatures follow from Megatron-LM's
conjugate operators (Shoeybi et al. 2019, arXiv:1909.08053, sec. 3, Fig. 3): ``f`` (identity
forward, all-reduce backward) before a column-parallel layer, ``g`` (all-reduce forward, identity
backward) after a row-parallel one:

- missing ``g``: each rank's output is a partial sum, so the ranks' outputs add up to the dense
  output (plus ``(t-1)`` biases when the bias is added after the missing all-reduce);
- missing ``f``: each rank's dL/dx holds only what flows through its own columns, so the ranks'
  dL/dx add up to the dense one;
- bias added on every rank: a row-parallel bias added before the all-reduce on every rank (instead of
  after it, or on rank 0 only) is counted ``t`` times: output = dense + ``(t-1)`` bias;
- shard on the wrong dim, a head split that ignores the fused QKV layout, another rank's chunk, an
  unsplit weight: the rank's parameter equals that other slice of the dense one (``shards.py``);
- non-replicated input: the ranks' copies of an input meant to be replicated differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_distcheck.tp.plan import Layer
from pytest_distcheck.tp.replicated import replication_error
from pytest_distcheck.tp.shards import chunk, close, expected_shard, what_is_held

# Each fault name, and what it means / how to fix it (shown once per fault in the report).
FAULTS: dict[str, str] = {
    "non-replicated-input": "an input meant to be replicated differs across the ranks: seed every rank's generator "
                            "identically or dist.broadcast it from rank 0 (nothing else is compared until it is)",
    "missing-g": "g is missing after a row-parallel layer: each rank's output is a partial sum and the ranks' "
                 "outputs add up to the dense one; all-reduce the output in forward (identity in backward)",
    "missing-f": "f is missing before a column-parallel layer: each rank's dL/dx is partial and the ranks' values add "
                 "up to the dense one; all-reduce the input's gradient in backward (identity in forward)",
    "bias-on-every-rank": "a row-parallel bias is added on every rank before the all-reduce, so it is counted t "
                          "times (output = dense + (t-1) bias); add it once after the all-reduce, or on rank 0 only",
    "wrong-shard-dim": "a weight is split along the wrong dim: column-parallel splits dim 0 of nn.Linear's "
                       "[out_features, in_features] weight (and the bias), row-parallel dim 1",
    "qkv-head-split": "the fused QKV weight is split without following its layout, so a rank's q, k and v rows belong "
                      "to different heads: for a [q | k | v] layout take each rank's chunk of q, of k and of v "
                      "(plan: Layer('colwise', fused=3)); for a head-by-head [n_heads, 3, head_dim] layout, one "
                      "contiguous chunk",
    "wrong-rank-shard": "a rank holds another rank's chunk (rank r must hold chunk r)",
    "not-sharded": "a parameter the plan splits is whole on the rank",
    "wrong-values": "a parameter's values match no slice of the dense one: were the dense weights loaded?",
    "missing-parameter": "the TP module lacks a parameter of the dense module (it must keep the dense names)",
    "grad-none": "a gradient is None on some rank: the tensor took no part in that rank's loss",
    "shape-mismatch": "a tensor's shape is neither the dense shape nor this rank's shard of it",
    "mismatch": "values differ from the dense ones by more than the tolerance, with none of the signatures above",
}


@dataclass
class Finding:
    """One diagnosed fault: ``fault`` (a key of :data:`FAULTS`), ``where`` (a module path, parameter name,
    ``output`` or ``input i``), ``detail`` (what was seen), ``ranks`` (where it was seen)."""

    fault: str
    where: str
    detail: str
    ranks: list[int] = field(default_factory=list)

    def line(self) -> str:
        ranks = f", rank{'s' if len(self.ranks) > 1 else ''} {', '.join(map(str, self.ranks))}" if self.ranks else ""
        return f"- {self.fault} [{self.where}{ranks}]: {self.detail}"


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs expected {tuple(b.shape)}"
    return f"max abs diff {(a.double() - b.double()).abs().max().item():.3g}"


def expected_like(tp: torch.Tensor, dense: torch.Tensor, layer: Layer | None, rank: int,
                  size: int) -> torch.Tensor | None:
    """The dense activation as rank ``rank`` should hold it: whole, or its shard of the last dim.

    The layout is read from the TP tensor's shape (a column-parallel output is sharded, unless the
    layer gathers it); None when the shape fits neither.
    """
    if tp.shape == dense.shape:
        return dense
    fused = layer.fused if layer is not None and layer.style == "colwise" else 1
    try:
        shard = chunk(dense, dense.dim() - 1, rank, size, fused)
    except ValueError:
        return None
    return shard if shard.shape == tp.shape else None


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

    def close(self, a: Any, b: Any) -> bool:
        return close(a, b, self.rtol, self.atol)

    def _layer_of(self, name: str) -> tuple[str, Layer | None, str]:
        path, _, pname = name.rpartition(".")
        return path, self.plan.get(path), pname

    def _sum(self, tensors: list[torch.Tensor | None]) -> torch.Tensor | None:
        if any(x is None for x in tensors) or len({x.shape for x in tensors}) != 1:
            return None
        return torch.stack([x.double() for x in tensors]).sum(0)

    def _row_bias(self, path: str) -> torch.Tensor | None:
        layer = self.plan.get(path)
        return self.dense["params"].get(f"{path}.bias", {}).get("value") if layer and layer.style == "rowwise" else None

    # -- 1. inputs -----------------------------------------------------------------------------
    def inputs(self) -> bool:
        for i in range(len(self.dense["inputs"])):
            if not isinstance(self.dense["inputs"][i], torch.Tensor):
                continue
            err = replication_error([r["inputs"][i] for r in self.ranks], f"input {i}")
            if err:
                self.add("non-replicated-input", f"input {i}", err)
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
                    self.add("missing-parameter", name, "no parameter of this name in the TP module", [rank])
                    continue
                try:
                    want = expected_shard(d["value"], layer, pname, rank, self.t, emb)
                except ValueError as exc:
                    self.add("shape-mismatch", name, str(exc), [rank])
                    continue
                if self.close(p["value"], want):
                    continue
                held = what_is_held(p["value"], d["value"], layer, pname, rank, self.t, emb, self.rtol, self.atol)
                style = layer.style if layer else "replicated (not in the plan)"
                if held:
                    self.add(held[0], name, f"plan: {style}; the rank {held[1]}", [rank])
                else:
                    self.add("wrong-values", name, f"plan: {style}; {_maxdiff(p['value'], want)} from its expected "
                             f"slice {tuple(want.shape)}", [rank])

    # -- 3. forward ----------------------------------------------------------------------------
    def forward(self) -> None:
        outs = [r["out"] for r in self.ranks]
        dense_out = self.dense["out"]
        bad = []
        for rank, out in enumerate(outs):
            want = expected_like(out, dense_out, None, rank, self.t)
            if want is None:
                self.add("shape-mismatch", "output", f"shape {tuple(out.shape)} on rank {rank}, dense "
                         f"{tuple(dense_out.shape)} (whole) or its last-dim shard", [rank])
            elif not self.close(out, want):
                bad.append((rank, out, want))
        if not bad:
            return
        n = len(self.found)
        self._forward_layers()
        if len(self.found) > n:
            return
        total = self._sum(outs)
        if self.t > 1 and total is not None and self.close(total, dense_out):
            self.add("missing-g", "output", "the ranks' outputs add up to the dense output")
            return
        for path in self.plan:
            b = self._row_bias(path)
            if b is not None and all(self.close(o - w, (self.t - 1) * b.expand_as(w)) for _, o, w in bad):
                self.add("bias-on-every-rank", path,
                         f"output - dense = {self.t - 1} x the bias of {path} on every rank")
                return
        for rank, out, want in bad:
            self.add("mismatch", "output", _maxdiff(out, want), [rank])

    def _forward_layers(self) -> None:
        """Walk the planned layers in the order the TP module ran them; name the first that goes wrong."""
        for path in self.ranks[0]["order"]:
            layer, d = self.plan[path], self.dense["layers"].get(path)
            recs = [r["layers"].get(path) for r in self.ranks]
            if d is None or any(x is None or x["in"] is None or x["out"] is None for x in recs):
                continue
            ins, outs = [x["in"] for x in recs], [x["out"] for x in recs]
            if layer.style != "rowwise":
                err = replication_error(ins, f"the input of {path}")
                if err:
                    self.add("non-replicated-input", path, err + f" (plan: {layer.style}, which needs the whole input "
                             "on every rank)")
                    return
            ins_ok = all(self.close(x, expected_like(x, d["in"], None, k, self.t)) for k, x in enumerate(ins))
            if not ins_ok:
                return  # wrong before this layer, outside the plan's layers: leave it to the module-level checks
            wants = [expected_like(o, d["out"], layer, k, self.t) for k, o in enumerate(outs)]
            if all(w is not None and self.close(o, w) for o, w in zip(outs, wants, strict=True)):
                continue
            if layer.style == "rowwise":
                total, b = self._sum(outs), self._row_bias(path)
                extra = (self.t - 1) * b if b is not None else 0  # a bias added after a missing all-reduce
                dense_out = d["out"].double()
                if total is not None and self.t > 1 and (
                        self.close(total, dense_out) or (b is not None and self.close(total - extra, dense_out))):
                    self.add("missing-g", path, f"the ranks' outputs of {path} add up to the dense output "
                             "(each rank holds a partial sum)")
                    return
                if b is not None and all(w is not None and self.close(o - w, extra.expand_as(o))
                                         for o, w in zip(outs, wants, strict=True)):
                    self.add("bias-on-every-rank", path, f"output of {path} - dense = {self.t - 1} x its bias on "
                             "every rank")
                    return
            if any(f.where.startswith(path + ".") for f in self.found):
                return  # its parameters are already named as the cause
            bad = [k for k, (o, w) in enumerate(zip(outs, wants, strict=True)) if w is None or not self.close(o, w)]
            self.add("mismatch", path, "output of this layer differs from the dense layer's: "
                     + "; ".join(f"rank {k}: {_maxdiff(outs[k], wants[k]) if wants[k] is not None else 'shape'}"
                                 for k in bad), bad)
            return

    # -- 4. backward ---------------------------------------------------------------------------
    def backward(self) -> None:
        layer = self._missing_f_layer()
        named = False
        for i, dg in enumerate(self.dense["xgrads"]):
            if dg is None:
                continue
            grads = [r["xgrads"][i] for r in self.ranks]
            none = [k for k, g in enumerate(grads) if g is None]
            if none:
                self.add("grad-none", f"input {i}", "dL/dx is None (the input took no part in the TP loss)", none)
                continue
            bad = [k for k, g in enumerate(grads) if not self.close(g, dg)]
            if not bad:
                continue
            total = self._sum(grads)
            if self.t > 1 and total is not None and self.close(total, dg):
                at = f" (at the input of {layer})" if layer else ""
                self.add("missing-f", layer or f"input {i}", f"dL/dx of input {i} is partial on each rank; the ranks' "
                         "values add up to the dense dL/dx" + at)
                named = True
            elif layer is not None and not named:
                self._missing_f_at(layer)
                named = True
            else:
                self.add("mismatch", f"dL/dx of input {i}",
                         "; ".join(f"rank {k}: {_maxdiff(grads[k], dg)}" for k in bad), bad)
        if layer is not None and not named:  # dL/dx of the module may be right (or not needed) while a layer's is not
            self._missing_f_at(layer)
        self._param_grads()

    def _missing_f_at(self, path: str) -> None:
        self.add("missing-f", path, f"the gradient flowing back through {path} to its input is partial on each rank; "
                 "the ranks' values add up to the dense one")

    def _missing_f_layer(self) -> str | None:
        for path in reversed(self.ranks[0]["order"]):
            d = self.dense["layers"].get(path)
            gs = [r["layers"].get(path, {}).get("in_grad") for r in self.ranks]
            if self.plan[path].style == "rowwise" or d is None or d["in_grad"] is None or any(g is None for g in gs):
                continue
            if all(self.close(g, d["in_grad"]) for g in gs):
                continue
            total = self._sum(gs)
            return path if total is not None and self.close(total, d["in_grad"]) else None
        return None

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
                hint = ""
                if layer is not None and layer.style == "rowwise" and pname == "bias":
                    hint = "; a bias added by rank 0 only is the plan's Layer('rowwise', bias='rank0')"
                self.add("grad-none", name, "its gradient is None" + hint, none)
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
            if self.t > 1 and total is not None and all(w is not None and w.shape == d["grad"].shape for w in wants) \
                    and self.close(total, d["grad"]):
                self.add("missing-f", name, "its gradient is partial on each rank; the ranks' gradients add up to the "
                         "dense one (an f missing between it and a column-parallel layer)")
            else:
                self.add("mismatch", f"grad of {name}",
                         "; ".join(f"rank {k}: {_maxdiff(grads[k], wants[k])}" for k in bad), bad)


def diagnose(ranks: list[dict], dense: dict, plan: dict[str, Layer], rtol: float, atol: float,
             embeddings: set[str] = frozenset(), backward: bool = True) -> list[Finding]:
    """Every fault seen, in the order: inputs, parameters, forward, dL/dx, gradients.

    Args:
        ranks: each rank's record (group-rank order): ``inputs`` (list), ``out`` (tensor, whole when it
            was a DTensor), ``xgrads`` (list, None for inputs without a gradient), ``params`` (name ->
            ``{"value", "grad"}``, local shards), ``layers`` (planned path -> ``{"in", "in_grad",
            "out"}``) and ``order`` (planned paths in the order they ran).
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
    """The failure message: a headline naming every fault, one line per finding, then what each means."""
    named = [f for f in found if f.fault != "mismatch"]
    # Once a fault is named, the plain mismatches after it are mostly its consequences: list them in one line.
    shown, after = (named, [f for f in found if f.fault == "mismatch"]) if named else (found, [])
    names = list(dict.fromkeys(f.fault for f in shown))
    lines = [f"the TP module does not match the dense module (TP degree {size}; rtol {rtol:g}, atol {atol:g}): "
             + ", ".join(names)]
    lines += [f.line() for f in shown[:limit]]
    if len(shown) > limit:
        lines.append(f"- ... and {len(shown) - limit} more")
    if after:
        lines.append("- then also differ (likely consequences of the above): "
                     + ", ".join(dict.fromkeys(f.where for f in after)))
    lines.append("what these mean:")
    lines += [f"  {n}: {FAULTS[n]}" for n in names]
    return "\n".join(lines)
