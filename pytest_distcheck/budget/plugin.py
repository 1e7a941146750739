"""pytest wiring of the budget guard: ``--max-usd``, the gpu-marker skip, ``@pytest.mark.budget(usd=X)``,
the report-header line, and the ``budget_guard`` / ``budget`` fixtures. Wiring only; the guard is in
:mod:`pytest_distcheck.budget.guard`.

Paid tests (marked ``gpu``) run only when a session ceiling is given (``--max-usd``, env
``DISTCHECK_MAX_USD`` or ini ``distcheck_max_usd``); otherwise they are skipped with a reason that
says how to enable them. All processes of one run (xdist workers included) share one session id, so
the session ceiling holds for the run as a whole.
"""

from __future__ import annotations

import uuid
from decimal import Decimal, InvalidOperation

import pytest

from pytest_distcheck.budget.errors import paid_runs
from pytest_distcheck.budget.errors import runs as count_runs
from pytest_distcheck.i18n import N_, _
from pytest_distcheck.settings import Setting
from pytest_distcheck.workspace import get_workspace, workspace_label

MAX_USD = Setting(
    flag="--max-usd",
    env="DISTCHECK_MAX_USD",
    ini="distcheck_max_usd",
    help="the most this session may spend on paid GPU tests, in USD; tests marked gpu run only when it is set",
    default="",
)
ENABLE_HINT = N_("give this session a budget to run it: pytest -m gpu --max-usd 3 (or {env}=3, or ini {ini} = 3)")
PAID_TEST = N_("paid GPU test: {hint}")
PAID_WORK = N_("paid GPU work: {hint}")
NOT_USD = N_("{source}: {text!r} is not a number of USD (e.g. 3 or 0.5)")
NEGATIVE_USD = N_("{source}: must be a number of USD >= 0, got {text!r}")
NO_WORKSPACE = N_("paid tests need a workspace file with a [budget] section ({label!r} not found)")
PAID_ON = N_("paid GPU tests on, --max-usd {usd} this session")
PAID_REHEARSAL = N_("REHEARSAL, nothing paid: GPU tests on against the fake API, --max-usd {usd} this session")
PAID_OFF = N_("paid GPU tests off (give --max-usd USD to run tests marked gpu)")
HEADER = N_("distcheck budget: {paid}; {left} left of {ceiling} phase ceiling ({spent} in {ledger}{held})")
MARKER_ARGS = N_("@pytest.mark.budget takes one amount, usd=X; got args {args!r} kwargs {kwargs!r}")
MARKER_NOT_POSITIVE = N_("@pytest.mark.budget(usd=X) needs X > 0 USD, got {value!r}")
MARKER_PROBLEM = N_("@pytest.mark.budget(usd=X): X {problem}")  # {problem}: budget.config.ceiling_problem's words
# {runs}: budget.errors.runs(n); SPENT's: paid_runs(n) (SPENT_REHEARSAL's: runs(n))
HEADER_HELD = N_(", {runs} in progress at their worst case")
HEADER_NO_SECTION = N_("distcheck budget: {paid}; no [budget] section in the workspace, paid tests will be refused")
HEADER_PROBLEM = N_("distcheck budget: {paid}; {problem} (paid tests will be refused)")
SPENT = N_("distcheck budget: this session spent {spent} in {runs}{unsettled}; {left} left of {ceiling} "
           "phase ceiling")
# The same in a session whose provider bills no one (a plugin sets rehearsal_key: the fake API's prices).
SPENT_REHEARSAL = N_("distcheck budget: REHEARSAL, nothing paid: this session's runs came to {spent} at the fake "
                     "API's prices in {runs}{unsettled}; the scratch copy's ledger has {left} left of {ceiling}")
SPENT_UNSETTLED = N_(", {n} not settled (counted at worst case)")
NO_TIME_LIMIT = N_("{purpose}: no time limit to price the worst case; pass max_seconds or mark the test "
                   "@pytest.mark.timeout(SECONDS)")
