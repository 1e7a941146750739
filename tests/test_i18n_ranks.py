"""dist_world under --lang es: its errors in Spanish, in the test process and in the ranks (told the language at
start and with every call); each rank's status keyword stays as it is."""

from __future__ import annotations

import json

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.i18n import _
from pytest_distcheck.ranks.children import FORKED_CHILD
from pytest_distcheck.ranks.errors import RankError, RankOutcome, RankTimeout
from pytest_distcheck.ranks.pool import TIMEOUT_DETAIL
from pytest_distcheck.ranks.report import FORKED_CHILD_HANG, STOPPED, blame, detail_rerun, hang_hint, peers_returned
from pytest_distcheck.ranks.worker import USER_HASH_STORE

GLOO_CLOSED = "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:52141."


@pytest.fixture(autouse=True)
def _english_after():
    """The session's own summary, after the last test here, stays English."""
    yield
    i18n.use(i18n.DEFAULT)


def test_a_rank_error_speaks_spanish_with_each_ranks_status_keyword_kept():
    i18n.use("es")
    one = str(RankError(blame([RankOutcome(0, "error", "ValueError: x", phase="call"),
                               RankOutcome(1, "error", GLOO_CLOSED, phase="call")])))
    assert one == f"el rank 0 ha fallado\n  rank 0: error (ValueError: x)\n  rank 1: stopped ({_(STOPPED)})"
    two = str(RankError([RankOutcome(0, "died", "x"), RankOutcome(1, "died", "y")]))
    assert two.startswith("los ranks 0, 1 han fallado\n")  # the plural form
    assert str(RankTimeout([RankOutcome(0, "timeout", "z")])).startswith("el rank 0 no ha terminado a tiempo\n")


def test_which_peers_returned_is_said_in_spanish_in_both_numbers():
    i18n.use("es")
    assert peers_returned([RankOutcome(0, "error", GLOO_CLOSED, phase="call"), RankOutcome(1, "ok")]) == (
        "el rank 1 ha retornado y ha cerrado sus conexiones mientras el rank 0 seguía en una colectiva: "
        "¿una colectiva que solo lanzaron algunos ranks?")
    assert peers_returned([RankOutcome(0, "error", GLOO_CLOSED, phase="call"), RankOutcome(1, "ok"),
                           RankOutcome(2, "error", GLOO_CLOSED, phase="call"), RankOutcome(3, "ok")]).startswith(
        "los ranks 1, 3 han retornado y han cerrado sus conexiones mientras los ranks 0, 2 seguían")


def test_a_child_section_written_in_spanish_is_read_in_spanish():
    i18n.use("es")
    header = _(FORKED_CHILD).format(pid=7, rank_threads="9 hilos", threads="1 hilo", cmdline="x")
    stack = f'File "/usr/lib/python3/multiprocessing/popen_fork.py", line 27 in poll\n{header}\nFile "t.py", line 3'
    assert hang_hint("t.py::test_x", "OFF", {0: stack}) == _(FORKED_CHILD_HANG).format(ranks="el rank 0")
    assert _(FORKED_CHILD) != FORKED_CHILD and _(FORKED_CHILD_HANG) != FORKED_CHILD_HANG


SPANISH_RUN = """
import json
import pathlib

def _raise_on_rank_0():
    import torch.distributed as dist

    if dist.get_rank() == 0:
        raise ValueError("rank zero fails")
    dist.barrier()

def _sleep():
    import time

    time.sleep(600)

def _hash_store():
    import torch.distributed as dist

    try:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=dist.get_rank(), world_size=dist.get_world_size())
    except RuntimeError as exc:
        return str(exc)

def test_raises(dist_world):
    dist_world.run(int)  # the group is up: rank 1 waits in the barrier
    dist_world.run(_raise_on_rank_0)

def test_hangs(dist_world):
    dist_world.run(_sleep, timeout=1)

def test_hash_store(dist_world):
    pathlib.Path("hash_store.json").write_text(json.dumps(dist_world.run(_hash_store)))
"""


def test_under_lang_es_dist_world_reports_in_spanish_and_its_ranks_speak_spanish(pytester):
    pytester.makepyfile(test_spanish=SPANISH_RUN)
    result = pytester.runpytest_subprocess("--lang", "es", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2, passed=1)
    i18n.use("es")
    rerun = detail_rerun("test_spanish.py::test_hangs", "OFF")
    result.stdout.fnmatch_lines([
        "*RankError: " + RankError.headline(1).format(ranks="0"),
        "*  rank 0: error (ValueError: rank zero fails)",
        f"*  rank 1: stopped ({_(STOPPED)})",
    ])
    result.stdout.fnmatch_lines([
        "*RankTimeout: " + RankTimeout.headline(2).format(ranks="0, 1") + ": "
        + _(TIMEOUT_DETAIL).format(limit="1 s"),
        "*" + rerun[:1].upper() + rerun[1:],
    ])
    assert RankError.headline(1) != "rank(s) {ranks} failed" and _(TIMEOUT_DETAIL) != TIMEOUT_DETAIL
    # Made in the ranks, which were told the language when the pool started them.
    assert json.loads((pytester.path / "hash_store.json").read_text()) == [_(USER_HASH_STORE)] * 2
    assert _(USER_HASH_STORE) != USER_HASH_STORE


def _rank_language():
    from pytest_distcheck import i18n

    return i18n.language()


def test_ranks_speak_the_language_of_each_call_not_only_the_one_they_started_in(dist_world):
    """Lab 02's fault-zoo tests speak the run's language after other tests started the ranks in English."""
    i18n.use(i18n.DEFAULT)
    assert dist_world.run(_rank_language) == ["en", "en"]
    i18n.use("es")
    assert dist_world.run(_rank_language) == ["es", "es"]
    i18n.use(i18n.DEFAULT)
    assert dist_world.run(_rank_language) == ["en", "en"]
