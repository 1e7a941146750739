"""Evidence helpers: sources recorded and checked for freshness, stored values checked against their
recomputation; and, through pytester, a stale result and a tampered score failing the gate."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from dod_support import gate_run, unshipped, unverified

import pytest_distcheck
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.evidence import check_fresh, digest, record_sources, require_consistent, require_fresh


@pytest.fixture
def root(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "model.py").write_text("WIDTH = 64\n")
    (tmp_path / "ws.toml").write_text('[tp]\nsizes = [1, 2]\n\n[quiz]\npass_mark = 0.7\n')
    return tmp_path


def test_fresh_result_has_no_problems(root):
    result = {"sources": record_sources(["lab/model.py", "ws.toml#tp"], root)}
    assert all(v.startswith("sha256:") and len(v) == 71 for v in result["sources"].values())
    assert check_fresh(result, root, ["lab/model.py"], where="r.json") == []


def test_changed_file_is_named_with_both_hashes(root):
    result = {"sources": record_sources(["lab/model.py"], root)}
    (root / "lab" / "model.py").write_text("WIDTH = 128\n")
    [problem] = check_fresh(result, root, where="r.json")
    assert problem.startswith("lab/model.py changed since r.json was produced (recorded sha256:")
    assert f"now {digest('lab/model.py', root)[:19]}…" in problem


def test_only_the_recorded_table_counts(root):
    result = {"sources": record_sources(["ws.toml#tp"], root)}
    (root / "ws.toml").write_text('[tp]\nsizes = [1, 2]\n\n[quiz]\npass_mark = 0.8\n')
    assert check_fresh(result, root, where="r.json") == []
    (root / "ws.toml").write_text('[tp]\nsizes = [1, 2, 4]\n\n[quiz]\npass_mark = 0.8\n')
    assert check_fresh(result, root, where="r.json")[0].startswith("ws.toml#tp changed since r.json")


def test_folder_digest_ignores_caches_but_not_new_files(root):
    result = {"sources": record_sources(["lab"], root)}
    (root / "lab" / "__pycache__").mkdir()
    (root / "lab" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    assert check_fresh(result, root, where="r.json") == []
    (root / "lab" / "extra.py").write_text("X = 1\n")
    assert check_fresh(result, root, where="r.json") == [
        f"lab changed since r.json was produced (recorded {result['sources']['lab'][:19]}…, "
        f"now {digest('lab', root)[:19]}…)"]


def test_line_endings_do_not_change_a_digest(root):
    before = digest("lab/model.py", root)
    (root / "lab" / "model.py").write_bytes(b"WIDTH = 64\r\n")
    assert digest("lab/model.py", root) == before


def test_missing_unrecorded_and_absent_sources(root):
    result = {"sources": record_sources(["lab/model.py"], root)}
    (root / "lab" / "model.py").unlink()
    assert check_fresh(result, root, ["lab/plan.py"], where="r.json") == [
        "r.json does not record lab/plan.py among its sources",
        "lab/model.py, recorded in r.json, no longer exists (source not found)",
    ]
    assert check_fresh({}, root, where="r.json") == [
        "r.json records no sources (the hashes of the code and config it came from)"]


def test_malformed_sources_name_the_field(root):
    with pytest.raises(ConfigError, match=r"r.json, sources: must map each source path to 'sha256:<64 hex digits>'"):
        check_fresh({"sources": {"lab/model.py": "abc"}}, root, where="r.json")
    with pytest.raises(ConfigError, match="no such table"):
        record_sources(["ws.toml#nope"], root)


def test_require_fresh_raises_stale_with_the_command(root):
    result = {"sources": record_sources(["lab/model.py"], root)}
    require_fresh(result, ["lab/model.py"], root=root, where="r.json", command="make r.json")
    (root / "lab" / "model.py").write_text("WIDTH = 1\n")
    with pytest.raises(pytest_distcheck.Stale) as info:
        require_fresh(result, root=root, where="r.json", command="make r.json")
    assert info.value.reason.startswith("lab/model.py changed since r.json was produced")
    assert info.value.command == "make r.json"
    with pytest.raises(pytest_distcheck.Broken, match="sources"):
        require_fresh({"sources": []}, root=root, where="r.json")


@pytest.mark.parametrize(("stored", "recomputed", "tolerance"), [
    (0.75, 0.75, 0.0), (1.9999999, 2.0, 1e-6), (Decimal("5.20"), Decimal("5.2"), 0.0), ("abc", "abc", 0.0),
])
def test_consistent_values_pass(stored, recomputed, tolerance):
    require_consistent("value", stored, recomputed, where="f.json, value", tolerance=tolerance)


def test_a_stored_value_that_disagrees_is_broken():
    with pytest.raises(pytest_distcheck.Broken) as info:
        require_consistent("total", Decimal("4.10"), Decimal("5.20"), where="ledger.md, total", unit="$")
    assert info.value.reason == "ledger.md, total: stored total $4.10 disagrees with $5.20 recomputed from its evidence"
    with pytest.raises(pytest_distcheck.Broken, match="stored speedup 1.9 disagrees with 1.8"):
        require_consistent("speedup", 1.9, 1.8, where="r.json, speedup", tolerance=0.01)
    with pytest.raises(pytest_distcheck.Broken):
        require_consistent("speedup", float("nan"), 1.0, where="r.json, speedup", tolerance=1.0)


# -- the pattern inside a DoD check, through the gate --------------------------------------------

CHECK = '''
import json
import pytest
import pytest_distcheck
from pytest_distcheck.evidence import require_consistent, require_fresh

@pytest.mark.dod("alpha")
def test_quiz(distcheck_workspace):
    rel = "results/quiz.json"
    path = distcheck_workspace.resolve(rel)
    if not path.is_file():
        pytest_distcheck.pending(f"no {rel}", "make quiz")
    result = json.loads(path.read_text())
    require_fresh(result, ["key.json"], root=distcheck_workspace.root, where=rel, command="make quiz")
    key = json.loads(distcheck_workspace.resolve("key.json").read_text())
    # Re-grade the answers; the stored score is compared, never judged.
    correct = sum(a == k for a, k in zip(result["answers"], key))
    score = round(100 * correct / len(key))
    require_consistent("score", result["score"], score, where=f"{rel}, score", unit="%")
    if score < 70:
        pytest_distcheck.broken(f"quiz {score}% (needs >= 70%) in {rel}")

@pytest.mark.dod("beta")
def test_beta():
    pass
'''


@pytest.fixture
def quiz(workspace_dir):
    from pytest_distcheck.evidence import record_sources

    workspace_dir.makepyfile(**{"checks/test_quiz": CHECK})
    (workspace_dir.path / "key.json").write_text(json.dumps(["a", "b", "c", "d", "a"]))
    (workspace_dir.path / "results").mkdir()

    def write(answers, score):
        result = {"answers": answers, "score": score,
                  "sources": record_sources(["key.json"], workspace_dir.path)}
        (workspace_dir.path / "results" / "quiz.json").write_text(json.dumps(result))
        return workspace_dir

    return write


def test_a_fresh_consistent_passing_result_is_done(quiz):
    result = gate_run(quiz(["a", "b", "c", "d", "b"], 80))
    result.stdout.fnmatch_lines(["DONE     alpha  evidence checked", unverified(2, 2)])


def test_a_tampered_score_is_broken(quiz):
    # 3 of 5 correct is 60%; the file claims 90%.
    result = gate_run(quiz(["a", "b", "c", "x", "x"], 90))
    result.stdout.fnmatch_lines(["BROKEN   alpha  results/quiz.json, score: stored score 90% disagrees with 60% "
                                 "recomputed from its evidence",
                                 "gate: FAILED (0/2 items done; not done: alpha (broken), beta (blocked)"
                                 f"{unshipped()})"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_result_older_than_its_key_is_stale(quiz):
    pytester = quiz(["a", "b", "c", "d", "b"], 80)
    (pytester.path / "key.json").write_text(json.dumps(["a", "b", "c", "d", "b"]))
    result = gate_run(pytester)
    result.stdout.fnmatch_lines(["STALE    alpha  key.json changed since results/quiz.json was produced (recorded "
                                 "sha256:*, now sha256:*)", "*-> make quiz", "*rerun: pytest --dod alpha",
                                 "BLOCKED  beta   blocked by alpha (stale)*",
                                 "gate: FAILED (0/2 items done; not done: alpha (stale), beta (blocked)"
                                 f"{unshipped()})"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
