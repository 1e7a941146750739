"""Errors about the workspace file's [budget] and [notes] sections, a JSON file checked against a shipped schema,
a price table, a note's front matter and the budget marker, under --lang es. Field paths, file names and what
the learner wrote stay as they are; jsonschema's and Python's own words are passed on."""

from __future__ import annotations

import json

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.budget import config as budget
from pytest_distcheck.budget import plugin as budget_plugin
from pytest_distcheck.budget import pricing
from pytest_distcheck.citations import config as notes
from pytest_distcheck.citations import syntax
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import _
from pytest_distcheck.schemas import CANNOT_READ, NEEDS_OFFSET, NEEDS_TIME, NOT_JSON, TOP_LEVEL, WHY, load_json
from pytest_distcheck.workspace import load_workspace

HEAD = "[phase]\nid = 't'\ntitle = 't'\n[[items]]\nid = 'a'\ntitle = 't'\nhow = 'h'\n"


@pytest.fixture(autouse=True)
def _spanish():
    i18n.use("es")
    yield
    i18n.use(i18n.DEFAULT)


def _error(call, *args) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        call(*args)
    return info.value


def _workspace(tmp_path, sections: str):
    path = tmp_path / "distcheck.toml"
    path.write_text(HEAD + sections)
    return load_workspace(path)


@pytest.mark.parametrize(("sections", "where", "message", "spanish"), [
    ("ledger = 3\nphase_ceiling_usd = 5", "budget.ledger", budget.NOT_LEDGER_PATH,
     "debe ser la ruta del registro de gastos relativa a la raíz, hay 3"),
    ("ledger = 'l.md'", "budget.phase_ceiling_usd", budget.NO_PHASE_CEILING,
     "falta: lo más que puede gastar la fase, en USD"),
    ("ledger = 'l.md'\nphase_ceiling_usd = '5'", "budget.phase_ceiling_usd", budget.NOT_USD,
     "debe ser un número de USD, hay '5'"),
    ("ledger = 'l.md'\nphase_ceiling_usd = 0", "budget.phase_ceiling_usd", budget.NOT_POSITIVE,
     "debe ser > 0 USD, hay 0"),
    ("ledger = 'l.md'\nphase_ceiling_usd = 5\nexperiment_ceilings_usd = 3", "budget.experiment_ceilings_usd",
     budget.NOT_CEILING_TABLE, "debe ser una tabla de id de experimento = USD"),
    ("ledger = 'l.md'\nphase_ceiling_usd = 5\nexperiment_ceilings_usd = {tp = 6}",
     "budget.experiment_ceilings_usd.tp", budget.ABOVE_PHASE, "6 USD es más que el tope de la fase, 5 USD"),
    ("ledger = 'l.md'\nphase_ceiling_usd = 5\nuncapped_experiments = ['a b']", "budget.uncapped_experiments",
     budget.NOT_ID_LIST, "debe ser una lista de ids de experimento (letras, dígitos, '.', '_', ':' o '-'), "
                         "hay ['a b']"),
    ("ledger = 'l.md'\nphase_ceiling_usd = 5\nexperiment_ceilings_usd = {'a b' = 1}",
     "budget.experiment_ceilings_usd.a b", budget.BAD_ID, "un id de experimento son letras, dígitos, '.', '_', "
                                                          "':' o '-'"),
    ("ledger = 'l.md'\nphase_ceiling_usd = 5\nexperiment_ceilings_usd = {tp = 1}\nuncapped_experiments = ['tp']",
     "budget.uncapped_experiments", budget.CAPPED_TOO, "'tp' también tiene tope; decláralo una sola vez"),
])
def test_a_bad_budget_section_is_said_in_spanish_naming_its_field(tmp_path, sections, where, message, spanish):
    err = _error(budget.budget_config, _workspace(tmp_path, "[budget]\n" + sections + "\n"))
    assert err.where == where
    assert err.problem == spanish
    assert err.problem != message  # translated, not the English msgid


