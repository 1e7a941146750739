"""The DoD reports: terminal colour (and none with --color=no), --dod-json against its shipped schema,
--dod-markdown for a CI job summary (pytester)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from dod_support import gate_run, unshipped, write_checks

from pytest_distcheck.copies import IS_REFERENCE
from pytest_distcheck.dod.markdown import NOTED as MD_NOTED
from pytest_distcheck.dod.state import COPIED
from pytest_distcheck.dod.table import NOTED
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import _
from pytest_distcheck.schemas import load_schema, validate


def run(pytester, alpha="pass", beta="pass", *args):
    write_checks(pytester, alpha, beta)
    return pytester.runpytest("-p", "no:cacheprovider", "--dod-json", "out/dod.json",
                              "--dod-markdown", "out/summary.md", *args)


def gated(pytester, alpha="pass", beta="pass", *args):
    write_checks(pytester, alpha, beta)
    return gate_run(pytester, *args, report="out/dod.json", markdown="out/summary.md")


def load(pytester):
    doc = json.loads((pytester.path / "out" / "dod.json").read_text())
    jsonschema.Draft202012Validator(load_schema("dod-report.schema.json")).validate(doc)
    return doc


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(load_schema("dod-report.schema.json"))


def test_json_report_of_a_gate_with_every_item_done(workspace_dir):
    result = gated(workspace_dir, "pass", "pass")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # phase t1 ships no DoD with the kit: unverified
    doc = load(workspace_dir)
    commit = doc["run"]["git_commit"]
    assert doc["gate"] == {"requested": True, "passed": False, "verdict": "unverified", "failing": [],
                           "flagged": [], "noted": [], "commit": commit} and len(commit) == 40
    assert doc["workspace"]["root"] == str(workspace_dir.path)  # the folder whose commit was judged
    assert doc["summary"]["done"] == doc["summary"]["ran"] == doc["summary"]["total"] == 2
    assert doc["phase"] == {"id": "t1", "title": "test phase"}
    assert doc["workspace"]["path"] == "checks/distcheck.toml"
    assert doc["run"]["command"] == "distcheck gate"
    assert [f["path"] for f in doc["check_files"]] == ["checks/test_checks.py"]
    alpha = doc["items"][0]
    assert alpha["state"] == "done" and alpha["ran"] is True and alpha["rerun"] == "pytest --dod alpha"
    assert alpha["checks"] == [{"nodeid": "checks/test_checks.py::test_alpha", "state": "done",
                                "reason": "evidence checked", "command": None}]


def test_json_report_names_every_failing_item_and_its_commands(workspace_dir):
    result = gated(workspace_dir, "pytest_distcheck.pending('no log | yet', 'run the lab')", "pass", "-k", "alpha")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = load(workspace_dir)
    assert doc["gate"]["verdict"] == "failed" and doc["gate"]["failing"] == ["alpha", "beta"]
    alpha, beta = doc["items"]
    assert (alpha["state"], alpha["reason"], alpha["command"], alpha["ran"]) == (
        "pending", "no log | yet", "run the lab", True)
    # beta's check was not selected: nothing was asked of it, so it is not run (not blocked)
    assert (beta["state"], beta["ran"], beta["blocked_by"]) == ("not-run", False, ["alpha"])
    assert beta["reason"] == "deselected (-k 'alpha')"
    assert beta["checks"] == [{"nodeid": "checks/test_checks.py::test_beta", "state": "not-run",
                               "reason": "deselected (-k 'alpha')", "command": None}]
    assert doc["summary"]["by_state"]["not-run"] == 1 and doc["summary"]["ran"] == 1


def test_shipped_validator_rejects_a_report_with_an_unknown_state(workspace_dir):
    run(workspace_dir)
    doc = load(workspace_dir)
    doc["items"][0]["state"] = "fine"
    with pytest.raises(ConfigError, match=r"dod.json, items\[0\]\.state: 'fine' is not one of"):
        validate(doc, "dod-report.schema.json", "dod.json")


def test_markdown_summary(workspace_dir):
    result = gated(workspace_dir, "pytest_distcheck.broken('spend $5.20 | $5.00')", "pass")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    md = (workspace_dir.path / "out" / "summary.md").read_text()
    lines = md.splitlines()
    assert lines[0] == "## Definition of Done: phase t1"
    assert ("**Gate FAILED**: 0/2 items done, 2/2 checked in this run; not done: alpha (broken), beta (blocked)."
            in lines)
    assert "| ❌ | `alpha`<br>first deliverable | broken | spend $5.20 \\| $5.00 |" in lines
    assert "| ⛔ | `beta`<br>second deliverable | blocked | blocked by alpha (broken) |" in lines
    assert "- **alpha** (broken): spend $5.20 \\| $5.00" in lines
    assert "  - produce the evidence: `make alpha`" not in lines  # broken: fix what the reason says
    assert "  - check just this item again: `pytest --dod alpha`" in lines
    # the words before a blocked item's command are not code: what is pasted is the command alone
    assert "  - produce the evidence: first fix alpha (broken), then: `pytest --dod alpha`" in lines
    assert "<details><summary>Run details</summary>" in lines


def test_markdown_of_an_ungated_run_does_not_claim_a_gate(workspace_dir):
    run(workspace_dir, "pass", "pass", "-k", "alpha")
    md = (workspace_dir.path / "out" / "summary.md").read_text()
    assert "**Not gated** (run with `--gate` to require every item): 1/2 items done, 1/2 checked in this run." in md
    assert "| ⬜ | `beta`<br>second deliverable | not-run | deselected (-k 'alpha') |" in md


def test_reports_are_written_by_the_xdist_controller(workspace_dir):
    run(workspace_dir, "pass", "pytest_distcheck.stale('older than model.py', 'rerun lab')", "-n", "2")
    doc = load(workspace_dir)
    assert [(i["id"], i["state"]) for i in doc["items"]] == [("alpha", "done"), ("beta", "stale")]


def test_a_report_that_cannot_be_written_fails_the_run(workspace_dir):
    (workspace_dir.path / "out").write_text("a file, not a folder")
    result = run(workspace_dir)
    result.stdout.fnmatch_lines(["distcheck: cannot write out/dod.json: *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_colour_only_when_asked(workspace_dir):
    result = run(workspace_dir, "pytest_distcheck.broken('bad')", "pass", "--color=yes")
    assert "\x1b[31m\x1b[1mBROKEN " in result.stdout.str()
    result = run(workspace_dir, "pytest_distcheck.broken('bad')", "pass", "--color=no")
    assert "\x1b[" not in result.stdout.str()
    result.stdout.fnmatch_lines(["BROKEN   alpha  bad"])


def test_the_gate_passes_only_with_every_item_done_and_none_flagged_on_the_shipped_dod():
    from pytest_distcheck.dod.report import flagged, gate_verdict, noted
    from pytest_distcheck.dod.state import CheckOutcome, ItemResult, State

    done = [ItemResult("a", "A", State.DONE, "evidence checked", "make a")]
    pending = [*done, ItemResult("b", "B", State.PENDING, "no log", "make b")]
    assert gate_verdict(done, {"trusted": True}) == "passed"
    assert gate_verdict(done, {"trusted": False}) == "failed"
    assert gate_verdict(done, None) == "unverified"  # red-team R6: a phase the kit ships no DoD for
    assert gate_verdict(pending, {"trusted": True}) == gate_verdict(pending, None) == "failed"
    assert gate_verdict([], {"trusted": True}) == "failed"
    fast = [ItemResult("a", "A", State.DONE, "evidence checked", "make a",
                       outcomes=(CheckOutcome("a", "n", State.DONE, "ok", flags=("self-reported", "fast-quiz")),))]
    # An honest learner can be fast: the gate shows it to a grader and passes.
    assert flagged(fast) == [] and noted(fast) == ["a (fast-quiz)"]
    assert gate_verdict(fast, {"trusted": True}) == "passed"
    copied = [ItemResult("a", "A", State.DONE, "evidence checked", "make a",
                         outcomes=(CheckOutcome("a", "n", State.DONE, "ok", flags=("self-reported", "copied")),))]
    assert flagged(copied) == ["a (copied)"] and noted(copied) == []
    assert gate_verdict(copied, {"trusted": True}) == "failed"
    # An item that is not done says so in its state; "noted, not a failure" would contradict it.
    untrusted = [ItemResult("a", "A", State.UNTRUSTED, "edited check", "make a", outcomes=fast[0].outcomes)]
    assert noted(untrusted) == []


def test_a_note_for_a_grader_is_in_the_gate_line_the_report_and_the_summary(workspace_dir):
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest
        @pytest.mark.dod("alpha")
        def test_alpha(distcheck_evidence):
            distcheck_evidence(flags=["self-reported", "fast-quiz"])
        @pytest.mark.dod("beta")
        def test_beta():
            pass
        """})
    result = gate_run(workspace_dir, report="out/dod.json", markdown="out/summary.md")
    result.stdout.fnmatch_lines(["gate: UNVERIFIED (2/2 items done" + _(NOTED).format(items="alpha (fast-quiz)") + "*"])
    doc = load(workspace_dir)
    assert doc["gate"]["noted"] == ["alpha (fast-quiz)"] and doc["gate"]["flagged"] == []
    assert _(MD_NOTED).format(noted="alpha (fast-quiz)") in (workspace_dir.path / "out" / "summary.md").read_text()


