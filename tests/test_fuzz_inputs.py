"""Fuzz the parsers that read what a learner writes or types (issue 17 point 6, beyond the calculator options
of test_calc_inputs.py): the spend ledger and `distcheck budget`, the citation syntax and `distcheck cite`,
the quiz's answer parser, the price table and `distcheck estimate`'s names, and the Mermaid page check.

Seeded random input, in process (no subprocess). Garbled input must end in a normal result or the kit's own
error (a DistcheckError naming the file and line or field; AnswerError for a quiz answer), never another
exception; the ledger's bytes only ever grow at the end. Each input a fuzz run found broken is a named case
below it, so it stays pinned whatever the random draw.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
from pathlib import Path

import pytest

from pytest_distcheck.budget.config import ABSURD_CEILING, CURRENCY_SIGN, MAX_CEILING_USD, NOT_FINITE
from pytest_distcheck.budget.ledger import Ledger, LedgerError, make_row, parse
from pytest_distcheck.budget.pricing import PriceBook
from pytest_distcheck.citations.syntax import EXPECTED, FORM, NOT_CLOSED_AFTER, parse_note
from pytest_distcheck.cli import main
from pytest_distcheck.errors import ConfigError, DistcheckError
from pytest_distcheck.quiz.answers import AnswerError, parse_choice, parse_number

ROOT = Path(__file__).resolve().parents[1]
LEDGER_FIXTURE = (ROOT / "fixtures" / "budget" / "ledger-within.md").read_text(encoding="utf-8")
NOTES = ROOT / "fixtures" / "notes"
# Characters that break Markdown tables, numbers and quotes: separators, escapes, digits of other scripts
# (U+00B2 superscript two, U+0663 Arabic-Indic three), a byte-order mark, CR, NUL, a line separator.
NOISE = list("|\\-:.0123456789 xX\n\t\"'`[]()#*_/$%<>{};,=@!~^&") + [
    "\u00b2", "\u0663", "\ufeff", "\r", "\x00", "\u00e9", "\u2026", "\u2028", "\u201c"]


def garble(rng: random.Random, text: str, edits: int | None = None) -> str:
    """``text`` after 1-4 random edits: a cut, an insertion of noise, a repeated, dropped or reordered
    line, or a truncation."""
    for _ in range(edits or rng.randint(1, 4)):
        op, i = rng.random(), rng.randrange(len(text) + 1)
        lines = text.split("\n")
        if op < 0.3:
            text = text[:i] + text[i + rng.randint(1, 8):]
        elif op < 0.6:
            text = text[:i] + "".join(rng.choice(NOISE) for _ in range(rng.randint(1, 4))) + text[i:]
        elif op < 0.7:
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(lines))
            text = "\n".join(lines)
        elif op < 0.8:
            lines.pop(rng.randrange(len(lines)))
            text = "\n".join(lines)
        elif op < 0.85:
            rng.shuffle(lines)
            text = "\n".join(lines)
        else:
            text = text[:i]
    return text


CELLS = ["", "-", "0", "-1", "999999999999", "9999999999999", "1e3", "0x10", "\u0663", "9\u00b2", "1.18",
         "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-02-30T10:00:00Z", "open", "settled", "overrun",
         "reconciled", "started", "usd", "EUR", "RTX 4090 x 0", " x 1", "A40 x 99999999999999999999", "podZ",
         "a\\|b", "0" * 16, "g" * 16, "999999999999.999999999999", "0.000000000001"]


def garbled_ledger(rng: random.Random) -> str:
    """The fixture ledger with random edits: either anywhere in the text or in 1-3 table cells."""
    if rng.random() < 0.5:
        return garble(rng, LEDGER_FIXTURE)
    lines = LEDGER_FIXTURE.splitlines()
    first_row = next(n for n, ln in enumerate(lines) if ln.startswith("|")) + 2
    for _ in range(rng.randint(1, 3)):
        n = rng.randrange(first_row, len(lines))
        cells = lines[n].strip().strip("|").split("|")
        cells[rng.randrange(len(cells))] = f" {rng.choice(CELLS)} "
        lines[n] = "|" + "|".join(cells) + "|"
    return "\n".join(lines) + "\n"


def run_cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``distcheck ARGV`` in process; any exception but SystemExit fails."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    except Exception as exc:  # noqa: BLE001 - the point: nothing else may escape
        pytest.fail(f"distcheck {argv!r} raised {type(exc).__name__}: {exc}")
    out, err = capsys.readouterr()
    assert rc in (0, 1, 2), (argv, rc, out, err)
    if rc == 2:
        assert err.strip(), f"{argv}: exit 2 without a message"
    assert "Traceback" not in out + err, argv
    return rc, out, err


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """The phase's workspace file in an empty folder, cwd there, no RunPod key (the shipped price table)."""
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    (tmp_path / "checks").mkdir()
    (tmp_path / "experiments").mkdir()
    shutil.copy(ROOT / "checks" / "distcheck.toml", tmp_path / "checks")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- the spend ledger ---------------------------------------------------------------------------------

