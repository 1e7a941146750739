"""FakeRunPod: an HTTP server on 127.0.0.1 that stands in for ``https://api.runpod.io`` in tests.

Point the SDK at it with ``RUNPOD_API_BASE_URL=fake.url``. Each pod, once booted, has a real SSH
server on loopback (its ``runtime.ports`` maps private port 22 to it) and runs its start command
(``dockerArgs``, shlex-split as RunPod does) as a local process group, with the variables a pod has
(``RUNPOD_POD_ID``, a pod-scoped ``RUNPOD_API_KEY``, ``PUBLIC_KEY``) and a ``runpodctl`` on PATH
that terminates the pod through this API. Terminating a pod kills its SSH server and every process of the
pod, as a machine that is gone would: those descended from its start command or its SSH commands, and any
other that carries the pod's environment (an orphan that left their process tree).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncssh
import psutil

from .graphql_api import Api
from .sshd import LoopThread, PodSSHServer, kill_tree
from .state import Account, Clock, FakePod

RUNPODCTL = '''#!{python}
"""Fake runpodctl: `remove pod ID` (legacy) and `pod delete ID` send podTerminate with the pod's key."""
import json, os, sys, urllib.request
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
if args[:2] == ["remove", "pod"] or args[:2] == ["pod", "delete"]:
    pod_id = args[2]
    q = 'mutation {{ podTerminate(input: {{podId: "%s"}}) }}' % pod_id
    req = urllib.request.Request({url!r} + "/graphql", data=json.dumps({{"query": q}}).encode(),
        headers={{"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ.get("RUNPOD_API_KEY", "")}})
    try:
        body = json.loads(urllib.request.urlopen(req, timeout=10).read())
    except Exception as exc:
        print("runpodctl: " + str(exc), file=sys.stderr)
        sys.exit(1)
    if body.get("errors"):
        print("runpodctl: " + body["errors"][0]["message"], file=sys.stderr)
        sys.exit(1)
    print('pod "%s" removed' % pod_id)
    sys.exit(0)
print("runpodctl (fake): unsupported command", file=sys.stderr)
sys.exit(2)
'''


class FakeRunPod:
    """The fake API, its pods, and knobs for faults.

    Attributes:
        boot_seconds: fake-clock seconds from create until a pod is RUNNING with port 22 mapped.
        never_ready: pods never boot (runtime stays null, SSH never reachable).
        host_error: when set, pods never boot and, once due, show it as ``lastStatusChange`` (a host whose
            driver is older than the image's CUDA, runpod/containers issue 98).
        gone_as_error: ``pod(...)`` of a terminated pod is an error instead of ``null``.
        terminate_lag_polls: after podTerminate, ``pod(...)`` still shows RUNNING this many times.
    """

    def __init__(self, root: Path, api_key: str = "fake-account-key", boot_seconds: float = 0.3,
                 speed: float = 1.0) -> None:
        self.root = Path(root)
        self.clock = Clock(speed)
        self.account = Account(api_key, self.root, self.clock)
        self.api = Api(self.account, self)
        self.boot_seconds = boot_seconds
        self.never_ready = False
        self.host_error = ""
        self.gone_as_error = False
        self.terminate_lag_polls = 0
        self._host_key = asyncssh.generate_private_key("ssh-ed25519")
        self._loop: LoopThread | None = None
        self._http: ThreadingHTTPServer | None = None
        self._stop = threading.Event()
        self._ssh: dict[str, PodSSHServer] = {}

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._http is not None, "start() first"
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def start(self) -> FakeRunPod:
        self._loop = LoopThread()
        self._http = _QuietServer(("127.0.0.1", 0), _handler(self.api))
        self._http.daemon_threads = True
        # a short poll: shutdown() waits up to one poll interval (0.5 s by default), at every fake's stop
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-runpod-http",
                         daemon=True).start()
        bindir = self.root / "bin"
        bindir.mkdir(parents=True, exist_ok=True)
        ctl = bindir / "runpodctl"
        ctl.write_text(RUNPODCTL.format(python=sys.executable, url=self.url, log=str(self.root / "runpodctl.log")))
        ctl.chmod(0o755)
        threading.Thread(target=self._tick, name="fake-runpod-clock", daemon=True).start()
        return self

    def stop(self) -> None:
        """Shut down; kills every pod's processes (billing state is kept for assertions)."""
        self._stop.set()
        for pod in list(self.account.pods.values()):
            self._kill_pod_processes(pod)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._loop is not None:
            self._loop.stop()

    def __enter__(self) -> FakeRunPod:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- knobs and inspection -----------------------------------------------------------------
    def inject(self, op: str, kind: str, times: int = 1) -> None:
        """Queue a fault for the next ``times`` calls of ``op`` (create/get/list/terminate/stop/gpu).

        Kinds: no_capacity (RunPod's GraphQL error), http_502 (HTML body), http_500
        (INTERNAL_SERVER_ERROR), timeout (answers after ``api.hang_seconds``), reply_lost (does the
        work, then closes the connection without an answer).
        """
        self.api.inject(op, kind, times)

    @property
    def pods(self) -> list[FakePod]:
        with self.account.lock:
            return list(self.account.pods.values())

    def live_pods(self) -> list[FakePod]:
        return self.account.live()

    def billed_usd(self) -> float:
        now = self.clock.now()
        return sum(p.billed_usd(now) for p in self.pods)

    def calls(self, op: str) -> list[dict[str, Any]]:
        from .graphql_api import OPS

        name = OPS.get(op, op)
        return [args for n, args in self.api.log if n == name]

    def ssh_commands(self, pod: FakePod) -> list[str]:
        server = self._ssh.get(pod.id)
        return list(server.commands) if server else []

    def wait_until(self, predicate: Any, timeout: float = 20.0) -> bool:
        """Poll ``predicate()`` every 50 ms; True once it holds, False after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            time.sleep(0.05)
        return bool(predicate())

    # -- called by the API --------------------------------------------------------------------
    def _create(self, inp: dict[str, Any]) -> FakePod:
        return self.account.new_pod(inp, self.boot_seconds)

    def _terminate(self, pod: FakePod, by: str) -> None:
        with self.account.lock:
            if not pod.alive:
                return
            pod.terminated_at = self.clock.now()
            pod.terminated_by = by
            pod.desired_status = "TERMINATED"
            pod.hide_polls_left = self.terminate_lag_polls
        self._kill_pod_processes(pod)

    # -- internals ----------------------------------------------------------------------------
    def _env(self, pod: FakePod) -> dict[str, str]:
        path = os.pathsep.join([str(self.root / "bin"), os.path.dirname(sys.executable), "/usr/bin", "/bin"])
        return {**pod.env, "PATH": path, "HOME": str(pod.home), "LANG": "C.UTF-8",
                "RUNPOD_POD_ID": pod.id, "RUNPOD_API_KEY": pod.pod_key, "RUNPOD_GPU_COUNT": str(pod.gpu_count),
                "RUNPOD_API_BASE_URL": self.url,
                "RUNPOD_PUBLIC_IP": "127.0.0.1"}

    def _boot(self, pod: FakePod) -> None:
        env = self._env(pod)
        server = PodSSHServer(pod.home, env, pod.env.get("PUBLIC_KEY", ""), self._host_key)
        assert self._loop is not None
        port = self._loop.call(server.start())
        self._ssh[pod.id] = server
        if pod.docker_args:
            out = open(pod.home / "start.log", "ab")  # noqa: SIM115 - handed to the child
            pod.process = subprocess.Popen(shlex.split(pod.docker_args), cwd=pod.home, env=env, stdout=out,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            out.close()
        with self.account.lock:
            pod.ssh_port = port
            pod.booted = pod.alive

    def _kill_pod_processes(self, pod: FakePod) -> None:
        # Not once reaped (a pod's second kill, at stop): its pid may be another process's by then.
        if pod.process is not None and pod.process.poll() is None:
            kill_tree(pod.process.pid)
            try:
                pod.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        server = self._ssh.pop(pod.id, None)
        if server is not None and self._loop is not None:
            try:
                self._loop.call(server.stop(), timeout=10)
            except Exception:  # noqa: BLE001 - the loop may be gone at shutdown
                pass
        for _ in range(5):  # a stray may start another before it is killed; that one carries the mark too
            strays = self._strays(pod)
            if not strays:
                break
            for proc in strays:
                kill_tree(proc.pid, proc)

    def _strays(self, pod: FakePod) -> list[psutil.Process]:
        """Live processes of ``pod`` outside the trees its kill reaches: those whose environment is the pod's
        (its id and this fake's URL), as a container's processes are the container's wherever they went."""
        mark = {"RUNPOD_POD_ID": pod.id, "RUNPOD_API_BASE_URL": self._env(pod)["RUNPOD_API_BASE_URL"]}
        found = []
        for proc in psutil.process_iter():
            try:
                env = proc.environ()
                if all(env.get(k) == v for k, v in mark.items()) and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except psutil.Error:  # gone, a zombie, or another user's
                continue
        return found

    def _tick(self) -> None:
        while not self._stop.wait(0.05):
            now = self.clock.now()
            for pod in self.pods:
                if pod.alive and not pod.booted and self.host_error and now >= pod.ready_at:
                    pod.status_change = self.host_error
                elif pod.alive and not pod.booted and not self.never_ready and now >= pod.ready_at:
                    try:
                        self._boot(pod)
                    except Exception as exc:  # noqa: BLE001 - keep the clock running; visible in the log
                        with (self.root / "fake-errors.log").open("a") as log:
                            log.write(f"boot {pod.id}: {exc!r}\n")
                        self.never_ready = True


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout fault) closes its socket; that is expected here


def _handler(api: Api) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            # REST billing (docs.runpod.io api-reference/billing/GET/billing/pods): records of
            # {amount (USD), timeBilledMs, podId, gpuTypeId, time, diskSpaceBilledGb}.
            from urllib.parse import parse_qs, urlparse

            url = urlparse(self.path)
            if url.path.rstrip("/") != "/v1/billing/pods":
                self._send(404, b"<html><body>404 Not Found</body></html>")
                return
            auth = self.headers.get("Authorization") or ""
            if auth != f"Bearer {api.account.api_key}":
                self._send(401, {"error": "unauthorized"})
                return
            if api.faults["billing"] and api.faults["billing"].popleft() == "http_502":
                self._send(502, b"<html>502</html>")
                return
            wanted = parse_qs(url.query).get("podId", [None])[0]
            now = api.account.clock.now()
            records = [{"amount": round(p.billed_usd(now), 6), "timeBilledMs": int(p.billed_seconds(now) * 1000),
                        "podId": p.id, "gpuTypeId": p.gpu_type_id, "diskSpaceBilledGb": 0,
                        "time": "2026-12-01T00:00:00Z"}
                       for p in api.account.pods.values() if wanted in (None, p.id)]
            self._send(200, records)

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/graphql":
                self._send(404, b"<html><body>404 Not Found</body></html>")
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"errors": [{"message": "fake: body is not JSON"}]})
                return
            auth = self.headers.get("Authorization") or ""
            bearer = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
            reply = api.handle(body, bearer)
            if reply.drop:
                self.close_connection = True
                return
            self._send(reply.status, reply.body)

        def _send(self, status: int, body: Any) -> None:
            if isinstance(body, bytes):
                data, ctype = body, "text/html"
            else:
                data, ctype = json.dumps(body).encode(), "application/json"
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
