"""The pods' messages under --lang es: a request's refusals, the local provider's lost pods and time limits, RunPod's
waits and API failures (the key still redacted), the SSH and timings errors, the preflight's misses and summary, the
sweep's reasons, the watchdog's cut, the shipped DoD's problems, the gate's snapshot and the phase pack, in Spanish;
identifiers and status keywords (RUNNING, EXITED) as they are. No fake RunPod server: providers are stubbed."""

from __future__ import annotations

import time

import pytest

from pytest_distcheck import i18n
from pytest_distcheck.budget import watchdog as wd
from pytest_distcheck.dod import manifest, snapshot
from pytest_distcheck.i18n import _
from pytest_distcheck.pods import base, local, preflight, reaper, runpod, runpod_api, session, ssh, sweep, timings
from pytest_distcheck.pods.base import GONE, RUNNING, TERMINATED, GpuRequest, PodInfo, ProviderError
from pytest_distcheck.pods.fake.fixtures import guard  # noqa: F401 - fixture (a budget guard on a scratch ledger)

KEY = "rpa_ES_TESTKEY_n0l34k_1c2d"
REQUEST = {"gpus": 2, "gpu_type": "NVIDIA GeForce RTX 4090", "seconds": 60.0}


@pytest.fixture(autouse=True)
def _spanish_then_english():
    """Each test speaks Spanish; the session's own summary, after the last one, stays English."""
    i18n.use("es")
    yield
    i18n.use(i18n.DEFAULT)


def test_a_requests_refusals_are_spanish():
    with pytest.raises(ValueError) as err:
        GpuRequest(**{**REQUEST, "gpus": 0})
    assert str(err.value) == _(base.BAD_GPUS).format(value=0) == "gpus debe ser un número entero >= 1; se ha recibido 0"
    with pytest.raises(ValueError, match="no es una versión de CUDA"):
        GpuRequest(**REQUEST, cuda_versions=("12",))
    with pytest.raises(ValueError, match="^cloud debe ser 'secure' o 'community'"):
        GpuRequest(**REQUEST, cloud="ALL")
    with pytest.raises(ValueError, match="no es un id de tipo de GPU"):
        GpuRequest(**{**REQUEST, "gpu_type": 'RTX"4090'})


def test_the_local_provider_speaks_spanish_when_gpus_are_few_a_command_runs_long_or_the_pod_is_released():
    with pytest.raises(base.Unavailable) as err:
        local.LocalProvider(gpus=["g"]).rate(GpuRequest(**REQUEST))
    assert str(err.value) == _(local.TOO_FEW_GPUS).format(gpus=2, count=1)
    assert "esta máquina tiene 1" in str(err.value) and "--gpu-provider runpod" in str(err.value)
    prov = local.LocalProvider(gpus=["g", "g"])
    pod = prov.wait_ready(prov.create(GpuRequest(**REQUEST), "n", 60, 0, 1), 5)
    with pytest.raises(base.RunTimeout) as timed_out:
        pod.run("sleep 30", timeout=0.3)
    assert str(timed_out.value) == _(local.TIMED_OUT).format(pod=pod.id, seconds=0.3, command="sleep 30")
    assert "ha superado su límite de 0.3 s" in str(timed_out.value)
    prov.terminate(pod.id)
    with pytest.raises(base.PodLost, match="ya se ha liberado"):
        pod.run("true", timeout=5)
    with pytest.raises(base.PodLost, match=f"^el pod local {pod.id} ya no existe$"):
        prov.wait_ready(pod.id, 1)


def test_a_leased_pod_the_watchdog_ended_says_so_in_spanish(guard, tmp_path):  # noqa: F811
    from pytest_distcheck.pods.lease import CUT_BY_WATCHDOG, Lease
    from pytest_distcheck.pods.reaper import Reaper

    lease = Lease(local.LocalProvider(gpus=["g", "g"]), GpuRequest(**REQUEST),
                  lambda s, r: guard.reserve("local", "local GPU", 2, s, "t", usd_per_gpu_hour=r), Reaper(10),
                  timings.Timings.parse("teardown=1 ready_timeout=5"))
    with lease as pod:
        assert lease.reservation.describe_limit().startswith(f"su reserva de $0.00 (ejecución {pod.run_id}; ")
        lease.cut_reason = _(wd.COST_REACHED).format(limit=lease.reservation.describe_limit())
        with pytest.raises(base.PodLost) as err:
            pod.put(tmp_path, "x")
    assert str(err.value) == _(CUT_BY_WATCHDOG).format(pod=pod.id, reason=lease.cut_reason)
    assert str(err.value).startswith(f"el watchdog del presupuesto ha terminado el pod {pod.id} (el coste acumulado")


