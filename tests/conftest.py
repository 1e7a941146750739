"""Helpers shared by the kit's own tests."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from dod_support import MINI_WORKSPACE

from pytest_distcheck.phase_pack import PACK_GLOBS

SHIMS = str(Path(__file__).parent / "shims")
RUN_LANGUAGE = "en"  # the language this run was started in (pytest_configure); its own closing lines speak it
LEARNERS_TESTS = {Path(p).name for p in PACK_GLOBS if p.startswith("tests/")}


@pytest.fixture
def workspace_dir(pytester: pytest.Pytester):
    """A pytester folder with a two-item workspace file at the default place, checks/distcheck.toml."""
    pytester.mkdir("checks")
    (pytester.path / "checks" / "distcheck.toml").write_text(textwrap.dedent(MINI_WORKSPACE))
    return pytester


def pytest_configure(config):
    """The kit's tests check its English messages, so they speak English whatever this machine's locale
    (LANG=es_ES.UTF-8 makes the kit speak Spanish). Set once for the session, not per test, so that a test
    calling ``monkeypatch.undo()`` cannot drop it; a test of the language setting unsets it itself."""
    from pytest_distcheck import i18n

    global RUN_LANGUAGE
    RUN_LANGUAGE = i18n.language()  # the plugin chose it from --lang, the environment or the ini, before this hook
    os.environ["DISTCHECK_LANG"] = i18n.DEFAULT
    # This process and its children import the py-cpuinfo stand-in (why: tests/shims/cpuinfo.py).
    paths = [SHIMS, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if SHIMS not in sys.path:
        sys.path.insert(0, SHIMS)


@pytest.fixture(autouse=True)
def _the_kit_speaks_english(request):
    """A test that switched the kit's language leaves the next one in English; except in the four lab-02 test
    files a learner runs to read the kit's diagnoses (docs/lab/02-tp-inference-cloud.md), which compare them in
    the language in use and so speak the run's language, as they do where `distcheck init` copied them."""
    from pytest_distcheck import i18n

    i18n.use(RUN_LANGUAGE if request.path.name in LEARNERS_TESTS else i18n.DEFAULT)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """The tests spoke English; the run's own closing lines (the DoD line of the terminal summary, after this
    hook) speak the language it was started in, as they do in a workspace, where lab 02 runs some of these
    tests without this file (``pytest tests/test_tp_model.py``)."""
    from pytest_distcheck import i18n

    i18n.use(RUN_LANGUAGE)
