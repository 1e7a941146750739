"""The reading-notes-cited DoD check: done, broken (every failure listed), pending (no note / not installed)."""

from __future__ import annotations

import functools
import importlib.metadata
import shutil
from pathlib import Path

import pytest
from dod_support import git_commit_all

from pytest_distcheck.citations.decision import PLACEHOLDER
from pytest_distcheck.citations.report import SUMMARY, UNSEEN, citations, cited_statements
from pytest_distcheck.citations.syntax import UNCLOSED_COMMENT
from pytest_distcheck.citations.verdict import (
    COUNT_OF,
    DO_NOT_RESOLVE,
    ENOUGH,
    HAS_OF,
    NO_NOTE_YET,
    NOT_INSTALLED,
    TOO_FEW,
)
from pytest_distcheck.citations.verifier import CHECKED_OTHER, KINDS, NO_DECISION, RECORD_HINT, UNKNOWN_PACKAGE
from pytest_distcheck.committed import EVIDENCE_MESSAGE, NOT_COMMITTED

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "checks" / "test_reading_notes_cited.py"
NOTES = REPO / "fixtures" / "notes"


@pytest.fixture
def notes_workspace(pytester, monkeypatch):
    """Run the check in a pytester folder whose workspace lists the given notes (copied to docs/)."""
    monkeypatch.syspath_prepend(str(NOTES / "site"))
    pytester.mkdir("checks")
    pytester.mkdir("docs")
    # Another basename: the real check may already be imported in this session under its own name.
    shutil.copy(CHECK, pytester.path / "checks" / "test_notes_check_under_test.py")

    def run(notes: dict[str, Path | None], minimum: int = 5, extra: str = "", commit: bool = True):
        for name, source in notes.items():
            if source is not None:
                shutil.copy(source, pytester.path / "docs" / name)
        paths = [f"docs/{name}" for name in notes]
        (pytester.path / "checks" / "distcheck.toml").write_text(
            "[phase]\nid = 't'\ntitle = 't'\n"
            "[[items]]\nid = 'reading-notes-cited'\ntitle = 'notes'\nhow = 'write the notes'\n"
            f"[notes]\npaths = {paths!r}\nmin_cited_decisions = {minimum}\n"
            "install = \"pip install -e '.[notes]'\"\n" + extra
        )
        if commit:
            git_commit_all(pytester.path)
        return pytester.runpytest("-p", "no:cacheprovider", "checks")

    return run


def test_notes_with_enough_resolved_citations_are_done(notes_workspace):
    result = notes_workspace({"a.md": NOTES / "good.md"})
    result.stdout.fnmatch_lines([
        "*docs/a.md: " + SUMMARY.format(statements=cited_statements(5), citations=citations(5), ok=5, uncounted=0,
                                        failed=0) + "*",
        "DONE     reading-notes-cited  evidence checked, confirmed: every citation resolved in the installed sources",
    ])
    assert result.ret == 0


def test_hidden_and_filler_notes_are_not_done(notes_workspace):
    # Issue 19: 5 + 5 statements in HTML comments or after eight filler words made the item DONE.
    # Every citation resolves, so the notes are in progress (pending), and the table says why none counted.
    result = notes_workspace({"a.md": NOTES / "all-hidden.md", "b.md": NOTES / "filler.md"})
    result.stdout.fnmatch_lines([
        "PENDING  reading-notes-cited  " + HAS_OF.format(label="docs/a.md", n=0, minimum=5) + "; "
        + COUNT_OF.format(label="docs/b.md", n=0, minimum=5),
    ])
    out = result.stdout.str()
    assert "DONE " not in out
    assert UNSEEN.format(label="docs/a.md", n=6) in out
    assert "docs/b.md:4 [cite: toyparallel" in out
    reason = NO_DECISION.format(kind=KINDS["list item"], line=3, problem=PLACEHOLDER.format(word="Lorem"))
    assert ": not counted: " + reason in out