class _StubRunPod(runpod.RunPodProvider):
    """RunPodProvider without the SDK or a key: ``status`` answers from ``infos``."""

    def __init__(self, infos: list[PodInfo]) -> None:
        self.timings = timings.Timings.parse("poll_every=0.01 ready_timeout=5")
        self._infos = infos

    def status(self, pod_id: str) -> PodInfo:
        return self._infos.pop(0) if len(self._infos) > 1 else self._infos[0]


def test_runpods_wait_says_in_spanish_why_a_pod_never_became_usable():
    exited = PodInfo("p1", "n", "EXITED", detail="nvidia-container-cli: requirement error: cuda>=12.8")
    with pytest.raises(base.NotReady) as err:
        _StubRunPod([exited]).wait_ready("p1", 5)
    said = _(runpod.RUNPOD_SAYS).format(detail=exited.detail)
    assert str(err.value) == _(runpod.CANNOT_START).format(pod="p1", said=said, status="EXITED")
    assert "no puede arrancar en su host: RunPod dice" in str(err.value) and "allowed_cuda_versions" in str(err.value)
    with pytest.raises(base.PodLost, match="^el pod p1 está TERMINATED mientras"):
        _StubRunPod([PodInfo("p1", "n", TERMINATED)]).wait_ready("p1", 5)
    lines: list[str] = []
    with pytest.raises(base.NotReady) as slow:
        _StubRunPod([PodInfo("p1", "n", "")]).wait_ready("p1", 0.05, lines.append)
    last = _(runpod.PORT_NOT_MAPPED).format(status=_(runpod.NO_STATUS))
    assert lines[-1] == last == "sin estado, el puerto 22 aún no está mapeado"
    assert str(slow.value) == _(runpod.NOT_USABLE).format(pod="p1", seconds=0.05, last=last)


def test_runpod_api_failures_are_spanish_and_never_show_the_key(monkeypatch):
    monkeypatch.delenv(runpod_api.API_KEY_ENV, raising=False)
    with pytest.raises(base.Unavailable, match="^RUNPOD_API_KEY no está definida: exporta tu clave"):
        runpod_api.api_key()
    with pytest.raises(ValueError) as unsafe:
        runpod_api.check_value("image", 'a"b')
    assert str(unsafe.value).startswith("image contiene una comilla doble; el SDK de runpod 1.12.0")
    monkeypatch.setenv(runpod_api.API_KEY_ENV, KEY)
    with pytest.raises(ValueError, match="^el id de pod 'a/b' no es solo letras y dígitos$"):
        runpod_api.pod_bills(["a/b"])
    # A billing URL with the key in it: the error names the URL, redact() takes the key out.
    monkeypatch.setenv(runpod_api.REST_URL_ENV, f"http://127.0.0.1:9/{KEY}")
    with pytest.raises(ProviderError) as billing:
        runpod_api.pod_bills(["abc123"], timeout=5)
    assert str(billing.value).startswith("billing: ha fallado la respuesta de facturación de RunPod para el pod abc123")
    assert KEY not in str(billing.value) and "***" in str(billing.value)

    def lost() -> None:
        import requests

        raise requests.exceptions.ConnectionError(f"connection to {KEY} refused")

    with pytest.raises(ProviderError) as no_answer:
        runpod_api.call("list", lost, timeout=5)
    assert str(no_answer.value) == "list: " + _(runpod_api.NO_ANSWER).format(error="ConnectionError")
    with pytest.raises(ProviderError, match="^get: sin respuesta de RunPod en 0.05 s$"):
        runpod_api.call("get", time.sleep, 2, timeout=0.05)


def test_timings_and_ssh_errors_are_spanish():
    with pytest.raises(ValueError) as err:
        timings.Timings.parse("warp=1", "src")
    assert str(err.value).startswith("src: 'warp=1' no es nombre=segundos")
    with pytest.raises(ValueError, match=r"^src: heartbeat_stale \(300\) debe superar ready_timeout \(600\)"):
        timings.Timings.parse("heartbeat_stale=300", "src")
    lost = ssh.SSHSession(None, None, "root@h:22")._lost(ConnectionError(_(ssh.CLOSED)))
    assert str(lost) == ("se ha perdido la conexión SSH con root@h:22 (ConnectionError: la conexión SSH se ha "
                         "cerrado); puede que el pod se haya terminado")