_session_key = pytest.StashKey[str]()
# Set by the plugin that runs a rehearsal: the session's amounts are a fake provider's, in a scratch ledger.
rehearsal_key = pytest.StashKey[bool]()
_max_usd_key = pytest.StashKey["Decimal | None"]()


def enable_hint() -> str:
    """How to give a session a budget (:data:`ENABLE_HINT`), in the language in use."""
    return _(ENABLE_HINT).format(env=MAX_USD.env, ini=MAX_USD.ini)


def max_usd(config: pytest.Config) -> Decimal | None:
    """The session ceiling in USD, or None when none is given. Raises pytest.UsageError naming the source."""
    if _max_usd_key in config.stash:
        return config.stash[_max_usd_key]
    text, source = MAX_USD.raw(config)
    value = None
    if text.strip():
        value = _usd(text.strip(), source)
    config.stash[_max_usd_key] = value
    return value


def _usd(text: str, source: str) -> Decimal:
    """``text`` as a session ceiling in USD. Raises pytest.UsageError naming ``source`` and the fix."""
    from pytest_distcheck.budget.config import CURRENCY_SIGN, ceiling_problem

    try:
        value = Decimal(text)
    except InvalidOperation:
        plain = text.replace("$", "").replace("USD", "").replace("usd", "").strip()
        try:
            Decimal(plain)
        except InvalidOperation:
            raise pytest.UsageError(_(NOT_USD).format(source=source, text=text)) from None
        raise pytest.UsageError(f"{source}: " + _(CURRENCY_SIGN).format(text=text, plain=plain)) from None
    if value.is_finite() and value < 0:
        raise pytest.UsageError(_(NEGATIVE_USD).format(source=source, text=text))
    problem = ceiling_problem(value, text)
    if problem:
        raise pytest.UsageError(f"{source}: {problem}")
    return value


def session_id(config: pytest.Config) -> str:
    """The id every process of this run shares: xdist's test-run uid (its first 8 hex digits)."""
    if _session_key not in config.stash:
        workerinput = getattr(config, "workerinput", None)
        uid = workerinput["testrunuid"] if workerinput else getattr(config.option, "testrunuid", None)
        config.stash[_session_key] = (uid or uuid.uuid4().hex)[:8]
    return config.stash[_session_key]


def pytest_addoption(parser: pytest.Parser) -> None:
    MAX_USD.add(parser, parser.getgroup("distcheck"))


def pytest_configure(config: pytest.Config) -> None:
    max_usd(config)  # a bad value is a usage error now, not at the first paid test
    if not hasattr(config, "workerinput") and getattr(config.option, "testrunuid", "absent") is None:
        # xdist hands this uid to every worker; fixing it here lets the controller know the session id.
        config.option.testrunuid = uuid.uuid4().hex
    session_id(config)


def _marker_cap(item: pytest.Item) -> Decimal | None:
    marker = item.get_closest_marker("budget")
    if marker is None:
        return None
    value = marker.kwargs.get("usd", marker.args[0] if marker.args else None)
    extra = set(marker.kwargs) - {"usd"}
    if extra or len(marker.args) > 1 or (marker.args and "usd" in marker.kwargs):
        raise pytest.UsageError(f"{item.nodeid}: " + _(MARKER_ARGS).format(args=marker.args, kwargs=marker.kwargs))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise pytest.UsageError(f"{item.nodeid}: " + _(MARKER_NOT_POSITIVE).format(value=value))
    from pytest_distcheck.budget.config import ceiling_problem

    problem = ceiling_problem(Decimal(str(value)))
    if problem:
        raise pytest.UsageError(f"{item.nodeid}: " + _(MARKER_PROBLEM).format(problem=problem))
    return Decimal(str(value))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if get_workspace(config) is None:
        return  # `gpu` and `budget` are a course workspace's markers (plugin.WORKSPACE_MARKERS); not the project's
    enabled = max_usd(config) is not None
    for item in items:
        _marker_cap(item)
        if item.get_closest_marker("gpu") is not None and not enabled:
            item.add_marker(pytest.mark.skip(reason=_(PAID_TEST).format(hint=enable_hint())))


