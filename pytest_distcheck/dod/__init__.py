"""Definition-of-Done bookkeeping: how a check reports its state, and the gate at the end of a run.

- ``outcome``: ``done``/``pending``/``broken``/``stale``, which checks call.
- ``state``: the states, and ``combine`` (check outcomes -> one result per item, prerequisites).
- ``selection``: ``--dod ITEM``, prerequisites first, why a check was deselected.
- ``collection``: what was collected and selected, sent from xdist workers to the controller.
- ``classify``: what a check did, as a state; ``state`` also decides whether it can be believed (``judge``).
- ``gate``, ``snapshot``: the gate's own process and the commit it judges; ``manifest``, ``provenance``: the
  shipped DoD and the kit's own material, never the learner's evidence.
- ``plugin``, ``options``: the pytest hooks and options; ``table``, ``report``, ``markdown``: the reports.
"""