# SYNTHETIC: a CPU-only pod as the probe reports it (the rehearsal's fake pod), in the probe's own English words.
NO_GPU_FACTS = {"nvidia_smi": {"error": preflight.NO_SMI},
                "torch": {"version": "2.8.0+cpu", "cuda": None, "available": True, "count": 2, "nccl": None},
                "allreduce": {"skipped": preflight.NO_CUDA_DEVICE}}


def test_the_preflight_speaks_spanish_and_translates_the_probes_own_words():
    found = preflight.problems(NO_GPU_FACTS, preflight.Expect(gpus=2))
    assert found == [_(preflight.NO_GPU_VISIBLE).format(error=_(preflight.NO_SMI)),
                     _(preflight.NO_ALLREDUCE).format(why=_(preflight.NO_CUDA_DEVICE))]
    assert found[0] == "ninguna GPU visible: nvidia-smi: no se encuentra nvidia-smi"
    timed_out = {**NO_GPU_FACTS, "allreduce": {"ranks": 2, "ok": False,
                                               "error": f"{preflight.RANK_TIMED_OUT} | NCCL error: x"}}
    assert preflight.problems(timed_out, preflight.Expect(gpus=2))[-1].endswith("(NCCL None): tiempo agotado tras 90 s"
                                                                                  " | NCCL error: x")
    assert preflight.summary(NO_GPU_FACTS) == ("ninguna GPU visible, torch 2.8.0+cpu (CUDA None, disponible), "
                                               "all-reduce omitido")
    failed = str(preflight.PreflightFailed("p1", found, NO_GPU_FACTS))
    assert failed.startswith("el pod p1 no ha superado su comprobación previa") and "\n  - ninguna GPU" in failed


def test_the_status_line_says_what_runs_on_the_pod_in_spanish_and_the_command_stays_english():
    """The preflight's "running ..." comes from its command's comment through the catalog; the experiment's from
    SPEEDUP_RUN, given as ``shown``. What the pod receives is the same in every language."""
    from pytest_distcheck.phase35 import messages as m
    from pytest_distcheck.pods.progress import RUNNING, ReportedPod, StatusLine

    sent = []

    class Pod:
        def run(self, command, timeout, on_output=None):
            sent.append(command)

    line = StatusLine("p")
    pod = ReportedPod(Pod(), line)
    pod.run(preflight.probe_command(2), 10)
    speedup = _(m.SPEEDUP_RUN).format(ranks=m.ranks(2), backend="gloo", device="cpu")
    pod.run("# speedup.py: torchrun, 2 ranks, gloo on cpu\ncd code && torchrun ...", 10, shown=speedup)
    assert [ln.split(": ", 2)[2] for ln in line.lines] == [
        _(RUNNING).format(command=_(preflight.PROBE_LABEL)), _(RUNNING).format(command=speedup)]
    assert line.lines[0].endswith("ejecutando la comprobación previa: GPU, driver, torch, all-reduce de NCCL, "
                                  "memoria libre")
    assert line.lines[1].endswith("ejecutando speedup.py: torchrun, 2 ranks, gloo en cpu")
    assert sent[0].startswith(f"# {preflight.PROBE_LABEL}\n") and sent[1].startswith("# speedup.py: torchrun, 2 ranks, "
                                                                                     "gloo on cpu\n")


class _NoFactsPod(base.Pod):
    id = name = "p1"

    def put(self, local, remote):
        pass

    def get(self, remote, local):
        pass

    def run(self, command, timeout, on_output=None):
        return base.RunResult(127, 0.1, [])


def test_a_probe_with_no_facts_says_so_in_spanish():
    with pytest.raises(preflight.PreflightFailed) as err:
        preflight.run_preflight(_NoFactsPod(), preflight.Expect(gpus=2))
    assert err.value.problems == [_(preflight.NO_FACTS).format(status=127, tail=_(preflight.NO_OUTPUT))]
    assert err.value.problems == ["la sonda no ha dado datos (código de salida 127): sin salida"]


class _Stuck(base.Provider):
    """A provider whose pods never end and whose list fails."""

    name = "stub"

    def rate(self, request):
        return None

    def create(self, *args):
        return "p1"

    def find(self, name):
        return None

    def status(self, pod_id):
        return PodInfo(pod_id, "n", RUNNING)

    def wait_ready(self, *args):
        raise NotImplementedError

    def terminate(self, pod_id):
        pass

    def list(self):
        raise ProviderError("list", "down")


