"""The language setting's precedence and errors, and the catalogs: complete, current and faithful."""

from __future__ import annotations

import gettext
import string

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from pytest_distcheck import i18n
from pytest_distcheck.cli import main

PACKAGE = i18n.LOCALE_DIR.parent
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}


def _catalog(lang: str):
    with open(i18n.LOCALE_DIR / lang / "LC_MESSAGES" / f"{i18n.DOMAIN}.po", "rb") as f:
        return read_po(f, locale=lang)


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@pytest.fixture(autouse=True)
def _english_after():
    yield
    i18n.use(i18n.DEFAULT)


@pytest.mark.parametrize(
    ("cli", "env", "ini", "expected"),
    [
        ("es", {"DISTCHECK_LANG": "en", "LANG": "en_GB.UTF-8"}, "en", ("es", "command line --lang")),
        (None, {"DISTCHECK_LANG": "es", "LANG": "en_GB.UTF-8"}, "en", ("es", "environment variable DISTCHECK_LANG")),
        (None, {"LANG": "en_GB.UTF-8"}, "es", ("es", "ini key distcheck_lang")),
        (None, {"LANG": "es_ES.UTF-8"}, "", ("es", "the locale")),
        (None, {"LC_ALL": "es_MX.UTF-8", "LANG": "en_US.UTF-8"}, "", ("es", "the locale")),
        (None, {"LC_ALL": "C.UTF-8", "LC_MESSAGES": "es_ES.UTF-8"}, "", ("en", "the locale")),
        (None, {"LC_MESSAGES": "es_ES.UTF-8", "LANG": "en_US.UTF-8"}, "", ("es", "the locale")),
        (None, {}, "", ("en", "the default")),
        ("ES", {}, "", ("es", "command line --lang")),
    ],
)
def test_the_language_follows_the_kits_precedence(cli, env, ini, expected):
    assert i18n.choose(cli, env, ini) == expected


@pytest.mark.parametrize(("cli", "env", "ini", "source"), [
    ("fr", {}, "", "command line --lang"),
    (None, {"DISTCHECK_LANG": "spanish"}, "", "environment variable DISTCHECK_LANG"),
    (None, {}, "de", "ini key distcheck_lang"),
])
def test_an_unsupported_language_is_an_error_naming_where_it_came_from(cli, env, ini, source):
    with pytest.raises(i18n.LanguageError) as excinfo:
        i18n.choose(cli, env, ini)
    value = cli or env.get("DISTCHECK_LANG") or ini
    assert str(excinfo.value) == i18n.UNSUPPORTED.format(source=source, value=value, choices="en, es")


def test_the_cli_refuses_an_unsupported_language_with_exit_status_2(capsys):
    assert main(["bubble", "-p", "4", "-m", "8", "--lang", "fr"]) == 2
    assert capsys.readouterr().err.strip() == "distcheck bubble: " + i18n.UNSUPPORTED.format(
        source="command line --lang", value="fr", choices="en, es")


@pytest.mark.parametrize("argv", [["bubble", "-p", "x", "-m", "8", "--lang", "es"],
                                  ["bubble", "-p", "x", "-m", "8", "--lang=es"],
                                  ["--lang", "es", "bubble", "-p", "x", "-m", "8"]])
def test_the_cli_speaks_its_language_while_it_parses_the_command_line(argv, monkeypatch, capsys):
    import argparse

    from pytest_distcheck.commands import bubble

    def spoken(text):  # an argument type's error, spoken when argparse calls it
        raise argparse.ArgumentTypeError(f"lang={i18n.language()}")

    monkeypatch.setattr(bubble, "positive_int", spoken)
    try:
        with pytest.raises(SystemExit) as exc:
            main(argv)
    finally:
        i18n.use(i18n.DEFAULT)
    assert exc.value.code == 2 and "lang=es" in capsys.readouterr().err