def session_guard(config: pytest.Config):
    """The session's :class:`~pytest_distcheck.budget.guard.BudgetGuard`: the workspace's ceilings, ``--max-usd``
    as the session ceiling, the session id, lock waits said on the terminal. A new guard object on each call
    (its state is the ledger). Raises pytest.UsageError without a workspace file, DistcheckError for a bad one."""
    from pytest_distcheck.budget.guard import BudgetGuard

    ws = get_workspace(config)
    if ws is None:
        raise pytest.UsageError(_(NO_WORKSPACE).format(label=workspace_label(config)))
    guard = BudgetGuard.from_workspace(ws, session_ceiling_usd=max_usd(config), session_id=session_id(config))
    guard.ledger.notify = _terminal_line(config)
    return guard


def _terminal_line(config: pytest.Config):
    """A function writing one line to the terminal, with output capture suspended (a wait for the ledger
    lock is said while a test runs)."""
    import contextlib
    import sys

    def write(line: str) -> None:
        capman = config.pluginmanager.getplugin("capturemanager")
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            if reporter is not None:
                reporter.write_line(line)
            else:
                sys.stderr.write(line + "\n")

    return write


def pytest_report_header(config: pytest.Config) -> list[str]:
    from pytest_distcheck.budget.config import budget_config
    from pytest_distcheck.budget.errors import usd
    from pytest_distcheck.errors import DistcheckError

    cap = max_usd(config)
    ws = get_workspace(config)
    if ws is None and cap is None:  # a suite of dist_world tests, no course workspace: nothing to say
        return []
    paid = _(PAID_ON).format(usd=usd(cap)) if cap is not None else _(PAID_OFF)
    if cap is not None and config.stash.get(rehearsal_key, False):
        paid = _(PAID_REHEARSAL).format(usd=usd(cap))
    try:
        cfg = budget_config(ws) if ws is not None else None
        if cfg is None:
            return [_(HEADER_NO_SECTION).format(paid=paid)]
        status = session_guard(config).status()
    except (DistcheckError, pytest.UsageError) as exc:
        return [_(HEADER_PROBLEM).format(paid=paid, problem=exc)]
    phase = status.limits["phase"]
    n = len(status.in_progress)
    held = _(HEADER_HELD).format(runs=count_runs(n)) if n else ""
    return [_(HEADER).format(paid=paid, left=usd(max(phase.left, Decimal(0))), ceiling=usd(phase.ceiling),
                             spent=usd(phase.spent), ledger=cfg.ledger_rel, held=held)]


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """One line on what this session spent, when it ran paid work (controller or single process)."""
    if hasattr(config, "workerinput") or max_usd(config) is None:
        return
    from pytest_distcheck.budget import accounting
    from pytest_distcheck.budget.errors import usd
    from pytest_distcheck.errors import DistcheckError

    try:
        status = session_guard(config).status()
    except (DistcheckError, pytest.UsageError):
        return
    mine = accounting.totals(status.rows, run_prefix=f"{session_id(config)}-")
    n_runs = len({r.run_id for r in status.rows if r.run_id.startswith(f"{session_id(config)}-")})
    if n_runs:
        phase = status.limits["phase"]
        unsettled = _(SPENT_UNSETTLED).format(n=len(mine.unsettled)) if mine.unsettled else ""
        fake = config.stash.get(rehearsal_key, False)
        runs = count_runs(n_runs) if fake else paid_runs(n_runs)
        line = _(SPENT_REHEARSAL if fake else SPENT).format(spent=usd(mine.total), runs=runs, unsettled=unsettled,
                                                            left=usd(max(phase.left, Decimal(0))),
                                                            ceiling=usd(phase.ceiling))
        terminalreporter.write_line(line)


