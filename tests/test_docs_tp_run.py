"""One length and one price for the paid TP run on every page (issue 12): the source is the paid check's
own ``@pytest.mark.pod`` (checks/test_tp_speedup_gpu.py) with ``[pods]`` of checks/distcheck.toml; the
reservation and its price are recomputed with the kit's pod timings and budget calculator, and every
`distcheck estimate` figure a page quotes is rerun. No figure is typed in this file.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
from functools import cache
from pathlib import Path

import pytest

from pytest_distcheck.budget.errors import usd
from pytest_distcheck.cli import main
from pytest_distcheck.commands import estimate
from pytest_distcheck.commands.budget import load_guard
from pytest_distcheck.pods.timings import Timings
from pytest_distcheck.workspace import load_workspace

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "docs" / "README.md", *sorted((ROOT / "docs" / "lab").glob("*.md")),
         *sorted((ROOT / "docs" / "theory").glob("*.md")), *sorted((ROOT / "docs" / "kit").glob("*.md"))]
IDS = [p.relative_to(ROOT).as_posix() for p in PAGES]
# The pages that price the TP run: each must quote the check's run with its figures, rerun below.
PRICING_PAGES = ["docs/kit/budget-and-pods.md", "docs/README.md", "docs/lab/00-cloud-budget-and-tooling.md",
                 "docs/lab/02-tp-inference-cloud.md"]
COMMAND = re.compile(r"distcheck estimate [^`\n#|]*")
MARKER = re.compile(r"`\$ (distcheck estimate [^`]+)`\s+→\s+((?:`[^`]+`(?:,\s+|\s+and\s+)?)+)")


@cache
def tp_run() -> dict:
    """The paid check's run: GPUs and minutes from its pod marker, GPU type and cloud from [pods], the
    reserved minutes (run + ready timeout + teardown, as pods/lease.py adds them) and their price."""
    spec = importlib.util.spec_from_file_location("_tp_speedup_gpu_check", ROOT / "checks" / "test_tp_speedup_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (pod,) = [m for m in module.test_tp_speedup_on_two_gpus.pytestmark if m.name == "pod"]
    pods = load_workspace(ROOT / "checks" / "distcheck.toml").section("pods")
    t = Timings()
    minutes = float(pod.kwargs["minutes"])
    reserved_s = minutes * 60 + t.ready_timeout + t.teardown
    guard = load_guard(str(ROOT / "checks" / "distcheck.toml"))
    est = guard.estimate("runpod", pods["gpu_type"], pod.kwargs["gpus"], reserved_s, pods["cloud"])
    return {"gpus": pod.kwargs["gpus"], "minutes": minutes, "cloud": pods["cloud"], "gpu": est.price.provider_gpu_id,
            "rate": usd(est.price.usd_per_gpu_hour),
            "reserved_min": reserved_s / 60, "usd": usd(est.usd), "guard": guard,
            "allowed_min": {minutes, reserved_s / 60, t.ready_timeout / 60, t.teardown / 60, t.heartbeat_stale / 60}}


def _parse(command: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="distcheck estimate")
    estimate.add_arguments(parser)
    return parser.parse_args(shlex.split(command)[2:])


def _is_tp_run_hardware(args: argparse.Namespace) -> bool:
    run = tp_run()
    if args.count != run["gpus"] or args.cloud != run["cloud"]:
        return False
    return run["guard"].prices.price("runpod", args.gpu, args.cloud, args.count).provider_gpu_id == run["gpu"]


def _out(command: str, capsys) -> str:
    capsys.readouterr()
    main(shlex.split(command)[1:])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_estimate_of_the_tp_hardware_prices_the_check_s_run(page):
    """`distcheck estimate` for the check's GPUs (type, count, cloud) is always the check's own run:
    its minutes, priced as gpu_pod reserves it (--pod)."""
    run = tp_run()
    for command in COMMAND.findall(page.read_text()):
        if "--gpu" not in command:  # prose naming an option, not a command
            continue
        args = _parse(command.strip())
        if _is_tp_run_hardware(args):
            assert (args.minutes, args.pod) == (run["minutes"], True), (
                f"{page.name}: `{command.strip()}` prices another TP run; the check asks for "
                f"--minutes {run['minutes']:g} --pod (checks/test_tp_speedup_gpu.py)")


@pytest.mark.parametrize("rel", PRICING_PAGES)
def test_the_pricing_pages_quote_the_check_s_run_as_the_tool_prints_it(rel, capsys, monkeypatch):
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)  # the shipped table, never a live price
    monkeypatch.chdir(ROOT)
    run = tp_run()
    markers = MARKER.findall((ROOT / rel).read_text())
    quoted = [c for c, _ in markers if _is_tp_run_hardware(_parse(c))]
    assert quoted, f"{rel}: no '`$ distcheck estimate ...` → `VALUE`' quoting the TP run's reservation"
    for command, values in markers:
        out = _out(command, capsys)
        missing = [v for v in re.findall(r"`([^`]+)`", values) if " ".join(v.split()) not in out]
        assert not missing, f"{rel}: `{command}` does not print {missing}"
    assert f"{run['reserved_min']:g} min: {run['usd']}" in _out(quoted[0], capsys)


def _sentences(text: str):
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for para in re.split(r"\n\s*\n", text):
        yield from re.split(r"(?<=[.;])\s+|\n(?=\|)|\n- ", para)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_prose_about_the_reservation_uses_the_check_s_figures(page):
    """A sentence (or table row) about the reservation or the pod's time quotes only the check's figures:
    the reservation's price, and the run, ready, teardown, reserved and heartbeat minutes."""
    run = tp_run()
    for sentence in _sentences(page.read_text()):
        if not re.search(r"reserv|worst case|on a pod|run time|of use", sentence, re.I) or "`$ distcheck" in sentence:
            continue
        flat = " ".join(sentence.split())
        amounts = set(re.findall(r"\$\d+\.\d\d\b(?!/)", flat)) - {run["usd"], run["rate"]}
        minutes = {float(m) for m in re.findall(r"\b(\d+) min(?:utes?)?\b", flat)} - run["allowed_min"]
        if "test_tp_speedup_gpu" in flat:  # the check's own marker, quoted
            minutes |= {float(m) for m in re.findall(r"minutes=(\d+)", flat)} - {run["minutes"]}
        assert not amounts and not minutes, f"{page.name}: {sorted(amounts)} {sorted(minutes)} in: {flat[:200]}"


def test_estimate_pod_prints_the_reservation_breakdown(capsys):
    """--pod adds the pod timings' ready timeout and teardown to the run time, and says so."""
    t = Timings()
    out = _out('distcheck estimate --gpu "RTX 4090" --count 2 --minutes 25 --pod', capsys)
    total = 25 + (t.ready_timeout + t.teardown) / 60
    assert (f"25 min run + {t.ready_timeout / 60:g} min to get ready + {t.teardown / 60:g} min to terminate = "
            f"{total:g} min") in out
    plain = _out(f'distcheck estimate --gpu "RTX 4090" --count 2 --minutes {total:g}', capsys)
    price = re.compile(r"min: (\$\d+\.\d\d) ")
    assert price.search(out).group(1) == price.search(plain).group(1)  # the same sum, priced the same
