"""A published parallel configuration: its data-parallel degree and micro-batch count derived, what does not add up.

  distcheck layout --gpus 64 --tp 4 --pp 8 --vp 5 --mbs 1 --gbs 128 --layers 80 --ga 64
                                            a benchmark table's row: DP = 2, m = 64, consistent (exit 0)
Exit status 1 when something does not add up (each problem printed), 0 when all does. Formulas: calc/layout.py.
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import positive_int
from pytest_distcheck.i18n import N_, _

LAYOUT = N_("layout: {gpus} GPUs = TP {tp} x PP {pp} x CP {cp} x DP {dp}   DP = GPUs / (TP x PP x CP), "
            "megatron-core parallel_state")
# The rows' labels, padded after translation to the longest one.
MICROBATCHES = N_("micro-batches per step")
CHUNK_LAYERS = N_("layers per model chunk")
BUBBLE = N_("bubble / ideal time")
GA_COUNT = N_("the gradient-accumulation count")
CONSISTENT = N_("consistent: every count divides")
DOES_NOT_ADD_UP = N_("does not add up:")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--gpus", type=positive_int, required=True, help="GPUs in all (the table's #-GPUs)")
    parser.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree (default 1)")
    parser.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel degree (default 1)")
    parser.add_argument("--cp", type=positive_int, default=1, help="context-parallel degree (default 1)")
    parser.add_argument("--vp", type=positive_int, default=1, help="virtual pipeline stages per device (default 1)")
    parser.add_argument("--mbs", type=positive_int, required=True, help="micro-batch size, sequences")
    parser.add_argument("--gbs", type=positive_int, required=True, help="global batch size, sequences")
    parser.add_argument("--layers", type=positive_int, help="transformer layers (checked against PP x VP)")
    parser.add_argument("--ga", type=positive_int, help="the source's gradient-accumulation count, to compare")


def run(args: argparse.Namespace) -> int:
    from fractions import Fraction

    from pytest_distcheck.calc import layout, pipeline

    out = layout.derive_layout(args.gpus, args.tp, args.pp, args.mbs, args.gbs, args.cp, args.vp, args.layers,
                               args.ga)
    dp, m = out.dp, out.microbatches
    show = lambda x: str(x) if x.denominator == 1 else f"{float(x):.4g}"  # noqa: E731
    print(_(LAYOUT).format(gpus=args.gpus, tp=args.tp, pp=args.pp, cp=args.cp, dp=show(dp)))
    labels = [_(MICROBATCHES), _(CHUNK_LAYERS), _(BUBBLE)]
    w = max(len(label) for label in labels) + 2
    print(f"  {labels[0]:<{w}}m = GBS / (DP x MBS) = {args.gbs} / ({show(dp)} x {args.mbs}) = {show(m)}"
          + "   " + _(GA_COUNT))
    if args.layers is not None:
        print(f"  {labels[1]:<{w}}L / (PP x VP) = {args.layers} / {args.pp * args.vp} = "
              f"{show(Fraction(args.layers, args.pp * args.vp))}")
    if args.pp > 1 and m.denominator == 1:
        ratio = pipeline.bubble_ratio_over_ideal(args.pp, int(m), 1) / args.vp
        print(f"  {labels[2]:<{w}}(p-1)/(v*m) = {Fraction(args.pp - 1, args.vp * int(m))} = {ratio:.4g}"
              "   Narayanan et al. 2021 sec. 2.2.1-2.2.2")
    if not out.problems:
        print(_(CONSISTENT))
        return 0
    print(_(DOES_NOT_ADD_UP))
    for problem in out.problems:
        print(f"  - {problem}")
    return 1
