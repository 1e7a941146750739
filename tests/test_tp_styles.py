"""One assert_tp_matches_dense call checks each public style of TP layers (the examples of lab 02's exercise).

The styles (fixtures/tp_styles/, written for these tests): picotron's column/row pair with its own
process-group manager; nano-vllm's inference-only pair sharded by weight loaders (fused [q | k | v]
QKV, bias added by rank 0 before the all-reduce); torch's DTensor parallelize_module on a CPU mesh
(also with sequence parallelism); megatron-core 0.16.1's own layers and mappings (f inside the
column-parallel layer or in its parent, vocab-parallel cross entropy, its global state left behind);
and the lab's own layers
(experiments/tp_inference). World size 2, one rank pool for all. The kit's messages are compared in the language
in use (lab 02 has the learner run this file, Spanish included).
"""

from __future__ import annotations

import re
import string

import pytest

from pytest_distcheck.i18n import _


def _said(template: str, **fields) -> str:
    """A regex of kit message ``template`` in the language in use: each field of ``fields`` as given, any other
    (a measured difference, an index) as any text."""
    out = ""
    for literal, name, spec, _conversion in string.Formatter().parse(_(template)):
        out += re.escape(literal)
        if name is not None:
            out += ".+?" if name not in fields else re.escape(format(fields[name], spec))
    return out


# --- examples (docs/lab/02-tp-inference-cloud.md shows these bodies) -------------------------------
def check_picotron_style():
    import torch

    from fixtures.tp_faults.zoo import MLP
    from fixtures.tp_styles.picotron_style import apply_tensor_parallel, setup_process_group_manager
    from pytest_distcheck.tp import assert_tp_matches_dense

    torch.manual_seed(0)
    dense, plan = MLP(), {"up": "colwise", "down": "rowwise"}
    pgm = setup_process_group_manager(tp_size=2)
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1))
    assert_tp_matches_dense(dense, lambda d: apply_tensor_parallel(d, plan), plan, x, group=pgm.tp_group)


def check_nanovllm_style():
    import torch

    from fixtures.tp_styles.nanovllm_style import Block, dense_block, load_weights
    from pytest_distcheck.tp import Layer, assert_tp_matches_dense

    dense = dense_block()
    plan = {"attn.qkv_proj": Layer("colwise", fused=3), "attn.o_proj": Layer("rowwise", bias="rank0"),
            "mlp.up_proj": "colwise", "mlp.down_proj": Layer("rowwise", bias="rank0")}
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    assert_tp_matches_dense(dense, lambda d: load_weights(Block(), d.state_dict()), plan, x, backward=False)


def check_dtensor_style():
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from fixtures.tp_faults.zoo import MLP
    from pytest_distcheck.tp import assert_tp_matches_dense

    torch.manual_seed(0)
    dense = MLP()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1))
    assert_tp_matches_dense(
        dense, lambda d: parallelize_module(d, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()}),
        {"up": "colwise", "down": "rowwise"}, x)


def check_lab_block():
    import torch

    from experiments.tp_inference.comm import TPGroup
    from experiments.tp_inference.model import GPTConfig, build_model
    from experiments.tp_inference.plan import BLOCK_PLAN
    from experiments.tp_inference.shard import shard_model
    from pytest_distcheck.tp import assert_tp_matches_dense

    model = build_model(GPTConfig(vocab_size=16, n_layers=1, d_model=16, n_heads=4, max_seq_len=8, init_std=0.3))
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    assert_tp_matches_dense(model.blocks[0].train(), shard_model(model, TPGroup.from_group()).blocks[0].train(),
                            BLOCK_PLAN, x)


@pytest.mark.parametrize("check", [check_picotron_style, check_nanovllm_style, check_dtensor_style, check_lab_block],
                         ids=["picotron", "nano-vllm", "dtensor", "lab"])
def test_each_style_passes_with_one_call(dist_world, check):
    dist_world.run(check)


