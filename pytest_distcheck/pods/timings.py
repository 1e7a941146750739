"""How long the pods code waits for things, in seconds: one frozen dataclass, settable from one string.

The defaults suit RunPod (an image pull can take minutes; the SDK's own HTTP timeout is 30 s). Tests
and impatient users override some with the ini key ``distcheck_pod_timings``, e.g.
``api_timeout=1 ready_timeout=5 heartbeat_stale=3``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from pytest_distcheck.i18n import N_, _

MAX_S = 86400.0  # a day: a longer wait is a typo (and inf or nan is never a wait)
NOT_A_WAIT = N_("{name} must be a number of seconds > 0 and at most {max:g} (a day), got {value!r}")
STALE_BEFORE_READY = N_("heartbeat_stale ({stale:g}) must exceed ready_timeout ({ready:g}): the first heartbeat comes "
                        "only once SSH answers, so the pod would end itself while the client still waits for it")
STALE_BEFORE_BEAT = N_("heartbeat_stale ({stale:g}) must exceed heartbeat_every ({every:g}), or the pod ends itself "
                       "while the client is alive")
NOT_A_PAIR = N_("{source}: {pair!r} is not name=seconds with a name among {names}")
NOT_SECONDS = N_("{source}: {name}={raw!r} is not a number of seconds")


@dataclass(frozen=True)
class Timings:
    """Seconds.

    Attributes:
        api_timeout: one provider API call (the runpod SDK itself gives up after 30).
        ready_timeout: from create until the pod must be usable (running, port 22 mapped, SSH answers).
        poll_every: between status polls while waiting.
        create_grace: after a create whose answer was lost, how long to look for the pod by its name.
        confirm_timeout: how long terminate is retried until the provider confirms the pod is gone.
        teardown: added to the reservation for terminating, and the dead-man switch fires this much
            before the reservation runs out.
        heartbeat_every: how often the client tells the pod it is alive.
        heartbeat_stale: the pod's dead-man switch ends the pod when the heartbeat is older than this;
            above ``ready_timeout``, so a pod whose SSH is slow to come up is not ended while the client
            still waits for it (the first beat comes only once SSH answers).
        deadman_every: how often the dead-man switch looks.
        run_grace: a command's client-side limit is its time limit plus this (the pod's own
            ``timeout`` stops it first).
        meter_every: how often the provider's rate and bill for a running pod are read (the watchdog
            meters the larger of them and the priced rate).
    """

    api_timeout: float = 30.0
    ready_timeout: float = 600.0
    poll_every: float = 2.0
    create_grace: float = 60.0
    confirm_timeout: float = 300.0
    teardown: float = 120.0
    heartbeat_every: float = 20.0
    heartbeat_stale: float = 900.0
    deadman_every: float = 15.0
    run_grace: float = 30.0
    meter_every: float = 30.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= MAX_S:
                raise ValueError(_(NOT_A_WAIT).format(name=f.name, max=MAX_S, value=value))
        if self.heartbeat_stale <= self.ready_timeout:
            raise ValueError(_(STALE_BEFORE_READY).format(stale=self.heartbeat_stale, ready=self.ready_timeout))
        if self.heartbeat_stale <= self.heartbeat_every:
            raise ValueError(_(STALE_BEFORE_BEAT).format(stale=self.heartbeat_stale, every=self.heartbeat_every))

    def reserved_seconds(self, run_seconds: float) -> float:
        """Seconds of pod time a lease reserves for ``run_seconds`` of work: the run, plus up to
        ``ready_timeout`` to get the pod ready and ``teardown`` to terminate it (both billed)."""
        return run_seconds + self.ready_timeout + self.teardown

    @classmethod
    def parse(cls, text: str, source: str = "timings") -> Timings:
        """``"name=seconds name=seconds ..."`` (spaces or commas between) over the defaults.

        Raises:
            ValueError: naming ``source``, the pair and what is wrong.
        """
        known = {f.name for f in fields(cls)}
        values: dict[str, float] = {}
        for pair in text.replace(",", " ").split():
            name, sep, raw = pair.partition("=")
            if not sep or name not in known:
                raise ValueError(_(NOT_A_PAIR).format(source=source, pair=pair, names=sorted(known)))
            try:
                values[name] = float(raw)
            except ValueError:
                raise ValueError(_(NOT_SECONDS).format(source=source, name=name, raw=raw)) from None
        try:
            return replace(cls(), **values)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
