"""Build script: the kit's packages, plus the phase pack mapped in from this repository's own folders.

The wheel ships ``checks/``, the labs' code under ``experiments/`` and ``docs/`` (start page, theory, lab
statements, note skeleton) as ``pytest_distcheck/_phase/<same path>`` so that ``distcheck init`` works from a wheel;
they are mapped, never copied by hand (``pytest_distcheck/phase_pack.py`` lists what init takes).
Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

PHASE_PACK = {
    "pytest_distcheck._phase.checks": "checks",
    "pytest_distcheck._phase.experiments": "experiments",
    "pytest_distcheck._phase.experiments.ddp_cpu": "experiments/ddp_cpu",
    "pytest_distcheck._phase.experiments.tp_inference": "experiments/tp_inference",
    "pytest_distcheck._phase.docs": "docs",
}

setup(packages=find_packages(include=["pytest_distcheck", "pytest_distcheck.*"]) + list(PHASE_PACK),
      package_dir=PHASE_PACK)