@pytest.mark.parametrize(("sections", "where", "spanish"), [
    ("[quiz]\nbank = 'b'\n", "notes", "no hay sección [notes] (paths = [...], min_cited_decisions = N)"),
    ("[notes]\npaths = []\n", "notes.paths", "debe ser una lista de cadenas no vacías, hay []"),
    ("[notes]\npaths = ['n.md']\nmin_cited_decisions = 0\n", "notes.min_cited_decisions",
     "debe ser un número entero >= 1, hay 0"),
    ("[notes]\npaths = ['n.md']\ninstall = 3\n", "notes.install", "debe ser una cadena de texto, hay 3"),
])
def test_a_bad_notes_section_is_said_in_spanish(tmp_path, sections, where, spanish):
    err = _error(notes.notes_config, _workspace(tmp_path, sections))
    assert (err.where, err.problem) == (where, spanish)
    assert _(notes.NO_SECTION).startswith("no hay sección [notes]")


def test_a_json_file_that_cannot_be_read_or_parsed_is_said_in_spanish(tmp_path):
    missing = tmp_path / "r.json"
    err = _error(load_json, missing, "allreduce-result.schema.json")
    assert err.problem == _(CANNOT_READ).format(error="No such file or directory")
    assert err.problem.startswith("no se puede leer: ")
    missing.write_text('{\n  "a": 1,\n  oops\n}')
    err = _error(load_json, missing, "allreduce-result.schema.json")
    assert err.where == "línea 3"
    assert err.problem.startswith("no es JSON válido: ")
    assert _(NOT_JSON) == "no es JSON válido: {error}"


def test_the_document_itself_is_the_top_level_in_spanish(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("[]")
    err = _error(load_json, path, "allreduce-result.schema.json")
    assert err.where == _(TOP_LEVEL) == "(nivel superior)"


@pytest.mark.parametrize(("value", "why"), [
    ("2026-11-29", "necesita fecha y hora, p. ej. 2026-11-29T18:52:10+00:00"),
    ("2026-11-29T18:52:10", "necesita el desfase respecto a UTC, p. ej. +00:00 o Z"),
])
def test_a_date_time_of_the_wrong_format_says_why_in_spanish(value, why):
    import jsonschema

    from pytest_distcheck.schemas import _FORMATS, _problem

    schema = {"type": "string", "format": "date-time"}
    (error,) = jsonschema.Draft202012Validator(schema, format_checker=_FORMATS).iter_errors(value)
    assert _problem(error) == _(WHY).format(problem=f"{value!r} is not a 'date-time'", why=why)
    assert why in (_(NEEDS_TIME), _(NEEDS_OFFSET))


def test_a_price_table_priced_twice_or_without_billing_is_said_in_spanish(tmp_path):
    table = json.loads(pricing.resources.files("pytest_distcheck.data").joinpath("prices.json").read_text())
    twice = json.loads(json.dumps(table))
    twice["prices"].append(dict(twice["prices"][0]))
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(twice))
    err = _error(pricing.PriceBook.load, path)
    assert err.problem.endswith(" ya tiene precio en prices[0]")
    table["billing"].pop("runpod")
    err = _error(pricing.PriceBook.from_table, table, path)
    assert (err.where, err.problem) == ("prices[0].provider", "no hay regla de facturación para 'runpod'")


def test_a_note_front_matter_error_is_said_in_spanish(tmp_path):
    path = tmp_path / "n.md"
    err = _error(syntax.parse_note, "---\nchecked-against: torch\n", path)
    assert (err.where, err.problem) == ("línea 1", "el front matter que abre '---' no se cierra nunca con una "
                                                   "línea '---'")
    err = _error(syntax.parse_note, "---\nchecked-against: torch\n---\nbody\n", path)
    assert err.where == "línea 2"
    assert err.problem == "la entrada 'torch' de checked-against no es 'PAQUETE VERSIÓN'"


def test_a_bad_budget_marker_is_said_in_spanish(workspace_dir):
    pytester = workspace_dir  # the budget marker is a course workspace's
    pytester.makepyfile("""
        import pytest

        @pytest.mark.budget(usd=0)
        def test_a():
            pass
    """)
    result = pytester.runpytest("--lang", "es")
    expected = _(budget_plugin.MARKER_NOT_POSITIVE).format(value=0)
    assert expected == "@pytest.mark.budget(usd=X) necesita X > 0 USD; ha recibido 0"
    assert expected in result.stdout.str() + result.stderr.str()
