"""A stand-in for py-cpuinfo in the suite's processes.

The runpod SDK imports its serverless worker on ``import runpod``, and that asks py-cpuinfo for the CPU's
brand at import time; py-cpuinfo answers by starting a second Python (1.3 s of CPU per process). The kit
uses only the SDK's pod API, never the worker, so the suite's processes (the xdist workers, pytester
subprocesses, the commands it runs) find this module first: tests/conftest.py puts this folder on sys.path
and PYTHONPATH.
"""


def get_cpu_info() -> dict[str, str]:
    return {"brand_raw": "distcheck test suite (py-cpuinfo stand-in)"}
