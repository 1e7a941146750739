"""Rehearse the paid GPU run for free: the whole path against a fake RunPod API, in a scratch copy.

Runs what `pytest -m gpu --max-usd 3` runs (pricing, reservation, ledger rows, pod create, SSH, staging, preflight,
the experiment on the CPU preset, copy-back, termination, settlement, the DoD checks) against the bundled fake RunPod
API, whose pods are this machine over real SSH, in a scratch copy of the workspace: $0, nothing in your workspace
written, no DoD table. It ends with what the rehearsal covered and what only a real GPU pod shows. Ctrl-C lets it
terminate its fake pod and settle its ledger row first (Ctrl-C again stops at once). The last line gives the
scratch copy's path and the rm -rf that removes it. Do it before paying.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_distcheck.commands import add_config_argument
from pytest_distcheck.i18n import N_, _

NEEDS_GPU_EXTRA = N_("needs the gpu extra ({module} is not installed): pip install -e '.[gpu]' (the README's main "
                     "command installs it)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    from pytest_distcheck.errors import DistcheckError

    try:
        import pytest_distcheck.pods.fake  # noqa: F401 - needs the gpu extra (runpod, asyncssh, graphql-core)
    except ImportError as exc:
        raise DistcheckError(_(NEEDS_GPU_EXTRA).format(module=exc.name)) from None
    from pytest_distcheck.pods.rehearsal import rehearse

    return rehearse(Path(args.config), lang=getattr(args, "lang", None))
