import json

import pytest

import pytest_distcheck
from pytest_distcheck.committed import require_committed

RESULTS = "experiments/results/bench.json"


@pytest.mark.local
@pytest.mark.dod("results-committed")  # the item's id in checks/distcheck.toml
def test_results_committed(distcheck_workspace):
    path = distcheck_workspace.resolve(RESULTS)
    if not path.exists():
        pytest_distcheck.pending(f"no results at {RESULTS}")  # `->` shows the item's `how`
    require_committed([path], distcheck_workspace.root)
    try:
        value = json.loads(path.read_text())["bandwidth_gbps"]
    except (ValueError, KeyError) as exc:
        pytest_distcheck.broken(f"{RESULTS}: expected JSON with a field bandwidth_gbps ({exc})")
    if not isinstance(value, (int, float)) or value <= 0:
        pytest_distcheck.broken(f"{RESULTS}: bandwidth_gbps must be a positive number, found {value!r}")
    pytest_distcheck.done(f"{value} GB/s, committed")
