"""The ``dist_world`` fixture and its markers: wiring only (the work is in ``pool``, ``group``, ``zygote``).

The zygote (the process that imports torch once) starts as soon as pytest is about to import a test
module that names ``dist_world``, so its import runs beside the module's own ``import torch``; a test that
gets ``dist_world`` through a conftest fixture starts it when collected. Zygotes no selected test needs
are stopped when collection ends.
"""

from __future__ import annotations

import atexit
import os
import time

import pytest

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.ranks import DEFAULT_WORLD_SIZE
from pytest_distcheck.settings import TIMEOUT

MARKERS = {
    "world_size": "world_size(n): number of ranks the dist_world fixture starts (default 2); or parametrize "
                  "dist_world indirectly: @pytest.mark.parametrize('dist_world', [2, 4], indirect=True)",
    "fresh_ranks": "fresh_ranks: run this test on newly started rank processes (its first call on each world "
                   "size and debug level)",
    "dist_debug": "dist_debug(level): run this test's ranks with TORCH_DISTRIBUTED_DEBUG=level "
                  "(OFF, INFO or DETAIL), set before torch is imported; other tests are unaffected",
}
# A marker the fixture reads at set-up, added while the test runs (LATE_MARKER): what to do instead.
_LATE_FIX = {
    "world_size": N_("Put @pytest.mark.world_size(n) on the test, or parametrize dist_world indirectly: "
                     "@pytest.mark.parametrize('dist_world', [2, 4], indirect=True)"),
    "dist_debug": N_("Put @pytest.mark.dist_debug(level) on the test, or set the level before the call: "
                     "monkeypatch.setenv('TORCH_DISTRIBUTED_DEBUG', level)"),
    "fresh_ranks": N_("Put @pytest.mark.fresh_ranks on the test"),
}
LATE_MARKER = N_("a {marker} marker was added while the test ran (request.node.add_marker): dist_world was already "
                 "set up (world size {size}, debug level {level}) and would ignore it. {fix}")
SESSION_LEVEL = N_("of the session")  # LATE_MARKER's {level} without a dist_debug marker
# A bad world size or debug level, after the test's node id.
BAD_PARAM = N_("dist_world parametrized with {param!r}: the world size must be a whole number >= 1")
WORLD_SIZE_TWICE = N_("the world size is given twice (@pytest.mark.world_size and an indirect parametrize of "
                      "dist_world): keep one")
BAD_WORLD_SIZE_MARKER = N_("@pytest.mark.world_size needs a whole number >= 1, got {value!r}")
BAD_DEBUG_MARKER = N_("@pytest.mark.dist_debug needs 'OFF', 'INFO' or 'DETAIL', got {value!r}")
# A rank forked from the zygote holds ~12 MiB of its own before it works (measured: USS of 4 ranks on
# torch 2.13, CPU); 64 MiB leaves room for its gloo buffers and tensors. 32 ranks a core: past that
# gloo's rendezvous and collectives time out long before the test ends.
RANK_BYTES = 64 * 2**20
RANKS_PER_CORE = 32
TOO_MANY_RANKS = N_("world size {n} is more than this machine can hold: {n} ranks x about {per} MiB each = {need} "
                    "MiB, {avail} MiB available, and {cores} core(s) run at most {per_core} ranks each; at most {most} "
                    "ranks here")
_REGISTRY = pytest.StashKey[object]()
_BASE_ENV = pytest.StashKey[dict]()  # os.environ at configure time: what every call's environment is diffed against
_STARTED = pytest.StashKey[set]()  # debug levels whose zygote collection already started
_PLAIN = pytest.StashKey[bool]()  # plain_results_only was called
_PYTEST_TIMEOUT = pytest.StashKey[tuple]()  # (time.monotonic() deadline, seconds) of pytest-timeout's timer
_FITS = pytest.StashKey[set]()  # world sizes found to fit this machine: checked once (psutil costs ~0.1 ms a test)


def plain_results_only(config: pytest.Config) -> None:
    """From now on this session's ranks may return plain data only (``RankPool(plain_results=True)``): for a
    session whose ranks run code it must not trust (the gate, where the ranks run the lab)."""
    config.stash[_PLAIN] = True
    registry = config.stash.get(_REGISTRY, None)
    if registry is not None:
        registry.plain_results_only()


