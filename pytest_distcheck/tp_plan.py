"""Moved to :mod:`pytest_distcheck.tp.plan` (one home for the TP subject); this re-export stays until
every user of the old path (the diagram check, the lab) has moved."""

from pytest_distcheck.tp.plan import COLWISE, ROWWISE, STYLES, Style, validate_plan  # noqa: F401