def _dtensor_sequence_parallel() -> str:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    from pytest_distcheck.tp import assert_tp_matches_dense

    class NormMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.up, self.down = nn.LayerNorm(8), nn.Linear(8, 16), nn.Linear(16, 8)

        def forward(self, x):
            return self.down(F.gelu(self.up(self.ln(x))))

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))

    def shard(d):  # torchtitan's layout: the LayerNorm on sequence shards, all-gather in, reduce-scatter out
        d = parallelize_module(d, mesh, {"ln": SequenceParallel(), "up": ColwiseParallel(input_layouts=Shard(1)),
                                         "down": RowwiseParallel(output_layouts=Shard(1))})
        whole_in = PrepareModuleInput(input_layouts=Replicate(), desired_input_layouts=Shard(1))
        return parallelize_module(d, mesh, whole_in)

    torch.manual_seed(0)
    x = torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(1))
    try:
        assert_tp_matches_dense(NormMLP(), shard, {"up": "colwise", "down": "rowwise"}, x)
    except AssertionError as exc:
        return str(exc)
    return ""


def test_a_dtensor_sequence_parallel_block_passes(dist_world):
    assert dist_world.run(_dtensor_sequence_parallel) == ["", ""]


def _megatron_cases() -> dict[str, str]:
    """Each megatron-core case's report ('' when it passes), all in one call: importing megatron-core costs
    seconds per rank, paid once."""
    import torch
    import torch.distributed as dist

    from fixtures.tp_faults.zoo import MLP
    from fixtures.tp_styles.megatron_style import (
        CrossEntropyHead,
        MegatronMLP,
        MegatronVocabCrossEntropy,
        model_parallel,
    )
    from pytest_distcheck.tp import assert_tp_matches_dense

    def report(dense, factory, plan, inputs) -> str:
        try:
            assert_tp_matches_dense(dense, factory, plan, inputs)
        except AssertionError as exc:
            return str(exc)
        return ""

    torch.manual_seed(0)
    x = torch.randn(3, 2, 8, generator=torch.Generator().manual_seed(1))  # Megatron's [s, b, h]
    out = {f: report(MLP(), lambda d, f=f: MegatronMLP(d, dist.group.WORLD, f), {"up": "colwise", "down": "rowwise"}, x)
           for f in ("layer", "parent", "none")}
    target = torch.randint(0, 12, (3, 2), generator=torch.Generator().manual_seed(2))
    for again in ("", " again"):  # initialised and destroyed in the call, so it initialises again
        with model_parallel(dist.get_world_size()):
            out["cross-entropy" + again] = report(
                CrossEntropyHead(), lambda d: MegatronVocabCrossEntropy(d, dist.group.WORLD), {"head": "colwise"},
                (x, target))
    return out


def _megatron_initialise() -> None:
    from fixtures.tp_styles.megatron_style import megatron

    megatron()[2].initialize_model_parallel(tensor_model_parallel_size=2)  # and never destroyed


@pytest.mark.filterwarnings("ignore:When using async grad allreduce:UserWarning")
def test_megatron_cores_own_layers_pass_a_layer_without_f_is_named_and_its_leftover_state_names_the_test(
        dist_world, request):
    pytest.importorskip("megatron.core")
    from pytest_distcheck.ranks.errors import RankError
    from pytest_distcheck.ranks.module_state import MEGATRON_LEFT_INITIALISED

    got, _other = dist_world.run(_megatron_cases)
    # f inside ColumnParallelLinear, or copy_to_tensor_model_parallel_region in the parent: no report.
    assert (got["layer"], got["parent"]) == ("", ""), got
    assert got["none"].splitlines()[0].endswith("): missing-f") and "- missing-f [up]" in got["none"], got["none"]
    assert (got["cross-entropy"], got["cross-entropy again"]) == ("", ""), got
    # initialize_model_parallel left in place: the next call's "already initialized" names this test.
    dist_world.run(_megatron_initialise)
    with pytest.raises(RankError) as info:
        dist_world.run(_megatron_initialise)
    text = str(info.value)
    assert "AssertionError: data parallel group is already initialized" in text  # Megatron's own words
    assert RankError.note(2).format(ranks="0, 1", note=_(MEGATRON_LEFT_INITIALISED).format(
        test=request.node.nodeid)) in text