def test_a_failed_gate_names_what_is_not_done_before_what_is_noted(workspace_dir):
    """The verdict line names the item that fails the gate, not only the one noted for the grader; so does the
    Markdown headline."""
    from pytest_distcheck.dod.markdown import GATE_VERDICT
    from pytest_distcheck.dod.markdown import NOT_DONE as MD_NOT_DONE
    from pytest_distcheck.dod.table import GATE_LINE, NOT_DONE

    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest, pytest_distcheck
        @pytest.mark.dod("alpha")
        def test_alpha(distcheck_evidence):
            distcheck_evidence(flags=["self-reported", "fast-quiz"])
        @pytest.mark.dod("beta")
        def test_beta():
            pytest_distcheck.pending("no speedup yet", "make beta")
        """})
    result = gate_run(workspace_dir, report="out/dod.json", markdown="out/summary.md")
    line = ("gate: FAILED (1/2 items done; not done: beta (pending); noted for the grader, not a failure: "
            f"alpha (fast-quiz){unshipped()})")
    assert line == GATE_LINE.format(verdict="FAILED", summary="1/2 items done" + NOT_DONE.format(items="beta (pending)")
                                    + NOTED.format(items="alpha (fast-quiz)") + unshipped())
    result.stdout.fnmatch_lines([line])
    md = (workspace_dir.path / "out" / "summary.md").read_text().splitlines()
    assert GATE_VERDICT.format(verdict="FAILED", counts="1/2 items done, 2/2 checked in this run"
                               + MD_NOT_DONE.format(items="beta (pending)")) in md


def test_the_report_carries_each_items_evidence_and_flags(workspace_dir):
    """R7: a grader re-verifies from the report alone; R3: a copy of a reference solution is untrusted."""
    import hashlib
    import shutil
    from pathlib import Path

    (workspace_dir.path / "results.txt").write_text("42\n")
    shutil.copy(Path(__file__).resolve().parents[1] / "solutions/experiments/ddp_cpu/results/allreduce-cpu.png",
                workspace_dir.path / "plot.png")
    workspace_dir.makepyfile(**{"checks/test_checks": """
        import pytest, pytest_distcheck
        @pytest.mark.dod("alpha")
        def test_alpha(distcheck_evidence):
            distcheck_evidence("results.txt", "missing.txt", flags=["self-reported"])
            distcheck_evidence(flags=["fast-quiz"])
        @pytest.mark.dod("beta")
        def test_beta(distcheck_evidence):
            distcheck_evidence("plot.png", flags=["confirmed"])
        """})
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--dod-json", "out/dod.json")
    copied = IS_REFERENCE.format(ref="solutions/experiments/ddp_cpu/results/allreduce-cpu.png", how="byte for byte")
    result.stdout.fnmatch_lines([f"UNTRUSTED  beta   {COPIED.partition('{files}')[0]}plot.png: {copied}*"])
    alpha, beta = load(workspace_dir)["items"]
    assert alpha["state"] == "done" and alpha["flags"] == ["self-reported", "fast-quiz"]
    assert alpha["evidence"] == [{"path": "results.txt", "sha256": "sha256:" + hashlib.sha256(b"42\n").hexdigest(),
                                  "copied": None}]
    assert beta["state"] == "untrusted" and beta["flags"] == ["copied"]  # a copy is not confirmed by its check
    assert beta["evidence"][0]["copied"] == copied


def test_the_markdown_summary_speaks_the_kits_language(workspace_dir):
    from pytest_distcheck import i18n
    from pytest_distcheck.dod.markdown import COUNTS, HEADING, NOT_GATED, RECHECK, RUN_DETAILS, TABLE_HEAD

    run(workspace_dir, "pass", "pass", "-k", "alpha", "--lang", "es")
    md = (workspace_dir.path / "out" / "summary.md").read_text()
    try:
        i18n.use("es")
        assert md.splitlines()[0] == _(HEADING).format(phase="t1") == "## Definition of Done: fase t1"
        counts = _(COUNTS).format(done=1, total=2, ran=1)
        assert _(NOT_GATED).format(counts=counts) in md and "**Sin gate**" in md
        assert _(TABLE_HEAD) in md and f"<summary>{_(RUN_DETAILS)}</summary>" in md
        assert _(RECHECK).format(command="`pytest --dod beta`") in md
        assert "| not-run |" in md  # states are identifiers, in every language
    finally:
        i18n.use(i18n.DEFAULT)


GITHUB = {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "learner/course-work", "GITHUB_RUN_ID": "42",
          "GITHUB_SERVER_URL": "https://github.com", "GITHUB_SHA": "a" * 40, "GITHUB_REF": "refs/heads/main"}


def test_the_report_names_the_kit_that_judged_the_packages_and_the_ci_run(workspace_dir, monkeypatch):
    """A grader tells which kit judged the commit (every kit commit says distcheck 0.1.0), against which torch and
    megatron-core, in which CI run; the summary names the kit and the run in one line."""
    import importlib.metadata

    from pytest_distcheck.dod import report
    from pytest_distcheck.dod.markdown import CI_RUN, KIT

    for name, value in GITHUB.items():
        monkeypatch.setenv(name, value)
    source = {"url": "https://github.com/COURSE-ORG/pytest-distcheck", "commit": "c" * 40, "requested": "v0.1.0",
              "editable": False}
    monkeypatch.setattr(report, "kit_source", lambda: source)
    gated(workspace_dir)
    run = load(workspace_dir)["run"]
    url = "https://github.com/learner/course-work/actions/runs/42"
    assert run["ci"] == {"repository": "learner/course-work", "run_id": "42", "server_url": "https://github.com",
                         "sha": "a" * 40, "ref": "refs/heads/main", "run_url": url}
    assert run["kit_source"] == source
    for name in ("torch", "megatron-core"):
        try:
            assert run["packages"][name] == importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            assert run["packages"][name] is None
    md = (workspace_dir.path / "out" / "summary.md").read_text().splitlines()
    assert KIT.format(source=f"`{source['url']}@{source['commit']}`") + CI_RUN.format(url=url) in md
    # Outside CI, and with no install record (run from a source folder): no run, the folder the kit ran from.
    for name in GITHUB:
        monkeypatch.delenv(name)
    monkeypatch.setattr(report, "kit_source", lambda: None)
    gated(workspace_dir)
    run = load(workspace_dir)["run"]
    assert run["ci"] is None and run["kit_source"] is None
    md = (workspace_dir.path / "out" / "summary.md").read_text().splitlines()
    assert KIT.format(source=f"`{run['kit_location']}`") in md


def test_the_ci_run_is_read_from_githubs_variables_only_in_ci():
    from pytest_distcheck.dod.report import ci_run

    assert ci_run({"GITHUB_REPOSITORY": "a/b"}) is None  # not CI: a variable left in a shell says nothing
    assert ci_run({"CI": "true", "GITHUB_RUN_ID": "7"}) == {"repository": None, "run_id": "7", "server_url": None,
                                                            "sha": None, "ref": None, "run_url": None}
    assert ci_run({**GITHUB, "GITHUB_SERVER_URL": "https://ghe.example/"})["run_url"] == (
        "https://ghe.example/learner/course-work/actions/runs/42")


def _installed(tmp_path, direct_url, text=None):
    """A pytest-distcheck distribution installed in ``tmp_path/site`` with ``direct_url`` as its direct_url.json
    (``None``: none, as an install from an index has); the distribution and its package folder."""
    import importlib.metadata

    info = tmp_path / "site" / "pytest_distcheck-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-distcheck\nVersion: 0.1.0\n")
    if direct_url is not None or text is not None:
        (info / "direct_url.json").write_text(text if text is not None else json.dumps(direct_url))
    (tmp_path / "site" / "pytest_distcheck").mkdir()
    return importlib.metadata.PathDistribution(info), tmp_path / "site" / "pytest_distcheck"


@pytest.mark.parametrize("direct_url, expected", [
    ({"url": "https://github.com/COURSE-ORG/pytest-distcheck",
      "vcs_info": {"vcs": "git", "commit_id": "c" * 40, "requested_revision": "v0.1.0"}},
     {"url": "https://github.com/COURSE-ORG/pytest-distcheck", "commit": "c" * 40, "requested": "v0.1.0",
      "editable": False}),
    # credentials never reach the report (a deploy token in the url); git@ is a user name, not a secret
    ({"url": "https://x-token:s3cret@github.com/o/kit", "vcs_info": {"vcs": "git", "commit_id": "c" * 40}},
     {"url": "https://github.com/o/kit", "commit": "c" * 40, "requested": None, "editable": False}),
    ({"url": "ssh://git@github.com/o/kit", "vcs_info": {"vcs": "git", "commit_id": "c" * 40}},
     {"url": "ssh://git@github.com/o/kit", "commit": "c" * 40, "requested": None, "editable": False}),
    ({"url": "file:///wheels/pytest_distcheck-0.1.0-py3-none-any.whl", "archive_info": {}},
     {"url": "file:///wheels/pytest_distcheck-0.1.0-py3-none-any.whl", "commit": None, "requested": None,
      "editable": False}),
    (None, None),
])
def test_the_kit_source_is_the_install_record_of_the_kit_that_runs(tmp_path, direct_url, expected):
    from pytest_distcheck.dod.report import kit_source

    dist, kit = _installed(tmp_path, direct_url)
    assert kit_source(dist, kit) == expected
    # The record of another copy of the kit (one on PYTHONPATH runs instead) says nothing of the one that ran.
    (tmp_path / "src" / "pytest_distcheck").mkdir(parents=True)
    assert kit_source(dist, tmp_path / "src" / "pytest_distcheck") is None


def test_an_editable_kit_source_is_the_folder_the_kit_runs_from(tmp_path):
    from pytest_distcheck.dod.markdown import KIT_EDITABLE, _kit
    from pytest_distcheck.dod.report import kit_source

    clone = tmp_path / "clone"
    (clone / "pytest_distcheck").mkdir(parents=True)
    dist, _site = _installed(tmp_path, {"url": clone.as_uri(), "dir_info": {"editable": True}})
    source = kit_source(dist, clone / "pytest_distcheck")
    assert source == {"url": clone.as_uri(), "commit": None, "requested": None, "editable": True}
    assert _kit({"kit_source": source}) == KIT_EDITABLE.format(url=f"`{clone.as_uri()}`")
    (tmp_path / "other" / "pytest_distcheck").mkdir(parents=True)
    assert kit_source(dist, tmp_path / "other" / "pytest_distcheck") is None
    dist, kit = _installed(tmp_path / "bad", None, text="{not json")
    assert kit_source(dist, kit) is None
