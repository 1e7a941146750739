"""pytest wiring of the pods: ``--gpu-provider``, ``--gpu-local-rate``, the ``pod`` marker, the
``gpu_pod`` fixture, and the session-end sweep. Wiring only; the work is in
:mod:`pytest_distcheck.pods.session` and :mod:`pytest_distcheck.pods.lease`.

``gpu_pod`` gives a test one ready pod under the budget guard (the ``budget`` fixture of
:mod:`pytest_distcheck.budget.plugin`, which skips without ``--max-usd``): reserved before it is
created, recorded in the ledger as soon as it has an id, cut by the watchdog at the reservation,
terminated until confirmed and settled when the test is done.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.settings import FROM_INI, Setting
from pytest_distcheck.workspace import get_workspace

GPU_PROVIDER = Setting(
    flag="--gpu-provider",
    env="DISTCHECK_GPU_PROVIDER",
    ini="distcheck_gpu_provider",
    help="where the gpu_pod fixture gets GPUs: runpod (rented, paid) or local (this machine's)",
    default="runpod",
)
LOCAL_RATE = Setting(
    flag="--gpu-local-rate",
    env="DISTCHECK_GPU_LOCAL_RATE",
    ini="distcheck_gpu_local_rate",
    help="USD per GPU-hour the local provider's GPUs cost (your own hardware: 0)",
    default="0",
)
TIMINGS_INI = "distcheck_pod_timings"
# Set only by `distcheck rehearse` (pytest_distcheck.pods.rehearsal), which starts the bundled fake RunPod
# API; accepted only while the SDK points at a loopback address, so a real paid run can never be a rehearsal.
REHEARSAL_ENV = "DISTCHECK_REHEARSAL"
MARKER = ("pod(gpus=1, minutes=30, gpu_type=None, image=None, cloud=None, experiment=None): what gpu_pod rents "
          "for this test; unset values come from the workspace's [pods] section, then the kit's defaults")
_MARKER_KEYS = {"gpus", "minutes", "gpu_type", "image", "cloud", "experiment"}
MAX_LOCAL_RATE = 100.0  # USD per GPU-hour: above any GPU's rent
LOCAL_RATE_BOUND = N_("must be a finite number of USD per GPU-hour, >= 0 and at most {max:g} (more is a typo), "
                      "got {value!r}")
MAX_POD_MINUTES = 366 * 24 * 60  # a year, as distcheck estimate --minutes
POD_MINUTES = N_("{source} must be a number of minutes > 0 and at most {max} (a year), got {value!r}")
UNKNOWN_PROVIDER = N_("{source}: unknown GPU provider {value!r}; choose one of {choices}")
NOT_A_RATE = N_("{source}: {value!r} is not a number of USD per GPU-hour")
REHEARSAL_ONLY = N_("{env}=1 is for `distcheck rehearse` only (provider runpod, the bundled fake API on this machine); "
                    "here the API is {host}: unset {env}")
HEADER_REHEARSAL = N_("distcheck pods: REHEARSAL against the bundled fake RunPod API on this machine: nothing is paid, "
                      "results are not evidence")
HEADER_RUNPOD_KEY = N_("distcheck pods: provider runpod (RUNPOD_API_KEY set); pods named "
                       "distcheck-<run id>-<deadline>, orphans swept at every session start and after paid sessions")
HEADER_RUNPOD_NO_EXTRA = N_("distcheck pods: provider runpod (RUNPOD_API_KEY set, but the gpu extra is not installed "
                            "in this Python: no pod is created or swept from it)")
HEADER_RUNPOD_NO_KEY = N_("distcheck pods: provider runpod (RUNPOD_API_KEY not set); pods named "
                          "distcheck-<run id>-<deadline>, orphans swept once RUNPOD_API_KEY is set")
HEADER_LOCAL = N_("distcheck pods: provider local (this machine's GPUs, ${rate:g}/GPU-hour)")
MARKER_KEYWORDS = N_("{test}: @pytest.mark.pod takes keywords {keys}; got args {args!r} kwargs {kwargs!r}")
BAD_REQUEST = N_("{test}: @pytest.mark.pod / [pods]: {problem}")
SKIPPED = N_("gpu_pod ({provider}): {reason}")
NOT_RECONCILED = N_("distcheck budget: not reconciled with RunPod ({problem}); run `distcheck budget --reconcile` "
                    "later")
RECONCILED = N_("distcheck budget: reconciled {finding}")
RECONCILED_REHEARSAL = N_("distcheck budget: REHEARSAL, nothing paid: reconciled with the fake RunPod API {finding}")
NO_FINAL_SWEEP = N_("distcheck pods: no final sweep ({problem})")
CUDA_NOT_A_LIST = N_("allowed_cuda_versions must be a list such as [\"12.8\", \"12.9\"], got {value!r}")
# The pod's status line (pods/progress.py) as the fixture starts and ends it.
NOT_STARTED = N_("not started ({reason})")
FAILED_BEFORE_READY = N_("failed before it was ready; {ending}")
READY = N_("ready: pod {pod}, run {run_id}")
TERMINATING = N_("terminating pod {pod}")
_session_key = pytest.StashKey[Any]()
_workers_key = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("distcheck")
    GPU_PROVIDER.add(parser, group)
    LOCAL_RATE.add(parser, group)
    parser.addini(TIMINGS_INI, "pods waits in seconds, 'name=seconds ...' (see pytest_distcheck.pods.timings)",
                  default="")


def _provider_name(config: pytest.Config) -> str:
    from pytest_distcheck.pods.session import PROVIDERS

    value, source = GPU_PROVIDER.raw(config)
    if value not in PROVIDERS:
        raise pytest.UsageError(_(UNKNOWN_PROVIDER).format(source=source, value=value, choices=", ".join(PROVIDERS)))
    return value


def _local_rate(config: pytest.Config) -> float:
    value, source = LOCAL_RATE.raw(config)
    try:
        rate = float(value)
    except ValueError:
        raise pytest.UsageError(_(NOT_A_RATE).format(source=source, value=value)) from None
    if not 0 <= rate <= MAX_LOCAL_RATE:
        raise pytest.UsageError(f"{source}: " + _(LOCAL_RATE_BOUND).format(max=MAX_LOCAL_RATE, value=value))
    return rate


def _timings(config: pytest.Config):
    from pytest_distcheck.pods.timings import Timings

    try:
        return Timings.parse(str(config.getini(TIMINGS_INI)), _(FROM_INI).format(ini=TIMINGS_INI))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def rehearsal(config: pytest.Config) -> bool:
    """Whether this session is a rehearsal (``DISTCHECK_REHEARSAL=1``, set by ``distcheck rehearse``).

    Raises:
        pytest.UsageError: it is set while the RunPod API is not on this machine (a real account).
    """
    import os
    from urllib.parse import urlparse

    if os.environ.get(REHEARSAL_ENV, "") != "1":
        return False
    host = urlparse(os.environ.get("RUNPOD_API_BASE_URL", "https://api.runpod.io")).hostname or ""
    if _provider_name(config) != "runpod" or host not in ("127.0.0.1", "localhost", "::1"):
        raise pytest.UsageError(_(REHEARSAL_ONLY).format(env=REHEARSAL_ENV, host=host or "?"))
    return True


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    if rehearsal(config):
        from pytest_distcheck.budget.plugin import rehearsal_key
        from pytest_distcheck.dod.plugin import table_instead_key
        from pytest_distcheck.pods.rehearsal import NO_DOD_TABLE

        config.stash[table_instead_key] = _(NO_DOD_TABLE)
        config.stash[rehearsal_key] = True
    _provider_name(config)  # bad values are usage errors now, not at the first paid test
    _local_rate(config)
    _timings(config)
    config.stash[_workers_key] = []


def pytest_report_header(config: pytest.Config) -> list[str]:
    import os

    from pytest_distcheck.budget.plugin import max_usd

    name = _provider_name(config)
    if get_workspace(config) is None and max_usd(config) is None and not rehearsal(config):
        return []  # a suite of dist_world tests, no course workspace: no pods in sight
    if rehearsal(config):
        return [_(HEADER_REHEARSAL)]
    if name == "runpod":
        if not os.environ.get("RUNPOD_API_KEY", "").strip():
            return [_(HEADER_RUNPOD_NO_KEY)]
        from pytest_distcheck.deps import extra_missing

        return [_(HEADER_RUNPOD_NO_EXTRA if extra_missing("gpu") else HEADER_RUNPOD_KEY)]
    return [_(HEADER_LOCAL).format(rate=_local_rate(config))]


def _report(config: pytest.Config):
    def write(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            # after the last test's "[100%]" (written with no file on the line) write_line would go on that line
            if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
                reporter.line("")
            reporter.write_line(line)
        else:
            print(line, file=sys.stderr)  # noqa: T201 - no terminal reporter (e.g. -p no:terminal)

    return write


def pods_session(config: pytest.Config):
    """This process's :class:`~pytest_distcheck.pods.session.PodsSession` (made on first use)."""
    if _session_key not in config.stash:
        from pytest_distcheck.budget.plugin import session_id
        from pytest_distcheck.pods.session import PodsSession

        config.stash[_session_key] = PodsSession(
            _provider_name(config), _timings(config), _local_rate(config), session_id(config),
            worker=hasattr(config, "workerinput"), report=_report(config), guard=lambda: _ledger_guard(config))
    return config.stash[_session_key]


