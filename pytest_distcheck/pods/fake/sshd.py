"""A real SSH server on loopback for each fake pod (asyncssh): exec sessions and SFTP, key auth only.

Commands run as ``bash -c`` in the pod's home folder with the pod's environment; SFTP is rooted
there too, so relative paths mean the same as on a real pod (home = /root). Closing a channel or
terminating the pod kills the command's whole process group, as a container stop would.
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


class LoopThread:
    """An asyncio event loop on a daemon thread; ``call`` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-runpod-ssh", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class PodSSHServer:
    """The SSH side of one fake pod. ``start`` returns the loopback port."""

    def __init__(self, home: Path, env: dict[str, str], public_key: str, host_key: asyncssh.SSHKey) -> None:
        self.home = home
        self.env = env
        self.public_key = public_key
        self.host_key = host_key
        self._server: asyncssh.SSHAcceptor | None = None
        self._conns: set[asyncssh.SSHServerConnection] = set()
        self._pids: set[int] = set()
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
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=self.home, env=self.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
        self._pids.add(proc.pid)

        async def pump(src: asyncio.StreamReader, dst: Any) -> None:
            while chunk := await src.read(4096):
                dst.write(chunk)

        pumps = asyncio.ensure_future(asyncio.gather(pump(proc.stdout, process.stdout),
                                                     pump(proc.stderr, process.stderr)))
        exited = asyncio.ensure_future(proc.wait())
        closed = asyncio.ensure_future(process.wait_closed())
        await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
        kill_group(proc.pid)  # leftovers of an exited command, or the whole command on a closed channel
        self._pids.discard(proc.pid)
        if exited.done() and not closed.done():
            try:
                await asyncio.wait_for(pumps, 5)
            except (asyncio.TimeoutError, ConnectionError):
                pass
            process.exit(proc.returncode if proc.returncode >= 0 else 128 - proc.returncode)
        else:
            for task in (pumps, exited):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                    await task
        closed.cancel()

    async def stop(self) -> None:
        """Close the listener and every connection, kill every command's process group."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.abort()
        for pid in list(self._pids):
            kill_group(pid)
