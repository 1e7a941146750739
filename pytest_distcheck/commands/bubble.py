"""Pipeline bubble of GPipe/1F1B or interleaved 1F1B, in both definitions, with the formulas.

  distcheck bubble -p 4 -m 8          GPipe / 1F1B
  distcheck bubble -p 4 -m 8 -v 2     interleaved 1F1B, 2 model chunks per device (m % p == 0)
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("-p", "--stages", type=positive_int, required=True, help="pipeline stages p")
    parser.add_argument("-m", "--microbatches", type=positive_int, required=True, help="micro-batches m per batch")
    parser.add_argument("-v", "--virtual", type=positive_int, default=1,
                        help="model chunks per device v (interleaved 1F1B; default 1)")


def run(args: argparse.Namespace) -> int:
    from fractions import Fraction

    from pytest_distcheck.calc import pipeline
    from pytest_distcheck.errors import DistcheckError

    p, m, v = args.stages, args.microbatches, args.virtual
    try:
        ratio = pipeline.bubble_ratio_over_ideal(p, m, v)
        frac = pipeline.bubble_fraction_of_total(p, m, v)
    except ValueError as exc:
        raise DistcheckError(str(exc)) from None
    schedule = "GPipe / 1F1B" if v == 1 else f"interleaved 1F1B, v = {v}"
    print(f"pipeline: p = {p} stages, m = {m} micro-batches ({schedule})")
    print(f"  bubble / ideal compute time  (p-1)/(v*m)               = {Fraction(p - 1, v * m)} = {ratio:.4g}"
          "    Narayanan et al. 2021 sec. 2.2.1-2.2.2")
    print(f"  bubble / total iteration     ((p-1)/v)/(m+(p-1)/v)     = {Fraction(p - 1, v * m + p - 1)} = "
          f"{frac:.4g} ({frac:.1%})    GPipe sec. 2.3; Narayanan Eq. (1)")
    in_flight = pipeline.microbatches_in_flight("1f1b", p, m)
    print(f"  activations in flight        GPipe m = {m}; 1F1B min(p, m) = {in_flight}"
          "    Narayanan et al. 2021 sec. 2.2.1")
    if p > 1:
        need = pipeline.min_microbatches_for_bubble(p, 0.2, v)
        print(f"  bubble <= 20% of the iteration needs m >= {need}" + (" (a multiple of p)" if v > 1 else ""))
    print("The first number can exceed 1; only the second is a share of wall time.")
    return 0