def test_the_cli_takes_its_language_before_the_command_too(capsys):
    from pytest_distcheck.commands import bubble

    assert main(["bubble", "-p", "4", "-m", "8", "--lang", "es"]) == 0
    after = capsys.readouterr().out
    assert main(["--lang", "es", "bubble", "-p", "4", "-m", "8"]) == 0
    before = capsys.readouterr().out
    assert before == after
    assert i18n._(bubble.FIRST_CAN_EXCEED) == ("El primer número puede pasar de 1; solo el segundo es una fracción "
                                               "del tiempo de reloj.")
    assert before.splitlines()[-1] == i18n._(bubble.FIRST_CAN_EXCEED)
    # the one after the command wins, as a repeated option does
    assert main(["--lang", "es", "bubble", "-p", "4", "-m", "8", "--lang", "en"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == bubble.FIRST_CAN_EXCEED
    assert main(["--lang", "fr", "bubble", "-p", "4", "-m", "8"]) == 2
    assert capsys.readouterr().err.strip() == "distcheck bubble: " + i18n.UNSUPPORTED.format(
        source="command line --lang", value="fr", choices="en, es")


def test_the_top_level_help_under_lang_es_is_argparses_english(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--lang", "es", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert out.startswith("usage: distcheck [-h] [--lang en|es] COMMAND ...")
    assert "positional arguments:" in out and "language of the kit's messages: en or es" in out


def test_pytest_refuses_an_unsupported_language_as_a_usage_error(pytester):
    result = pytester.runpytest("--lang", "fr")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*" + i18n.UNSUPPORTED.format(source="command line --lang", value="fr",
                                                                  choices="en, es")])


@pytest.mark.parametrize("lang", [lang for lang in i18n.SUPPORTED if lang != i18n.DEFAULT])
def test_the_committed_catalog_is_the_compiled_po(lang):
    mo = i18n.LOCALE_DIR / lang / "LC_MESSAGES" / f"{i18n.DOMAIN}.mo"
    with open(mo, "rb") as f:
        compiled = {k: v for k, v in gettext.GNUTranslations(f)._catalog.items() if k}
    expected = {}
    for m in _catalog(lang):
        if not m.id or not m.string or m.fuzzy:
            continue
        if isinstance(m.id, tuple):
            expected.update({(m.id[0], n): s for n, s in enumerate(m.string)})
        else:
            expected[m.id] = m.string
    assert compiled == expected, f"{mo} is stale: run pybabel compile -d pytest_distcheck/locale -D distcheck"


@pytest.mark.parametrize("lang", [lang for lang in i18n.SUPPORTED if lang != i18n.DEFAULT])
def test_every_message_of_the_kit_is_translated_with_the_same_placeholders(lang):
    catalog = _catalog(lang)
    problems = []
    for filename, lineno, message, _comments, _context in extract_from_dir(
            str(PACKAGE), method_map=[("**.py", "python")], keywords=KEYWORDS):
        msgids = message if isinstance(message, tuple) else (message,)
        entry = catalog.get(msgids[0])
        where = f"pytest_distcheck/{filename}:{lineno}"
        if entry is None or not entry.string or entry.fuzzy:
            problems.append(f"{where}: {msgids[0]!r} has no {lang} translation")
            continue
        strings = entry.string if isinstance(entry.string, tuple) else (entry.string,)
        for translated in strings:
            if _fields(translated) != _fields(msgids[0]):
                problems.append(f"{where}: {msgids[0]!r} and its {lang} translation name other placeholders")
    assert not problems, "\n".join(problems)


def test_a_translated_message_is_spoken_after_use_and_english_stays_the_default():
    catalog = _catalog("es")
    entry = next((m for m in catalog if m.id and isinstance(m.id, str) and m.string), None)
    if entry is None:
        pytest.skip("the Spanish catalog holds no message yet")
    assert i18n._(entry.id) == entry.id
    i18n.use("es")
    assert i18n.language() == "es"
    assert i18n._(entry.id) == entry.string