def test_fuzz_ledger_reader_names_the_line_and_append_never_rewrites(tmp_path):
    rng = random.Random(35)
    path = tmp_path / "ledger.md"
    for n in range(150):
        text = garbled_ledger(rng)
        try:
            parse(text, path)
        except LedgerError as exc:
            assert str(path) in str(exc) and "line " in str(exc), str(exc)
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"ledger {text!r}: {type(exc).__name__}: {exc}")
        if n % 3:
            continue
        path.write_text(text, encoding="utf-8")
        before = path.read_bytes()
        ledger = Ledger(path, tmp_path / f"lock{n}" / "budget.lock")
        new = make_row(run_id=f"fuzz-{n}", status="open", provider="runpod", gpu_type="A40", gpu_count=1,
                       billed_s=60, rate_per_hour=0.4, experiment=None, purpose="fuzz", resource_id="-")
        try:
            ledger.append(new)
        except DistcheckError:
            assert path.read_bytes() == before  # refused: nothing written
        else:
            assert path.read_bytes().startswith(before)  # appended: every old byte kept


def test_fuzz_budget_command_arguments_and_ledgers(workspace, capsys):
    rng = random.Random(36)
    ledger = workspace / "experiments" / "35-cloud-budget.md"
    values = ["aaaa1111-01", "cccc3333-01", "", " ", "-", "x|y", "1", "-5", "1200", "1300", "1e9", "nan",
              "99999999999999999999999", "\u0663", "1.5", "0", "--", "\n", "a" * 300]
    for _ in range(60):
        ledger.write_text(garbled_ledger(rng) if rng.random() < 0.7 else LEDGER_FIXTURE, encoding="utf-8")
        before = ledger.read_bytes()
        argv = ["budget"]
        if rng.random() < 0.6:
            argv += ["--settle", rng.choice(values), "--seconds", rng.choice(values)][:rng.choice((2, 4, 4))]
        elif rng.random() < 0.5:
            argv += ["--seconds", rng.choice(values)]
        run_cli(capsys, argv)
        if "--settle" in argv:
            assert ledger.read_bytes().startswith(before), argv
        else:
            assert ledger.read_bytes() == before, argv
        shutil.rmtree(workspace / ".distcheck", ignore_errors=True)  # the head record of the last append


# -- quiz answers -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "unit"), [("inf/2", "GB"), ("1e400/2", "GB"), ("1e308/1e-308", ""),
                                             ("1 x 10^400", "GB"), ("2 x 10^99999999999999999999", ""),
                                             ("1e308 TB", "KB")])
def test_an_answer_too_large_for_a_float_is_an_answer_error(text, unit):
    with pytest.raises(AnswerError, match="is not a finite number"):
        parse_number(text, unit)


@pytest.mark.parametrize("text", ["\u00b2", "0\u00b2", "\u00b21"])
def test_a_choice_in_other_digits_is_an_answer_error(text):
    with pytest.raises(AnswerError, match="answer with a letter A-D"):
        parse_choice(text, 4)


