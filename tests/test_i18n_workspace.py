"""The workspace in Spanish: item titles and steps (title_es, how_es), `distcheck init --lang es`, the locale
alone making the kit speak Spanish, and English as the default everywhere else."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.cli import main
from pytest_distcheck.commands.init import KEPT, READY, START_PAGES
from pytest_distcheck.errors import ConfigError
from pytest_distcheck.i18n import _
from pytest_distcheck.phase_pack import PACK_GLOBS, pack_files
from pytest_distcheck.plugin import GATE_OFF, HEADER
from pytest_distcheck.settings import FROM_CLI, NOT_A_NUMBER
from pytest_distcheck.workspace import DodItem, load_workspace
from pytest_distcheck.workspace_init import PYTEST_INI, init_workspace, pytest_ini

REPO = Path(__file__).resolve().parents[1]
WORKSPACE_FILES = (REPO / "checks" / "distcheck.toml", REPO / "checks" / "solutions.toml")
COMMIT = 'git init && git add . && git commit -m "Start the phase workspace (distcheck init)" -- .'


def _locale(monkeypatch, **env: str) -> None:
    """Only the given locale variables set, and no DISTCHECK_LANG."""
    for name in ("DISTCHECK_LANG", *i18n.LOCALE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def _header(lang: str) -> str:
    """The header line's pattern in ``lang`` (the workspace part left open), for a run that is not a gate."""
    i18n.use(lang)
    try:
        return _(HEADER).format(world_size=2, timeout=60, where="*", gate=_(GATE_OFF))
    finally:
        i18n.use(i18n.DEFAULT)


def test_an_item_speaks_its_spanish_title_and_step_and_falls_back_to_english():
    item = DodItem(id="a", title="Notes written", how="write them", title_es="Notas escritas", how_es="escríbelas")
    assert (item.title_in("es"), item.how_in("es")) == ("Notas escritas", "escríbelas")
    assert (item.title_in("en"), item.how_in("en")) == ("Notes written", "write them")
    bare = DodItem(id="b", title="Quiz passed", how="distcheck quiz 35")
    assert (bare.title_in("es"), bare.how_in("es")) == ("Quiz passed", "distcheck quiz 35")
    assert item.title_in() == "Notes written"  # the language in use: English by default
    i18n.use("es")
    assert (item.title_in(), item.how_in()) == ("Notas escritas", "escríbelas")


@pytest.mark.parametrize("path", WORKSPACE_FILES, ids=lambda p: p.name)
def test_every_item_of_the_phase_has_a_spanish_title_and_every_prose_step_a_spanish_one(path):
    """Steps that are one command read the same in both languages; the others (prose) carry how_es."""
    for item in load_workspace(path).items:
        assert item.title_es and item.title_es != item.title, item.id
        command = item.how.split()[0] in ("pytest", "distcheck", "torchrun") and "," not in item.how
        assert bool(item.how_es) != command, item.id


def test_the_reference_workspace_has_the_learner_s_spanish_titles():
    learner, reference = (load_workspace(p) for p in WORKSPACE_FILES)
    assert [i.title_es for i in reference.items] == [i.title_es for i in learner.items]
    assert [i.id for i in reference.items if i.how_es] == [i.id for i in learner.items if i.how_es]


def test_an_empty_spanish_title_is_an_error_naming_the_field(tmp_path):
    path = tmp_path / "distcheck.toml"
    path.write_text("[phase]\nid = 't'\ntitle = 't'\n[[items]]\nid = 'a'\ntitle = 't'\nhow = 'h'\ntitle_es = ''\n")
    with pytest.raises(ConfigError) as info:
        load_workspace(path)
    assert "title_es" in info.value.where