# --- the failing cases of the issue ------------------------------------------------------------------
def _dtensor_mlp_fed(seed_by_rank: bool) -> str:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from fixtures.tp_faults.zoo import MLP
    from pytest_distcheck.tp import assert_tp_matches_dense

    torch.manual_seed(0)
    dense = MLP()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    seed = dist.get_rank() if seed_by_rank else 0
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(seed))
    try:
        assert_tp_matches_dense(
            dense, lambda d: parallelize_module(d, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()}),
            {"up": "colwise", "down": "rowwise"}, x)
    except AssertionError as exc:
        return str(exc)
    return ""


def test_the_replicated_input_guard_catches_a_rank_dependent_input(dist_world):
    from pytest_distcheck.tp.diagnose import INPUT_I
    from pytest_distcheck.tp.replicated import VALUES_DIFFER

    message, _other = dist_world.run(_dtensor_mlp_fed, True)
    assert message.splitlines()[0].endswith("non-replicated-input")
    assert re.search(_said(VALUES_DIFFER, name=_(INPUT_I).format(i=0), rank=1), message), message
    assert dist_world.run(_dtensor_mlp_fed, False) == ["", ""]


def _dtensor_wrong_plan() -> str:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from fixtures.tp_faults.zoo import MLP
    from pytest_distcheck.tp import assert_tp_matches_dense

    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))
    # The model is sharded as planned, but the plan given to the check says the opposite.
    try:
        assert_tp_matches_dense(
            MLP(), lambda d: parallelize_module(d, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()}),
            {"up": "rowwise", "down": "colwise"}, x)
    except AssertionError as exc:
        return str(exc)
    return ""


def test_a_dtensor_shard_against_the_plan_is_named(dist_world):
    message, _other = dist_world.run(_dtensor_wrong_plan)
    assert "wrong-shard-dim" in message.splitlines()[0], message


def _nanovllm_with_backward() -> str:
    import torch

    from fixtures.tp_styles.nanovllm_style import Block, dense_block, load_weights
    from pytest_distcheck.tp import Layer, assert_tp_matches_dense

    plan = {"attn.qkv_proj": Layer("colwise", fused=3), "attn.o_proj": Layer("rowwise", bias="rank0"),
            "mlp.up_proj": "colwise", "mlp.down_proj": Layer("rowwise", bias="rank0")}
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    try:
        assert_tp_matches_dense(dense_block(), lambda d: load_weights(Block(), d.state_dict()), plan, x)
    except AssertionError as exc:
        return str(exc)
    return ""


def test_an_inference_only_pair_trained_through_lacks_f_behind_a_residual(dist_world):
    # nano-vllm's column-parallel layer has no f: fine for inference, wrong under backward. The block's
    # residual adds the whole dL/dx to the partial one, so the module's dL/dx does not add up: the layer
    # hooks find the f missing at the layer closest to the loss.
    # torch warns about it too (dist.all_reduce has no autograd kernel); the ranks' warning reaches the test.
    with pytest.warns(UserWarning, match="autograd kernel was not registered"):
        message, _other = dist_world.run(_nanovllm_with_backward)
    assert message.splitlines()[0].endswith(": missing-f"), message
    assert "- missing-f [mlp.up_proj]" in message


def test_the_lab_shows_these_examples_verbatim():
    import inspect
    from pathlib import Path

    lab = (Path(__file__).parents[1] / "docs/lab/02-tp-inference-cloud.md").read_text()
    for check in (check_picotron_style, check_nanovllm_style, check_dtensor_style, check_lab_block):
        assert inspect.getsource(check).rstrip() in lab, f"docs/lab/02 no longer shows {check.__name__} as tested"