ANSWER_TOKENS = ["1", "0", "-", "+", ".", "e", "E", "x", "\u00d7", "*", "10", "^", "/", "%", "$", " ", ",", "_",
                 "inf", "nan", "400", "308", "-400", "B", "GB", "ms", "K", "\u00b5s", "TB/s", "\u00bd", "\u00b2",
                 "\u0661", "(", ")", "a", "9" * 30]


def test_fuzz_quiz_answers_give_a_finite_number_a_letter_or_an_answer_error():
    rng = random.Random(37)
    for _ in range(1500):
        text = "".join(rng.choice(ANSWER_TOKENS) for _ in range(rng.randint(0, 7)))
        for unit in ("", "GB", "ms", "billion", "B", "GB/s", "USD"):
            try:
                value = parse_number(text, unit)
            except AnswerError as exc:
                assert str(exc)
            else:
                assert isinstance(value, float) and value == value and abs(value) != float("inf"), (text, unit)
        try:
            assert parse_choice(text, 4) in "ABCD"
        except AnswerError:
            pass


# -- citations ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["A claim [cite: torch torch/x.py::f", "A claim [cite: torch torch/x.py::f  \n"])
def test_a_citation_cut_off_after_its_symbol_is_malformed_not_a_crash(text):
    (bad,) = parse_note(text, Path("note.md")).malformed
    assert bad.line == 1 and bad.problem == EXPECTED.format(problem=NOT_CLOSED_AFTER.format(symbol="f"), form=FORM)


def _notes() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted(NOTES.glob("*.md")) if p.name != "README.md"]


def test_fuzz_citation_syntax_parses_or_names_the_line():
    rng = random.Random(38)
    notes = _notes()
    for _ in range(300):
        text = garble(rng, rng.choice(notes))
        try:
            note = parse_note(text, Path("note.md"))
        except ConfigError as exc:
            assert "note.md" in str(exc) and "line" in str(exc), str(exc)
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"note {text!r}: {type(exc).__name__}: {exc}")
        else:
            assert all(m.problem and m.line >= 1 for m in note.malformed)


def test_fuzz_cite_command_on_garbled_notes(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(NOTES / "site"))  # the synthetic package the fixture notes cite
    monkeypatch.chdir(tmp_path)
    rng = random.Random(39)
    notes = _notes()
    for n in range(6):
        note = tmp_path / f"note{n}.md"
        note.write_text(garble(rng, rng.choice(notes)), encoding="utf-8")
        run_cli(capsys, ["cite", note.name, *rng.choice([[], ["--min", "5"], ["--min", "-1"], ["--record"]])])


def test_find_with_an_empty_package_name_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, ["cite", "--find", "divide", "--package", ""])
    assert rc == 2 and "'' is not a distribution name" in err


def test_fuzz_cite_find_symbols_and_packages(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(NOTES / "site"))
    monkeypatch.chdir(tmp_path)
    rng = random.Random(44)
    symbols = ["ColumnLinear.forward", "", ".", "a..b", "ColumnLinear.", "*", "\u00e9", "x" * 300, "1abc",
               "divide", "make_pair.build_inner", "__init__", "a b", "::", "layers.py::divide", "\x00"]
    packages = ["toyparallel", "", "nope", "../..", "Toy_Parallel", "x y", "-", "\x00"]  # not torch: slow to scan
    for _ in range(30):
        argv = ["cite", "--find", rng.choice(symbols)]
        for _ in range(rng.randint(0, 2)):
            argv += ["--package", rng.choice(packages)]
        run_cli(capsys, argv)


# -- prices and estimate ------------------------------------------------------------------------------

def _garble_json(rng: random.Random, obj):
    """``obj`` with one random change somewhere inside: a key dropped, an item repeated or dropped, or a
    value replaced by one of the wrong type or range."""
    odd = [None, -1, 0, 1e308, float("nan"), float("inf"), "x", "", [], {}, True, 10**30, "2026-13-45"]
    if isinstance(obj, dict) and obj:
        key, r = rng.choice(list(obj)), rng.random()
        if r < 0.2:
            del obj[key]
        elif r < 0.6:
            obj[key] = _garble_json(rng, obj[key])
        else:
            obj[key] = rng.choice(odd)
        return obj
    if isinstance(obj, list) and obj:
        i, r = rng.randrange(len(obj)), rng.random()
        if r < 0.3:
            obj.pop(i)
        elif r < 0.5:
            obj.append(copy.deepcopy(obj[i]))
        else:
            obj[i] = _garble_json(rng, obj[i])
        return obj
    return rng.choice(odd)


