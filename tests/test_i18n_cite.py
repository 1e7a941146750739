"""`distcheck cite` in Spanish: why a citation does not resolve, and the --record refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.citations.report import LABELS, note_lines
from pytest_distcheck.citations.resolver import NOT_INSTALLED, Problem, Resolver
from pytest_distcheck.citations.verifier import (
    BACKSLASH_N,
    LOST_BACKTICKS,
    NEAREST_AT,
    QUOTE_NOT_IN,
    Status,
    verify_note,
)
from pytest_distcheck.i18n import _


@pytest.fixture(autouse=True)
def _english_after():
    yield
    i18n.use(i18n.DEFAULT)


@pytest.mark.parametrize("lang", i18n.SUPPORTED)
def test_a_package_that_is_not_installed_is_named_in_the_language_in_use(lang):
    i18n.use(lang)
    with pytest.raises(Problem) as info:
        Resolver().distribution("distcheck-no-such-package")
    assert info.value.code == "not-installed"  # the code stays: the DoD check reads it
    assert info.value.message == _(NOT_INSTALLED).format(package="distcheck-no-such-package")
    assert (info.value.message == NOT_INSTALLED.format(package="distcheck-no-such-package")) == (lang == "en")


NOTES = Path(__file__).resolve().parents[1] / "fixtures" / "notes"


@pytest.fixture
def toy_site(monkeypatch):
    monkeypatch.syspath_prepend(str(NOTES / "site"))


def test_the_status_of_each_citation_is_labelled_in_spanish(toy_site):
    i18n.use("es")
    counted = note_lines(verify_note(NOTES / "duplicates.md"))
    failed = note_lines(verify_note(NOTES / "malformed.md"))
    assert counted[1].startswith("  ok          línea 4 "), counted
    assert counted[2].startswith("  sin contar  línea 6 "), counted
    assert all(line.startswith("  NO SUPERADO ") for line in failed[1:4]), failed
    assert (_(LABELS[Status.UNCOUNTED]), _(LABELS[Status.FAILED])) == ("sin contar", "NO SUPERADO")


def test_the_status_labels_stay_english_in_english(toy_site):
    lines = note_lines(verify_note(NOTES / "duplicates.md"))
    assert lines[1].startswith("  ok          line 4 ") and lines[2].startswith("  not counted line 6 ")
    assert {s: LABELS[s] for s in Status} == {s: s.value for s in Status}


def _reason(tmp_path, citation: str) -> str:
    note = tmp_path / "n.md"
    note.write_text(f"A statement of a decision made in the code, with enough words to count\n[cite: {citation}].\n")
    (res,) = verify_note(note, Resolver()).failures
    assert res.code == "quote-not-in-symbol"  # the code stays: the DoD check reads it
    return res.reason


def test_a_quote_not_in_its_symbol_names_the_nearest_line_in_spanish(toy_site):
    i18n.use("es")
    rep = verify_note(NOTES / "typo-quote.md")
    (res,) = rep.failures
    assert res.reason == ("la cita textual no está en ColumnLinear.forward (líneas 32-34); lo más parecido, en la "
                          "línea 33: 'no communication in forward: each rank owns a column slice'")
    assert _(QUOTE_NOT_IN) != QUOTE_NOT_IN and _(NEAREST_AT) != NEAREST_AT
    (wrong,) = verify_note(NOTES / "wrong-symbol.md").failures
    assert wrong.reason == ("la cita textual no está en ColumnLinear.forward (líneas 32-34); está en "
                            "RowLinear.forward (líneas 48-50)")


def test_eaten_backticks_and_a_written_newline_are_explained_in_spanish(toy_site, tmp_path):
    i18n.use("es")
    reason = _reason(tmp_path, 'toyparallel toyparallel/sharding.py::hybrid '
                               '"Like ``ROW_SPLIT``, except the split stays inside one node"')
    assert ("; Markdown leyó los acentos graves de la cita textual como código y los quitó: encierra la cita entera "
            "entre acentos graves (`[cite: ...]`) para que Markdown los conserve") in reason, reason
    reason = _reason(tmp_path, r'toyparallel toyparallel/layers.py::RowLinear.forward "one all-reduce sums\nthe '
                               r'partial products"')
    assert reason.endswith(r"; un \n en una cita textual se lee como la letra n: los espacios en blanco, saltos de "
                           "línea incluidos, se reducen a un espacio, así que escribe un salto de línea como un "
                           "espacio"), reason
    assert _(BACKSLASH_N) != BACKSLASH_N and _(LOST_BACKTICKS) != LOST_BACKTICKS