def test_an_unclosed_html_comment_is_named_with_its_line_in_the_dod_row(notes_workspace, tmp_path):
    lines = (NOTES / "good.md").read_text().split("\n")
    lines.insert(11, "<!-- draft: rewrite below")  # becomes line 12, above two of the five citations
    (tmp_path / "a.md").write_text("\n".join(lines))
    result = notes_workspace({"a.md": tmp_path / "a.md"})
    result.stdout.fnmatch_lines([
        "BROKEN   reading-notes-cited  " + TOO_FEW.format(label="docs/a.md", statements=cited_statements(3), minimum=5)
        + "; " + DO_NOT_RESOLVE.format(n=1),
    ])
    assert "docs/a.md:12 <!-- draft: rewrite below: " + UNCLOSED_COMMENT.format(citations=citations(3)) in (
        result.stdout.str())


def test_four_good_and_many_bad_is_broken_and_lists_every_failure(notes_workspace):
    result = notes_workspace({"a.md": NOTES / "good.md", "b.md": NOTES / "four-good-many-bad.md"})
    result.stdout.fnmatch_lines([
        "BROKEN   reading-notes-cited  " + TOO_FEW.format(label="docs/b.md", statements=cited_statements(4), minimum=5)
        + "; " + DO_NOT_RESOLVE.format(n=7),
    ])
    out = result.stdout.str()
    for line in (15, 17, 19, 21, 23, 25, 27):
        assert f"docs/b.md:{line} [cite: toyparallel" in out
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_missing_note_is_pending_with_what_to_write(notes_workspace):
    result = notes_workspace({"a.md": NOTES / "good.md", "fsdp.md": None})
    result.stdout.fnmatch_lines([
        "PENDING  reading-notes-cited  " + COUNT_OF.format(label="docs/a.md", n=5, minimum=5) + ENOUGH + "; "
        + NO_NOTE_YET.format(label="docs/fsdp.md", minimum=5),
        "*-> distcheck cite",
    ])
    assert result.ret == 0


def test_a_missing_note_next_to_a_template_is_pending_with_the_copy_of_the_template(notes_workspace, pytester):
    (pytester.path / "docs" / "notes").mkdir()
    (pytester.path / "docs" / "notes" / "TEMPLATE.md").write_text("# template\n")
    result = notes_workspace({"a.md": NOTES / "good.md", "notes/fsdp.md": None})
    result.stdout.fnmatch_lines(["*-> cp docs/notes/TEMPLATE.md docs/notes/fsdp.md"])
    assert result.ret == 0


def test_notes_that_are_right_but_not_committed_are_pending_with_the_git_command(notes_workspace, pytester):
    # The gate judges the commit, where uncommitted notes are absent: done here would be "no note yet" there.
    git_commit_all(pytester.path)  # a repository whose commit lacks the notes
    result = notes_workspace({"a.md": NOTES / "good.md", "b.md": NOTES / "good.md"}, commit=False)
    result.stdout.fnmatch_lines([
        "PENDING  reading-notes-cited  " + NOT_COMMITTED.format(path="docs/a.md") + "; "
        + NOT_COMMITTED.format(path="docs/b.md"),
        f'*-> git add docs/a.md docs/b.md && git commit -m "{EVIDENCE_MESSAGE}" -- docs/a.md docs/b.md',
    ])
    assert "DONE " not in result.stdout.str()


def test_a_cited_package_that_is_not_installed_is_pending_with_the_install_command(notes_workspace):
    result = notes_workspace({"a.md": NOTES / "good.md", "b.md": NOTES / "not-installed.md"})
    result.stdout.fnmatch_lines([
        "PENDING  reading-notes-cited  " + NOT_INSTALLED.format(packages="absent-dist"),
        "*-> pip install -e '.[[]notes]'",
    ])
    assert result.ret == 0


