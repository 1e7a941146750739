"""Settings shared by a command-line flag, an environment variable and an ini key.

Precedence, as in pytest-timeout: command line, then environment, then ini file, then the default;
a marker or an argument overrides for one test or one call. Each setting has one description that
its flag and its ini key share.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.i18n import DEFAULT, N_, SUPPORTED, _

# Where a value came from, named in every error about it.
FROM_CLI = N_("command line {flag}")
FROM_ENV = N_("environment variable {env}")
FROM_INI = N_("ini key {ini}")
NOT_A_NUMBER = N_("{source}: {text!r} is not a number")
NOT_POSITIVE = N_("{source}: must be > 0, got {text!r}")
NOT_FINITE = N_("{source}: must be finite, got {text!r}")


@dataclass(frozen=True)
class Setting:
    """A setting reachable as ``--flag``, ``$ENV`` and ini ``key``."""

    flag: str
    env: str
    ini: str
    help: str
    default: str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def add(self, parser: pytest.Parser, group: pytest.OptionGroup) -> None:
        group.addoption(self.flag, dest=self.dest, default=None, help=f"{self.help} (env {self.env}, ini {self.ini})")
        parser.addini(self.ini, self.help, default=self.default)

    def raw(self, config: pytest.Config) -> tuple[str, str]:
        """(value, where it came from): the source is named in errors about the value."""
        cli = config.getoption(self.dest)
        if cli is not None:
            return str(cli), _(FROM_CLI).format(flag=self.flag)
        if self.env in os.environ:
            return os.environ[self.env], _(FROM_ENV).format(env=self.env)
        return str(config.getini(self.ini)), _(FROM_INI).format(ini=self.ini)

    def given(self, config: pytest.Config) -> bool:
        """Whether the setting was given (command line, environment or an ini value other than the default)."""
        return config.getoption(self.dest) is not None or self.env in os.environ or (
            str(config.getini(self.ini)) != self.default)

    def positive_float(self, config: pytest.Config) -> float:
        """The value as seconds or USD, finite and > 0. Raises ``pytest.UsageError`` naming the source."""
        text, source = self.raw(config)
        try:
            value = float(text)
        except ValueError:
            raise pytest.UsageError(_(NOT_A_NUMBER).format(source=source, text=text)) from None
        if not math.isfinite(value):  # nan and inf: "must be > 0" would be no help for nan
            raise pytest.UsageError(_(NOT_FINITE).format(source=source, text=text))
        if not value > 0:
            raise pytest.UsageError(_(NOT_POSITIVE).format(source=source, text=text))
        return value


LANG = Setting(
    flag=i18n.FLAG,
    env=i18n.ENV,
    ini=i18n.INI,
    help=f"language of the kit's messages: {' or '.join(SUPPORTED)} (default: from the locale, else {DEFAULT})",
    default="",
)
TIMEOUT = Setting(
    flag="--distcheck-timeout",
    env="DISTCHECK_TIMEOUT",
    ini="distcheck_timeout",
    help="seconds one dist_world.run() call may take before its ranks are stack-dumped and killed",
    default="60",
)
