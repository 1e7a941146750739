"""An item whose checks were not selected is NOT RUN, whatever its prerequisites (unit test of combine)."""

from __future__ import annotations

import textwrap

from dod_support import MINI_WORKSPACE

from pytest_distcheck.dod.collection import CheckInfo, CollectionRecord
from pytest_distcheck.dod.state import CheckOutcome, State, combine
from pytest_distcheck.workspace import load_workspace


def _ws(tmp_path):
    (tmp_path / "checks").mkdir()
    path = tmp_path / "checks" / "distcheck.toml"
    path.write_text(textwrap.dedent(MINI_WORKSPACE))
    return load_workspace(path, root=tmp_path)


def test_an_unselected_item_is_not_run_even_when_its_prerequisite_is_not_done(tmp_path):
    record = CollectionRecord(checks={
        "checks/test_a.py::test_alpha": CheckInfo("alpha", "checks/test_a.py", "test_alpha"),
        "checks/test_b.py::test_beta": CheckInfo("beta", "checks/test_b.py", "test_beta", selected=False,
                                                 not_run="not selected (--dod alpha)"),
    })
    outcomes = [CheckOutcome("alpha", "checks/test_a.py::test_alpha", State.PENDING, "no log yet", "make alpha")]
    alpha, beta = combine(_ws(tmp_path), outcomes, record)
    assert alpha.state is State.PENDING
    assert (beta.state, beta.reason) == (State.NOT_RUN, "not selected (--dod alpha)")


def test_a_selected_item_that_did_not_run_is_still_blocked_by_a_prerequisite_not_done(tmp_path):
    record = CollectionRecord(checks={
        "checks/test_a.py::test_alpha": CheckInfo("alpha", "checks/test_a.py", "test_alpha"),
        "checks/test_b.py::test_beta": CheckInfo("beta", "checks/test_b.py", "test_beta"),
    })
    outcomes = [CheckOutcome("alpha", "checks/test_a.py::test_alpha", State.BROKEN, "wrong")]
    _, beta = combine(_ws(tmp_path), outcomes, record)
    assert beta.state is State.BLOCKED and beta.reason.startswith("blocked by alpha (broken)")
