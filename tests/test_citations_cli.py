"""``distcheck cite``: statuses and exit codes, --find, --record, defaults from the workspace, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_distcheck.cli import build_parser, main

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
    assert "(checked against toyparallel 1.2.0)" in out.splitlines()[0]
    assert out.rstrip().endswith("5 cited statements; 5 citations: 5 ok, 0 not counted, 0 failed")


def test_a_failing_citation_exits_1_and_says_why(here, capsys):
    rc, out, _ = cite(capsys, str(NOTES / "wrong-symbol.md"))
    assert rc == 1
    assert "  FAILED      line 4  [cite: toyparallel toyparallel/layers.py::ColumnLinear.forward" in out
    assert "it is in RowLinear.forward (lines 48-50)" in out


def test_min_makes_too_few_statements_fail(here, capsys):
    rc, out, _ = cite(capsys, "--min", "6", str(NOTES / "good.md"))
    assert rc == 1 and "too few: 5 cited statements, at least 6 needed" in out


def test_files_and_minimum_default_to_the_workspace(here, capsys):
    (here / "docs").mkdir()
    shutil.copy(NOTES / "four-good-many-bad.md", here / "docs" / "a.md")
    write_workspace(here, ["docs/a.md"])
    rc, out, _ = cite(capsys)
    assert rc == 1
    assert out.startswith("docs/a.md  (checked against toyparallel 1.2.0)")
    assert "too few: 4 cited statements, at least 5 needed" in out


def test_a_missing_package_shows_the_install_command_of_the_workspace(here, capsys):
    write_workspace(here, ["x.md"], packages=("toyparallel", "absent-dist"))
    rc, out, _ = cite(capsys, str(NOTES / "not-installed.md"))
    assert rc == 1 and "install the cited packages with: pip install the-notes-extra" in out


def test_a_package_the_workspace_does_not_list_is_a_failure_not_a_package_to_install(here, capsys):
    write_workspace(here, ["x.md"])
    rc, out, _ = cite(capsys, str(NOTES / "wrong-package-name.md"), str(NOTES / "not-installed.md"))
    assert rc == 1
    assert "line 8  [cite: toyparalel toyparallel/layers.py::divide" in out
    assert "unknown package 'toyparalel' (the notes cite: toyparallel)" in out
    assert "unknown package 'absent-dist' (the notes cite: toyparallel)" in out
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
    assert "recorded: checked-against: toyparallel 1.2.0" in out
    assert "not recorded: versions are recorded only when every citation resolves" in out
    assert (here / "ok.md").read_text().startswith("---\nchecked-against: toyparallel 1.2.0\n---\n")
    assert "checked-against" not in (here / "bad.md").read_text()
    assert "ok.md  (checked against toyparallel 1.2.0)" in out  # the report after recording


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


def test_find_of_an_unknown_symbol_exits_1(here, capsys):
    rc, out, _ = cite(capsys, "--find", "Nope", "--package", "toyparallel")
    assert rc == 1 and out.strip() == "Nope: not defined in toyparallel"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # No workspace file anywhere above: say so and how to name one, not "list them in" a missing file.
        ((), "give note files (distcheck cite NOTE.md ...); no checks/distcheck.toml in this folder or any "
             "folder above it; run from your workspace, name the file (distcheck ... --config FILE, pytest "
             "--workspace FILE), or start one with `distcheck init`"),
        (("nowhere.md",), "nowhere.md: no such note; write it, or check the path"),
        (("--find", "X"), "--find needs --package P"),
        (("--find", "X", "--package", "absent-dist"), "distribution 'absent-dist' is not installed"),
        (("--config", "missing.toml", "a.md"), "workspace file missing.toml not found"),
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
    assert ("docs/notes/fsdp.md: no such note; start it from the template: "
            "cp docs/notes/TEMPLATE.md docs/notes/fsdp.md") in err, err


def test_one_of_anything_is_singular(here, capsys):
    note = here / "one.md"
    note.write_text("The row layer finishes with a single all-reduce that sums the partial products\n"
                    '`[cite: toyparallel toyparallel/layers.py::RowLinear.forward "one all-reduce sums the partial '
                    'products"]`.\n')
    rc, out, _ = cite(capsys, "--min", "2", str(note))
    assert rc == 1
    assert "  1 cited statement; 1 citation: 1 ok, 0 not counted, 0 failed" in out, out
    assert "  too few: 1 cited statement, at least 2 needed" in out, out
