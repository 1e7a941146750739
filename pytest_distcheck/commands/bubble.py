"""Pipeline bubble of GPipe/1F1B or interleaved 1F1B, in both definitions, with the formulas.

  distcheck bubble -p 4 -m 8          GPipe / 1F1B
  distcheck bubble -p 4 -m 8 -v 2     interleaved 1F1B, 2 model chunks per device (m % p == 0)
"""

from __future__ import annotations

import argparse

from pytest_distcheck.commands._numbers import positive_int
from pytest_distcheck.i18n import N_, _, ngettext

INTERLEAVED = N_("interleaved 1F1B, v = {v}")
# The three rows' labels, padded after translation to the longest one (formulas and citations stay as they are).
OVER_IDEAL = N_("bubble / ideal compute time")
OVER_TOTAL = N_("bubble / total iteration")
IN_FLIGHT = N_("activations in flight")
NEEDS_M = N_("bubble <= 20% of the iteration needs m >= {need}")
MULTIPLE_OF_P = N_("(a multiple of p)")
FIRST_CAN_EXCEED = N_("The first number can exceed 1; only the second is a share of wall time.")
ONE_STAGE = N_("  one stage: no pipeline, so no bubble (no stage waits for another); m only splits the batch")


def pipeline_line(p: int, m: int, schedule: str) -> str:
    """The first line: stages, micro-batches and schedule (English keeps "1 stages"; Spanish says etapa/etapas)."""
    line = ngettext("pipeline: p = {p} stages, m = {m} micro-batches ({schedule})",
                    "pipeline: p = {p} stages, m = {m} micro-batches ({schedule})", p)
    return line.format(p=p, m=m, schedule=schedule)


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
    schedule = "GPipe / 1F1B" if v == 1 else _(INTERLEAVED).format(v=v)
    print(pipeline_line(p, m, schedule))
    labels = [_(OVER_IDEAL), _(OVER_TOTAL), _(IN_FLIGHT)]
    w = max(len(label) for label in labels) + 2
    # p = 1: the substituted fractions (0/8), not "= 0 = 0"
    over_ideal = Fraction(p - 1, v * m) if p > 1 else f"0/{v * m}"
    over_total = Fraction(p - 1, v * m + p - 1) if p > 1 else f"0/{m}"
    print(f"  {labels[0]:<{w}}(p-1)/(v*m)               = {over_ideal} = {ratio:.4g}"
          "    Narayanan et al. 2021 sec. 2.2.1-2.2.2")
    print(f"  {labels[1]:<{w}}((p-1)/v)/(m+(p-1)/v)     = {over_total} = "
          f"{frac:.4g} ({frac:.1%})    GPipe sec. 2.3; Narayanan Eq. (1)")
    in_flight = pipeline.microbatches_in_flight("1f1b", p, m)
    print(f"  {labels[2]:<{w}}GPipe m = {m}; 1F1B min(p, m) = {in_flight}"
          "    Narayanan et al. 2021 sec. 2.2.1")
    if p > 1:
        need = pipeline.min_microbatches_for_bubble(p, 0.2, v)
        print("  " + _(NEEDS_M).format(need=need) + (" " + _(MULTIPLE_OF_P) if v > 1 else ""))
    else:
        print(_(ONE_STAGE))
    print(_(FIRST_CAN_EXCEED))
    return 0
