"""``distcheck cite``: statuses and exit codes, --find, --record, defaults from the workspace, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_distcheck.citations.quote import QUOTE_TO_FILL
from pytest_distcheck.citations.report import CHECKED_AGAINST, NOTE_HEADER, SUMMARY, citations, cited_statements
from pytest_distcheck.citations.verifier import QUOTE_NOT_FILLED, UNKNOWN_PACKAGE
from pytest_distcheck.cli import build_parser, main
from pytest_distcheck.commands.cite import (
    FIND_NEEDS_PACKAGE,
    FROM_TEMPLATE,
    GIVE_NOTES,
    INSTALL,
    NO_SUCH_NOTE,
    NO_WORKSPACE,
    NOT_DEFINED,
    NOT_RECORDED,
    RECORDED,
    TOO_FEW,
    WRITE_IT,
)
from pytest_distcheck.workspace import NOT_FOUND_HINT

REPO = Path(__file__).resolve().parents[1]
NOTES = REPO / "fixtures" / "notes"


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working folder (no workspace file) with the synthetic distributions importable."""
    monkeypatch.syspath_prepend(str(NOTES / "site"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cite(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["cite", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def write_workspace(folder: Path, paths: list[str], minimum: int = 5, packages=("toyparallel",)) -> None:
    (folder / "checks").mkdir()
    (folder / "checks" / "distcheck.toml").write_text(
        "[phase]\nid = 't'\ntitle = 't'\n"
        "[[items]]\nid = 'reading-notes-cited'\ntitle = 'notes'\nhow = 'write notes'\n"
        f"[notes]\npaths = {paths!r}\nmin_cited_decisions = {minimum}\n"
        f"packages = {list(packages)!r}\ninstall = 'pip install the-notes-extra'\n"
    )


def test_cite_is_a_subcommand():
    assert "cite" in build_parser().format_help()


def test_a_good_note_prints_each_citation_and_exits_0(here, capsys):
    rc, out, _ = cite(capsys, str(NOTES / "good.md"))
    assert rc == 0
    assert out.count("\n  ok          line ") == 5
    assert out.splitlines()[0] == NOTE_HEADER.format(label=NOTES / "good.md",
                                                     versions=CHECKED_AGAINST.format(versions="toyparallel 1.2.0"))
    assert out.rstrip().endswith(SUMMARY.format(statements=cited_statements(5), citations=citations(5), ok=5,
                                                uncounted=0, failed=0))


def test_a_failing_citation_exits_1_and_says_why(here, capsys):
    rc, out, _ = cite(capsys, str(NOTES / "wrong-symbol.md"))
    assert rc == 1
    assert "  FAILED      line 4  [cite: toyparallel toyparallel/layers.py::ColumnLinear.forward" in out
    assert "it is in RowLinear.forward (lines 48-50)" in out


def test_min_makes_too_few_statements_fail(here, capsys):
    rc, out, _ = cite(capsys, "--min", "6", str(NOTES / "good.md"))
    assert rc == 1 and TOO_FEW.format(statements=cited_statements(5), minimum=6) + "\n" in out


def test_files_and_minimum_default_to_the_workspace(here, capsys):
    (here / "docs").mkdir()
    shutil.copy(NOTES / "four-good-many-bad.md", here / "docs" / "a.md")
    write_workspace(here, ["docs/a.md"])
    rc, out, _ = cite(capsys)
    assert rc == 1
    assert out.startswith(NOTE_HEADER.format(label="docs/a.md", versions=CHECKED_AGAINST.format(
        versions="toyparallel 1.2.0")) + "\n")
    assert TOO_FEW.format(statements=cited_statements(4), minimum=5) + "\n" in out


def test_a_missing_package_shows_the_install_command_of_the_workspace(here, capsys):
    write_workspace(here, ["x.md"], packages=("toyparallel", "absent-dist"))
    rc, out, _ = cite(capsys, str(NOTES / "not-installed.md"))
    assert rc == 1 and INSTALL.format(install="pip install the-notes-extra") + "\n" in out


def test_a_package_the_workspace_does_not_list_is_a_failure_not_a_package_to_install(here, capsys):
    write_workspace(here, ["x.md"])
    rc, out, _ = cite(capsys, str(NOTES / "wrong-package-name.md"), str(NOTES / "not-installed.md"))
    assert rc == 1
    assert "line 8  [cite: toyparalel toyparallel/layers.py::divide" in out
    assert UNKNOWN_PACKAGE.format(package="toyparalel", packages="toyparallel") + "\n" in out
    assert UNKNOWN_PACKAGE.format(package="absent-dist", packages="toyparallel") + "\n" in out
    assert "pip install" not in out
    assert out.count("  FAILED      ") == 6


def test_without_a_workspace_a_missing_package_suggests_no_pip_name(here, capsys):
    rc, out, _ = cite(capsys, str(NOTES / "not-installed.md"))
    assert rc == 1 and "distribution 'absent-dist' is not installed" in out and "pip install" not in out


def test_record_writes_front_matter_only_when_all_resolve(here, capsys):
    shutil.copy(NOTES / "duplicates.md", here / "ok.md")
    shutil.copy(NOTES / "wrong-path.md", here / "bad.md")
    rc, out, _ = cite(capsys, "--record", "ok.md", "bad.md")
    assert rc == 1
    assert RECORDED.format(recorded="checked-against: toyparallel 1.2.0") + "\n" in out
    assert NOT_RECORDED + "\n" in out
    assert (here / "ok.md").read_text().startswith("---\nchecked-against: toyparallel 1.2.0\n---\n")
    assert "checked-against" not in (here / "bad.md").read_text()
    assert NOTE_HEADER.format(label="ok.md", versions=CHECKED_AGAINST.format(versions="toyparallel 1.2.0")) in out
    # the report after recording


def test_find_prints_file_span_version_and_a_citation_to_paste(here, capsys):
    rc, out, _ = cite(capsys, "--find", "forward", "--package", "toyparallel")
    assert rc == 0
    assert out.splitlines() == [
        "toyparallel 1.2.0  toyparallel/layers.py::ColumnLinear.forward  lines 32-34",
        '    [cite: toyparallel toyparallel/layers.py::ColumnLinear.forward "..."]',
        "toyparallel 1.2.0  toyparallel/layers.py::RowLinear.forward  lines 48-50",
        '    [cite: toyparallel toyparallel/layers.py::RowLinear.forward "..."]',
    ]


def test_find_defaults_to_the_workspace_packages(here, capsys):
    write_workspace(here, ["x.md"])
    rc, out, _ = cite(capsys, "--find", "divide")
    assert rc == 0 and "toyparallel/layers.py::divide  lines 14-17" in out


def test_the_citation_find_prints_pasted_as_it_is_says_what_to_put_in_its_quote(here, capsys):
    _, found, _ = cite(capsys, "--find", "divide", "--package", "toyparallel")
    pasted = found.splitlines()[1].strip()
    assert pasted.endswith(f' "{QUOTE_TO_FILL}"]')  # the quote is the learner's to choose, not the kit's
    (here / "n.md").write_text(f"Every split is even, so that each rank holds a shard of the same size `{pasted}`.\n")
    rc, out, _ = cite(capsys, "n.md")
    assert rc == 1
    assert QUOTE_NOT_FILLED.format(placeholder="...", low=12, high=100, path="toyparallel/layers.py", symbol="divide",
                                   start=14, end=17) + "\n" in out
    assert "3 characters" not in out


def test_find_of_an_unknown_symbol_exits_1(here, capsys):
    rc, out, _ = cite(capsys, "--find", "Nope", "--package", "toyparallel")
    assert rc == 1 and out == NOT_DEFINED.format(symbol="Nope", packages="toyparallel") + "\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # No workspace file anywhere above: say so and how to name one, not "list them in" a missing file.
        ((), GIVE_NOTES.format(hint=NOT_FOUND_HINT)),
        (("nowhere.md",), NO_SUCH_NOTE.format(path="nowhere.md", next=WRITE_IT)),
        (("--find", "X"), FIND_NEEDS_PACKAGE),
        (("--find", "X", "--package", "absent-dist"), "distribution 'absent-dist' is not installed"),
        (("--config", "missing.toml", "a.md"), NO_WORKSPACE.format(path="missing.toml")),
    ],
)
def test_usage_errors_are_one_line_with_status_2(here, capsys, argv, message):
    rc, out, err = cite(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("distcheck cite: ") and message in err and err.count("\n") == 1


def test_a_missing_note_beside_the_template_says_to_copy_it(here, capsys):
    """The DoD row says to copy docs/notes/TEMPLATE.md: a missing note next to it gets that command."""
    (here / "docs" / "notes").mkdir(parents=True)
    (here / "docs" / "notes" / "TEMPLATE.md").write_text("# template\n")
    rc, out, err = cite(capsys, "docs/notes/fsdp.md")
    assert rc == 2 and out == ""
    assert err == "distcheck cite: " + NO_SUCH_NOTE.format(path="docs/notes/fsdp.md", next=FROM_TEMPLATE.format(
        template="docs/notes/TEMPLATE.md", path="docs/notes/fsdp.md")) + "\n"


def test_under_es_a_missing_note_is_started_from_the_spanish_template(here, capsys):
    """The DoD row says, under es, to copy docs/es/notes/TEMPLATE.md; distcheck cite says the same."""
    for folder in ("docs/notes", "docs/es/notes"):
        (here / folder).mkdir(parents=True)
        (here / folder / "TEMPLATE.md").write_text("# template\n")
    rc, out, err = cite(capsys, "--lang", "es", "docs/notes/fsdp.md")
    assert rc == 2 and "cp docs/es/notes/TEMPLATE.md docs/notes/fsdp.md" in err, err


def test_one_of_anything_is_singular(here, capsys):
    note = here / "one.md"
    note.write_text("The row layer finishes with a single all-reduce that sums the partial products\n"
                    '`[cite: toyparallel toyparallel/layers.py::RowLinear.forward "one all-reduce sums the partial '
                    'products"]`.\n')
    rc, out, _ = cite(capsys, "--min", "2", str(note))
    assert rc == 1
    assert cited_statements(1) == "1 cited statement" and citations(1) == "1 citation"
    assert "  " + SUMMARY.format(statements="1 cited statement", citations="1 citation", ok=1, uncounted=0,
                                 failed=0) + "\n" in out, out
    assert TOO_FEW.format(statements="1 cited statement", minimum=2) + "\n" in out, out