@pytest.hookimpl(trylast=True)  # after conftests' and other plugins' own set-up of the environment
def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS.values():
        config.addinivalue_line("markers", line)
    # Taken now, not when the registry is first made: that may be inside a test (dist_world reached through
    # a conftest fixture), whose monkeypatch would become every later test's base and the zygote's.
    config.stash[_BASE_ENV] = dict(os.environ)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings) -> None:
    # pytest-timeout's own hook, given the settings it resolved (marker, --timeout, PYTEST_TIMEOUT, ini):
    # dist_world's calls end before this deadline, so their RankTimeout (every rank's stack) comes first.
    # Returns None: pytest-timeout's own implementation still sets the timer.
    item.stash[_PYTEST_TIMEOUT] = (time.monotonic() + settings.timeout, settings.timeout)


def _registry(config: pytest.Config):
    registry = config.stash.get(_REGISTRY, None)
    if registry is None:
        from pytest_distcheck.ranks.group import PoolRegistry

        # Under xdist the controller is this worker's parent: the zygotes watch it, so a killed controller
        # takes the ranks with it at once (the worker itself notices only seconds later).
        watch = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else None
        registry = config.stash[_REGISTRY] = PoolRegistry(config.stash[_BASE_ENV], watch_pid=watch)
        if config.stash.get(_PLAIN, False):
            registry.plain_results_only()
        atexit.register(registry.close)  # also when the session ends by an exception
    return registry


def _start_zygote(config: pytest.Config, level: str | None) -> None:
    started = config.stash.setdefault(_STARTED, set())
    if level not in started:
        started.add(level)
        _registry(config).zygote(level)  # starts importing torch now; waited for at first use


def pytest_pycollect_makemodule(module_path, parent) -> None:
    # Before the module is imported: a learner's test module imports torch at its top, and the zygote's
    # own import should run beside that one, not after it. (A dist_world used only through a conftest
    # fixture starts the zygote when its first test is collected, below.)
    if parent.config.option.collectonly:
        return
    try:
        names_it = b"dist_world" in module_path.read_bytes()
    except OSError:
        return
    if names_it:
        _start_zygote(parent.config, None)


def pytest_itemcollected(item: pytest.Item) -> None:
    if "dist_world" in getattr(item, "fixturenames", ()) and not item.config.option.collectonly:
        _start_zygote(item.config, _debug_level(item, fail=False))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # -k, -m or --dod left no dist_world test, or none at a level started early: stop those zygotes.
    registry = config.stash.get(_REGISTRY, None)
    if registry is not None:
        registry.keep_levels({_debug_level(i, fail=False) for i in items
                              if "dist_world" in getattr(i, "fixturenames", ())})


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # Before the DoD plugin writes its reports: under the gate no rank or zygote, where lab code
    # ran, may still be alive to rewrite them (docs/ci/known-limitations.md).
    registry = session.config.stash.get(_REGISTRY, None)
    if registry is not None:
        registry.close()


def pytest_unconfigure(config: pytest.Config) -> None:
    registry = config.stash.get(_REGISTRY, None)
    if registry is not None:
        registry.close()
        atexit.unregister(registry.close)


