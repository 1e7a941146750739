"""Citations in Markdown notes, verified offline against the installed sources of the cited packages.

Syntax (see :mod:`pytest_distcheck.citations.syntax`)::

    [cite: megatron-core megatron/core/tensor_parallel/layers.py::ColumnParallelLinear.forward "QUOTE"]

- :mod:`.syntax`: parse a note into citations, the blocks they stand in, and its front matter.
- :mod:`.resolver`: find a distribution (``importlib.metadata``), its file and symbol (``ast``).
- :mod:`.verifier`: resolve each citation, check its quote, count the cited design decisions.
- :mod:`.report`, :mod:`.record`, :mod:`.find`: text for people, recording versions, finding symbols.
"""

from pytest_distcheck.citations.verifier import NoteReport, Status, verify_note

__all__ = ["NoteReport", "Status", "verify_note"]
