"""Workspace-wide pytest configuration for Phase 35.

The kit itself is the installed plugin ``pytest_distcheck`` (markers, options, fixtures); the phase's
settings and DoD items are in ``checks/distcheck.toml``, and ``experiments/`` imports from the
repository root (``pythonpath`` in ``pyproject.toml``). Nothing else is needed here.

Put fixtures for your own experiments' tests here if you like, but not for DoD checks: the gate
trusts a check only with fixtures from pytest, the kit, ``checks/`` or installed packages, and marks
an item *untrusted* when a check uses a fixture from this file (see "The phase gate" in README.md).
"""
