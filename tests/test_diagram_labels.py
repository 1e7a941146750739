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
