"""`distcheck cite` in Spanish: why a citation does not resolve, and the --record refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.citations.report import LABELS, note_lines
from pytest_distcheck.citations.resolver import NOT_INSTALLED, Problem, Resolver
from pytest_distcheck.citations.verifier import Status, verify_note
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
