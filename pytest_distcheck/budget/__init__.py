"""The budget guard's parts: ``ledger`` (the Markdown ledger file), ``accounting`` (totals from its
rows), ``pricing`` (price table and live prices), ``config`` (the workspace's ``[budget]`` section),
``guard`` (ceilings and reservations), ``watchdog`` (the cut), ``plugin`` (pytest wiring).
The public entry point is :mod:`pytest_distcheck.budget_guard`.
"""
