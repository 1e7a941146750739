"""`distcheck cite` in Spanish: why a citation does not resolve, and the --record refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.citations.report import LABELS, note_lines
from pytest_distcheck.citations.resolver import (
    DID_YOU_MEAN,
    NOT_IN_PACKAGE,
    NOT_INSTALLED,
    NOT_SHIPPED,
    Problem,
    Resolver,
    suggestible,
)
from pytest_distcheck.citations.verifier import (
    BACKSLASH_N,
    LOST_BACKTICKS,
    NEAREST_AT,
    QUOTE_NOT_FILLED,
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


@pytest.mark.parametrize(("path", "spanish"), [
    ("toyparallel/layer.py", "toyparallel/layer.py no es un fichero de toyparallel 1.2.0; ¿querías decir "
                             "toyparallel/layers.py o toyparallel/sharding.py?"),
    ("toyparallel/training/x.py", "toyparallel/training/x.py no es un fichero de toyparallel 1.2.0: ningún fichero "
                                  "suyo está bajo toyparallel/training/ (instala toyparallel/testing/); la ruta puede "
                                  "venir del repositorio de código fuente del proyecto, que tiene más que esta "
                                  "distribución"),
])
def test_a_path_not_in_the_package_is_hinted_in_spanish(toy_site, path, spanish):
    i18n.use("es")
    with pytest.raises(Problem) as info:
        Resolver().file("toyparallel", path)
    assert (info.value.code, info.value.message) == ("not-in-package", spanish)
    assert _(DID_YOU_MEAN) != DID_YOU_MEAN and _(NOT_SHIPPED) != NOT_SHIPPED


@pytest.mark.parametrize("lang", i18n.SUPPORTED)
def test_no_test_code_is_suggested_for_a_path_not_in_the_package(toy_site, lang):
    """toyparallel/testing/helpers.py has the same name and is one letter off: a citation of it would
    not count (test code), so the hint names the library's files or none."""
    i18n.use(lang)
    messages = {}
    for path in ("toyparallel/helpers.py", "toyparallel/testing/helper.py"):
        with pytest.raises(Problem) as info:
            Resolver().file("toyparallel", path)
        assert info.value.code == "not-in-package"
        messages[path] = info.value.message
    head = _(NOT_IN_PACKAGE).format(rel="toyparallel/helpers.py", name="toyparallel", version="1.2.0")
    assert messages["toyparallel/helpers.py"] == head + _(DID_YOU_MEAN).format(names="toyparallel/layers.py")
    assert messages["toyparallel/testing/helper.py"] == _(NOT_IN_PACKAGE).format(
        rel="toyparallel/testing/helper.py", name="toyparallel", version="1.2.0")


@pytest.mark.parametrize(("rel", "suggested"), [
    ("megatron/core/tensor_parallel/layers.py", True), ("megatron/core/tests/test_layers.py", False),
    ("torch/testing/_internal/common_fsdp.py", False), ("pkg/test/x.py", False), ("pkg/fixtures/data.py", False),
    ("tests.py", True), ("pkg/contest/x.py", True),
])
def test_only_library_code_is_suggestible(rel, suggested):
    assert suggestible(rel) is suggested


def test_a_symbol_defined_only_in_test_code_is_not_pointed_to(toy_site, tmp_path):
    note = tmp_path / "n.md"
    note.write_text("A statement of a decision made in the code, with enough words to count\n"
                    '[cite: toyparallel toyparallel/layers.py::make_batch "build a fake batch for the unit tests"].\n')
    (res,) = verify_note(note, Resolver()).failures
    assert res.code == "symbol-not-found"
    assert res.reason == "make_batch is not defined in toyparallel/layers.py; did you mean make_pair?"


@pytest.mark.parametrize("lang", i18n.SUPPORTED)
def test_the_placeholder_quote_of_cite_find_is_named_in_the_language_in_use(toy_site, tmp_path, lang):
    i18n.use(lang)
    (tmp_path / "n.md").write_text("Every split is even, so that each rank holds a shard of the same size\n"
                                   '`[cite: toyparallel toyparallel/layers.py::divide "..."]`.\n')
    (res,) = verify_note(tmp_path / "n.md").results
    assert (res.status, res.code) == (Status.FAILED, "quote-too-short")
    args = dict(placeholder="...", low=12, high=100, path="toyparallel/layers.py", symbol="divide", start=14, end=17)
    assert res.reason == _(QUOTE_NOT_FILLED).format(**args)
    assert (res.reason == QUOTE_NOT_FILLED.format(**args)) == (lang == "en")


def test_an_unclosed_citation_and_comment_are_explained_in_spanish():
    from pytest_distcheck.citations.report import citations
    from pytest_distcheck.citations.syntax import EXPECTED, FORM, NOT_CLOSED, UNCLOSED_COMMENT, parse_note

    i18n.use("es")
    text = 'A decision [cite: torch torch/a.py::f "a quote of the code"\n\n<!-- draft\n[cite: torch a.py::g "x"]\n'
    problems = [m.problem for m in parse_note(text, Path("n.md")).malformed]
    assert problems == [_(EXPECTED).format(problem=_(NOT_CLOSED), form=FORM),
                        _(UNCLOSED_COMMENT).format(citations=citations(1))]
    assert problems[0].startswith("cita sin cerrar: añade `]`") and "1 cita);" in problems[1]
