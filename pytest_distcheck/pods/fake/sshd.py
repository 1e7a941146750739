"""A real SSH server on loopback for each fake pod (asyncssh): exec sessions and SFTP, key auth only.

Commands run as ``bash -c`` in the pod's home folder with the pod's environment; SFTP is rooted
there too, so relative paths mean the same as on a real pod (home = /root). Closing a channel or
terminating the pod kills the command with every process descended from it and its process group, as a
container stop would (torchrun's workers, for one, run in sessions of their own).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import asyncssh
import psutil


class LoopThread:
    """An asyncio event loop on a daemon thread; ``call`` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-runpod-ssh", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        """Cancel what still runs on the loop and wait for it (a command's handler kills its processes and
        closes its pipes as it ends), then stop and close the loop, as ``asyncio.run`` ends one: a transport
        left open would be closed by the garbage collector on a closed loop, and say so in a traceback."""
        async def wind_down() -> None:
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=5)
            await self.loop.shutdown_asyncgens()
            await asyncio.wait_for(self.loop.shutdown_default_executor(), 5)

        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):  # a loop that does not wind down in time is stopped all the same
            self.call(wind_down(), timeout=12)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def find_process(pid: int) -> psutil.Process | None:
    """Process ``pid`` as psutil sees it, or None when it is gone. Signals sent through it later reach that
    process only, never one that reuses its pid."""
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def kill_tree(pid: int, top: psutil.Process | None = None) -> None:
    """SIGKILL process ``pid`` (``top``: it, as :func:`find_process` found it earlier), every process descended
    from it, and its process group.

    The descendants are collected before anything is killed (a killed parent's children go to init, out of
    reach) and stopped as they are found, so that none starts another meanwhile; those in a process group or
    session of their own (torchrun's workers) are among them. A ``pid`` already gone leaves its group only.
    """
    top = find_process(pid) if top is None else top
    found: dict[int, psutil.Process] = {}
    try:
        if top is not None:
            top.suspend()
        while top is not None:
            new = [p for p in top.children(recursive=True) if p.pid not in found]
            if not new:
                break
            for proc in new:
                found[proc.pid] = proc
                with contextlib.suppress(psutil.Error):
                    proc.suspend()
    except psutil.Error:  # ``top`` is gone (or a zombie): what was found so far is all there is to find
        pass
    kill_group(pid)
    for proc in [*([top] if top is not None else []), *found.values()]:
        with contextlib.suppress(psutil.Error):
            proc.kill()


class PodSSHServer:
    """The SSH side of one fake pod. ``start`` returns the loopback port."""

    def __init__(self, home: Path, env: dict[str, str], public_key: str, host_key: asyncssh.SSHKey) -> None:
        self.home = home
        self.env = env
        self.public_key = public_key
        self.host_key = host_key
        self._server: asyncssh.SSHAcceptor | None = None
        self._conns: set[asyncssh.SSHServerConnection] = set()
        self._pids: dict[int, psutil.Process | None] = {}
        self._handlers: set[asyncio.Task[Any]] = set()
        self.commands: list[str] = []

    async def start(self) -> int:
        outer = self
        try:
            allowed = asyncssh.import_authorized_keys(self.public_key)
        except ValueError:  # a pod without a usable PUBLIC_KEY boots, but nobody can log in
            allowed = None

        class _Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                outer._conns.add(conn)

        self._server = await asyncssh.create_server(
            _Server, "127.0.0.1", 0,
            server_host_keys=[self.host_key], authorized_client_keys=allowed,
            process_factory=self._handle, encoding=None,
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(self.home).encode()),
            allow_scp=True,
        )
        return self._server.sockets[0].getsockname()[1]

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command
        if command is None:  # interactive shell: not offered
            process.stderr.write(b"fake pod: exec requests only\n")
            process.exit(1)
            return
        self.commands.append(command)
        loop = asyncio.get_running_loop()
        output = _Output(process, loop)
        transport, _ = await loop.subprocess_exec(
            lambda: output, "bash", "-c", command, cwd=self.home, env=self.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
        pid = transport.get_pid()
        top = find_process(pid)
        self._pids[pid] = top
        self._handlers.add(asyncio.current_task())
        closed = asyncio.ensure_future(process.wait_closed())
        killed = False
        try:
            await asyncio.wait({output.exited, closed}, return_when=asyncio.FIRST_COMPLETED)
            kill_tree(pid, top)  # leftovers of an exited command, or the whole command on a closed channel
            killed = True
            if output.exited.done() and not closed.done():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(output.drained), 5)
                code = transport.get_returncode()
                process.exit(code if code >= 0 else 128 - code)
        finally:
            # Also when cancelled (the loop winding down): no process of the command is left, and its
            # transport is closed while the loop still runs, once the child watcher has seen it exit.
            if not killed:
                kill_tree(pid, top)
            self._pids.pop(pid, None)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(output.exited), 5)
            transport.close()
            closed.cancel()
            self._handlers.discard(asyncio.current_task())

    async def stop(self) -> None:
        """Close the listener and every connection, kill every command with all its processes; wait (5 s at
        most) for the commands' handlers to end."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.abort()
        for pid, top in list(self._pids.items()):
            kill_tree(pid, top)
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=5)


class _Output(asyncio.SubprocessProtocol):
    """A command's stdout and stderr, written to the SSH channel as they come; ``exited``: the command's
    process exited; ``drained``: that, and its output pipes are closed (every process holding them ended)."""

    def __init__(self, process: asyncssh.SSHServerProcess, loop: asyncio.AbstractEventLoop) -> None:
        self._process = process
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        with contextlib.suppress(Exception):  # the channel is closing: the command is about to be killed
            (self._process.stdout if fd == 1 else self._process.stderr).write(data)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.drained.done():
            self.drained.set_result(None)