def test_fuzz_price_table_is_refused_naming_the_field_or_prices_cleanly():
    shipped = json.loads((ROOT / "pytest_distcheck" / "data" / "prices.json").read_text(encoding="utf-8"))
    rng = random.Random(40)
    for _ in range(100):
        table = shipped
        for _ in range(rng.randint(1, 3)):
            table = _garble_json(rng, copy.deepcopy(table))
        try:
            book = PriceBook.from_table(table, "prices.json")
        except ConfigError as exc:
            assert str(exc).startswith("prices.json, "), str(exc)
            continue
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"table {json.dumps(table, default=str)[:500]}: {type(exc).__name__}: {exc}")
        for gpu in ("A40", "RTX 4090", "H100", "nope"):
            try:
                price = book.price("runpod", gpu, rng.choice(["secure", "community"]))
            except DistcheckError:
                continue
            assert price.usd_per_gpu_hour >= 0


def test_fuzz_estimate_names_and_counts(workspace, capsys):
    ledger = workspace / "experiments" / "35-cloud-budget.md"
    ledger.write_text(LEDGER_FIXTURE, encoding="utf-8")
    before = ledger.read_bytes()
    rng = random.Random(41)
    gpus = ["A40", "RTX 4090", "h100", "H100 SXM", "", " ", "x" * 500, "RTX\n4090", "A40|x",
            "NVIDIA GeForce RTX 4090", "../etc", "\u00e4", "\x00"]
    for _ in range(60):
        argv = ["estimate", "--gpu", rng.choice(gpus), "--minutes", rng.choice(["1", "30", "0.01", "525600", "1e-9"]),
                "--count", rng.choice(["1", "2", "8", "1000000"])]
        if rng.random() < 0.4:
            argv += ["--provider", rng.choice(["runpod", "local", "", "aws", "x y"])]
        if rng.random() < 0.4:
            argv += ["--experiment", rng.choice(["tp-inference", "", "nope", "x|y", "\n"])]
        if rng.random() < 0.3:
            argv += ["--cloud", rng.choice(["secure", "community", "ALL"])]
        run_cli(capsys, argv)
    assert ledger.read_bytes() == before  # an estimate writes nothing


# -- Mermaid pages ------------------------------------------------------------------------------------

DIAGRAMS = ROOT / "fixtures" / "diagrams"
SMALL_PAGES = ["ok-single-column-parallel.md", "ok-single-row-parallel.md", "row-parallel-fed-replicated.md"]


def test_fuzz_mermaid_block_extraction_and_inline_plans():
    from pytest_distcheck.diagram.markdown import mermaid_blocks
    from pytest_distcheck.diagram.plan import parse_inline

    rng = random.Random(42)
    pages = [p.read_text(encoding="utf-8") for p in sorted(DIAGRAMS.glob("*.md"))]
    for _ in range(150):
        page = garble(rng, rng.choice(pages))
        for block in mermaid_blocks(page):
            assert 1 <= block.fence_line <= page.count("\n") + 1
    entries = ["attn.qkv=colwise", "attn.out=rowwise", "mlp.up=colwise", "=", "", "x=y", "a.b.c=rowwise",
               "mlp.up=", "=colwise", " ", "mlp.up=colwise,mlp.up=rowwise", "\u00e9=colwise", "a=replicate"]
    for _ in range(150):
        text = ",".join(rng.choice(entries) for _ in range(rng.randint(1, 3)))
        try:
            assert parse_inline(text)
        except ValueError as exc:  # the diagram command shows it as "--plan: <message>", exit 2
            assert str(exc)


