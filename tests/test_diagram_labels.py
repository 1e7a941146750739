"""The labelling convention the diagram check reads (pytest_distcheck.diagram.labels)."""

from __future__ import annotations

import pytest

from pytest_distcheck.diagram import labels


@pytest.mark.parametrize(
    "text, styles",
    [
        ("attn.qkv<br/>column-parallel", {"colwise"}),
        ("ColwiseParallel", {"colwise"}),
        ("col-wise", {"colwise"}),
        ("column wise parallel", {"colwise"}),
        ("colwise_parallel", {"colwise"}),
        ("Row-Parallel", {"rowwise"}),
        ("RowwiseParallel", {"rowwise"}),
        ("**row** parallel", {"rowwise"}),
        ("row 0", set()),
        ("weight columns 0 … d/2", set()),
        ("narrow-parallel", set()),
        ("column-parallel then row-parallel", {"colwise", "rowwise"}),
    ],
)
def test_style_spellings(text, styles):
    assert labels.styles_in_label(text) == styles


def test_classes_must_be_a_style_spelling_in_full():
    assert labels.styles_in_classes(("colwise", "big")) == {"colwise"}
    assert labels.styles_in_classes(("row_parallel",)) == {"rowwise"}
    assert labels.styles_in_classes(("colwisefoo",)) == set()


@pytest.mark.parametrize(
    "text, forward",
    [
        ("all-reduce", True),
        ("AllReduce", True),
        ("all_reduce (sum)", True),
        ("g: all-reduce forward, identity backward", True),
        ("f: identity forward, all-reduce in backward", False),
        ("all-reduce (backward)", False),
        ("allreduce bwd", False),
        # what comes between the all-reduce and "backward", in English or Spanish (a Spanish-first learner's f)
        ("all-reduce of the gradient in backward", False),
        ("all-reduce en el backward", False),
        ("f: identidad, all-reduce del gradiente en el backward", False),
        ("all-reduce de los gradientes durante el backward", False),
        ("g: all-reduce en el forward, identidad en el backward", True),
        # a backward qualifier directly before the all-reduce (f drawn as "fwd identity, bwd all-reduce"), in English
        # or Spanish; one that belongs to another clause leaves the all-reduce a forward one (g)
        ("f: fwd identity, bwd all-reduce", False),
        ("f: bwd: all-reduce", False),
        ("f (backward: all-reduce)", False),
        ("f: identity in forward; its backward is an all-reduce", False),
        ("f: backward = all-reduce", False),
        ("f: identidad en el forward; en el backward, all-reduce", False),
        ("f: identidad en el forward, bwd all-reduce", False),
        ("f (en el backward: all-reduce del gradiente)", False),
        ("f: identidad; su backward es un all-reduce", False),
        ("f: identidad en el forward y en el backward un all-reduce", False),
        ("g: all-reduce in forward, identity in backward", True),
        ("g: all-reduce (fwd), identity (bwd)", True),
        ("g: identity in backward, all-reduce", True),
        ("g: identidad en el backward, all-reduce en el forward", True),
        ("g: identidad (bwd), all-reduce", True),
        ("f: bwd all-reduce; g: all-reduce", True),
        ("reduce-scatter", False),
        ("sum &amp; all-reduce", True),
    ],
)
def test_forward_all_reduce(text, forward):
    assert labels.forward_all_reduce(text) is forward


def test_layer_names_match_whole_module_paths():
    assert labels.names_layer("attn.qkv: column-parallel", "attn.qkv")
    assert labels.names_layer("<b>attn.qkv</b>.", "attn.qkv")
    assert not labels.names_layer("attn.qkv_bias", "attn.qkv")
    assert not labels.names_layer("xattn.qkv", "attn.qkv")
    assert not labels.names_layer("attn.qkv.weight", "attn.qkv")


def test_rank_titles():
    assert labels.rank_of_title("Rank 1 (GPU 1)") == 1
    assert labels.rank_of_title("rank0") == 0
    assert labels.rank_of_title("tensor-parallel ranks") is None
    assert labels.rank_of_title("cranky 3") is None


@pytest.mark.parametrize(
    "text, styles",
    [
        ("ColumnParallelLinear", {"colwise"}),  # Megatron-LM, picotron, vLLM
        ("RowParallelLinear", {"rowwise"}),
        ("MergedColumnParallelLinear", {"colwise"}),  # vLLM
        ("QKVParallelLinear", {"colwise"}),  # vLLM
        ("o_proj: RowParallelLinear(input_is_parallel=True)", {"rowwise"}),
        ("ColwiseParallel()", {"colwise"}),  # torch.distributed.tensor.parallel
        ("VocabParallelEmbedding", set()),
        ("ReplicatedLinear", set()),
    ],
)
def test_framework_class_names_are_styles(text, styles):
    assert labels.styles_in_label(text) == styles


