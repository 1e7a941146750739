"""Resolving package/path/symbol/quote against installed distributions, found via importlib.metadata.

Most tests use the synthetic distributions in fixtures/notes/site (toyparallel, otherpkg), so they do
not depend on which torch or megatron-core is installed.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_distcheck.citations.find import find_symbol
from pytest_distcheck.citations.quote import nearest, normalise
from pytest_distcheck.citations.resolver import Problem, Resolver, public_version
from pytest_distcheck.citations.symbols import SourceFile

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "fixtures" / "notes" / "site"
LAYERS = "toyparallel/layers.py"


@pytest.fixture
def toy(monkeypatch) -> Resolver:
    monkeypatch.syspath_prepend(str(SITE))
    return Resolver()


def problem(call) -> Problem:
    with pytest.raises(Problem) as info:
        call()
    return info.value


def test_the_distribution_comes_from_its_metadata(toy):
    dist = toy.distribution("toyparallel")
    assert (dist.name, dist.version, dist.root) == ("toyparallel", "1.2.0", SITE.resolve())
    assert LAYERS in dist.files
    assert toy.distribution("Toyparallel") is dist  # pip's spellings are one distribution


def test_symbols_are_classes_functions_methods_nested_and_attributes(toy):
    _, src, _ = toy.symbol("toyparallel", LAYERS, "ColumnLinear")
    assert {
        "DEFAULT_WORLD_SIZE", "typing_only_helper", "divide", "ColumnLinear", "ColumnLinear.__init__",
        "ColumnLinear.forward", "ColumnLinear.shape", "RowLinear.forward", "make_pair.build_inner",
    } <= set(src.spans)
    assert "RowLinear.forward.partial" not in src.spans  # a local variable is not a symbol


def test_a_property_and_its_setter_are_two_spans_of_one_name(toy):
    _, _, spans = toy.symbol("toyparallel", LAYERS, "ColumnLinear.shape")
    assert [(s.start, s.end) for s in spans] == [(36, 38), (40, 42)]
    assert spans[0].text.startswith("@property")  # the span starts at the decorator


@pytest.mark.parametrize(
    ("package", "path", "symbol", "code", "message"),
    [
        ("toyparallel", "toyparallel/layer.py", "divide", "not-in-package",
         "toyparallel/layer.py is not a file of toyparallel 1.2.0; "
         "did you mean toyparallel/layers.py or toyparallel/sharding.py?"),
        ("toyparallel", "stray.py", "x", "not-in-package", "stray.py is not a file of toyparallel 1.2.0"),
        ("toyparallel", "toyparallel/../otherpkg/helpers.py", "helper", "escapes-package",
         "'toyparallel/../otherpkg/helpers.py' escapes the package with '..'"),
        ("toyparallel", "/etc/hosts", "x", "absolute-path", "'/etc/hosts' is absolute"),
        ("toyparallel", "C:/x/layers.py", "x", "absolute-path", "'C:/x/layers.py' is absolute"),
        ("toyparallel", "otherpkg/helpers.py", "helper", "other-package",
         "otherpkg/helpers.py belongs to otherpkg 0.3.0, not to toyparallel"),
        ("toyparallel", "toyparallel/NOTICE.txt", "x", "not-python", "toyparallel/NOTICE.txt is not Python source"),
        ("toyparallel", LAYERS, "ColumnLinear.fwd", "symbol-not-found",
         "ColumnLinear.fwd is not defined in toyparallel/layers.py; did you mean ColumnLinear.forward"),
        ("absent-dist", "absent/x.py", "f", "not-installed", "distribution 'absent-dist' is not installed"),
    ],
)
def test_each_problem_has_a_code_and_says_why(toy, package, path, symbol, code, message):
    exc = problem(lambda: toy.symbol(package, path, symbol))
    assert exc.code == code
    assert message in exc.message


def test_a_file_that_does_not_parse_is_reported(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")
    exc = problem(lambda: Resolver().source(bad))
    assert exc.code == "unparsable" and "bad.py" in exc.message


def test_source_files_honour_their_encoding_line(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes("# -*- coding: latin-1 -*-\ndef f():\n    return 'caf\xe9'\n".encode("latin-1"))
    assert "café" in SourceFile(path).spans["f"][0].text


def test_normalise_collapses_every_run_of_whitespace():
    assert normalise("  a\n\t  b   c \n") == "a b c"


def test_nearest_finds_a_typo_across_a_line_break():
    lines = ["    x = 1", '    """one all-reduce sums the', '    partial products"""', "    return x"]
    assert nearest("one all-reduse sums the partial", lines, first_line=10) == (
        11, "one all-reduce sums the partial prod"
    )
    assert nearest("nothing like it at all, really", lines, first_line=10) is None


def test_public_version_drops_the_local_label():
    assert public_version("2.13.0+cpu") == "2.13.0"
    assert public_version("not a version") == "not a version"


def test_find_lists_every_definition_with_a_citation_to_paste(toy):
    hits = find_symbol(toy, "forward", "toyparallel")
    assert [(h.path, h.span.name) for h in hits] == [(LAYERS, "ColumnLinear.forward"), (LAYERS, "RowLinear.forward")]
    assert hits[0].citation() == '[cite: toyparallel toyparallel/layers.py::ColumnLinear.forward "..."]'
    assert find_symbol(toy, "Nope", "toyparallel") == []


def test_real_torch_fsdp_symbols_resolve():
    # The installed torch (the kit's own dependency): FSDP1 and FSDP2 sources are where the notes say.
    resolver = Resolver()
    _, _, spans = resolver.symbol("torch", "torch/distributed/fsdp/api.py", "ShardingStrategy")
    assert "FULL_SHARD = auto()" in spans[0].text
    _, _, spans = resolver.symbol("torch", "torch/distributed/fsdp/_fully_shard/_fsdp_param.py", "FSDPParam")
    assert "dim-0 per-parameter sharding" in spans[0].text


def test_megatron_resolves_without_being_imported():
    try:
        importlib.metadata.distribution("megatron-core")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("megatron-core is not installed (pip install -e '.[notes]')")
    code = textwrap.dedent("""
        import sys
        from pytest_distcheck.citations.resolver import Resolver
        r = Resolver()
        r.symbol("megatron-core", "megatron/core/tensor_parallel/layers.py", "ColumnParallelLinear.forward")
        print("megatron" in sys.modules, "torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]


def test_a_source_changed_since_it_was_installed_confirms_no_citation(tmp_path, monkeypatch):
    """Issue 26: lab code appended an invented function to an installed source, and citations of it came back
    confirmed. A file whose sha256 is not the one its distribution's RECORD gives makes the citation
    unverifiable, naming the file and the reinstall."""
    import base64
    import hashlib
    import shutil

    from pytest_distcheck.citations.resolver import CHANGED_SOURCE

    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    layers = site / LAYERS
    digest = base64.urlsafe_b64encode(hashlib.sha256(layers.read_bytes()).digest()).rstrip(b"=").decode()
    record = site / "toyparallel-1.2.0.dist-info" / "RECORD"
    record.write_text(record.read_text().replace(f"{LAYERS},,", f"{LAYERS},sha256={digest},{layers.stat().st_size}"))
    monkeypatch.syspath_prepend(str(site))
    assert Resolver().symbol("toyparallel", LAYERS, "ColumnLinear")[2]  # as installed: resolves
    layers.write_text(layers.read_text() + "\n\ndef invented_design_decision():\n    return 'made up'\n")
    exc = problem(lambda: Resolver().symbol("toyparallel", LAYERS, "invented_design_decision"))
    assert exc.code == "changed-source"
    assert exc.message == CHANGED_SOURCE.format(rel=LAYERS, name="toyparallel", version="1.2.0")


def test_a_distribution_s_record_is_read_once_and_normalised_texts_are_made_once(toy, monkeypatch):
    reads = []
    files = importlib.metadata.PathDistribution.files

    def counted(self):
        reads.append(self.metadata["Name"])
        return files.fget(self)

    monkeypatch.setattr(importlib.metadata.PathDistribution, "files", property(counted))
    dist = toy.distribution("toyparallel")
    toy.distribution("toyparallel")
    assert reads == ["toyparallel"]  # RECORD parsed once, though files and hashes both come from it
    assert LAYERS in dist.files
    first = toy.normalised(dist, LAYERS)
    assert first == normalise(toy.texts(dist)[LAYERS]) and toy.normalised(dist, LAYERS) is first
