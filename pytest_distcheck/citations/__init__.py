"""Citations in Markdown notes, verified offline against the installed sources of the cited packages.

Syntax (see :mod:`pytest_distcheck.citations.syntax`)::

    [cite: megatron-core megatron/core/tensor_parallel/layers.py::ColumnParallelLinear.forward "QUOTE"]

- :mod:`.blocks`: a note's statements as a reader sees them (markdown-it-py; comments and code hidden).
- :mod:`.syntax`: parse a note into citations, the statements they stand in, and its front matter.
- :mod:`.decision`: when the words of a statement state a decision (prose, no filler).
- :mod:`.resolver`: find a distribution (``importlib.metadata``), its file and symbol (``ast``).
- :mod:`.verifier`: resolve each citation, check its quote, count each cited place once.
- :mod:`.report`, :mod:`.record`, :mod:`.find`: text for people, recording versions, finding symbols.
"""

from pytest_distcheck.citations.verifier import NoteReport, Status, verify_note

__all__ = ["NoteReport", "Status", "verify_note"]
