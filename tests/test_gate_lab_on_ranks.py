"""The learner's lab runs on the ranks only, never in the process that decides the gate's verdict: under the
gate the ranks' replies and return values are unpickled as plain data only
(``pytest_distcheck.ranks.pool.plain_loads``), so neither a lab object nor crafted bytes can run code there (the
whole gate: tests/test_gate_attempts.py)."""

from __future__ import annotations

import pickle

import pytest

from pytest_distcheck.ranks import pool


class _Runs:
    def __reduce__(self):
        return (print, ("ran",))


@pytest.mark.parametrize("value", [
    ("result", 1, {"rank": 0, "status": "ok"}, b"\x80", None, True),
    {"a": [1, 2.5, "x", None, True], "b": (b"y",), "c": {3}, "d": frozenset({4})},
])
def test_plain_data_round_trips(value):
    assert pool.plain_loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL)) == value


def test_anything_that_names_a_class_or_function_is_refused(capsys):
    with pytest.raises(pickle.UnpicklingError, match=pool.NOT_PLAIN_DATA.format(module="builtins", name="print")):
        pool.plain_loads(pickle.dumps(_Runs()))
    with pytest.raises(pickle.UnpicklingError,
                       match=pool.NOT_PLAIN_DATA.format(module="collections", name="OrderedDict")):
        pool.plain_loads(pickle.dumps(__import__("collections").OrderedDict(a=1)))
    assert capsys.readouterr().out == ""


def _sends_a_crafted_reply(marker: str) -> None:
    """On a rank: from now on the worker's replies are bytes that run code wherever they are unpickled."""
    import pickle as real
    import sys
    import types

    class Payload:
        def __reduce__(self):
            return (exec, (f"import pathlib; pathlib.Path({marker!r}).write_text('ran')",))

    worker = sys.modules["pytest_distcheck.ranks.worker"]
    worker.pickle = types.SimpleNamespace(dumps=lambda obj, protocol=None: real.dumps(Payload()),
                                          loads=real.loads, HIGHEST_PROTOCOL=real.HIGHEST_PROTOCOL)


@pytest.mark.fresh_ranks
def test_a_crafted_reply_of_a_rank_runs_no_code_here(dist_world, tmp_path):
    from pytest_distcheck.ranks.errors import RankError

    marker = tmp_path / "ran-in-the-test-process"
    not_plain = pool.NOT_PLAIN_DATA.format(module="builtins", name="exec")
    with pytest.raises(RankError, match=pool.NOT_THE_KITS_REPLY.format(error=not_plain)):
        dist_world.run(_sends_a_crafted_reply, str(marker))
    assert not marker.exists()


def test_a_warning_category_is_never_looked_up_through_a_modules_getattr():
    import subprocess
    import sys

    code = ("import sys; from pytest_distcheck.ranks import rank_warnings as w; import pytest_distcheck.tp\n"
            "assert w._category('pytest_distcheck.tp', 'assert_tp_matches_dense') is None\n"
            "print('pytest_distcheck.tp.compare' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
