"""Sharding diagrams in Mermaid, checked against a tensor-parallel plan.

- :mod:`.markdown`: the ```mermaid blocks of a page, with their lines (CommonMark parser).
- :mod:`.mermaid`: the real Mermaid parser, offline (mermaidx), giving syntax errors and the graph.
- :mod:`.labels`: the labelling convention (layer, style, all-reduce, rank) read from that graph.
- :mod:`.names`: which plan layers a label names (module paths, common names, aliases, fused nodes).
- :mod:`.graph`: the flowchart as a data-flow graph, edges to and from subgraphs expanded.
- :mod:`.compare`: the differences between a flowchart and a plan, in words (:mod:`.difference`).
- :mod:`.flow`: the data-flow part of that comparison (what feeds each layer, where its output goes).
- :mod:`.skeleton`: the skeleton ``distcheck diagram`` prints (the plan's layers per rank, nothing decided).
- :mod:`.concepts`: the ideas a diagram can get wrong, each with the lesson its messages end with.
- :mod:`.check`: a page checked end to end, and its rendered SVG kept in step.
- :mod:`.config`: the workspace's ``[diagram]`` section.
- :mod:`.source`: the plan's literals read from its module's source, never importing it.

Importing this package is cheap; mermaidx loads only when a parser starts or an SVG is rendered.
"""
