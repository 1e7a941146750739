"""A published parallel configuration's derived numbers: data-parallel degree, micro-batches per step, and what
does not add up.

    DP = GPUs / (TP x PP x CP)       megatron-core ``parallel_state.initialize_model_parallel`` (world size over
                                     TP x PP x CP; EP regroups the same ranks, so it is no factor here)
    m  = GBS / (DP x MBS)            micro-batches per step per pipeline = gradient-accumulation steps ("GA")
    layers % (PP x VP) == 0          each of the PP x VP model chunks holds the same number of layers
                                     (Narayanan et al. 2021 sec. 2.2.2); megatron-core can set uneven first and
                                     last stages instead, so this is a flag, not an error
    m % PP == 0 when VP > 1          the interleaved schedule's groups of p micro-batches (Narayanan sec. 2.2.2)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from pytest_distcheck.calc._checks import whole as _whole
from pytest_distcheck.i18n import N_, _

DP_NOT_WHOLE = N_("GPUs = {gpus} is not a multiple of TP x PP x CP = {model}: DP would be {dp}")
M_NOT_WHOLE = N_("GBS = {gbs} is not a multiple of DP x MBS = {per_step}: {m} micro-batches per step")
LAYERS_UNEVEN = N_("layers = {layers} do not divide into PP x VP = {chunks} model chunks ({per} each): the stages "
                   "are uneven (megatron-core needs its first/last-stage layer options or a pipeline layout)")
INTERLEAVE_M = N_("interleaved 1F1B (VP = {vp}) runs micro-batches in groups of PP = {pp}: m = {m} is not a "
                  "multiple")
GA_DIFFERS = N_("the source's GA = {ga} is not the derived m = GBS / (DP x MBS) = {m}")


@dataclass(frozen=True)
class Layout:
    """The derived numbers of a configuration and its problems (each one sentence, from the templates above).

    Attributes:
        dp: data-parallel degree (a Fraction when GPUs do not divide). microbatches: m = GBS / (DP x MBS)
        (a Fraction when it does not divide). problems: what does not add up, empty when all does.
    """

    dp: Fraction
    microbatches: Fraction
    problems: tuple[str, ...]


def _show(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):.4g}"


def derive_layout(gpus: int, tp: int, pp: int, mbs: int, gbs: int, cp: int = 1, vp: int = 1,
                  layers: int | None = None, ga: int | None = None) -> Layout:
    """DP, micro-batches per step and the inconsistencies of a configuration (module docstring for the rules).

    Args: counts as a benchmark table gives them: GPUs, TP, PP, CP, VP (virtual stages per device), MBS
    (micro-batch size), GBS (global batch size, sequences), layers (optional), ga (the source's own
    gradient-accumulation count, optional: compared with the derived m).

    Raises:
        ValueError: a count that is not a whole number >= 1.
    """
    for name, value in (("gpus", gpus), ("tp", tp), ("pp", pp), ("cp", cp), ("vp", vp), ("mbs", mbs),
                        ("gbs", gbs)):
        _whole(name, value)
    for name, value in (("layers", layers), ("ga", ga)):
        if value is not None:
            _whole(name, value)
    problems = []
    model = tp * pp * cp
    dp = Fraction(gpus, model)
    if dp.denominator != 1:
        problems.append(_(DP_NOT_WHOLE).format(gpus=gpus, model=model, dp=_show(dp)))
    m = Fraction(gbs) / (dp * mbs)
    if m.denominator != 1:
        problems.append(_(M_NOT_WHOLE).format(gbs=gbs, per_step=_show(dp * mbs), m=_show(m)))
    if layers is not None and layers % (pp * vp):
        problems.append(_(LAYERS_UNEVEN).format(layers=layers, chunks=pp * vp, per=f"{layers / (pp * vp):.4g}"))
    if vp > 1 and m.denominator == 1 and m % pp:
        problems.append(_(INTERLEAVE_M).format(vp=vp, pp=pp, m=_show(m)))
    if ga is not None and Fraction(ga) != m:
        problems.append(_(GA_DIFFERS).format(ga=ga, m=_show(m)))
    return Layout(dp, m, tuple(problems))
