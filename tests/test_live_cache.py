"""The live-run cache under .distcheck/: keyed by content, used only while the run's files are unchanged."""

from __future__ import annotations

import json

from pytest_distcheck import live_cache


def _lab(tmp_path):
    lab = tmp_path / "experiments" / "ddp_cpu"
    lab.mkdir(parents=True)
    (tmp_path / "experiments" / "__init__.py").write_text("")
    (lab / "lab.py").write_text("STEPS = 5\n")
    return lab / "lab.py"


def test_the_key_changes_with_any_file_of_the_labs_package_and_not_without(tmp_path):
    lab = _lab(tmp_path)

    def key():
        return live_cache.content_key(live_cache.python_files(tmp_path / "experiments"))

    before = key()
    assert key() == before
    (lab.parent / "__pycache__").mkdir()
    (lab.parent / "__pycache__" / "lab.cpython-311.pyc").write_bytes(b"compiled")
    assert key() == before  # bytecode is not the lab's code
    lab.write_text("STEPS = 6\n")
    assert key() != before
    lab.write_text("STEPS = 5\n")
    (lab.parent / "helpers.py").write_text("")
    assert key() != before


def test_a_missing_file_counts_as_missing_not_as_empty(tmp_path):
    path = tmp_path / "distcheck.toml"
    missing = live_cache.content_key([path])
    path.write_text("")
    assert live_cache.content_key([path]) != missing


def test_a_record_is_found_under_its_key_only_while_the_files_it_wrote_are_unchanged(tmp_path):
    log = tmp_path / ".distcheck" / "live.json"
    log.parent.mkdir()
    log.write_text("{}")
    path = live_cache.remember(tmp_path, "item", "k1", {"table": "t"}, [log])
    assert path == tmp_path / live_cache.FOLDER / "item.json"
    assert live_cache.lookup(tmp_path, "item", "k1") == {"table": "t", "files": {".distcheck/live.json": (
        json.loads(path.read_text())["k1"]["files"][".distcheck/live.json"])}}
    assert live_cache.lookup(tmp_path, "item", "k2") is None
    assert live_cache.lookup(tmp_path, "other", "k1") is None
    log.write_text('{"edited": true}')
    assert live_cache.lookup(tmp_path, "item", "k1") is None
    log.unlink()
    assert live_cache.lookup(tmp_path, "item", "k1") is None


def test_only_the_newest_records_are_kept(tmp_path):
    for i in range(live_cache.KEEP + 2):
        live_cache.remember(tmp_path, "item", f"k{i}", {"i": i})
    live_cache.remember(tmp_path, "item", "k3", {"i": "again"})  # a reused key becomes the newest
    kept = json.loads((tmp_path / live_cache.FOLDER / "item.json").read_text())
    assert list(kept) == ["k2"] + [f"k{i}" for i in range(4, live_cache.KEEP + 2)] + ["k3"]


def test_an_unreadable_cache_file_is_a_miss_and_is_replaced(tmp_path):
    path = tmp_path / live_cache.FOLDER / "item.json"
    path.parent.mkdir(parents=True)
    for text in ("not json", "[1, 2]", '{"k1": "not a record"}'):
        path.write_text(text)
        assert live_cache.lookup(tmp_path, "item", "k1") is None
    live_cache.remember(tmp_path, "item", "k1", {"table": "t"})
    assert live_cache.lookup(tmp_path, "item", "k1") == {"table": "t", "files": {}}


def test_the_gate_flag_is_read_from_the_gate_option(pytester):
    assert live_cache.gate_on(pytester.parseconfig("--gate")) is True
    assert live_cache.gate_on(pytester.parseconfig()) is False