def test_fuzz_mermaid_page_check_with_the_real_parser():
    pytest.importorskip("mermaidx")
    from pytest_distcheck.diagram.check import check_page
    from pytest_distcheck.diagram.mermaid import MermaidParser

    rng = random.Random(43)  # few pages: each parse opens a fresh JS context, about 0.3 s
    plans = [{"mlp.up": "colwise"}, {"mlp.down": "rowwise"}, {"attn.qkv": "colwise", "attn.out": "rowwise"}]
    with MermaidParser() as parser:
        for _ in range(3):
            page = garble(rng, (DIAGRAMS / rng.choice(SMALL_PAGES)).read_text(encoding="utf-8"), rng.randint(1, 3))
            try:
                result = check_page(page, rng.choice(plans), rng.choice([None, 2]), parser)
            except DistcheckError:
                continue
            except Exception as exc:  # noqa: BLE001
                pytest.fail(f"page {page!r}: {type(exc).__name__}: {exc}")
            for finding in result.findings:
                assert finding.line >= 1 and finding.message


# -- dist_world's timeout -----------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", [float("inf"), 1e308, 1e12, float("nan"), 0, -1])
def test_a_call_timeout_out_of_range_is_refused_before_any_rank_starts(timeout):
    from pytest_distcheck.ranks.pool import BAD_TIMEOUT, MAX_TIMEOUT_S, RankPool

    pool = RankPool(2)
    with pytest.raises(ValueError, match=re.escape(BAD_TIMEOUT.format(most=MAX_TIMEOUT_S, timeout=timeout))):
        pool.run(print, (), {}, timeout)
    assert pool._zygote is None and not pool.alive  # nothing was started


class _Config:
    """What Setting.raw reads of a pytest config: one command-line value."""

    def __init__(self, value: str) -> None:
        self.value = value

    def getoption(self, dest: str) -> str:
        return self.value


def test_fuzz_the_timeout_setting_is_a_finite_positive_number_or_a_usage_error():
    from pytest_distcheck.settings import TIMEOUT

    rng = random.Random(45)
    texts = ["60", "0.5", "0", "-1", "inf", "-inf", "nan", "1e308", "1e309", "", " ", "abc", "1_000", "\u0663", "60s"]
    for _ in range(60):
        text = "".join(rng.choice(texts) for _ in range(rng.randint(1, 2)))
        try:
            value = TIMEOUT.positive_float(_Config(text))
        except pytest.UsageError as exc:
            assert str(exc).startswith("command line --distcheck-timeout: "), str(exc)
        else:
            assert 0 < value < float("inf"), text


# -- the other subcommands' arguments -----------------------------------------------------------------

def test_fuzz_diagram_quiz_and_top_level_arguments(workspace, capsys):
    """Arguments only: no page exists (the Mermaid engine never starts) and no quiz bank id is valid (the
    quiz never waits for an answer)."""
    rng = random.Random(46)
    diagram = ["--check", "--render", "--plan", "--world-size", "nope.md", "a=colwise", "x=y", "", "0", "-3", "2",
               "inf", "mod:NAME", "experiments.tp_inference.plan:BLOCK_PLAN", "--config", "missing.toml", "="]
    quiz = ["nope", "", "../x", "35x", "3 5", "\u0663\u0665", "--seed", "x", "-1", "99999999999999999999999",
            "--config", "missing.toml", "checks"]
    for _ in range(40):
        sub, tokens = rng.choice([("diagram", diagram), ("quiz", quiz), ("", diagram + quiz)])
        argv = ([sub] if sub else [rng.choice(["", "nope", "--version", "-h"])]) + [
            rng.choice(tokens) for _ in range(rng.randint(0, 4))]
        if sub == "quiz" and not any(t and not t.startswith("-") and t not in ("x", "-1") for t in argv[1:]):
            argv.append("nope")  # a bank id that does not exist
        run_cli(capsys, argv)


# -- bad input, one case each (issue 32): a clean error naming the file, line or option, or a bound ----------

LATIN1 = "# caf\xe9 ledger\n".encode("latin-1")  # not UTF-8: byte 0xe9 on line 1
PLAN = ["--plan", "mlp.up=colwise"]  # an inline plan: the workspace folder has no plan module