def _ledger_guard(config: pytest.Config):
    """The workspace's budget guard for recovering the ledger's pods, or None without a [budget] section.
    Raises DistcheckError for a malformed workspace or budget section."""
    from pytest_distcheck.budget.config import budget_config
    from pytest_distcheck.budget.guard import BudgetGuard
    from pytest_distcheck.budget.plugin import session_id

    ws = get_workspace(config)
    cfg = budget_config(ws) if ws is not None else None
    return None if cfg is None else BudgetGuard.from_config(cfg, session_id=session_id(config))


def _request(item: pytest.Item, config: pytest.Config):
    """The GpuRequest and experiment for a test, from its ``pod`` marker, the workspace, the defaults."""
    from pytest_distcheck.pods.base import GpuRequest
    from pytest_distcheck.pods.session import DEFAULT_GPU_TYPE, DEFAULT_IMAGE

    marker = item.get_closest_marker("pod")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and (marker.args or set(kwargs) - _MARKER_KEYS):
        raise pytest.UsageError(_(MARKER_KEYWORDS).format(test=item.nodeid, keys=sorted(_MARKER_KEYS), args=marker.args,
                                                          kwargs=marker.kwargs))
    ws = get_workspace(config)
    section = ws.section("pods") if ws is not None else {}
    pick = lambda key, default: kwargs.get(key) if kwargs.get(key) is not None else section.get(key, default)  # noqa: E731
    cuda = section.get("allowed_cuda_versions", [])
    minutes = pick("minutes", 30)
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes <= MAX_POD_MINUTES:
        source = "@pytest.mark.pod(minutes=...)" if kwargs.get("minutes") is not None else "[pods] minutes"
        raise pytest.UsageError(f"{item.nodeid}: " + _(POD_MINUTES).format(source=source, max=MAX_POD_MINUTES,
                                                                           value=minutes))
    try:
        if not isinstance(cuda, list):
            raise ValueError(_(CUDA_NOT_A_LIST).format(value=cuda))
        request = GpuRequest(gpus=pick("gpus", 1), gpu_type=str(pick("gpu_type", DEFAULT_GPU_TYPE)),
                             seconds=float(minutes) * 60, image=str(pick("image", DEFAULT_IMAGE)),
                             cloud=str(pick("cloud", "secure")), cuda_versions=tuple(cuda))
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(_(BAD_REQUEST).format(test=item.nodeid, problem=exc)) from None
    experiment = pick("experiment", None)
    return request, (str(experiment) if experiment is not None else None)


