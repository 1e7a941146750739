"""`distcheck cite` in Spanish: why a citation does not resolve, and the --record refusals."""

from __future__ import annotations

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.citations.resolver import NOT_INSTALLED, Problem, Resolver
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