def _no_traceback(capsys, argv: list[str]) -> str:
    rc, out, err = run_cli(capsys, argv)
    assert rc == 2, (argv, rc, out, err)
    return err


def test_a_ledger_that_is_not_utf8_is_an_error_naming_it_and_the_byte(workspace, capsys):
    from pytest_distcheck.textfile import NOT_UTF8

    (workspace / "experiments" / "35-cloud-budget.md").write_bytes(LATIN1)
    err = _no_traceback(capsys, ["budget"])
    assert "35-cloud-budget.md, line 1: " + NOT_UTF8.split("{")[0] + "e9 at byte offset 5" in err


def test_a_ledger_that_is_a_folder_is_an_error_naming_it(workspace, capsys):
    from pytest_distcheck.textfile import NOT_A_FILE

    (workspace / "experiments" / "35-cloud-budget.md").mkdir()
    err = _no_traceback(capsys, ["budget"])
    assert "35-cloud-budget.md: " + NOT_A_FILE.format(what="ledger") in err


@pytest.mark.parametrize("command", [["budget"], ["estimate", "--gpu", "A40", "--minutes", "10"]])
def test_a_workspace_file_that_is_not_utf8_is_an_error_with_its_own_exit_status(workspace, capsys, command):
    """Issue 28: `estimate --config FILE` exited 1 ("not enough budget") with a UnicodeDecodeError."""
    from pytest_distcheck.textfile import NOT_UTF8

    bad = workspace / "checks" / "latin1.toml"
    bad.write_bytes(b"[phase]\nid = \"35\"\ntitle = \"Fase 35: paralelismo \xe9\"\n")
    err = _no_traceback(capsys, [*command, "--config", str(bad)])
    assert "latin1.toml, line 3: " + NOT_UTF8.split("{")[0] in err


