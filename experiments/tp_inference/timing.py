"""Timing a piece of work on the device it runs on, without assuming a GPU.

On CUDA, kernels run asynchronously: a wall clock around the Python call measures only the launch.
So a pair of CUDA events is recorded on the current stream around the work and the device is
synchronised before reading them. On CPU the work is done when the call returns, so a wall clock is
right. The device comes from the backend (``nccl`` -> this rank's GPU, ``gloo`` -> CPU), never from a
hard-coded ``cuda``.
"""

from __future__ import annotations

import time

import torch


def device_for(backend: str, local_rank: int) -> torch.device:
    """The device a rank computes on: its GPU under ``nccl`` (``cuda:<local_rank>``), else the CPU."""
    return torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work; a no-op on CPU (where there is no queue)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Seconds between :meth:`start` and :meth:`stop`, as the device saw them.

    ``timer`` is ``"cuda-events"`` on CUDA and ``"wall-clock"`` elsewhere (written into results).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.timer = "cuda-events" if device.type == "cuda" else "wall-clock"
        self._t0 = 0.0
        self._events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None

    def start(self) -> None:
        if self.device.type == "cuda":
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            self._events[0].record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> float:
        """Seconds since :meth:`start` (synchronises the device on CUDA)."""
        if self.device.type == "cuda":
            assert self._events is not None, "stop() before start()"
            self._events[1].record()
            synchronize(self.device)
            return self._events[0].elapsed_time(self._events[1]) / 1e3  # elapsed_time is in ms
        return time.perf_counter() - self._t0
