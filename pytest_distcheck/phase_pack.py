"""The phase pack: the files ``distcheck init`` copies into a learner's repository to start a phase.

The pack is this repository's own files (:data:`PACK_GLOBS`), never a second copy: the workspace file, checks and
quiz bank, the labs' code, lab 02's exercise, the learner's pages and their Spanish twins; no reference solutions.
A wheel ships them under ``pytest_distcheck/_phase/`` (:data:`SHIPPED`); an editable install reads them from the
repository root (:func:`pack_root`). What is in it and why: docs/design/workspace.md.
"""

from __future__ import annotations

from pathlib import Path

from pytest_distcheck.errors import DistcheckError
from pytest_distcheck.i18n import N_, _

# Globs, relative to the pack root, of the files a fresh workspace gets; results, notes and the reference solutions
# (checks/solutions.toml, solutions/) are the learner's to make, and docs/kit (the kit's manual) and docs/ci are for
# plugin users and graders, so they are not copied (pyproject's package-data agrees: tests/test_init.py).
PACK_GLOBS = (
    "checks/distcheck.toml",
    "checks/test_*.py",
    "checks/quiz/*.json",
    "experiments/__init__.py",
    "experiments/ddp_cpu/__init__.py",
    "experiments/ddp_cpu/lab.py",
    "experiments/tp_inference/*.py",
    "experiments/tp_inference/gpu_smoke.sh",
    # Lab 02's exercise: the TP fault zoo, the layer styles its examples check, and the tests it runs.
    "fixtures/tp_faults/*.py",
    "fixtures/tp_styles/*.py",
    "tests/test_tp_equivalence.py",
    "tests/test_tp_model.py",
    "tests/test_tp_faults.py",
    "tests/test_tp_styles.py",
    "docs/README.md",
    "docs/theory/*.md",
    "docs/theory/*.svg",
    "docs/lab/*.md",
    "docs/notes/TEMPLATE.md",
    # The Spanish twins and the glossary (the English pages link their twins, so both languages ship).
    "docs/es/*.md",
    "docs/es/theory/*.md",
    "docs/es/theory/*.svg",
    "docs/es/lab/*.md",
    "docs/es/notes/TEMPLATE.md",
)
# Where a wheel keeps the pack, relative to the package folder.
SHIPPED = "_phase"
NO_PACK = N_("this install of pytest-distcheck has no phase pack ({folder} is missing); reinstall it from a wheel or a "
             "source checkout")


def pack_root() -> Path:
    """The folder the pack's relative paths start from: ``pytest_distcheck/_phase`` in a wheel, else the
    source checkout the package was installed from (editable).

    Raises:
        DistcheckError: neither holds ``checks/distcheck.toml`` (an install without its phase pack).
    """
    kit = Path(__file__).resolve().parent
    for root in (kit / SHIPPED, kit.parent):
        if (root / "checks" / "distcheck.toml").is_file():
            return root
    raise DistcheckError(_(NO_PACK).format(folder=kit / SHIPPED))


def pack_files(root: Path | None = None) -> list[str]:
    """The pack's files as sorted POSIX paths relative to ``root`` (default :func:`pack_root`)."""
    root = pack_root() if root is None else Path(root)
    found = {p.relative_to(root).as_posix() for pattern in PACK_GLOBS for p in root.glob(pattern) if p.is_file()}
    return sorted(found)
