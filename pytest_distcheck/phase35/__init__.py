"""Phase 35's own modules that the wheel ships because its DoD checks and labs import them from the kit:
``tp_result`` (the TP inference result and its speedups: ``checks/test_tp_speedup_*.py``,
``experiments/tp_inference/speedup.py``) and ``hostinfo`` (where a measurement ran: the labs' results,
``benchmarks/``). The rest of the phase lives in ``checks/``, ``experiments/`` and ``docs/``.
"""
