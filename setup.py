"""Build script: the kit's packages, plus the phase pack mapped in from this repository's own folders.

The wheel ships ``checks/``, the labs' code under ``experiments/``, ``docs/`` (start page, theory, lab
statements, note skeleton) and lab 02's exercise (``fixtures/tp_faults``, ``fixtures/tp_styles``, four
tests) as ``pytest_distcheck/_phase/<same path>`` so that ``distcheck init`` works from a wheel;
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
    "pytest_distcheck._phase.fixtures.tp_faults": "fixtures/tp_faults",
    "pytest_distcheck._phase.fixtures.tp_styles": "fixtures/tp_styles",
    "pytest_distcheck._phase.tests": "tests",
}
# Of the kit's tests, only those lab 02 tells a learner to run (a package would take all of tests/).
LAB_TESTS = ["test_tp_equivalence", "test_tp_model", "test_tp_faults", "test_tp_styles"]

setup(packages=find_packages(include=["pytest_distcheck", "pytest_distcheck.*"])
      + [p for p in PHASE_PACK if not p.endswith(".tests")],
      package_dir=PHASE_PACK, py_modules=[f"pytest_distcheck._phase.tests.{m}" for m in LAB_TESTS])