class TestBudget:
    """What a paid test gets from the ``budget`` fixture: its guard, cap and time limit.

    Attributes:
        guard: the session's :class:`~pytest_distcheck.budget.guard.BudgetGuard`.
        purpose: the test id (written into the ledger).
        cap_usd: ``@pytest.mark.budget(usd=X)`` or None.
        time_limit_s: the test's time limit (``@pytest.mark.timeout`` / ``--timeout``) or None.
    """

    __test__ = False  # not a test class, despite the name

    def __init__(self, guard, purpose: str, cap_usd: Decimal | None, time_limit_s: float | None) -> None:
        self.guard = guard
        self.purpose = purpose
        self.cap_usd = cap_usd
        self.time_limit_s = time_limit_s
        self.reservations: list = []

    def reserve(self, provider: str, gpu_type: str, gpu_count: int, max_seconds: float | None = None, *,
                experiment: str | None = None, cloud: str = "secure", usd_per_gpu_hour: float | None = None):
        """:meth:`BudgetGuard.reserve` for this test: purpose = the test id, cap = its budget marker,
        max_seconds defaults to its time limit. Raises BudgetRefused as that does."""
        from pytest_distcheck.budget.errors import BudgetRefused

        seconds = max_seconds if max_seconds is not None else self.time_limit_s
        if seconds is None:
            raise BudgetRefused(_(NO_TIME_LIMIT).format(purpose=self.purpose))
        res = self.guard.reserve(provider, gpu_type, gpu_count, seconds, self.purpose, experiment=experiment,
                                 cloud=cloud, cap_usd=None if self.cap_usd is None else float(self.cap_usd),
                                 usd_per_gpu_hour=usd_per_gpu_hour)
        self.reservations.append(res)
        return res


class Refused(pytest.fail.Exception):
    """A paid test refused before anything was rented (a budget refusal, no live price, a malformed ledger or
    ``[budget]`` section, the provider's clear no to a create): the test's setup fails (an error, as before)
    with the kit's message alone, no traceback of the kit's code; :mod:`pytest_distcheck.paid` lists it at
    the end of the run.

    Attributes:
        reason: the kit's message (the refusing DistcheckError's text).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason, pytrace=False)
        self.reason = reason


@pytest.fixture(scope="session")
def budget_guard(pytestconfig: pytest.Config):
    """The session's budget guard (:class:`~pytest_distcheck.budget.guard.BudgetGuard`), with the
    workspace's ceilings and ``--max-usd`` as the session ceiling. Skips when no ``--max-usd`` is given;
    raises :class:`Refused` for a malformed workspace or ``[budget]`` section."""
    from pytest_distcheck.errors import DistcheckError

    if max_usd(pytestconfig) is None:
        pytest.skip(_(PAID_WORK).format(hint=enable_hint()))
    try:
        return session_guard(pytestconfig)
    except DistcheckError as exc:
        raise Refused(str(exc)) from None


def _time_limit(item: pytest.Item) -> float | None:
    marker = item.get_closest_marker("timeout")
    value = marker.args[0] if marker is not None and marker.args else None
    if marker is not None and value is None:
        value = marker.kwargs.get("timeout")
    if value is None:
        try:
            value = item.config.getoption("timeout")
        except ValueError:
            value = None
    try:
        value = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return value if value and value > 0 else None


@pytest.fixture
def budget(request: pytest.FixtureRequest, budget_guard):
    """This test's budget (:class:`TestBudget`): ``budget.reserve(provider, gpu_type, gpu_count, ...)``
    reserves under the session's guard, capped by ``@pytest.mark.budget(usd=X)``. Reservations the test
    leaves without a pod are released at teardown."""
    tb = TestBudget(budget_guard, request.node.nodeid, _marker_cap(request.node), _time_limit(request.node))
    yield tb
    for res in tb.reservations:
        if res.started_row is None and not res.done:
            res.release()
