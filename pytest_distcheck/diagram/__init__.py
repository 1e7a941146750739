"""Sharding diagrams in Mermaid, checked against a tensor-parallel plan.

:mod:`.markdown` finds the ```mermaid blocks of a page; :mod:`.mermaid` parses them with the real Mermaid,
offline; :mod:`.labels` and :mod:`.names` read the labelling convention and the layers a label names; :mod:`.graph`
is the data-flow graph; :mod:`.compare` (with :mod:`.layout`, :mod:`.flow`, :mod:`.difference`, :mod:`.concepts`)
names each difference from the plan; :mod:`.skeleton` is what ``distcheck diagram`` prints; :mod:`.check` checks a
page end to end, each finding at the line of its node or edge (:mod:`.places`); :mod:`.config` and :mod:`.source`
read the ``[diagram]`` section and the plan's literals, never importing the plan. Importing this package is cheap:
mermaidx loads only when a parser starts or an SVG is rendered. Design record: docs/design/diagram.md.
"""
