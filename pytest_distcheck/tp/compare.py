"""``assert_tp_matches_dense``: a TP module against its dense original, on every rank, with the fault named.

It runs inside the ranks, one call per rank. Every rank records plain CPU tensors (outputs, dL/dx, its
parameter shards and gradients, and through module hooks what each planned layer, parent and parameter
owner saw), then one ``all_gather_object`` hands every rank every record, so the diagnosis
(``diagnose.py``) is a pure function and no rank issues a collective its peers do not. DTensors compare
through ``to_local()`` against the plan's slice; replicated inputs are checked first (``replicated.py``).
Design record: docs/design/tp-checker.md.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping, Sequence, Union

import torch
import torch.distributed as dist
from torch import nn

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.tp.diagnose import diagnose, report
from pytest_distcheck.tp.plan import A_FUSED_PART, EVEN_SHARDS, PLAN_ENTRY, Layer, parse_plan, split_problems
from pytest_distcheck.tp.replicated import gather_objects, local_cpu
from pytest_distcheck.tp.shards import part_sizes, shard_like, split_dim

# Default tolerances per dtype: TP only reorders the sums (row-parallel partial sums, the all-reduce),
# so float32 results agree to ~1e-6 relative; the margins below are those of tests/test_tp_equivalence.py.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
LOSS_SEED = 1234  # the loss weights: the same on every rank, and not uniform (a uniform gradient hides faults)


def _is_dtensor(t: Any) -> bool:
    return hasattr(t, "to_local") and hasattr(t, "placements") and hasattr(t, "device_mesh")


NOT_A_MODULE = N_("the tp factory returned a {type}, not an nn.Module")
NOT_A_FACTORY = N_("tp must be an nn.Module or a callable building one from the dense module, got {type}")
NO_SUBMODULE = N_("plan entry {path!r}: the {what} module has no submodule {path!r} (its modules with a weight: "
                  "{names})")
NO_SUBMODULE_AT_ALL = N_("plan entry {path!r}: the {what} module has no submodule {path!r} (and no module with a "
                         "weight)")
DENSE = N_("dense")  # the {what} of NO_SUBMODULE; the other is "TP"
NO_COUNTERPART = N_("TP module parameters with no counterpart in the dense module: {names} (the TP module must keep "
                    "the dense module's parameter names)")
MESH_DIMS = N_("the TP module's DTensors live on a mesh of {ndim} dims: pass group= (the TP dim's process group)")
NOT_ONE_TENSOR = N_("the module returned a {type}; assert_tp_matches_dense compares modules that return one tensor")
NOTHING_REQUIRES_GRAD = N_("nothing in the module or its inputs requires grad: pass backward=False to compare the "
                           "forward only")
SEE_RANK_0 = N_("the TP module does not match the dense module ({names}): the diagnosis is in the error of the "
                "group's rank 0")


def _build(tp: Union[nn.Module, Callable[[nn.Module], nn.Module]], dense: nn.Module) -> nn.Module:
    if isinstance(tp, nn.Module):
        return tp
    if not callable(tp):
        raise TypeError(_(NOT_A_FACTORY).format(type=type(tp).__name__))
    built = tp(copy.deepcopy(dense))
    if not isinstance(built, nn.Module):
        raise TypeError(_(NOT_A_MODULE).format(type=type(built).__name__))
    return built


def _group_of(model: nn.Module, group: dist.ProcessGroup | None) -> dist.ProcessGroup | None:
    if group is not None:
        return group
    for p in model.parameters():
        if _is_dtensor(p):
            mesh = p.device_mesh
            if mesh.ndim != 1:
                raise ValueError(_(MESH_DIMS).format(ndim=mesh.ndim))
            return mesh.get_group()
    return None


def _check_paths(plan: Mapping[str, Layer], dense: nn.Module, tp: nn.Module) -> set[str]:
    embeddings = set()
    for path in plan:
        for what, model in (("dense", dense), ("TP", tp)):
            try:
                mod = model.get_submodule(path)
            except AttributeError:
                names = [n for n, m in model.named_modules() if n and hasattr(m, "weight")]
                said = _(NO_SUBMODULE if names else NO_SUBMODULE_AT_ALL)
                raise ValueError(said.format(path=path, what=_(DENSE) if what == "dense" else what,
                                             names=", ".join(names))) from None
            if what == "dense" and isinstance(mod, nn.Embedding):
                embeddings.add(path)
    extra = sorted(set(dict(tp.named_parameters())) - set(dict(dense.named_parameters())))
    if extra:
        raise ValueError(_(NO_COUNTERPART).format(names=", ".join(extra)))
    return embeddings


def _check_even(plan: Mapping[str, Layer], dense: nn.Module, size: int) -> None:
    """Refuse, before anything runs, a plan whose splits are not even at TP degree ``size``."""
    problems = []
    for path, layer in plan.items():
        try:
            mod = dense.get_submodule(path)
        except AttributeError:  # named by _check_paths
            continue
        emb = isinstance(mod, nn.Embedding)
        for pname in ("weight", "bias"):
            p = getattr(mod, pname, None)
            dim = split_dim(layer, pname, emb) if isinstance(p, torch.Tensor) else None
            if dim is None or p.dim() <= dim:
                continue
            fused = layer.fused if dim == 0 and not emb else 1
            try:
                parts = part_sizes(p.shape[dim], fused)
            except ValueError as exc:
                raise ValueError(_(PLAN_ENTRY).format(path=path, problem=exc)) from None
            label = f"{path + '.' if path else ''}{pname} dim {dim}"
            label = _(A_FUSED_PART).format(label=label) if len(parts) > 1 else label
            for n in dict.fromkeys(parts):
                problems += split_problems({label: n}, size)
        problems += split_problems({}, size, layer.heads)
    if problems:
        raise ValueError("; ".join(dict.fromkeys(problems)) + f"; {_(EVEN_SHARDS)}")


def _recorded_paths(dense: nn.Module, plan: Mapping[str, Layer]) -> list[str]:
    """The planned layers, their parents, and every module that owns parameters (its LayerNorms...)."""
    paths = dict.fromkeys(plan)
    for path in plan:
        parts = path.split(".")
        paths.update(dict.fromkeys(".".join(parts[:i]) for i in range(1, len(parts))))
    for name, _param in dense.named_parameters():
        owner = name.rpartition(".")[0]
        if owner:
            paths[owner] = None
    return list(paths)


class _LayerRecorder:
    """Module hooks on the recorded modules: input, the gradient through the module, output, in the order they ran."""

    def __init__(self, model: nn.Module, paths: Sequence[str]) -> None:
        self.layers: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.handles = []
        for path in paths:
            try:
                mod = model.get_submodule(path)
            except AttributeError:  # a module the TP version lacks: its parameters are named missing
                continue
            self.handles.append(mod.register_forward_pre_hook(self._pre(path), prepend=True))
            self.handles.append(mod.register_forward_hook(self._post(path)))

    def _pre(self, path: str):
        def hook(_mod, args):
            x = next((a for a in args if isinstance(a, torch.Tensor)), None)
            rec = self.layers.setdefault(path, {"in": None, "in_grad": None, "out": None})
            if path not in self.order:
                self.order.append(path)
            if x is None:
                return
            rec["in"] = _record(x)
            if not x.requires_grad:
                return None
            # The layer gets a view of its input, so the view's gradient is what flows through this layer
            # alone (the input's own gradient also holds e.g. a residual branch's).
            alias = x.view_as(x)

            def grab(g, rec=rec):
                rec["in_grad"] = _record(g)
            alias.register_hook(grab)
            return tuple(alias if a is x else a for a in args)
        return hook

    def _post(self, path: str):
        def hook(_mod, _args, out):
            out = out[0] if isinstance(out, (tuple, list)) and out else out
            if isinstance(out, torch.Tensor):
                self.layers[path]["out"] = _record(out)
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _record(t: torch.Tensor) -> torch.Tensor:
    if _is_dtensor(t):
        t = t.detach().full_tensor()  # a collective: every rank's hooks run in the same order
    return t.detach().cpu().clone()


def _run(model: nn.Module, inputs: tuple, plan_paths: Sequence[str], backward: bool, size: int, rank: int,
         weights: torch.Tensor | None,
         after_backward: Callable[[nn.Module], Any] | None = None) -> tuple[dict, torch.Tensor, bool]:
    """Forward (and backward) of ``model`` on copies of ``inputs``; this rank's record, the loss weights
    and whether a backward ran (none for an output that is not floating point: token ids)."""
    model.zero_grad(set_to_none=True)  # gradients left from earlier use would add to these
    args = tuple(x.detach().clone().requires_grad_(backward and x.is_floating_point())
                 if isinstance(x, torch.Tensor) else x for x in inputs)
    rec = _LayerRecorder(model, plan_paths)
    try:
        with torch.set_grad_enabled(backward):
            out = model(*args)
            if _is_dtensor(out):
                out = out.full_tensor()
            if not isinstance(out, torch.Tensor):
                raise TypeError(_(NOT_ONE_TENSOR).format(type=type(out).__name__))
            if not out.is_floating_point():
                backward = False
            if weights is None:
                gen = torch.Generator().manual_seed(LOSS_SEED)
                weights = torch.randn(out.shape, generator=gen, dtype=torch.float64)
            if backward:
                w = shard_like(out, weights, rank, size)
                if w is None:  # shape fault: reported by the diagnosis, no backward possible
                    backward = False
                else:
                    loss = (out * w.to(out)).sum()
                    if loss.grad_fn is None:
                        raise ValueError(_(NOTHING_REQUIRES_GRAD))
                    loss.backward()
                    if after_backward is not None:
                        after_backward(model)
    finally:
        rec.remove()
    params = {}
    for name, p in model.named_parameters():
        g = p.grad
        if g is not None and _is_dtensor(g) and _is_dtensor(p) and tuple(g.placements) != tuple(p.placements):
            g = g.redistribute(p.device_mesh, p.placements)
        params[name] = {"value": local_cpu(p), "grad": local_cpu(g) if g is not None else None}
    record = {
        "inputs": [local_cpu(x) if isinstance(x, torch.Tensor) else x for x in inputs],
        "out": out.detach().cpu(),
        "xgrads": [local_cpu(a.grad) if isinstance(a, torch.Tensor) and a.grad is not None else None for a in args],
        "params": params,
        "layers": rec.layers,
        "order": rec.order,
    }
    return record, weights, backward


def assert_tp_matches_dense(
    dense: nn.Module,
    tp: Union[nn.Module, Callable[[nn.Module], nn.Module]],
    plan: Mapping[str, Union[str, Layer]],
    inputs: Union[torch.Tensor, Sequence[Any]],
    *,
    group: dist.ProcessGroup | None = None,
    backward: bool = True,
    after_backward: Callable[[nn.Module], Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """Check a tensor-parallel module against its dense original on this rank; call it on every rank.

    Runs the dense module and the TP module on the same inputs, then compares, on every rank of the
    TP group, the module at its boundary: the forward output, dL/dx of every floating-point input,
    every parameter's value and gradient with the slice of the dense one the plan gives this rank
    (so f and g may sit inside a layer or in its parent). On any difference it raises one
    ``AssertionError`` naming the faults it recognises (``pytest_distcheck.tp.diagnose.FAULTS``):
    ``missing-f`` (the ranks' dL/dx add up to the dense one), ``missing-g`` (the ranks' outputs add up
    to the dense one), ``sequence-parallel-grad``, ``sliced-input``, ``vocab-local-softmax``,
    ``wrong-shard-dim``, ``bias-on-every-rank``, ``qkv-head-split`` and ``fused-contiguous-split`` (a
    fused weight split against its layout), ``non-replicated-input``, ``grad-none`` and others, each
    with the layer or parameter and the ranks. Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053,
    sec. 3, Fig. 3) defines f (identity forward, all-reduce backward, before a column-parallel layer)
    and g (all-reduce forward, identity backward, after a row-parallel one).

    Conventions:
        - The TP module keeps the dense module's module paths and parameter names (as the lab's
          ``shard_model``, torch's ``parallelize_module`` and weight-loader sharding all do).
        - Plan: module path (relative to ``dense``) -> ``"colwise"``, ``"rowwise"``, ``"replicated"``
          or a :class:`~pytest_distcheck.tp.plan.Layer` (fused QKV parts, row-parallel bias convention).
          Column-parallel splits an ``nn.Linear`` weight ``[out_features, in_features]`` on dim 0 and
          the bias on dim 0; row-parallel splits the weight on dim 1 and keeps the bias whole (added
          once after the all-reduce; ``Layer("rowwise", bias="rank0")``: added by rank 0 only, its
          gradient None or zero on the other ranks). Rank ``r`` of ``t`` holds chunk ``r``
          (``torch.chunk``). Parameters outside planned layers are whole on every rank.
        - Outputs and activations: whole, or this rank's chunk of the last dim (a column-parallel
          output) or of another dim (a sequence-parallel one), read from the shape. A DTensor output
          is compared through ``full_tensor()``, a DTensor parameter or gradient through ``to_local()``.
        - Loss: ``(out * w).sum()`` with ``w`` drawn from a fixed seed (the same on every rank), or
          this rank's chunk of ``w`` for a sharded output; so dL/dout is not uniform. Both modules'
          gradients are set to None first. An output that is not floating point (token ids) gets
          no backward.
        - Every split must be even: rank ``r`` of ``t`` holds ``1/t`` of each split dim (and whole
          heads, ``Layer(heads=)``), checked before the modules run.
        - Modules are run as given (``train()``/``eval()``); dropout must be off. The dense module is
          deep-copied first, so its gradients are not touched.

    Args:
        dense: the original module, the same on every rank.
        tp: this rank's TP module, or a callable that builds it from a deep copy of ``dense`` (for
            ``parallelize_module``, which changes the module in place).
        plan: as above; every path must exist in both modules.
        inputs: a tensor or a sequence of positional arguments; every tensor must be the same on
            every rank (checked first, exactly).
        group: the TP process group (default: the mesh's group of a DTensor module, else the world).
        backward: False compares the forward only, under ``torch.no_grad()`` (inference-only layers
            with no f, such as vLLM's).
        after_backward: called on every rank with the TP module after its backward, before its
            gradients are read: a training step's gradient finalisation, such as the all-reduce of
            sequence-parallel LayerNorm gradients (megatron-core's ``finalize_model_grads``).
        rtol, atol: tolerance of every comparison (default by the output's dtype:
            :data:`TOLERANCES`; float32: 1e-4, 1e-5).

    Raises:
        AssertionError: the TP module differs from the dense one (on every rank: the whole report on
            the group's rank 0, a pointer to it on the others).
        ValueError: a plan path missing from either module, TP parameters unknown to the dense module,
            a plan entry that is not a style, a split dim or a head count not divisible by the TP
            degree (:data:`~pytest_distcheck.tp.plan.NOT_DIVISIBLE`, before the modules run), or
            nothing requires grad while ``backward`` is True.
        TypeError: ``tp`` is neither a module nor a factory of one, or a module returns no tensor.
    """
    __tracebackhide__ = True
    parsed = parse_plan(plan)
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    if group is not None:  # the TP degree is known: uneven splits are refused before the TP module is built
        _check_even(parsed, dense, dist.get_world_size(group))
    tp_model = _build(tp, dense)
    group = _group_of(tp_model, group)
    embeddings = _check_paths(parsed, dense, tp_model)
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    _check_even(parsed, dense, size)

    paths = _recorded_paths(dense, parsed)
    dense_copy = copy.deepcopy(dense)
    dense_rec, weights, backward = _run(dense_copy, inputs, paths, backward, 1, 0, None)
    tp_rec, _weights, _backward = _run(tp_model, inputs, paths, backward, size, rank, weights, after_backward)
    records = gather_objects(tp_rec, group)

    dtype = dense_rec["out"].dtype
    d_rtol, d_atol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    found = diagnose(records, dense_rec, parsed, rtol, atol, embeddings, backward)
    if found:
        if rank == 0:
            raise AssertionError(report(found, size, rtol, atol))
        names = ", ".join(dict.fromkeys(f.fault for f in found))
        raise AssertionError(_(SEE_RANK_0).format(names=names))
