"""The language the kit speaks to the learner, and the gettext catalog that speaks it.

Precedence: ``--lang``, ``$DISTCHECK_LANG``, ini ``distcheck_lang`` (a ``distcheck`` command reads its
workspace's pytest configuration), the locale (the first of ``$LC_ALL``, ``$LC_MESSAGES``, ``$LANG`` that is
set, as POSIX orders them), then English. Catalogs are
``locale/<lang>/LC_MESSAGES/distcheck.mo`` beside this file, compiled from the ``.po`` next to them
(docs/kit/translating.md). Identifiers (item ids, commands, options, file names, report fields) are never
translated. The setting itself is :data:`pytest_distcheck.settings.LANG`.
"""

from __future__ import annotations

import functools
import gettext
import os
from collections.abc import Mapping
from pathlib import Path

SUPPORTED = ("en", "es")
DEFAULT = "en"
DOMAIN = "distcheck"
LOCALE_DIR = Path(__file__).with_name("locale")
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")
# The setting's names (settings.LANG is the Setting; settings speaks through this module, so it names them here).
FLAG, ENV, INI = "--lang", "DISTCHECK_LANG", "distcheck_lang"

UNSUPPORTED = "{source}: language {value!r} is not supported; use one of: {choices}"


class LanguageError(ValueError):
    """A language setting outside :data:`SUPPORTED`; the message names where the value came from."""


def from_locale(environ: Mapping[str, str]) -> str | None:
    """``"es"`` when the locale that gettext would read (LC_ALL, else LC_MESSAGES, else LANG) is Spanish,
    ``"en"`` for any other locale that is set, ``None`` when none is set."""
    for name in LOCALE_VARIABLES:
        value = environ.get(name, "")
        if value:
            return "es" if value.lower().startswith("es") else DEFAULT
    return None


def choose(cli: str | None, environ: Mapping[str, str], ini: str = "") -> tuple[str, str]:
    """The language and where it came from, in the precedence of this module's docstring.

    An empty value counts as unset. Raises :class:`LanguageError` for a value outside :data:`SUPPORTED`
    given on the command line, in ``$DISTCHECK_LANG`` or in the ini file (a locale that is not Spanish is
    English, not an error)."""
    given = ((cli, f"command line {FLAG}"), (environ.get(ENV), f"environment variable {ENV}"),
             (ini, f"ini key {INI}"))
    for value, source in given:
        if value:
            lang = value.strip().lower()
            if lang not in SUPPORTED:
                raise LanguageError(UNSUPPORTED.format(source=source, value=value, choices=", ".join(SUPPORTED)))
            return lang, source
    lang = from_locale(environ)
    if lang is not None:
        return lang, "the locale"
    return DEFAULT, "the default"


_translations: gettext.NullTranslations = gettext.NullTranslations()
_language = DEFAULT


def use(lang: str) -> None:
    """Speak ``lang`` (one of :data:`SUPPORTED`) from now on in this process."""
    global _translations, _language
    if lang not in SUPPORTED:
        raise LanguageError(UNSUPPORTED.format(source="use()", value=lang, choices=", ".join(SUPPORTED)))
    _language = lang
    _translations = _catalog(lang)


@functools.lru_cache(maxsize=None)
def _catalog(lang: str) -> gettext.NullTranslations:
    return gettext.NullTranslations() if lang == DEFAULT else gettext.translation(DOMAIN, LOCALE_DIR, languages=[lang])


def language() -> str:
    """The language in use: one of :data:`SUPPORTED`."""
    return _language


def _(message: str) -> str:
    """``message`` (an English msgid) in the language in use."""
    return _translations.gettext(message)


def in_language(lang: str, message: str) -> str:
    """``message`` in ``lang`` (one of :data:`SUPPORTED`), whatever the language in use: for text the kit
    recognises in every language it prints it in (the diagram skeleton)."""
    if lang not in SUPPORTED:
        raise LanguageError(UNSUPPORTED.format(source="in_language()", value=lang, choices=", ".join(SUPPORTED)))
    return _catalog(lang).gettext(message)


def N_(message: str) -> str:
    """Mark ``message`` for the catalog without translating it: for a message constant that tests import
    and the code speaks later as ``_(CONSTANT)``."""
    return message


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for ``n`` in the language in use."""
    return _translations.ngettext(singular, plural, n)


def use_from(cli: str | None, ini: str = "", environ: Mapping[str, str] | None = None) -> str:
    """:func:`choose` then :func:`use`; returns the language. Raises :class:`LanguageError`."""
    lang, _source = choose(cli, os.environ if environ is None else environ, ini)
    use(lang)
    return lang
