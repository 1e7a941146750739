"""The phase quiz: a schema-validated bank, seeded draws, forgiving answer parsing, grading by the
calculators, an append-only attempt log, and the re-grading the DoD check does.

Modules: ``bank`` (load and validate), ``calculators`` (the allowed calculator names), ``draw``
(seeded attempts), ``answers`` (parsing), ``grade``, ``log`` (JSONL append/read), ``config``
(the workspace's ``[quiz]`` section), ``session`` (the terminal dialogue), ``regrade`` (for the DoD check).
"""
