"""The GPU-type vocabulary that pricing and the pods share: what a GPU type id and a price tier may be.

A GPU type id is the provider's name for a GPU (RunPod ``gpuTypeId``: "NVIDIA GeForce RTX 4090",
"NVIDIA A100-SXM4-80GB"); the runpod SDK pastes it into GraphQL unescaped, so only :data:`GPU_TYPE`'s
characters pass. A cloud is RunPod's price tier, always named (never ``ALL``) so the price is known.
"""

from __future__ import annotations

import re

from pytest_distcheck.i18n import N_, _

GPU_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()-]{0,79}$")
CLOUDS = ("secure", "community")
NOT_A_GPU_TYPE = N_("{where} {value!r} is not a GPU type id (letters, digits, spaces and ._()- only, "
                     "e.g. 'NVIDIA GeForce RTX 4090')")


def check_gpu_type(value: str, where: str = "gpu_type") -> str:
    """``value`` if it matches :data:`GPU_TYPE`. Raises ValueError (:data:`NOT_A_GPU_TYPE`) naming ``where``."""
    if not isinstance(value, str) or not GPU_TYPE.match(value):
        raise ValueError(_(NOT_A_GPU_TYPE).format(where=where, value=value))
    return value
