"""Verifying whole notes: each bad note under fixtures/notes gives its precise reason; counting; versions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_distcheck.citations.decision import too_few_words
from pytest_distcheck.citations.record import record_versions
from pytest_distcheck.citations.report import (
    NO_VERSIONS,
    NOTE_HEADER,
    RESOLVED,
    SUMMARY,
    citations,
    cited_statements,
    failure_lines,
    note_lines,
    summary,
)
from pytest_distcheck.citations.syntax import EXPECTED, FORM, NEVER_CLOSED, NO_PATH_SYMBOL, NO_SYMBOL
from pytest_distcheck.citations.verdict import (
    DO_NOT_RESOLVE,
    NOT_INSTALLED,
    OTHERS_FAIL,
    TOO_FEW,
    VERSION_DRIFT,
    notes_verdict,
)
from pytest_distcheck.citations.verifier import (
    CHECKED_OTHER,
    DUPLICATE,
    KINDS,
    NO_DECISION,
    NO_FRONT_MATTER,
    QUOTE_LENGTH,
    RECORD_HINT,
    UNKNOWN_PACKAGE,
    Status,
    verify_note,
)
from pytest_distcheck.errors import ConfigError, DistcheckError

REPO = Path(__file__).resolve().parents[1]
NOTES = REPO / "fixtures" / "notes"


@pytest.fixture(autouse=True)
def toy_site(monkeypatch):
    monkeypatch.syspath_prepend(str(NOTES / "site"))


def verify(name: str):
    return verify_note(NOTES / name, label=f"notes/{name}")


def only(report, status=Status.FAILED):
    (res,) = [r for r in report.results if r.status is status]
    return res


def test_the_good_note_counts_five_statements_and_no_warning():
    rep = verify("good.md")
    assert [r.status for r in rep.results] == [Status.COUNTED] * 5
    assert rep.cited_statements == 5 and rep.ok and rep.warnings == []
    assert rep.results[0].span.name == "ColumnLinear.forward" and rep.results[0].version == "1.2.0"


@pytest.mark.parametrize(
    ("note", "line", "code", "reason"),
    [
        ("wrong-path.md", 4, "not-in-package",
         "toyparallel/layer.py is not a file of toyparallel 1.2.0; did you mean toyparallel/layers.py?"),
        ("missing-symbol.md", 4, "symbol-not-found",
         "ColumnLinear.fwd is not defined in toyparallel/layers.py; did you mean ColumnLinear.forward"),
        ("wrong-symbol.md", 4, "quote-not-in-symbol",
         "quote not in ColumnLinear.forward (lines 32-34); it is in RowLinear.forward (lines 48-50)"),
        ("typo-quote.md", 4, "quote-not-in-symbol",
         "quote not in ColumnLinear.forward (lines 32-34); nearest at line 33: "
         "'no communication in forward: each rank owns a column slice'"),
        ("other-package.md", 4, "other-package", "otherpkg/helpers.py belongs to otherpkg 0.3.0, not to toyparallel"),
        ("not-installed.md", 4, "not-installed", "distribution 'absent-dist' is not installed"),
    ],
)
def test_each_bad_note_gives_the_precise_reason(note, line, code, reason):
    rep = verify(note)
    res = only(rep)
    assert (res.citation.line, res.code) == (line, code)
    assert reason in res.reason
    assert rep.cited_statements == 0
    # The line a person reads names note, line, citation and reason.
    (text,) = failure_lines(rep)
    assert text.startswith(f"notes/{note}:{line} [cite: ") and reason in text


def test_a_path_escaping_the_package_and_an_absolute_path_both_fail():
    rep = verify("escapes-package.md")
    assert [(r.citation.line, r.code) for r in rep.results] == [(4, "escapes-package"), (6, "absolute-path")]


def test_duplicates_are_counted_once_even_with_other_whitespace():
    rep = verify("duplicates.md")
    assert [r.status for r in rep.results] == [Status.COUNTED, Status.UNCOUNTED, Status.UNCOUNTED]
    assert [r.reason for r in rep.results[1:]] == [
        DUPLICATE.format(earlier=4, path="toyparallel/layers.py", symbol="RowLinear.forward", line=50)
    ] * 2
    assert rep.cited_statements == 1 and rep.ok


def test_citations_that_state_no_decision_do_not_count():
    rep = verify("no-decision.md")
    got = [(r.citation.line, r.status, r.code) for r in rep.results]
    assert got == [
        (3, Status.UNCOUNTED, "no-decision"),  # in a heading
        (5, Status.UNCOUNTED, "no-decision"),  # "- See [cite: ...]."
        (6, Status.UNCOUNTED, "no-quote"),
        (9, Status.FAILED, "quote-too-short"),
    ]
    assert too_few_words(1) == "1 word besides citations, at least 8"
    assert rep.results[1].reason == NO_DECISION.format(kind=KINDS["list item"], line=5, problem=too_few_words(1))
    assert rep.cited_statements == 0


def test_malformed_citations_fail_with_their_line():
    rep = verify("malformed.md")
    assert [(m.line, m.problem) for m in rep.malformed] == [
        (line, EXPECTED.format(problem=problem, form=FORM))
        for line, problem in ((4, NO_PATH_SYMBOL), (6, NO_SYMBOL), (8, NEVER_CLOSED))
    ]
    assert not rep.ok


def test_four_good_and_many_bad_is_broken_listing_every_failure():
    rep = verify("four-good-many-bad.md")
    assert rep.cited_statements == 4
    verdict = notes_verdict([rep], minimum=5)
    assert verdict.state == "broken"
    first, *rest = verdict.reason.splitlines()
    assert first == (TOO_FEW.format(label="notes/four-good-many-bad.md", statements=cited_statements(4), minimum=5)
                     + "; " + DO_NOT_RESOLVE.format(n=7))
    assert [line.split(" [cite:")[0] for line in rest[:-1]] == [
        f"notes/four-good-many-bad.md:{n}" for n in (15, 17, 19, 21, 23, 25, 27)
    ]
    assert "escapes the package" in rest[4] and "belongs to otherpkg 0.3.0" in rest[5]


def test_a_missing_package_makes_the_verdict_pending():
    verdict = notes_verdict([verify("good.md"), verify("not-installed.md")], minimum=5)
    assert verdict.state == "pending" and "absent-dist" in verdict.reason


def test_a_package_not_in_the_notes_packages_is_a_broken_citation_listed_with_the_others():
    rep = verify_note(NOTES / "wrong-package-name.md", label="n.md", packages=("toyparallel", "otherpkg"))
    failed = {r.citation.line: r for r in rep.failures}
    assert sorted(failed) == [8, 10, 12, 14, 16]
    assert failed[8].code == "unknown-package"
    assert failed[8].reason == UNKNOWN_PACKAGE.format(package="toyparalel", packages="toyparallel, otherpkg")
    verdict = notes_verdict([rep], minimum=2)
    assert verdict.state == "broken" and "pip install" not in verdict.reason
    assert verdict.reason.splitlines()[0] == DO_NOT_RESOLVE.format(n=5)
    assert [line.split(" [cite:")[0] for line in verdict.reason.splitlines()[1:-1]] == [
        f"n.md:{n}" for n in (8, 10, 12, 14, 16)
    ]


def test_package_names_compare_as_pip_does():
    rep = verify_note(NOTES / "good.md", packages=("ToyParallel",))
    assert rep.ok and rep.cited_statements == 5


def test_a_configured_package_not_installed_is_pending_and_still_lists_the_other_failures():
    packages = ("toyparallel", "absent-dist")
    reps = [
        verify_note(NOTES / name, label=name, packages=packages)
        for name in ("wrong-package-name.md", "not-installed.md")
    ]
    verdict = notes_verdict(reps, minimum=5)
    assert verdict.state == "pending"
    first, *rest = verdict.reason.splitlines()
    assert first == NOT_INSTALLED.format(packages="absent-dist") + OTHERS_FAIL.format(n=5)
    assert [line.split(" [cite:")[0] for line in rest] == [
        f"wrong-package-name.md:{n}" for n in (8, 10, 12, 14, 16)
    ]
    assert rest[0].endswith(UNKNOWN_PACKAGE.format(package="toyparalel", packages="toyparallel, absent-dist"))


def test_enough_good_citations_make_the_verdict_done():
    verdict = notes_verdict([verify("good.md")], minimum=5)
    report = verify("good.md")
    assert verdict.state == "done" and verdict.reason == f"{report.label}: {summary(report)}"
    assert summary(report).startswith(cited_statements(5) + "; ")
    assert notes_verdict([verify("good.md")], minimum=6).state == "pending"  # in progress, not wrong


def test_a_version_drift_warns_and_names_both_versions():
    rep = verify("version-drift.md")
    assert rep.ok
    (warning,) = rep.warnings
    assert warning == CHECKED_OTHER.format(note="notes/version-drift.md", name="toyparallel", want="1.1.0",
                                           version="1.2.0", record=RECORD_HINT.format(note="notes/version-drift.md"))


def test_no_front_matter_warns_that_nothing_is_recorded():
    (warning,) = verify("wrong-symbol.md").warnings
    assert warning == NO_FRONT_MATTER.format(note="notes/wrong-symbol.md",
                                             record=RECORD_HINT.format(note="notes/wrong-symbol.md"))


def test_record_writes_the_installed_versions_into_the_front_matter(tmp_path):
    for name in ("version-drift.md", "duplicates.md"):
        shutil.copy(NOTES / name, tmp_path / name)
        line = record_versions(verify_note(tmp_path / name))
        assert line == "checked-against: toyparallel 1.2.0"
        text = (tmp_path / name).read_text()
        assert text.startswith("---\nchecked-against: toyparallel 1.2.0\n---\n")
        assert text.count("checked-against") == 1
        assert verify_note(tmp_path / name).warnings == []


def test_record_refuses_a_note_whose_citations_fail(tmp_path):
    shutil.copy(NOTES / "wrong-path.md", tmp_path / "n.md")
    with pytest.raises(DistcheckError, match="1 citation"):
        record_versions(verify_note(tmp_path / "n.md"))
    assert "checked-against" not in (tmp_path / "n.md").read_text()


def test_an_unreadable_note_is_a_config_error(tmp_path):
    (tmp_path / "bin.md").write_bytes(b"\xff\xfe\x00")
    from pytest_distcheck.textfile import NOT_UTF8

    with pytest.raises(ConfigError, match=NOT_UTF8.split(":")[0]):
        verify_note(tmp_path / "bin.md")


def test_the_report_has_one_line_per_citation_and_a_count():
    lines = note_lines(verify("duplicates.md"))
    rep = verify("duplicates.md")
    assert lines[0] == NOTE_HEADER.format(label="notes/duplicates.md", versions=NO_VERSIONS)
    assert lines[1] == "  ok          " + RESOLVED.format(line=4, text=rep.results[0].citation.text,
                                                          symbol="RowLinear.forward", start=48, end=50)
    assert rep.results[0].citation.text.startswith("[cite: toyparallel")
    assert lines[-1] == "  " + SUMMARY.format(statements=cited_statements(1), citations=citations(3), ok=1,
                                              uncounted=2, failed=0)


def test_a_quote_over_100_characters_fails(tmp_path):
    quote = "x" * 101
    (tmp_path / "n.md").write_text(
        "A long quote pins nothing better than a short one, and it is hard to read in a note\n"
        f'`[cite: toyparallel toyparallel/layers.py::divide "{quote}"]`.\n'
    )
    res = only(verify_note(tmp_path / "n.md"))
    assert (res.code, res.reason) == ("quote-too-long", QUOTE_LENGTH.format(n=101, low=12, high=100))


def test_a_failing_note_checked_against_another_version_names_the_pinned_install(tmp_path):
    note = tmp_path / "drift.md"  # SYNTHETIC: version-drift.md plus a citation of a path that does not exist
    note.write_text((NOTES / "version-drift.md").read_text() + (NOTES / "wrong-path.md").read_text().split("\n", 1)[1])
    verdict = notes_verdict([verify_note(note, label="notes/drift.md")], minimum=1)
    assert verdict.state == "broken"
    first, second, *rest = verdict.reason.splitlines()
    assert second == VERSION_DRIFT.format(label="notes/drift.md", package="toyparallel", want="1.1.0", have="1.2.0")
    assert rest[0].startswith("notes/drift.md:") and "toyparallel/layer.py" in rest[0]
    good = notes_verdict([verify("good.md")], minimum=6).reason.splitlines()
    assert not [line for line in good if "checked against" in line]
