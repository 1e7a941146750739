"""Misspelled keys in the workspace's known sections are errors naming the key, the section and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_distcheck.errors import ConfigError
from pytest_distcheck.workspace import DECIMAL_COMMA, load_workspace

REPO = Path(__file__).resolve().parents[1]
HEAD = "[phase]\nid = 't'\ntitle = 't'\n[[items]]\nid = 'a'\ntitle = 't'\nhow = 'h'\n"


def load(tmp_path: Path, sections: str):
    path = tmp_path / "distcheck.toml"
    path.write_text(HEAD + sections)
    return path, load_workspace(path)


@pytest.mark.parametrize(
    ("sections", "where", "key"),
    [
        ("[budget]\nledger = 'l.md'\nphase_ceilng_usd = 5.0\n", "budget", "phase_ceilng_usd"),
        ("[quiz]\nbank = 'b.json'\nlog = 'l.jsonl'\npass_mark = 0.7\nitems_per_atempt = 10\n",
         "quiz", "items_per_atempt"),
        ("[budget]\nledger = 'l.md'\nphase_ceiling_usd = 5.0\n[budget.experiment_ceiling_usd]\nx = 1.0\n",
         "budget", "experiment_ceiling_usd"),
        ("[notes]\npaths = ['n.md']\npackage = ['torch']\n", "notes", "package"),
        ("[pods]\ngpu = 2\n", "pods", "gpu"),
    ],
)
def test_a_misspelled_key_names_the_key_the_section_and_the_file(tmp_path, sections, where, key):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, sections)
    err = info.value
    assert err.path == tmp_path / "distcheck.toml" and err.where == where
    assert f"Additional properties are not allowed ('{key}' was unexpected)" in err.problem
    assert str(err).startswith(f"{tmp_path / 'distcheck.toml'}, {where}: ")


def test_the_error_lists_the_keys_allowed_there(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "[budget]\nledger = 'l.md'\nphase_ceilng_usd = 5.0\n")
    assert info.value.problem.endswith(
        "(known: ledger, phase_ceiling_usd, experiment_ceilings_usd, uncapped_experiments)")


def test_a_decimal_comma_is_named_after_tomls_own_words(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "[budget]\nledger = 'l.md'\nphase_ceiling_usd = 5,0\n")
    assert info.value.where == "line 10" and info.value.problem.endswith(DECIMAL_COMMA)
    with pytest.raises(ConfigError) as info:  # another TOML error: no hint about commas
        load(tmp_path, "[budget]\nledger = 'l.md\n")
    assert DECIMAL_COMMA not in info.value.problem


def test_experiment_ids_and_unknown_sections_stay_free(tmp_path):
    _, ws = load(
        tmp_path,
        "[budget]\nledger = 'l.md'\nphase_ceiling_usd = 5.0\n[budget.experiment_ceilings_usd]\nany-id = 1.0\n"
        "[someone_elses]\nwhatever = 1\n",
    )
    assert ws.section("budget")["experiment_ceilings_usd"] == {"any-id": 1.0}
    assert ws.section("someone_elses") == {"whatever": 1}


def test_the_phase_workspace_file_is_valid():
    ws = load_workspace(REPO / "checks" / "distcheck.toml")
    assert {"ddp", "budget", "notes", "diagram", "quiz", "pods", "tp_inference"} <= set(ws.raw)
