"""Citations in Markdown notes, verified offline against the installed sources of the cited packages.

``[cite: megatron-core megatron/core/tensor_parallel/layers.py::ColumnParallelLinear.forward "QUOTE"]``.
Layers, lowest first: :mod:`.blocks` (a note's statements as a reader sees them), :mod:`.syntax`
(citations, their statements, front matter), :mod:`.decision` (when a statement states a decision),
:mod:`.resolver` (a distribution, its file and symbol), :mod:`.verifier` (resolve, check the quote, count
each place once); :mod:`.report`, :mod:`.record`, :mod:`.find` (text for people, versions, symbols).
The design record: docs/design/citations.md.
"""

from pytest_distcheck.citations.verifier import NoteReport, Status, verify_note

__all__ = ["NoteReport", "Status", "verify_note"]
