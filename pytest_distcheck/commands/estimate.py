"""Price a GPU run before launching it, and show what would be left of the budget after it.

  distcheck estimate --gpu "RTX 4090" --count 2 --minutes 30
  distcheck estimate --gpu H100 --count 2 --minutes 20 --cloud community --experiment tp-inference
  distcheck estimate --gpu "RTX 4090" --count 2 --minutes 25 --pod   # what a gpu_pod test reserves

Prices come from the shipped table (with source and date) or, with RUNPOD_API_KEY set, live from
RunPod; ``--pod`` adds a pod's ready and terminate time (``pods.timings``). An unknown GPU type or an
undeclared experiment is refused as reserving refuses it. Exit status 1 when the run would not fit in
what is left; 2 for a refusal or a workspace file or ledger that cannot be read.
"""

from __future__ import annotations

import argparse
import sys

from pytest_distcheck.commands import add_config_argument
from pytest_distcheck.commands._numbers import positive_int, real
from pytest_distcheck.i18n import N_, _

MAX_MINUTES = 366 * 24 * 60  # a year: anything longer is a typo, and the billing arithmetic stays exact
BAD_COUNT = N_("--count must be >= 1 and --minutes > 0, got {count} and {minutes:g}")
FOR_MINUTES = N_(" for {minutes:g} min")
RESERVED_AS_POD = N_(", reserved as gpu_pod does: {minutes:g} min run + {ready:g} min to get ready + {teardown:g} min "
                     "to terminate = {total:g} min")
LIVE_WARNING = N_("warning: {warning}; using the shipped table")
HEADLINE = N_("{count} x {gpu} on {where}{span}: {cost}")
# A price's confidence (prices.json's field, or "high" for a live price), as the price line says it.
CONFIDENCE = {"low": N_("low"), "medium": N_("medium"), "high": N_("high")}
PRICE_LINE = N_("  price    {rate}/GPU-hour ({origin}; source: {source}; {date}; recorded {recorded}; confidence "
                "{confidence})")
LIVE = N_("live")
SHIPPED_TABLE = N_("shipped table")
UNDATED = N_("undated")
DATED = N_("dated {date}")
BILLING_LINE = N_("  billing  per {granularity:g} s, minimum {minimum:g} s; billed {billed:g} s (source: {source})")
REHEARSE_FIRST = N_("  rehearse the paid path first, for free: `distcheck rehearse` (a fake RunPod API, this machine "
                    "as the pod); it cannot cover {gaps}")
NO_CEILING = N_("  {key}: no ceiling in {config}")
LEFT_AFTER = N_("  left after: {after} of {left} left under the {limit}")
SHORT = N_("NOT ENOUGH, short {usd}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--gpu", required=True, metavar="NAME", help="GPU type, e.g. 'RTX 4090', H100, A40")
    parser.add_argument("--count", type=positive_int, default=1, metavar="N", help="GPUs (default 1)")
    parser.add_argument("--minutes", type=real(0, MAX_MINUTES, low_open=True), required=True, metavar="M",
                        help=f"run time in minutes, > 0 and <= {MAX_MINUTES} (a year)")
    parser.add_argument("--provider", default="runpod", help="provider (default runpod)")
    parser.add_argument("--cloud", default="secure", choices=("secure", "community"),
                        help="RunPod cloud (default secure)")
    parser.add_argument("--experiment", help="also show what is left of this experiment's ceiling")
    parser.add_argument("--pod", action="store_true",
                        help="price the worst case a gpu_pod test of MINUTES reserves: MINUTES of run time + the "
                             "time to get ready + the time to terminate (default pod timings)")
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    from decimal import Decimal

    from pytest_distcheck.budget.errors import BudgetRefused, usd
    from pytest_distcheck.budget.pricing import LIVE_SOURCE
    from pytest_distcheck.commands.budget import load_guard

    if args.count < 1 or not args.minutes > 0:
        raise BudgetRefused(_(BAD_COUNT).format(count=args.count, minutes=args.minutes))
    guard = load_guard(args.config)
    guard.check_experiment(args.experiment)  # as reserving does: an undeclared id escapes its ceiling
    seconds, span = args.minutes * 60, _(FOR_MINUTES).format(minutes=args.minutes)
    if args.pod:
        from pytest_distcheck.pods.timings import Timings

        t = Timings()
        seconds = t.reserved_seconds(seconds)  # what pods/lease.py reserves
        span = _(RESERVED_AS_POD).format(minutes=args.minutes, ready=t.ready_timeout / 60, teardown=t.teardown / 60,
                                         total=seconds / 60)
    est = guard.estimate(args.provider, args.gpu, args.count, seconds, args.cloud)
    p, b = est.price, est.billing
    if p.warning:
        print(_(LIVE_WARNING).format(warning=p.warning), file=sys.stderr)
    where = f"{args.provider} {args.cloud}" if args.provider == "runpod" else args.provider
    print(_(HEADLINE).format(count=args.count, gpu=p.gpu, where=where, span=span, cost=usd(est.usd)))
    date = _(UNDATED) if p.date == "undated" else _(DATED).format(date=p.date)
    source = _(LIVE_SOURCE).format(cloud=p.cloud) if p.live else _(p.source)  # the shipped table's are messages
    print(_(PRICE_LINE).format(rate=usd(p.usd_per_gpu_hour), origin=_(LIVE) if p.live else _(SHIPPED_TABLE),
                               source=source, date=date, recorded=p.recorded,
                               confidence=_(CONFIDENCE.get(p.confidence, p.confidence))))
    print(_(BILLING_LINE).format(granularity=b.granularity_s, minimum=b.minimum_s, billed=est.billed_s,
                                 source=_(b.source)))
    if args.provider == "runpod":
        from pytest_distcheck.pods.rehearsal import NOT_COVERED

        print(_(REHEARSE_FIRST).format(gaps="; ".join(map(_, NOT_COVERED))))
    status = guard.status()
    fits = True
    keys = ["phase"] + ([f"experiment {args.experiment}"] if args.experiment else [])
    for key in keys:
        lim = status.limits.get(key)
        if lim is None:
            print(_(NO_CEILING).format(key=key, config=args.config))
            continue
        after = lim.left - est.usd
        fits &= after >= Decimal(0)
        shown = usd(after) if after >= 0 else _(SHORT).format(usd=usd(-after))
        print(_(LEFT_AFTER).format(after=shown, left=usd(lim.left), limit=lim.name))
    return 0 if fits else 1