@pytest.fixture
def distcheck_rehearsal(pytestconfig: pytest.Config) -> bool:
    """True in a rehearsal (``distcheck rehearse``: the fake RunPod API, a scratch copy, nothing paid)."""
    return rehearsal(pytestconfig)


@pytest.fixture
def gpu_pod(request: pytest.FixtureRequest, budget):
    """One ready pod (:class:`pytest_distcheck.pods.lease.LeasedPod`) under the budget guard.

    Ask for it with ``@pytest.mark.pod(gpus=2, minutes=20, experiment="tp-inference")``; the provider
    is ``--gpu-provider``. Use ``pod.put(local, remote)``, ``pod.run(command, timeout)`` (output streams
    to the terminal) and ``pod.get(remote, local)``; remote paths are relative to the pod's work folder.
    Skips when the provider cannot serve the request (no RUNPOD_API_KEY; fewer local GPUs than asked).
    A DistcheckError while no pod was created (the worst case does not fit the budget, no live price, a
    malformed ledger, the provider's clear no) is raised as :class:`~pytest_distcheck.budget.plugin.Refused`:
    the kit's message without its traceback. Anything else, or once a pod may exist, is raised as it is.
    """
    from pytest_distcheck.budget.plugin import Refused
    from pytest_distcheck.errors import DistcheckError
    from pytest_distcheck.pods.base import Unavailable
    from pytest_distcheck.pods.progress import ReportedPod, StatusLine, ending

    config = request.config
    ps = pods_session(config)
    gpu, experiment = _request(request.node, config)
    try:
        provider = ps.provider()
    except Unavailable as exc:
        pytest.skip(_(SKIPPED).format(provider=ps.provider_name, reason=exc))
    gpu_type = getattr(provider, "gpu_name", None) or gpu.gpu_type

    def reserve(max_seconds: float, rate: float | None):
        return budget.reserve(provider.name, gpu_type, gpu.gpus, max_seconds, experiment=experiment,
                              cloud=gpu.cloud, usd_per_gpu_hour=rate)

    capman = config.pluginmanager.getplugin("capturemanager")
    lease: Any = None

    def meter() -> tuple[float | None, float | None]:
        res = getattr(lease, "reservation", None)
        if lease is None or res is None or not lease.started:
            return None, None
        return lease.started, lease.metered_usd_per_hour

    line = StatusLine(f"{gpu.gpus} x {gpu_type} ({provider.name})", config.pluginmanager.get_plugin("terminalreporter"),
                      capman.global_and_fixture_disabled if capman is not None else None, meter)
    lease = ps.lease(gpu, reserve, line)
    try:
        ps.start()
        pod = lease.__enter__()
    except Unavailable as exc:
        line(_(NOT_STARTED).format(reason=exc))
        line.close()
        pytest.skip(_(SKIPPED).format(provider=provider.name, reason=exc))
    except BaseException as exc:
        line(_(FAILED_BEFORE_READY).format(ending=ending(lease)), metered=False)
        line.close()
        if isinstance(exc, DistcheckError) and lease.pod_id is None and lease.lost_name is None:
            raise Refused(str(exc)) from None  # nothing rented: the kit's sentence is the whole story
        raise
    try:  # from here on a Ctrl-C, even one landing just after the "ready" line, still reaches the teardown
        line(_(READY).format(pod=pod.id, run_id=pod.run_id))
        pod.echo = line.output
        yield ReportedPod(pod, line)
    finally:
        line(_(TERMINATING).format(pod=pod.id))
        try:
            lease.__exit__(None, None, None)
        finally:
            line(ending(lease), metered=False)
            line.close()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Sweep other sessions' orphaned pods at every session start where a RunPod key is set, paid tests
    or not (the controller only, under xdist)."""
    import os

    config = session.config
    if hasattr(config, "workerinput") or _provider_name(config) != "runpod":
        return
    if os.environ.get("RUNPOD_API_KEY", "").strip():
        pods_session(config).sweep_at_start()


def _reconcile_at_end(config: pytest.Config) -> None:
    """After a paid session on RunPod: append what RunPod billed for the ledger's pods, show differences."""
    import os

    from pytest_distcheck.budget.plugin import max_usd, session_guard, session_id
    from pytest_distcheck.errors import DistcheckError

    has_key = bool(os.environ.get("RUNPOD_API_KEY", "").strip())
    if max_usd(config) is None or _provider_name(config) != "runpod" or not has_key:
        return
    from pytest_distcheck.pods.runpod_api import pod_bills

    report = _report(config)
    try:
        findings = session_guard(config).reconcile(pod_bills)
    except (DistcheckError, pytest.UsageError) as exc:
        report(_(NOT_RECONCILED).format(problem=exc))
        return
    for f in findings:
        if f.run_id.startswith(f"{session_id(config)}-") or f.state == "difference":
            report(_(RECONCILED_REHEARSAL if rehearsal(config) else RECONCILED).format(finding=f.line()))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if rehearsal(config):  # at the end: say what it was
        from pytest_distcheck.pods.rehearsal import THIS_RUN

        terminalreporter.write_line(_(THIS_RUN), yellow=True, bold=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    ps = config.stash.get(_session_key, None)
    if ps is not None:
        ps.finish()
    if hasattr(config, "workerinput"):
        config.workeroutput["distcheck_pods_used"] = bool(ps is not None and ps.started)
        return
    used = bool(ps is not None and ps.started) or any(config.stash.get(_workers_key, []))
    if any(config.stash.get(_workers_key, [])) and (ps is None or not ps.started):
        # xdist controller: a worker used pods (or crashed); sweep what the whole session left.
        from pytest_distcheck.pods.base import Unavailable

        ps = pods_session(config)
        try:
            ps.sweep_session()
        except Unavailable as exc:
            _report(config)(_(NO_FINAL_SWEEP).format(problem=exc))
    if used:
        _reconcile_at_end(config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    out = getattr(node, "workeroutput", None) or {}
    node.config.stash.setdefault(_workers_key, []).append(bool(out.get("distcheck_pods_used")) or bool(error))