def test_the_sweeps_reasons_and_outcomes_are_spanish():
    name = "distcheck-0123abcd-01-1700000000"
    ended = sweep.orphan_reason(PodInfo("p1", name, RUNNING), "start", now=1700000000, state=lambda s: "ended")
    assert ended == (True, _(sweep.SESSION_ENDED).format(session="0123abcd"))
    assert ended[1] == "su sesión de pytest 0123abcd ha terminado (ningún proceso tiene su cerrojo)"
    assert sweep.orphan_reason(PodInfo("p1", name, GONE), "start") == (False, "ya está GONE")
    term = reaper.terminate_and_confirm(_Stuck(), "p1", 0.05)
    assert not term.confirmed and term.last_error == "estado todavía RUNNING"
    report = sweep.SweepReport(terminated=[(PodInfo("p1", name, RUNNING), ended[1], term)])
    assert report.lines() == [f"p1 {name}: terminación NO confirmada (estado todavía RUNNING); {ended[1]}"]
    lines: list[str] = []
    ps = session.PodsSession("local", timings.Timings(), 0.0, "0123abcd", worker=False, report=lines.append)
    ps._provider = _Stuck()
    ps._sweep("start", None)
    assert lines == [_(session.SWEEP_NOT_LISTED["start"]).format(error="list: down")]
    assert lines[0].startswith("distcheck pods: el barrido inicial no ha podido listar los pods (list: down)")


def test_the_watchdogs_cut_is_spanish():
    now = [0.0]
    dog = wd.Watchdog(limit_usd=1.0, usd_per_hour=3600.0, terminate=lambda: None, clock=lambda: now[0], start=0.0,
                      install_handlers=False)
    dog.observe(7200.0)
    now[0] = 10.0
    assert dog.check()
    assert dog.reason == _(wd.COST_REACHED).format(limit=_(wd.THE_LIMIT).format(usd="$1.00"))
    message = dog.message()
    assert message.startswith("ejecución de pago cortada: el coste acumulado ha alcanzado el límite de $1.00 tras "
                              "acumular")
    assert "(medido por la cifra mayor: el proveedor informa de $7200.00/hora" in message
    with pytest.raises(ValueError, match=r"^interval_s debe estar en \(0, 1\]"):
        wd.Watchdog(limit_usd=1, usd_per_hour=1, terminate=lambda: None, interval_s=2)


def test_the_shipped_dods_problems_the_snapshot_and_the_phase_pack_are_spanish(tmp_path, monkeypatch):
    from pytest_distcheck import phase_pack

    canon = manifest.shipped("35")
    problems = manifest.compare(tmp_path / "mine.toml", tmp_path, {"items": [], "quiz": {"pass_mark": 0.1}},
                                canon)["problems"]
    assert _(manifest.WORKSPACE_FILE).format(file="mine.toml", shipped="checks/distcheck.toml") in problems
    assert "falta el elemento 'quiz-passed' del DoD que trae el kit" in problems
    assert "falta el fichero de comprobación checks/test_quiz_passed.py" in problems
    assert any(p.startswith("[quiz] quiz.pass_mark es 0.1; el DoD que trae el kit tiene") for p in problems)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(snapshot.SnapshotError) as err:
        snapshot.tree(tmp_path)
    assert str(err.value) == _(snapshot.NO_REPOSITORY).format(root=tmp_path)
    assert "no está en un repositorio git, y el gate juzga un commit: git init" in str(err.value)
    monkeypatch.setattr(phase_pack, "__file__", str(tmp_path / "kit" / "phase_pack.py"))
    with pytest.raises(phase_pack.DistcheckError, match="no trae el paquete de la fase"):
        phase_pack.pack_root()


def test_a_reconciliation_is_said_in_spanish():
    from decimal import Decimal
    from types import SimpleNamespace

    from pytest_distcheck.budget.reconcile import CONFIRMED, DIFFERENCE, NO_BILL_YET, Finding

    row = SimpleNamespace(line=10)
    assert Finding("r1", "p1", "confirmed", Decimal("0.5"), Decimal("0.5"), row).line() == (
        "r1 (pod p1): confirmado por el proveedor, $0.50 (línea 10)")
    assert Finding("r1", "p1", "difference", Decimal("0.5"), Decimal("1.68"), row).line() == (
        "r1 (pod p1): DIFERENCIA: el proveedor facturó $1.68, el kit registró $0.50 ($1.18) (línea 10); cuenta la "
        "factura del proveedor")
    assert Finding("r1", "p1", "no bill yet", Decimal("0.5"), None).line() == (
        "r1 (pod p1): el proveedor aún no ha facturado; vuelve a ejecutar --reconcile más tarde")
    assert all(_(m) != m for m in (CONFIRMED, DIFFERENCE, NO_BILL_YET))
