"""Each framework's estimator, as a named variant, reproduces that framework's published figures (issue 28)."""

import pytest

from pytest_distcheck.calc import estimators as est

DS_DOCS = "DeepSpeed docs/code-docs/source/memory.rst, the _all_cold examples (2851e6 params, 32e6 largest layer)"


def _gib(rows):
    """(per CPU, per GPU) as DeepSpeed prints them: f'{bytes / 2**30:.2f}'."""
    return [(f"{r.host_bytes / est.GIB:.2f}", f"{r.gpu_bytes / est.GIB:.2f}") for r in rows]


def test_the_deepspeed_docs_variant_reproduces_the_published_zero2_table():
    # DS_DOCS, ZeRO-2 on 1 node x 8 GPUs: 127.45 | 5.31 offload_optimizer=cpu; 127.45 | 15.93 none (4 Psi + 16 Psi/N)
    rows = est.deepspeed_zero2(2851e6, gpus_per_node=8, variant=est.DEEPSPEED_DOCS)
    assert _gib(rows) == [("127.45", "5.31"), ("127.45", "15.93")]
    assert [r.gpu_formula for r in rows] == ["2 Psi", "4 Psi + 16 Psi/N"]


def test_the_current_deepspeed_estimator_follows_pr_5099():
    # deepspeed/runtime/zero/stage_1_and_2.py after PR #5099: 2 Psi + 18 Psi/N = 5.702e9 + 6.41475e9 bytes
    rows = est.deepspeed_zero2(2851e6, gpus_per_node=8)
    assert rows[1].gpu_bytes == int(2 * 2851e6 + int(18 * 2851e6 / 8))
    assert _gib(rows)[1] == ("127.45", "11.28")
    assert rows[1].gpu_formula == "2 Psi + 18 Psi/N" and "PR #5099" in rows[1].source


def test_the_offloaded_zero2_host_memory_counts_every_gpu_as_deepspeed_does():
    # stage_1_and_2.py: cpu_mem = total_params * max(4 * total_gpus, 16) * factor, total_gpus = nodes x per node
    two_nodes = est.deepspeed_zero2(2851e6, gpus_per_node=8, nodes=2)[0]
    assert two_nodes.host_bytes == int(2851e6 * max(4 * 16, 16) * 1.5)
    assert two_nodes.host_formula == "1.5 x max(4 N, 16) Psi"


def test_deepspeeds_gb_are_gib_the_same_formula_reads_17_11_gb():
    # the kit's 1e9 "GB" and DeepSpeed's 2**30 "GB" of the same bytes (issue 28: 17.11 against 15.93)
    docs = est.deepspeed_zero2(2851e6, gpus_per_node=8, variant=est.DEEPSPEED_DOCS)[1]
    assert (round(docs.gpu_bytes / 1e9, 2), round(docs.gpu_bytes / est.GIB, 2)) == (17.11, 15.93)


def test_the_zero3_rows_reproduce_deepspeeds_published_table_in_its_order():
    rows = est.deepspeed_zero3(2851e6, 32e6, gpus_per_node=8)
    assert _gib(rows) == [("71.69", "0.12"), ("127.45", "0.12"), ("63.72", "0.78"), ("127.45", "0.78"),
                          ("1.43", "6.09"), ("127.45", "6.09")]
    assert rows[0].options == "offload_param=cpu, offload_optimizer=cpu, zero_init=1"
    assert rows[4].gpu_formula == "4L + 18 Psi/N" and rows[4].host_formula == "1.5 x 4 L n"


def test_deepspeed_4527_measured_29_to_42_times_the_estimate_the_lower_bound_line_quotes():
    # DeepSpeed#4527: 6805M params, 131M largest layer, 4 GPUs, both offloaded: estimate 0.49 GiB (4L); measured
    # 14678 MiB after deepspeed.initialize() and 21272 MiB after the second forward
    estimate = est.deepspeed_zero3(6805e6, 131e6, gpus_per_node=4)[0]
    assert f"{estimate.gpu_bytes / est.GIB:.2f}" == "0.49"
    low, high = (mib * 2**20 / estimate.gpu_bytes for mib in (14678, 21272))
    assert (int(low), int(high)) == (29, 42)
    assert "29-42x" in est.LOWER_BOUND and "0.49 GiB" in est.LOWER_BOUND and "a lower bound" in est.LOWER_BOUND


def test_the_megatron_variant_reproduces_the_readme_distributed_optimizer_table():
    # Megatron-LM README, "Distributed Optimizer": 20 | 4 + 16/d, 18 | 6 + 12/d, 16 | 8 + 8/d bytes per parameter
    assert [r.gpu_bytes for r in est.megatron_distopt(1e9, dp=1)] == [20e9, 18e9, 16e9]
    rows = est.megatron_distopt(1e9, dp=8)
    assert [r.gpu_bytes for r in rows] == [6e9, 7.5e9, 9e9]
    assert [r.gpu_formula for r in rows] == ["(4 + 16/d) Psi", "(6 + 12/d) Psi", "(8 + 8/d) Psi"]
    assert rows[1].options == "bf16 param, fp32 grads"


def test_zero_offload_keeps_fp16_params_on_the_gpu_and_the_rest_on_the_host():
    # ZeRO-2 + optimizer offload, 1e9 params on 2 nodes x 8: GPU 2 Psi; host 8 x (2 + 12) Psi / 16 x 1.5
    p = est.offload_placement(1e9, "zero2", dp=16, gpus_per_node=8, offload_optimizer="cpu")
    assert (p.gpu_bytes, p.host_bytes, p.nvme_bytes) == (2e9, 8 * 14e9 / 16 * 1.5, 0)
    assert p.gpu_formula == "GPU holds params" and p.variant == est.ZERO_PAPER


def test_zero_infinity_leaves_the_gpu_the_largest_layer_and_can_put_the_rest_on_nvme():
    p = est.offload_placement(1e9, "zero3", dp=8, gpus_per_node=8, offload_optimizer="nvme", offload_param="nvme",
                              largest_layer=5e7)
    assert (p.gpu_bytes, p.host_bytes, p.nvme_bytes) == (2e8, 0, 16e9)
    assert p.gpu_formula == "GPU holds 4L"
    cpu = est.offload_placement(1e9, "zero3", dp=8, gpus_per_node=8, offload_optimizer="cpu", largest_layer=5e7)
    assert (cpu.gpu_bytes, cpu.host_bytes) == (2e9 / 8 + 2e8, 14e9 * 1.5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"stage": "zero1", "offload_optimizer": "cpu"}, "ZeRO-2 or ZeRO-3"),
    ({"stage": "zero2", "offload_optimizer": "cpu", "offload_param": "cpu"}, "needs ZeRO-3"),
    ({"stage": "zero3", "offload_param": "cpu"}, "offload the optimizer too"),
    ({"stage": "zero3", "offload_optimizer": "disk"}, "none, cpu, nvme"),
])
def test_an_offload_no_configuration_allows_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        est.offload_placement(1e9, dp=8, gpus_per_node=8, **kwargs)
