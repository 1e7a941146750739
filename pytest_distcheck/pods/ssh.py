"""SSH to a pod with asyncssh: a per-run key pair, file copies over SFTP, commands with streamed output.

asyncssh is asynchronous; the kit's callers are not. Each :class:`SSHSession` runs its own event loop
on a daemon thread and blocks the caller on it, so a KeyboardInterrupt in the caller still arrives
(the wait is interruptible) and the lease's ``finally`` terminates the pod.

The pod's host key is not known in advance (RunPod does not publish it), so it is not checked; the
connection is still encrypted and the pod lives minutes. Commands run with the image's environment
(``/etc/rp_environment`` on RunPod images, when present) under ``timeout``, so the pod stops a
command that outlives its limit even if this machine is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shlex
import threading
import time
from collections import deque
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.pods.base import OutputSink, PodLost, RunResult, RunTimeout

WORKDIR = "distcheck"  # relative to the pod's home folder (/root on RunPod)
TAIL_LINES = 40
CLOSED = N_("the SSH connection was closed")
NO_ANSWER = N_("no answer within {seconds:g} s")
LOST = N_("SSH connection to {where} lost ({error}); the pod may have been terminated")
STILL_RUNNING = N_("command on {where} still running after {seconds:g} s (+{grace:g} s grace); its channel was closed: "
                   "{command}")
STOPPED_BY_TIMEOUT = N_("command on {where} ran past its limit of {seconds} s and was stopped by `timeout`: {command}")


def _quiet() -> None:
    # asyncssh logs every channel at INFO; the kit reports what matters itself.
    import logging

    logging.getLogger("asyncssh").setLevel(logging.WARNING)


def new_key_pair() -> tuple[Any, str]:
    """A fresh ed25519 key pair for this run: (private key object, OpenSSH public key line).

    The private key stays in memory; the public line is given to the pod as ``PUBLIC_KEY``.
    """
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519", comment="pytest-distcheck")
    return key, key.export_public_key().decode().strip()


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="distcheck-ssh", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        """Run ``coro`` on the loop and wait for it (polling, so a stopped loop or Ctrl-C ends the wait).

        Raises TimeoutError after ``timeout`` seconds, ConnectionError if the loop has stopped.
        """
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        end = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                step = 0.5 if end is None else max(min(0.5, end - time.monotonic()), 0.0)
                try:
                    return fut.result(step)
                except concurrent.futures.TimeoutError:
                    if fut.done():
                        raise
                    if not self.loop.is_running():
                        raise ConnectionError(_(CLOSED)) from None
                    if end is not None and time.monotonic() >= end:
                        raise TimeoutError(_(NO_ANSWER).format(seconds=timeout)) from None
        except BaseException:
            fut.cancel()
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class SSHSession:
    """One SSH connection to a pod. Remote paths are relative to :data:`WORKDIR`.

    Raises (from every method): :class:`PodLost` when the connection is gone (the pod ended).
    """

    def __init__(self, loop: _Loop, conn: Any, where: str) -> None:
        self._loop = loop
        self._conn = conn
        self.where = where
        self._closed = False

    @classmethod
    def connect(cls, host: str, port: int, key: Any, timeout: float, username: str = "root") -> SSHSession:
        """Log in with ``key``; make the work folder. Raises OSError/asyncssh.Error if it fails."""
        import asyncssh

        _quiet()
        loop = _Loop()

        async def go() -> Any:
            conn = await asyncssh.connect(host, port, username=username, client_keys=[key], known_hosts=None,
                                          connect_timeout=timeout, keepalive_interval=15)
            await conn.run(f"mkdir -p {WORKDIR}", check=True, timeout=timeout)
            return conn

        try:
            conn = loop.call(go(), timeout + 5)
        except BaseException:
            loop.stop()
            raise
        return cls(loop, conn, f"{username}@{host}:{port}")

    def _lost(self, exc: BaseException) -> PodLost:
        return PodLost(_(LOST).format(where=self.where, error=f"{type(exc).__name__}: {exc}"))

    def put(self, local: Path, remote: str) -> None:
        import asyncssh

        local = Path(local)

        async def go() -> None:
            async with self._conn.start_sftp_client() as sftp:
                target = f"{WORKDIR}/{remote}".rstrip("/")
                parent = target.rsplit("/", 1)[0]
                await sftp.makedirs(parent, exist_ok=True)
                await sftp.put(str(local), target, recurse=local.is_dir())

        try:
            self._loop.call(go())
        except (OSError, asyncssh.Error) as exc:
            raise self._lost(exc) from None

    def get(self, remote: str, local: Path) -> None:
        import asyncssh

        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)

        async def go() -> None:
            async with self._conn.start_sftp_client() as sftp:
                src = f"{WORKDIR}/{remote}".rstrip("/")
                await sftp.get(src, str(local), recurse=await sftp.isdir(src))

        try:
            self._loop.call(go())
        except (OSError, asyncssh.Error) as exc:
            raise self._lost(exc) from None

    def run(self, command: str, timeout: float, grace: float, on_output: OutputSink | None = None) -> RunResult:
        """Run ``command`` under ``timeout -k 10 <timeout>`` on the pod; stream merged stdout/stderr lines.

        The client waits ``timeout + grace`` seconds, then closes the channel and raises RunTimeout.
        """
        import asyncssh

        limit = max(1, int(timeout + 0.999))
        wrapped = ("[ -f /etc/rp_environment ] && . /etc/rp_environment; "
                   f"cd {WORKDIR} && exec timeout -k 10 {limit} bash -c {shlex.quote(command)}")
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        t0 = time.monotonic()

        async def go() -> int:
            proc = await self._conn.create_process(wrapped, stderr=asyncssh.STDOUT, encoding="utf-8",
                                                   errors="replace")
            try:
                async def pump() -> None:
                    async for line in proc.stdout:
                        if not line:  # EOF
                            break
                        tail.append(line.rstrip("\n"))
                        if on_output is not None:
                            on_output(line)

                await asyncio.wait_for(pump(), limit + grace)
                status = await asyncio.wait_for(proc.wait(), grace)
                return status.exit_status if status.exit_status is not None else 255
            finally:
                proc.close()

        try:
            code = self._loop.call(go())
        except asyncio.TimeoutError:
            raise RunTimeout(_(STILL_RUNNING).format(where=self.where, seconds=timeout, grace=grace,
                                                     command=command[:200])) from None
        except (OSError, asyncssh.Error) as exc:
            raise self._lost(exc) from None
        seconds = time.monotonic() - t0
        if code == 124:
            raise RunTimeout(_(STOPPED_BY_TIMEOUT).format(where=self.where, seconds=limit, command=command[:200]))
        return RunResult(code, seconds, list(tail))

    def touch(self, remote: str, timeout: float, text: str = "") -> None:
        """``touch ~/distcheck/<remote>`` (the heartbeat), or write ``text`` (one line) into it. Raises
        PodLost or TimeoutError."""
        import asyncssh

        path = f"{WORKDIR}/{shlex.quote(remote)}"
        command = f"printf '%s\\n' {shlex.quote(text)} > {path}" if text else f"touch {path}"
        try:
            self._loop.call(self._conn.run(command, timeout=timeout), timeout + 2)
        except (OSError, asyncssh.Error) as exc:
            raise self._lost(exc) from None

    def close(self) -> None:
        """Close the connection; safe from any thread and more than once. A command running meanwhile
        ends with PodLost."""
        if self._closed:
            return
        self._closed = True

        async def go() -> None:
            self._conn.close()
            await self._conn.wait_closed()

        try:
            self._loop.call(go(), 5)
        except BaseException:  # noqa: BLE001 - closing a dead connection must not raise
            pass
        # Stop the loop a little later, so a caller blocked on it sees its call fail first.
        self._loop.loop.call_soon_threadsafe(self._loop.loop.call_later, 1.0, self._loop.loop.stop)