def test_a_wrong_package_name_is_broken_and_listed_with_the_other_failures(notes_workspace):
    result = notes_workspace(
        {"a.md": NOTES / "good.md", "b.md": NOTES / "wrong-package-name.md"}, minimum=2,
        extra="packages = ['toyparallel', 'otherpkg']\n",
    )
    result.stdout.fnmatch_lines([
        "BROKEN   reading-notes-cited  " + DO_NOT_RESOLVE.format(n=5),
    ])
    out = result.stdout.str()
    assert "docs/b.md:8 [cite: toyparalel toyparallel/layers.py::divide" in out
    assert UNKNOWN_PACKAGE.format(package="toyparalel", packages="toyparallel, otherpkg") in out
    for line in (10, 12, 14, 16):
        assert f"docs/b.md:{line} [cite: toyparallel" in out
    assert "PENDING" not in out and "pip install" not in out
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_version_drift_is_done_with_a_warning(notes_workspace):
    result = notes_workspace({"a.md": NOTES / "version-drift.md"}, minimum=1)
    result.stdout.fnmatch_lines([
        "*UserWarning: " + CHECKED_OTHER.format(note="docs/a.md", name="toyparallel", want="1.1.0", version="1.2.0",
                                                record=RECORD_HINT.format(note="docs/a.md")),
        "DONE     reading-notes-cited  evidence checked, confirmed: every citation resolved in the installed sources",
    ])


def test_a_bad_notes_section_is_an_error_naming_the_field(notes_workspace):
    result = notes_workspace({"a.md": NOTES / "good.md"}, minimum=0)
    result.stdout.fnmatch_lines(["ERROR*reading-notes-cited*notes.min_cited_decisions: must be a whole number >= 1*"])


def test_the_committed_notes_are_done_with_at_least_eight_statements_each(pytester):
    try:
        importlib.metadata.distribution("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("megatron-core is not installed (pip install -e '.[notes]')")
    from pytest_distcheck.citations.verifier import verify_note

    for name in ("megatron.md", "fsdp.md"):
        report = verify_note(REPO / "solutions" / "docs" / "notes" / name)
        assert report.ok, [r.reason for r in report.failures]
        assert report.cited_statements >= 8 and report.warnings == []


@functools.cache
def _verified_reference_note(note: str):
    """The verifier's report on a reference note, once per worker (the six pins below share two notes)."""
    from pytest_distcheck.citations.verifier import verify_note

    return verify_note(REPO / "solutions" / "docs" / "notes" / note)


@pytest.mark.parametrize(
    ("note", "symbol", "quote"),
    [
        # Megatron tracks three RNG state sets in 0.16.1: data-, tensor- and expert-parallel.
        ("megatron.md", "model_parallel_cuda_manual_seed", "Three set of RNG states are tracked:"),
        ("megatron.md", "model_parallel_cuda_manual_seed", "expert_parallel_seed = seed + 1024"),
        # The in-place edits reach the caller's logits only when .float() returns them (fp32).
        ("megatron.md", "VocabParallelCrossEntropy.calculate_logits_max", "= vocab_parallel_logits.float()"),
        # FSDP1 divides before and after whatever the dtype; choosing by overflow risk is FSDP2's.
        ("fsdp.md", "_reduce_grad", "state._gradient_predivide_factor"),
        ("fsdp.md", "_init_process_group_state", "data_parallel_world_size / state._gradient_predivide_factor"),
        ("fsdp.md", "_get_gradient_divide_factors", "overflow_risk = reduce_dtype not in"),
    ],
)
def test_the_corrected_claims_of_the_reference_notes_are_pinned(note, symbol, quote):
    pytest.importorskip("torch")
    try:
        importlib.metadata.distribution("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("megatron-core is not installed (pip install -e '.[notes]')")
    from pytest_distcheck.citations.verifier import Status

    report = _verified_reference_note(note)
    counted = [
        r for r in report.results
        if r.status is Status.COUNTED and r.citation.symbol == symbol and quote in (r.citation.quote or "")
    ]
    assert counted, f"{note}: no counted citation of {symbol} quoting {quote!r}"


def test_the_wrong_claims_are_gone_from_the_reference_notes():
    megatron = (REPO / "solutions" / "docs" / "notes" / "megatron.md").read_text()
    fsdp = (REPO / "solutions" / "docs" / "notes" / "fsdp.md").read_text()
    assert "two CUDA RNG streams" not in megatron and "three sets of CUDA RNG states" in megatron
    assert "only then do the in-place edits reach the caller's logits" in megatron
    assert "FSDP1 always splits the division" in fsdp and "dividing before and after the sum when" not in fsdp
