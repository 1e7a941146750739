"""Definition-of-Done bookkeeping: how a check reports its state, and the gate at the end of a run.

- ``outcome``: ``pending``/``broken``/``stale``, which checks call.
- ``state``: the states, and ``combine`` (check outcomes -> one result per item, prerequisites).
- ``selection``: ``--dod ITEM``, prerequisites first, why a check was deselected.
- ``collection``: what was collected and selected, sent from xdist workers to the controller.
- ``integrity``, ``classify``: whether a check's outcome is the kit's own, and what it was.
- ``plugin``, ``options``: the pytest hooks and options; ``table``, ``report``, ``markdown``: the reports.
"""