def test_pytest_workspace_not_utf8_or_empty_is_a_usage_error_naming_it(pytester):
    from pytest_distcheck.textfile import NOT_UTF8
    from pytest_distcheck.workspace import EMPTY_WORKSPACE_OPTION

    pytester.path.joinpath("bad.toml").write_bytes(LATIN1)
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--workspace", "bad.toml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.toml, line 1: " + NOT_UTF8.split("{")[0] in result.stderr.str()
    result = pytester.runpytest("--workspace=", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and EMPTY_WORKSPACE_OPTION in result.stderr.str()


def test_a_diagram_page_or_note_that_is_not_utf8_is_an_error_naming_it(workspace, capsys):
    from pytest_distcheck.textfile import NOT_UTF8

    (workspace / "page.md").write_bytes(LATIN1)
    said = "page.md, line 1: " + NOT_UTF8.split("{")[0]
    assert said in _no_traceback(capsys, ["diagram", "--check", "page.md", *PLAN])
    assert said in _no_traceback(capsys, ["cite", "page.md"])


def test_a_100_mb_file_is_refused_by_its_size_before_it_is_read(workspace, capsys):
    from pytest_distcheck.textfile import PAGE_BYTES, TOO_LARGE

    big = workspace / "big.md"
    with open(big, "wb") as fh:
        fh.truncate(100 * 2**20)  # sparse: 100 MB of zeros that take no disk
    said = TOO_LARGE.format(size=100 * 2**20, limit=PAGE_BYTES, what="{what}")
    assert said.format(what="diagram page") in _no_traceback(capsys, ["diagram", "--check", "big.md", *PLAN])
    assert said.format(what="note") in _no_traceback(capsys, ["cite", "big.md"])


def test_a_20000_edge_diagram_is_refused_by_the_page_limit(workspace, capsys):
    from pytest_distcheck.textfile import PAGE_BYTES

    edges = "\n".join(f"  n{i} --> n{i + 1}" for i in range(20_000))
    (workspace / "huge.md").write_text(f"# block\n\n```mermaid\nflowchart TD\n{edges}\n```\n")
    assert f"above the {PAGE_BYTES:,} bytes a diagram page may have" in _no_traceback(
        capsys, ["diagram", "--check", "huge.md", *PLAN])


def test_a_quiz_answer_of_5000_digits_is_an_answer_error():
    with pytest.raises(AnswerError, match="answer with a letter A-D"):
        parse_choice("5" * 5000, 4)
    with pytest.raises(AnswerError, match="is not a finite number"):
        parse_number("5" * 5000, "GB")


def test_a_world_size_above_what_the_machine_holds_is_refused_naming_memory_and_cores():
    from types import SimpleNamespace

    from pytest_distcheck.ranks.plugin import RANK_BYTES, TOO_MANY_RANKS, _fits_machine

    with pytest.raises(pytest.fail.Exception) as exc:
        _fits_machine(SimpleNamespace(nodeid="t.py::test_big"), 10_000)
    text = str(exc.value)
    assert text.startswith("t.py::test_big: " + TOO_MANY_RANKS.split(":")[0].format(n=10_000))
    assert f"x about {RANK_BYTES >> 20} MiB each" in text and "MiB available" in text
    assert f"{os.cpu_count()} core(s)" in text
    assert _fits_machine(SimpleNamespace(nodeid="t"), 2) == 2


def test_the_machine_is_asked_once_per_world_size_that_fits_and_a_refused_size_every_time(pytester):
    from pytest_distcheck.ranks.plugin import TOO_MANY_RANKS

    # psutil.virtual_memory costs about 0.1 ms, once a test: a size that fitted is not asked again.
    pytester.makeconftest("""
import psutil

ASKED = []
_real = psutil.virtual_memory

def counting():
    ASKED.append(1)
    return _real()

psutil.virtual_memory = counting

def pytest_sessionfinish(session):
    print(f"\\nASKED={len(ASKED)}")
""")
    pytester.makepyfile(test_sizes="""
import pytest

@pytest.mark.parametrize("i", range(3))
def test_fits(dist_world, i):
    assert dist_world.world_size == 2

@pytest.mark.world_size(4)
def test_other_size(dist_world):
    assert dist_world.world_size == 4

@pytest.mark.parametrize("i", range(2))
@pytest.mark.world_size(100_000)
def test_too_big(dist_world, i):
    pass
""")
    # -rN: no short summary, which repeats each error (whole or cut, by the terminal's width).
    result = pytester.runpytest_subprocess("-s", "-rN")
    result.assert_outcomes(passed=4, errors=2)
    out = result.stdout.str()
    too_many = TOO_MANY_RANKS.split(":")[0].format(n=100_000)
    assert out.count(f"test_too_big[0]: {too_many}") == 1 and out.count(f"test_too_big[1]: {too_many}") == 1
    result.stdout.fnmatch_lines(["ASKED=4"])  # sizes 2 and 4 once each, the refused size at each of its 2 tests


@pytest.mark.parametrize(("text", "expected"), [
    ("inf", NOT_FINITE.format(value="inf")), ("nan", NOT_FINITE.format(value="nan")),
    ("1e309", ABSURD_CEILING.format(value="1e+309", max=MAX_CEILING_USD)),
    ("1e308", ABSURD_CEILING.format(value="1e+308", max=MAX_CEILING_USD)),
    ("$3", CURRENCY_SIGN.format(text="$3", plain="3")), ("3 USD", CURRENCY_SIGN.format(text="3 USD", plain="3")),
])
def test_an_absurd_or_currency_signed_max_usd_is_a_usage_error_with_the_fix(text, expected):
    from pytest_distcheck.budget.plugin import _usd

    with pytest.raises(pytest.UsageError) as exc:
        _usd(text, "command line --max-usd")
    assert str(exc.value) == "command line --max-usd: " + expected


@pytest.mark.parametrize("value", ["inf", "1e308", "nan"])
def test_an_absurd_phase_ceiling_in_the_workspace_is_refused_naming_the_field(tmp_path, value):
    from pytest_distcheck.budget.config import budget_config
    from pytest_distcheck.workspace import load_workspace

    text = (ROOT / "checks" / "distcheck.toml").read_text().replace("phase_ceiling_usd = 5.0",
                                                                    f"phase_ceiling_usd = {value}")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "distcheck.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"budget\.phase_ceiling_usd: (must be|.* USD is above 10000 USD)"):
        budget_config(load_workspace(tmp_path / "checks" / "distcheck.toml"))


def _item(marker):
    from types import SimpleNamespace

    return SimpleNamespace(nodeid="t.py::test_paid", get_closest_marker=lambda name: marker.mark
                           if name == marker.mark.name else None)


@pytest.mark.parametrize("usd", [float("inf"), 1e308])
def test_a_budget_marker_of_inf_or_1e308_is_a_usage_error(usd):
    from pytest_distcheck.budget.plugin import _marker_cap

    with pytest.raises(pytest.UsageError, match=r"t.py::test_paid: @pytest.mark.budget\(usd=X\): X "):
        _marker_cap(_item(pytest.mark.budget(usd=usd)))


@pytest.mark.parametrize("minutes", [0, -1, "x", float("inf"), float("nan"), 10**9, True])
def test_a_pod_marker_speaks_minutes(monkeypatch, minutes):
    from pytest_distcheck.pods import plugin as pods_plugin
    from pytest_distcheck.pods.plugin import MAX_POD_MINUTES, POD_MINUTES, _request

    monkeypatch.setattr(pods_plugin, "get_workspace", lambda config: None)
    with pytest.raises(pytest.UsageError) as exc:
        _request(_item(pytest.mark.pod(minutes=minutes)), None)
    assert str(exc.value) == "t.py::test_paid: " + POD_MINUTES.format(
        source="@pytest.mark.pod(minutes=...)", max=MAX_POD_MINUTES, value=minutes)
    assert "second" not in str(exc.value)


@pytest.mark.parametrize("rate", ["inf", "1e308", "nan", "-1"])
def test_an_absurd_local_gpu_rate_is_a_usage_error(rate):
    from pytest_distcheck.pods.plugin import LOCAL_RATE_BOUND, _local_rate

    class Config:
        def getoption(self, dest):
            return rate

    with pytest.raises(pytest.UsageError, match="^command line --gpu-local-rate: " + LOCAL_RATE_BOUND.split(",")[0]):
        _local_rate(Config())


def test_estimate_refuses_an_undeclared_experiment_as_reserving_does(workspace, capsys):
    err = _no_traceback(capsys, ["estimate", "--gpu", "A40", "--minutes", "10", "--experiment", "nope"])
    assert "experiment 'nope' is not declared in [budget]" in err and "no ceiling" not in err


def test_the_schema_accepts_uncapped_experiments_as_the_manual_documents(tmp_path):
    from pytest_distcheck.budget.config import budget_config
    from pytest_distcheck.workspace import load_workspace

    text = (ROOT / "checks" / "distcheck.toml").read_text().replace(
        "phase_ceiling_usd = 5.0", 'phase_ceiling_usd = 5.0\nuncapped_experiments = ["smoke"]')
    assert "uncapped_experiments" in (ROOT / "docs" / "kit" / "budget-and-pods.md").read_text()
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "distcheck.toml").write_text(text)
    assert budget_config(load_workspace(tmp_path / "checks" / "distcheck.toml")).uncapped_experiments == ("smoke",)


def test_an_unclosed_code_fence_says_why_the_note_finds_no_citation():
    from pytest_distcheck.citations.syntax import UNCLOSED_FENCE

    note = parse_note('# Note\n\n```python\nx = 1\n\nA claim [cite: torch torch/x.py::f "quote here"].\n', Path("n.md"))
    assert note.citations == [] and [(m.line, m.problem) for m in note.malformed] == [
        (3, UNCLOSED_FENCE.format(fence="```"))]
    assert parse_note("# Note\n\n```\ncode\n```\n", Path("n.md")).malformed == []  # closed: nothing to say


@pytest.mark.parametrize("bad", ["inf", "nan", "1e9"])
def test_pod_timings_are_finite_and_bounded(bad):
    from pytest_distcheck.pods.timings import MAX_S, Timings

    with pytest.raises(ValueError, match=f"at most {MAX_S:g} \\(a day\\)"):
        Timings.parse(f"api_timeout={bad}")
