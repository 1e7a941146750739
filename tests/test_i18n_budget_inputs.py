"""Budget and plan inputs under --lang es: the problems a ledger read names (a row's cells, its run, the hash
chain, a torn last line), the guard's refusals, and the diagram plan's entries. Column names, status keywords,
run ids and what the learner typed stay as they are."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from ledger_support import rechained

from pytest_distcheck import i18n
from pytest_distcheck.budget import guard, ledger
from pytest_distcheck.budget.errors import BudgetRefused, SettleRefused
from pytest_distcheck.budget.guard import BudgetGuard
from pytest_distcheck.budget.ledger import Ledger, LedgerError, format_row, header_lines, make_row, parse
from pytest_distcheck.diagram import plan
from pytest_distcheck.diagram.plan import LayerNames, layer_names_of, parse_inline
from pytest_distcheck.errors import DistcheckError, at_line
from pytest_distcheck.i18n import _

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _spanish():
    i18n.use("es")
    yield
    i18n.use(i18n.DEFAULT)


def _row(run_id: str = "s1-a", status: str = "open", billed_s: int = 1800, resource_id: str = "-"):
    return make_row(run_id=run_id, status=status, provider="runpod", gpu_type="RTX 4090", gpu_count=1,
                    billed_s=billed_s, rate_per_hour=0.59, experiment=None, purpose="t::a",
                    resource_id=resource_id, now=datetime(2026, 11, 30, 10, 0, tzinfo=UTC))


def _text(*rows: str) -> str:
    return "# Ledger\n\n" + "\n".join([*header_lines(), *rows]) + "\n"


def _problems(text: str) -> LedgerError:
    with pytest.raises(LedgerError) as info:
        parse(text, Path("ledger.md"), now=NOW)
    return info.value


def test_a_hand_written_row_with_bad_cells_names_each_in_spanish_after_its_line():
    cells = format_row(_row(), ledger.GENESIS).split(" | ")
    cells[0] = "| 2026-11-30 10:00"  # time_utc
    cells[2] = "abierta"  # status
    cells[5] = "1800.5"  # billed_s
    cells[8] = "EUR"  # currency
    err = _problems(rechained(_text(" | ".join(cells))))
    assert err.where == _(ledger.PROBLEMS).format(n=4) == "4 problemas"
    assert [p for _n, p in err.problems] == [
        _(ledger.BAD_TIME).format(value="2026-11-30 10:00"),
        _(ledger.BAD_STATUS).format(value="abierta", statuses=", ".join(ledger.STATUSES)),
        _(ledger.NOT_WHOLE_SECONDS).format(value="1800.5"),
        _(ledger.BAD_CURRENCY).format(value="EUR", currency="USD"),
    ]
    assert "línea 5: time_utc '2026-11-30 10:00' no tiene la forma YYYY-MM-DDTHH:MM:SSZ; línea 5: status" in str(err)
    assert "status 'abierta' debe ser uno de open, started" in str(err)
    assert str(err).endswith(_(ledger.NOTHING_WRITTEN_RESTORE).format(ledger="ledger.md"))
    assert ("deshaz el cambio de esas líneas (lo muestra git diff o, si el cambio ya está en un commit, git log -p "
            "-- ledger.md)") in str(err)


def test_a_row_dated_in_the_future_and_a_missing_column_are_said_in_spanish():
    later = make_row(run_id="s1-a", status="open", provider="runpod", gpu_type="RTX 4090", gpu_count=1,
                     billed_s=60, rate_per_hour=0.59, experiment=None, purpose="t::a", resource_id="-",
                     now=datetime(2027, 1, 1, tzinfo=UTC))
    err = _problems(_text(format_row(later, ledger.GENESIS)))
    assert err.where == at_line(5) == "línea 5"
    assert err.problems == [(5, _(ledger.FUTURE_TIME).format(value="2027-01-01T00:00:00Z", now="2026-12-01T12:00:00Z"))]
    assert "está en el futuro (ahora es 2026-12-01T12:00:00Z); las filas se escriben cuando ocurren" in str(err)
    short = " | ".join(format_row(_row(), ledger.GENESIS).split(" | ")[:12]) + " |"
    (problem,) = [p for _n, p in _problems(_text(short)).problems]
    assert problem.startswith("12 celda(s), se esperaban 14 (")
    assert problem.endswith(", " + _(ledger.LOOKS_MISSING).format(columns="prev_hash, row_hash"))
    assert problem.endswith(", parece que falta(n) la(s) celda(s) prev_hash, row_hash (todas las demás encajan en su "
                            "columna)")


def test_a_runs_rows_out_of_order_are_named_in_spanish_with_the_status_keyword_kept():
    settled = format_row(_row(status="settled", billed_s=60, resource_id="podA"), ledger.GENESIS)
    err = _problems(rechained(_text(settled)))
    what = _(ledger.ROW_OF_RUN).format(status="settled", run="s1-a")
    assert err.problems == [(5, _(ledger.NO_OPEN_ROW).format(what=what))]
    assert str(err).startswith("ledger.md, línea 5: la fila settled de la ejecución 's1-a' no tiene ninguna fila open")
    opened = format_row(_row(), ledger.GENESIS)
    err = _problems(rechained(_text(opened, opened, settled)))
    assert err.where == _(ledger.PROBLEMS).format(n=2) == "2 problemas"
    assert _(ledger.DUPLICATE_RUN).format(run="s1-a", status="open", line=5) in str(err)
    assert "línea 6: id de ejecución 's1-a' repetido con status open (la primera vez en la línea 5)" in str(err)


def test_an_edited_row_and_a_broken_chain_are_named_in_spanish(tmp_path: Path):
    book = Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock", clock=lambda: NOW)
    book.append(_row("s1-a"), _row("s1-b"))
    lines = book.path.read_text().splitlines()
    edited = lines[:-2] + [lines[-2].replace("t::a", "t::z"), lines[-1]]
    err = _problems("\n".join(edited) + "\n")
    assert (len(lines) - 1, _(ledger.EDITED_ROW)) in err.problems
    assert ("esta fila no es como la escribió el kit: editada después o escrita a mano (su row_hash no coincide "
            "con sus celdas)") in str(err)
    first_deleted = lines[:-2] + lines[-1:]
    assert _problems("\n".join(first_deleted) + "\n").problems == [(len(lines) - 1, _(ledger.CHAIN_START))]
    book.path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(LedgerError) as info:
        book.read()
    assert "se han quitado filas del final del registro de gastos" in str(info.value)


def test_a_torn_last_line_says_where_its_bytes_go_in_spanish():
    whole = format_row(_row(), ledger.GENESIS)
    err = _problems(_text(whole).rstrip("\n") + "\n" + whole[:40])
    assert err.torn == 6
    where = _(ledger.TORN_WHERE).format(name="ledger.md")
    assert err.problems == [(6, _(ledger.TORN).format(rows=1, command=ledger.REPAIR_COMMAND, where=where))]
    assert "junto al cerrojo del registro de gastos" in str(err) and str(err).endswith(_(ledger.NOTHING_WRITTEN_TORN))


def test_a_decimal_comma_in_a_whole_last_row_is_named_and_not_cut_in_spanish(tmp_path: Path):
    book = Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock", clock=lambda: NOW)
    book.append(_row("s1-a"))
    book.path.write_text(book.path.read_text().rstrip("\n").replace("| 0.59 |", "| 0,59 |"))
    with pytest.raises(LedgerError) as info:
        book.repair_torn_line()
    assert info.value.problems[:2] == [
        (7, _(ledger.NOT_TORN).format(n=14, command=ledger.REPAIR_COMMAND)),
        (7, _(ledger.DECIMAL_COMMA).format(name="rate_per_hour", value="0,59", fixed="0.59"))]
    assert "no se corta: la última línea tiene sus 14 celdas" in str(info.value)
    assert "rate_per_hour '0,59' no es un número: usa '.' como separador decimal (0.59)" in str(info.value)


@pytest.fixture
def budget(tmp_path: Path) -> BudgetGuard:
    book = Ledger(tmp_path / "ledger.md", tmp_path / ".distcheck" / "budget.lock")
    return BudgetGuard(book, phase_ceiling_usd=5.0, session_id="sess0001")


def test_the_guards_argument_checks_refuse_in_spanish(budget: BudgetGuard):
    with pytest.raises(BudgetRefused) as info:
        budget.reserve("runpod", "RTX 4090", 0, 60, "t::a")
    assert str(info.value) == _(guard.BAD_GPU_COUNT).format(value=0)
    assert str(info.value) == "gpu_count debe ser un número entero >= 1; se ha recibido 0"
    with pytest.raises(BudgetRefused, match="^max_seconds debe ser un número finito > 0"):
        budget.reserve("runpod", "RTX 4090", 1, 0, "t::a")
    with pytest.raises(BudgetRefused) as info:
        budget.reserve("local", "cpu", 1, 60, "t::a", usd_per_gpu_hour=-1.0)
    assert str(info.value) == _(guard.BAD_RATE).format(value=-1.0)


def test_a_run_id_in_use_and_the_reservations_states_are_said_in_spanish(budget: BudgetGuard):
    res = budget.reserve("runpod", "RTX 4090", 1, 60, "t::a", run_id="sess0001-aaaaaa")
    with pytest.raises(BudgetRefused) as info:
        budget.reserve("runpod", "RTX 4090", 1, 60, "t::b", run_id="sess0001-aaaaaa")
    assert str(info.value) == _(guard.RUN_ID_IN_USE).format(run="sess0001-aaaaaa")
    assert "ya está en uso" in str(info.value)
    res.record_pod("podA", usd_per_hour=0.59)
    with pytest.raises(DistcheckError) as info:
        res.record_pod("podB")
    assert str(info.value) == "la reserva sess0001-aaaaaa ya tiene el pod podA, no podB"
    with pytest.raises(DistcheckError) as info:
        res.release()
    assert str(info.value) == _(guard.RESERVATION_HAS_POD).format(run="sess0001-aaaaaa", pod="podA")
    with pytest.raises(SettleRefused) as info:
        budget.adopt_pod("sess0001-aaaaaa", "podC")
    assert "ya nombra el pod podA o está liquidada" in str(info.value)
    res.settle(30)
    with pytest.raises(DistcheckError, match="^la reserva sess0001-aaaaaa ya está liquidada$"):
        res.record_pod("podA")
    with pytest.raises(SettleRefused) as info:
        budget.record_event("sess0001-zzzzzz", "terminate-failed")
    assert str(info.value) == _(guard.NO_OPEN_ROW).format(run="sess0001-zzzzzz", ledger=budget.ledger.path)
    assert str(info.value).startswith("id de ejecución desconocido 'sess0001-zzzzzz': no hay fila open en ")


def test_plan_entries_typed_inline_are_refused_in_spanish():
    with pytest.raises(ValueError) as info:
        parse_inline("attn.qkv")
    assert str(info.value) == _(plan.NOT_PATH_STYLE).format(entry="attn.qkv")
    assert "se esperaba ruta=estilo, p. ej. attn.qkv=colwise" in str(info.value)
    with pytest.raises(ValueError, match=r"^entrada del plan 'attn\.qkv=row': attn\.qkv aparece dos veces$"):
        parse_inline("attn.qkv=colwise,attn.qkv=row")
    with pytest.raises(ValueError) as info:
        parse_inline(" , ")
    assert str(info.value) == _(plan.NO_PLAN_ENTRIES).format(text=" , ") == "no hay entradas del plan en ' , '"


def test_layer_names_that_do_not_fit_the_plan_are_named_in_spanish():
    layers = {"attn.qkv": "colwise", "attn.out": "rowwise", "mlp.up": "colwise"}
    with pytest.raises(ValueError) as info:
        LayerNames(aliases={"attn.c_attn": ("qkv",)}).validate(layers)
    assert str(info.value) == _(plan.ALIAS_NOT_IN_PLAN).format(path="attn.c_attn", paths="attn.qkv, attn.out, mlp.up")
    assert "no es una ruta de módulo del plan" in str(info.value)
    with pytest.raises(ValueError, match="^entrada fusionada 'qkv_out': attn.qkv, attn.out no comparten un mismo"):
        LayerNames(fused={"qkv_out": ("attn.qkv", "attn.out")}).validate(layers)
    with pytest.raises(ValueError, match="necesita dos o más rutas de módulo del plan; hay"):
        LayerNames(fused={"up": ("mlp.up",)}).validate(layers)
    with pytest.raises(ValueError) as info:
        LayerNames(residual=("block",)).validate(layers)
    assert str(info.value) == _(plan.RESIDUAL_NOT_IN_PLAN).format(parent="block")
    with pytest.raises(ValueError, match="^PLAN_ALIASES debe asociar str a una lista de str$"):
        layer_names_of({"PLAN_ALIASES": {"attn.qkv": "c_attn"}}, "PLAN")