@pytest.mark.parametrize(
    "title, rank",
    [("GPU 0", 0), ("tp_rank=1", 1), ("Rank 0 (GPU 0)", 0), ("device 3", 3), ("cuda:1", 1), ("TP rank 2", 2),
     ("GPU", None), ("2 GPUs", None), ("layers.0.mlp", None)],
)
def test_rank_titles_of_public_diagrams(title, rank):
    assert labels.rank_of_title(title) == rank


def test_qualified_module_paths_name_the_layer():
    assert labels.names_layer("layers.0.attn.qkv", "attn.qkv")
    assert labels.names_layer("model.layers.11.attn.qkv: colwise", "attn.qkv")


@pytest.mark.parametrize(
    "text, layers",
    [
        ("self_attn.qkv_proj", ["attn.qkv"]),
        ("c_attn (GPT-2)", ["attn.qkv"]),
        ("Wq", ["attn.qkv"]),  # a part of the fused QKV projection
        ("query_key_value", ["attn.qkv"]),
        ("o_proj", ["attn.out"]),
        ("mlp.c_proj", ["mlp.down"]),  # the qualified name wins over c_proj alone
        ("attn.c_proj", ["attn.out"]),
        ("c_proj", ["attn.out", "mlp.down"]),  # ambiguous alone
        ("up_proj", ["mlp.up"]),
        ("dense_4h_to_h", ["mlp.down"]),
        ("out: partial sum [B, T, d]", []),  # a bare 'out' is not a name
        ("q, k, v of those heads", []),
        ("attn.qkv_bias", []),
    ],
)
def test_common_names_of_layers(text, layers):
    from pytest_distcheck.diagram.names import Namer

    assert Namer.of(["attn.qkv", "attn.out", "mlp.up", "mlp.down"]).layers(text) == layers


def test_declared_aliases_and_fused_groups_name_layers():
    from pytest_distcheck.diagram.names import Namer
    from pytest_distcheck.diagram.plan import LayerNames

    names = LayerNames(aliases={"mlp.down": ("W2",)}, fused={"gate_up_proj": ("mlp.gate", "mlp.up")})
    namer = Namer.of(["mlp.gate", "mlp.up", "mlp.down"], names)
    assert namer.layers("W2 shard 0") == ["mlp.down"]
    assert namer.layers("gate_up_proj") == ["mlp.gate", "mlp.up"]
    assert namer.fused_group(["mlp.gate", "mlp.up"]) == "gate_up_proj"
    assert namer.fused_group(["mlp.up", "mlp.down"]) is None


@pytest.mark.parametrize(
    "names, error",
    [
        ({"aliases": {"mlp.side": ("x",)}}, "alias entry 'mlp.side': not a module path of the plan"),
        ({"fused": {"gu": ("mlp.up",)}}, "fused entry 'gu': needs two or more module paths of the plan"),
        ({"fused": {"ud": ("mlp.up", "mlp.down")}}, "fused entry 'ud': mlp.up, mlp.down do not share one style"),
        ({"residual": ("attn",)}, "residual entry 'attn': no module path of the plan is inside it"),
    ],
)
def test_layer_names_that_do_not_fit_the_plan(names, error):
    from pytest_distcheck.diagram.plan import LayerNames

    with pytest.raises(ValueError, match=error):
        LayerNames(**names).validate({"mlp.up": "colwise", "mlp.down": "rowwise"})


def test_inline_plans():
    from pytest_distcheck.diagram.plan import parse_inline

    assert parse_inline("qkv=colwise, out=row") == {"qkv": "colwise", "out": "rowwise"}
    for bad, error in (("qkv", "expected path=style"), ("a=colwise,a=rowwise", "a given twice"),
                       ("a=diag", "unknown style 'diag'"), (" , ", "no plan entries")):
        with pytest.raises(ValueError, match=error):
            parse_inline(bad)


def test_closest_labels_spell_a_name_nearly():
    from pytest_distcheck.diagram.names import Namer

    found = ["X", "Q K V projection (ColumnParallelLinear)", "Attention", "Output proj (RowParallelLinear)",
             "AllReduce", "MLP fc 1 (column)", "MLP fc 2 (row)"]
    assert Namer.of(["attn.qkv", "attn.out", "mlp.up", "mlp.down"]).closest(found) == [
        ("attn.qkv", "Q K V projection (ColumnParallelLinear)"), ("attn.out", "Output proj (RowParallelLinear)"),
        ("mlp.up", "MLP fc 1 (column)"), ("mlp.down", "MLP fc 2 (row)"),
    ]
    assert Namer.of(["attn.qkv"]).closest(["Attention", "LayerNorm"]) == []  # nothing close: nothing said


@pytest.mark.parametrize(
    "text, splits",
    [("split", True), ("rank 1's slice", True), ("scatter", True), ("Shard(-1)", True), ("torch.chunk", True),
     ("partial sum", False), ("Replicate()", False), ("shard 0 of 2", False)],
)
def test_split_edges(text, splits):
    assert labels.split(text) is splits
