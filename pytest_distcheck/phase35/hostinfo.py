"""Where a measurement ran: the host facts every committed result records."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), name)
    except OSError:
        return name


def describe_host() -> dict:
    """cpu, logical_cpus, platform, python and load_avg_1m (timings on a shared machine vary with load)."""
    return {"cpu": cpu_model(), "logical_cpus": os.cpu_count() or 1, "platform": platform.platform(),
            "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]}