def test_init_with_lang_es_writes_the_ini_key_and_speaks_spanish(tmp_path, capsys):
    dest = tmp_path / "mine"
    assert main(["init", str(dest), "--lang", "es"]) == 0
    ini = (dest / "pytest.ini").read_text()
    assert ini == pytest_ini("es") and ini.startswith(PYTEST_INI) and ini.endswith("distcheck_lang = es\n")
    i18n.use("es")
    ready = _(READY).format(where=dest, go=f"cd {dest} && ", commit=COMMIT, start="docs/es/README.md")
    assert ready != READY.format(where=dest, go=f"cd {dest} && ", commit=COMMIT, start="docs/es/README.md")
    assert capsys.readouterr().out.endswith(ready + "\n")
    assert {"docs/README.md", "docs/theory/00-motivation.md", "docs/es/theory/00-motivation.md"} <= set(
        pack_files(dest))  # both languages' pages ship


def test_init_without_lang_writes_today_s_ini_and_points_at_the_english_start_page(tmp_path, capsys):
    dest = tmp_path / "mine"
    assert main(["init", str(dest)]) == 0
    assert (dest / "pytest.ini").read_text() == PYTEST_INI and "distcheck_lang" not in PYTEST_INI
    assert capsys.readouterr().out.endswith(
        READY.format(where=dest, go=f"cd {dest} && ", commit=COMMIT, start="docs/README.md") + "\n")


def test_each_start_page_init_names_ships_in_the_pack():
    for page in START_PAGES.values():
        assert any(fnmatch.fnmatch(page, glob) for glob in PACK_GLOBS), page
    assert START_PAGES[i18n.DEFAULT] in pack_files(REPO)


def test_pytest_in_a_workspace_made_with_lang_es_speaks_spanish(pytester, monkeypatch):
    """The ini key init writes beats an English locale; the DoD checks are only collected (cheap)."""
    _locale(monkeypatch, LANG="en_US.UTF-8")
    assert init_workspace(pytester.path, lang="es").conflicts == []
    result = pytester.runpytest("--co", "-m", "local", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([_header("es")])
    assert "6 elementos del DoD" in result.stdout.str()


def test_a_distcheck_command_in_a_workspace_made_with_lang_es_speaks_spanish(tmp_path, monkeypatch, capsys):
    _locale(monkeypatch, LANG="en_US.UTF-8")
    assert init_workspace(tmp_path, lang="es").conflicts == []
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0  # again, without --lang: it keeps everything, pytest.ini too
    i18n.use("es")
    assert _(KEPT).format(path="pytest.ini") in capsys.readouterr().out.splitlines()


def test_a_spanish_locale_alone_makes_the_kit_speak_spanish(workspace_dir, monkeypatch, tmp_path, capsys):
    """LANG=es_ES.UTF-8 and nothing else: pytest's header and usage errors, and the CLI, speak Spanish (and init
    pins no language: the locale is the machine's, not the workspace's)."""
    _locale(monkeypatch, LANG="es_ES.UTF-8")
    workspace_dir.makepyfile("def test_x(): pass")
    workspace_dir.runpytest("-p", "no:cacheprovider").stdout.fnmatch_lines([_header("es")])
    result = workspace_dir.runpytest("-p", "no:cacheprovider", "--distcheck-timeout", "soon")
    capsys.readouterr()
    dest = tmp_path / "mine"
    assert main(["init", str(dest)]) == 0
    assert (dest / "pytest.ini").read_text() == PYTEST_INI
    i18n.use("es")
    assert _(NOT_A_NUMBER).format(source=_(FROM_CLI).format(flag="--distcheck-timeout"), text="soon") in (
        result.stderr.str())
    assert capsys.readouterr().out.endswith(
        _(READY).format(where=dest, go=f"cd {dest} && ", commit=COMMIT, start="docs/es/README.md") + "\n")


@pytest.mark.parametrize("env", [{"LANG": "en_US.UTF-8"}, {"LC_ALL": "C.UTF-8", "LANG": "es_ES.UTF-8"}, {}],
                         ids=["english-locale", "c-locale-over-lang", "no-locale"])
def test_english_stays_the_default_elsewhere(workspace_dir, monkeypatch, env):
    _locale(monkeypatch, **env)
    workspace_dir.makepyfile("def test_x(): pass")
    workspace_dir.runpytest("-p", "no:cacheprovider").stdout.fnmatch_lines([_header("en")])
    assert i18n.choose(None, env)[0] == "en"
