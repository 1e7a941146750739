"""Every miss points to the right place (issue 19): each hint case with its message.

The toy package (fixtures/notes/site/toyparallel, SYNTHETIC) holds the cases: sharding.py has
@overload stubs, imported classes, a near-miss beside an exact match elsewhere; a few cases need the
real megatron-core or torch sources and are skipped without them.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from pytest_distcheck.citations.resolver import Resolver
from pytest_distcheck.citations.syntax import CURLY_QUOTE, EXPECTED, FORM, SINGLE_QUOTES
from pytest_distcheck.citations.verifier import verify_note

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "fixtures" / "notes" / "site"


@pytest.fixture(autouse=True)
def toy_site(monkeypatch):
    monkeypatch.syspath_prepend(str(SITE))


@pytest.fixture(scope="module")
def resolver():
    return Resolver()


def installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def verify(tmp_path, resolver, citation: str):
    path = tmp_path / "n.md"
    path.write_text(f"A statement of a decision made in the code, with enough words to count\n[cite: {citation}].\n")
    return verify_note(path, resolver)


def failed(tmp_path, resolver, citation: str):
    (res,) = verify(tmp_path, resolver, citation).failures
    return res.code, res.reason


@pytest.mark.parametrize(
    ("citation", "code", "reason"),
    [
        pytest.param(
            "toyparallel toyparallel/sharding.py::shard "
            '"the implementation pads the last chunk with zero before splitting"',
            "quote-not-in-symbol",
            "quote not in shard (lines 28-30); nearest at line 29: "
            "'the implementation pads the last chunk with zeros before splitting'",
            id="overload-resolved-to-implementation",
        ),
        pytest.param(
            'toyparallel toyparallel/sharding.py::gather "chunks of every rank in order"',
            "quote-not-in-symbol",
            "quote not in gather (lines 33-35); nearest at line 34: 'chunks of every rank in rank order' "
            "(the exact text is in unrelated, lines 38-39)",
            id="near-miss-before-exact-elsewhere",
        ),
        pytest.param(
            'toyparallel toyparallel/sharding.py::ColumnLinear.forward "no communication in forward"',
            "symbol-not-found",
            "ColumnLinear.forward is not defined in toyparallel/sharding.py; it is imported there from "
            "toyparallel.layers: defined in toyparallel/layers.py::ColumnLinear.forward (lines 32-34)",
            id="imported-absolute",
        ),
        pytest.param(
            'toyparallel toyparallel/sharding.py::Row "one all-reduce sums the partial products"',
            "symbol-not-found",
            "Row is not defined in toyparallel/sharding.py; it is imported there from .layers: "
            "defined in toyparallel/layers.py::RowLinear (lines 45-50)",
            id="imported-relative-alias",
        ),
        pytest.param(
            'toyparallel toyparallel/layers.py::gather "chunks of every rank in rank order"',
            "symbol-not-found",
            "gather is not defined in toyparallel/layers.py; did you mean toyparallel/sharding.py? "
            "gather is defined there (lines 33-35)",
            id="wrong-file-package-search",
        ),
        pytest.param(
            'toyparallel toyparallel/shard.py::gather "chunks of every rank in rank order"',
            "not-in-package",
            "toyparallel/shard.py is not a file of toyparallel 1.2.0; did you mean toyparallel/sharding.py? "
            "gather is defined there (lines 33-35)",
            id="missing-file-package-search",
        ),
        pytest.param(
            'toyparallel toyparallel/training/loop.py::train "chunks of every rank in rank order"',
            "not-in-package",
            "toyparallel/training/loop.py is not a file of toyparallel 1.2.0: no file of it is under "
            "toyparallel/training/ (it installs toyparallel/testing/); the path may be from the project's "
            "source repository, which holds more than this distribution",
            id="folder-not-shipped",
        ),
        pytest.param(
            "toyparallel https://github.com/example/toyparallel/blob/v1.2.0/toyparallel/layers.py#L33"
            "::ColumnLinear.forward "
            '"each rank owns a column slice"',
            "url",
            "a URL is not a PATH: write toyparallel/layers.py::SYMBOL (the #L33 anchor points into one version "
            "of the repository; line numbers drift between versions, so cite the symbol defined there instead); "
            "line 33 of the installed toyparallel 1.2.0 file is in ColumnLinear.forward, which may not be the "
            'line the URL meant: [cite: toyparallel toyparallel/layers.py::ColumnLinear.forward "..."]',
            id="github-url",
        ),
        pytest.param(
            r'toyparallel toyparallel/layers.py::ColumnLinear.forward "def forward(self, x):\n# no communication"',
            "quote-not-in-symbol",
            r"; a \n in a quote is read as the letter n: whitespace, line breaks included, is normalised to "
            "one space, so write a line break as a space",
            id="backslash-n",
        ),
    ],
)
def test_each_miss_says_where_to_look(tmp_path, resolver, citation, code, reason):
    got = failed(tmp_path, resolver, citation)
    assert got[0] == code and reason in got[1], got


@pytest.mark.parametrize(
    ("citation", "problem"),
    [
        pytest.param(
            "toyparallel https://github.com/example/toyparallel/blob/main/toyparallel/layers.py#L49 \"one all-reduce\"",
            "a URL is not a PATH: write toyparallel/layers.py::SYMBOL (the #L49 anchor points into one version "
            "of the repository; line numbers drift between versions, so cite the symbol defined there instead); "
            "line 49 of the installed toyparallel 1.2.0 file is in RowLinear.forward",
            id="github-url-without-symbol",
        ),
        pytest.param(
            "toyparallel toyparallel/layers.py::RowLinear.forward \u201cone all-reduce sums the partial products\u201d",
            EXPECTED.format(problem=CURLY_QUOTE.format(quote="\u201c"), form=FORM),
            id="curly-quotes",
        ),
        pytest.param(
            "toyparallel toyparallel/layers.py::RowLinear.forward 'one all-reduce sums the partial products'",
            EXPECTED.format(problem=SINGLE_QUOTES, form=FORM),
            id="single-quotes",
        ),
    ],
)
def test_malformed_citations_explain_the_fix(tmp_path, resolver, citation, problem):
    (bad,) = verify(tmp_path, resolver, citation).malformed
    assert bad.line == 2 and problem in bad.problem, bad.problem


@pytest.mark.skipif(not installed("megatron-core"), reason="needs megatron-core")
def test_a_megatron_lm_only_path_is_explained(tmp_path, resolver):
    code, reason = failed(
        tmp_path, resolver, 'megatron-core megatron/training/arguments.py::parse_args "def parse_args("'
    )
    assert code == "not-in-package"
    assert reason.startswith(
        "megatron/training/arguments.py is not a file of megatron-core 0.16.1: no file of it is under "
        "megatron/training/ (it installs megatron/core/)"
    ) or "(it installs megatron/core/)" in reason


@pytest.mark.skipif(not installed("torch"), reason="needs torch")
def test_a_class_cited_where_torch_only_imports_it_points_to_its_definition(tmp_path, resolver):
    code, reason = failed(tmp_path, resolver, 'torch torch/distributed/tensor/__init__.py::DTensor "class DTensor("')
    assert code == "symbol-not-found"
    assert (
        "it is imported there from torch.distributed.tensor._api: defined in torch/distributed/tensor/_api.py::DTensor"
    ) in reason


BACKTICK_HINT = "wrap the whole citation in backticks (`[cite: ...]`) so that Markdown keeps them"


def test_a_quote_whose_backticks_markdown_ate_says_to_wrap_the_citation(tmp_path, resolver):
    """Unwrapped, ``ROW_SPLIT`` in a quote is a code span: the rendered quote lost its backticks, the
    source still has them, so the quote misses; the message says why and what to do (lab 03, "How to cite")."""
    code, reason = failed(tmp_path, resolver, 'toyparallel toyparallel/sharding.py::hybrid '
                          '"Like ``ROW_SPLIT``, except the split stays inside one node"')
    assert code == "quote-not-in-symbol"
    assert "nearest at line" in reason and "Markdown read the backticks of the quote as code" in reason, reason
    assert BACKTICK_HINT in reason, reason


def test_a_wrapped_citation_keeps_its_backticks_and_resolves(tmp_path, resolver):
    path = tmp_path / "n.md"
    path.write_text("A statement of a decision made in the code, with enough words to count\n"
                    '`[cite: toyparallel toyparallel/sharding.py::hybrid "Like ``ROW_SPLIT``, except the split"]`.\n')
    report = verify_note(path, resolver)
    assert report.ok and report.cited_statements == 1, [r.reason for r in report.results]


def test_a_quote_that_misses_for_another_reason_gets_no_backtick_hint(tmp_path, resolver):
    code, reason = failed(tmp_path, resolver, 'toyparallel toyparallel/sharding.py::hybrid '
                          '"Like ROW_SPLIT, except the split stays inside two nodes"')
    assert code == "quote-not-in-symbol" and "backticks" not in reason, reason


@pytest.mark.skipif(not installed("torch"), reason="needs torch")
def test_the_fsdp_quote_with_double_backticks_gets_the_hint(tmp_path, resolver):
    """The fresh-user trial's citation, unwrapped (torch's ShardingStrategy docstring has ``HYBRID_SHARD``)."""
    code, reason = failed(tmp_path, resolver, 'torch torch/distributed/fsdp/api.py::ShardingStrategy '
                          '"This is like ``HYBRID_SHARD``, except this may provide even higher throughput"')
    assert code == "quote-not-in-symbol" and BACKTICK_HINT in reason, reason


def test_find_lists_the_implementation_not_the_overload_stubs(resolver):
    from pytest_distcheck.citations.find import find_symbol

    found = find_symbol(resolver, "shard", "toyparallel")
    assert [(f.path, f.span.start, f.span.end) for f in found] == [("toyparallel/sharding.py", 28, 30)]


def test_a_url_citation_says_where_its_line_is_also_in_spanish(tmp_path, resolver):
    """The line anchor's symbol goes before "; expected FORM" in the language in use (it was looked up by the
    English words, so under es it was left out)."""
    from pytest_distcheck import i18n
    from pytest_distcheck.citations.syntax import URL_ANCHOR, URL_WRITE
    from pytest_distcheck.citations.verifier import URL_LINE_IS_IN
    from pytest_distcheck.i18n import _

    citation = ("toyparallel https://github.com/example/toyparallel/blob/main/toyparallel/layers.py#L49 "
                "\"one all-reduce\"")
    i18n.use("es")
    try:
        (bad,) = verify(tmp_path, resolver, citation).malformed
        hint = _(URL_WRITE).format(path="toyparallel/layers.py", anchor=_(URL_ANCHOR).format(line=49))
        line = _(URL_LINE_IS_IN).format(line=49, dist="toyparallel", version="1.2.0", symbol="RowLinear.forward",
                                        path="toyparallel/layers.py")
        expected = _(EXPECTED).format(problem=hint + line, form=FORM)
    finally:
        i18n.use(i18n.DEFAULT)
    assert bad.problem == expected and expected.startswith("una URL no es un PATH: escribe toyparallel/layers.py"), (
        bad.problem)
    assert "; la línea 49 del fichero instalado de toyparallel 1.2.0 está en RowLinear.forward" in bad.problem
