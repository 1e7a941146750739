"""pytest fixtures for the pods tests: a started fake, the environment pointing the SDK at it, a budget
guard on a scratch ledger, fast timings, and a provider. Import them into a test module by name."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from .server import FakeRunPod

API_KEY = "rpa_TESTKEY_d0n0tl34k_7f3c9a"  # distinctive, so a leak is easy to grep for
SESSION = "5e55101d"

# Short waits so faults end in seconds; heartbeat_stale stays above ready_timeout and heartbeat_every.
FAST_TIMINGS = ("api_timeout=2 ready_timeout=10 poll_every=0.1 create_grace=2 confirm_timeout=10 teardown=2 "
                "heartbeat_every=0.3 heartbeat_stale=12 deadman_every=0.2 run_grace=3 meter_every=0.5")

WORKSPACE = """
[phase]
id = "t7"
title = "pods test phase"

[[items]]
id = "alpha"
title = "a deliverable"
how = "make alpha"

[budget]
ledger = "ledger.md"
phase_ceiling_usd = {phase}

[budget.experiment_ceilings_usd]
tp-inference = 3.0

[pods]
gpu_type = "NVIDIA GeForce RTX 4090"
image = "fake/image:1"
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A started FakeRunPod; RUNPOD_API_BASE_URL and RUNPOD_API_KEY point at it; session locks in tmp."""
    fake = FakeRunPod(tmp_path / "fake", api_key=API_KEY).start()
    monkeypatch.setenv("RUNPOD_API_BASE_URL", fake.url)
    monkeypatch.setenv("RUNPOD_API_KEY", API_KEY)
    monkeypatch.setenv("DISTCHECK_RUNPOD_REST_URL", fake.url + "/v1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield fake
    fake.stop()


@pytest.fixture
def timings():
    from pytest_distcheck.pods.timings import Timings

    return Timings.parse(FAST_TIMINGS)


@pytest.fixture
def guard(tmp_path: Path):
    """A budget guard on a scratch ledger: phase ceiling $5, session ceiling $3."""
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.budget.ledger import Ledger

    ledger = Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock")
    return BudgetGuard(ledger, phase_ceiling_usd=5.0, experiment_ceilings_usd={"tp-inference": 3.0},
                       session_ceiling_usd=3.0, session_id=SESSION)


@pytest.fixture
def provider(fake, timings):
    from pytest_distcheck.pods.runpod import RunPodProvider
    from pytest_distcheck.pods.ssh import new_key_pair

    key, public = new_key_pair()
    return RunPodProvider(timings, key, public)


def write_workspace(root: Path, phase_ceiling: float = 5.0) -> None:
    (root / "checks").mkdir(exist_ok=True)
    (root / "checks" / "distcheck.toml").write_text(textwrap.dedent(WORKSPACE.format(phase=phase_ceiling)))


@pytest.fixture
def pod_dir(pytester: pytest.Pytester, fake):
    """A pytester folder set up for gpu_pod against the fake: workspace, ledger path, fast timings."""
    write_workspace(pytester.path)
    pytester.makeini(f"""
        [pytest]
        distcheck_pod_timings = {FAST_TIMINGS}
        """)
    return pytester