def _fail(node, text: str):
    __tracebackhide__ = True
    pytest.fail(f"{node.nodeid}: {text}", pytrace=False)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _fits_machine(node, n: int) -> int:
    """``n`` when this machine can hold ``n`` ranks (memory and cores), else the test fails naming both."""
    __tracebackhide__ = True
    import psutil

    cores = os.cpu_count() or 1
    avail = psutil.virtual_memory().available
    most = max(1, min(avail // RANK_BYTES, RANKS_PER_CORE * cores))
    if n > most:
        _fail(node, _(TOO_MANY_RANKS).format(n=n, per=RANK_BYTES >> 20, need=(n * RANK_BYTES) >> 20,
                                             avail=avail >> 20, cores=cores, per_core=RANKS_PER_CORE, most=most))
    return n


def _world_size(request: pytest.FixtureRequest):
    __tracebackhide__ = True
    n = _asked_world_size(request)
    fits = request.config.stash.setdefault(_FITS, set())
    if n not in fits:
        fits.add(_fits_machine(request.node, n))
    return n


def _asked_world_size(request: pytest.FixtureRequest):
    __tracebackhide__ = True
    marker = request.node.get_closest_marker("world_size")
    param = getattr(request, "param", None)
    if param is not None:
        if not _whole(param):
            _fail(request.node, _(BAD_PARAM).format(param=param))
        if marker is not None:
            _fail(request.node, _(WORLD_SIZE_TWICE))
        return param
    if marker is None:
        return DEFAULT_WORLD_SIZE
    value = marker.args[0] if marker.args else marker.kwargs.get("n")
    if not _whole(value):
        _fail(request.node, _(BAD_WORLD_SIZE_MARKER).format(value=value))
    return value


def _debug_level(node, fail: bool = True) -> str | None:
    __tracebackhide__ = True
    marker = node.get_closest_marker("dist_debug")
    if marker is None:
        return None
    value = marker.args[0] if marker.args else marker.kwargs.get("level")
    if not isinstance(value, str) or value.upper() not in ("OFF", "INFO", "DETAIL"):
        if fail:
            _fail(node, _(BAD_DEBUG_MARKER).format(value=value))
        return None
    return value.upper()


def _invocation_nodeid(config: pytest.Config, nodeid: str) -> str:
    """The node id with its file relative to where pytest was started, so a proposed re-run works there."""
    if config.invocation_params.dir == config.rootpath:
        return nodeid
    path, sep, rest = nodeid.partition("::")  # node ids are relative to the rootdir
    return os.path.relpath(config.rootpath / path, config.invocation_params.dir) + sep + rest


@pytest.fixture
def dist_world(request: pytest.FixtureRequest):
    """A gloo process group of N ranks (``@pytest.mark.world_size(n)``, default 2) to run code on.

    ``dist_world.run(fn, *args, timeout=None, **kwargs)`` runs ``fn`` on every rank, each in its own
    process with ``torch.distributed`` initialised, and returns the per-rank results in rank order;
    ``dist_world.spawn(fn, args=(...), nprocs=n)`` calls ``fn(rank, *args)`` as ``mp.spawn`` does.
    The ranks live across tests (started once per world size); with ``@pytest.mark.fresh_ranks`` the
    test's first call on each world size and debug level runs on newly started ranks;
    ``@pytest.mark.dist_debug("DETAIL")`` asks for ranks with that debug level. A ``world_size``,
    ``dist_debug`` or ``fresh_ranks`` marker added while the test runs fails its next call. The world size
    may also come from ``@pytest.mark.parametrize("dist_world", [2, 4], indirect=True)``.
    See :class:`pytest_distcheck.ranks.group.RankGroup`.
    """
    from pytest_distcheck.ranks.group import RankGroup

    pools = _registry(request.config)  # not a session fixture: looking one up costs every test ~20 us
    size = _world_size(request)
    debug = _debug_level(request.node)
    node = request.node
    markers = tuple(node.own_markers)

    def check() -> None:
        # The markers were read at set-up (and add_marker appends: get_closest_marker still returns a
        # decorator's), so a late one would be silently ignored. Comparing lengths keeps this check ~free.
        __tracebackhide__ = True
        if len(node.own_markers) != len(markers):
            for mark in node.own_markers:
                if mark.name in _LATE_FIX and mark not in markers:
                    _fail(node, _(LATE_MARKER).format(marker=mark.name, size=size, level=debug or _(SESSION_LEVEL),
                                                      fix=_(_LATE_FIX[mark.name])))

    return RankGroup(pools, size, "gloo", TIMEOUT.positive_float(request.config), debug=debug,
                     live=request.config.getoption("capture") == "no", check=check,
                     nodeid=_invocation_nodeid(request.config, node.nodeid),
                     fresh=node.get_closest_marker("fresh_ranks") is not None,
                     outer=lambda: node.stash.get(_PYTEST_TIMEOUT, None))

