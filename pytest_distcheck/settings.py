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
            return str(cli), f"command line {self.flag}"
        if self.env in os.environ:
            return os.environ[self.env], f"environment variable {self.env}"
        return str(config.getini(self.ini)), f"ini key {self.ini}"

    def positive_float(self, config: pytest.Config) -> float:
        """The value as seconds or USD, finite and > 0. Raises ``pytest.UsageError`` naming the source."""
        text, source = self.raw(config)
        try:
            value = float(text)
        except ValueError:
            raise pytest.UsageError(f"{source}: {text!r} is not a number") from None
        if not value > 0:
            raise pytest.UsageError(f"{source}: must be > 0, got {text!r}")
        if value == math.inf:
            raise pytest.UsageError(f"{source}: must be finite, got {text!r}")
        return value


TIMEOUT = Setting(
    flag="--distcheck-timeout",
    env="DISTCHECK_TIMEOUT",
    ini="distcheck_timeout",
    help="seconds one dist_world.run() call may take before its ranks are stack-dumped and killed",
    default="60",
)
