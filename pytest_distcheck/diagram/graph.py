"""A parsed flowchart as a data-flow graph: edges to and from subgraphs expanded, ranks and styles.

Mermaid allows an edge to end on a subgraph (``ln1 --> gpu0``, ``rowpar --> AR``); its parser then
lists the subgraph's id as a vertex too. Here such an edge is expanded to the subgraph's *entry*
nodes (its nodes with no edge from another of its nodes) or *exit* nodes (with no edge to another
of its nodes), nested subgraphs included, and subgraph ids are not nodes. Invisible links (``~~~``)
only steer the layout and are dropped.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pytest_distcheck.diagram import labels
from pytest_distcheck.diagram.mermaid import Flowchart


@dataclass(frozen=True)
class Link:
    """One forward edge between two nodes: ``start``, ``end`` (vertex ids), its label ``text``, and
    ``written``, the ends of the edge as written (``("ln1", "gpu0")`` when it was drawn to a subgraph)."""

    start: str
    end: str
    text: str
    written: tuple[str, str]

    @property
    def drawn(self) -> str:
        """The edge as written, for a message: ``ln1 --> gpu0``."""
        return f"{self.written[0]} --> {self.written[1]}"


class Graph:
    """Nodes, expanded links, each node's rank and enclosing subgraphs.

    Attributes:
        nodes: vertex id -> label, subgraph ids left out.
        succ, pred: node id -> links out of / into it.
        rank: node id -> rank of its nearest enclosing rank subgraph (absent: none).
        enclosing: node id -> titles of its subgraphs, nearest first.
    """

    def __init__(self, fc: Flowchart) -> None:
        self.fc = fc
        sub_ids = {sg.id for sg in fc.subgraphs}
        self.nodes: dict[str, str] = {vid: v.text for vid, v in fc.vertices.items() if vid not in sub_ids}
        members = {sg.id: sg.members for sg in fc.subgraphs}
        titles = {sg.id: (sg.title or sg.id) for sg in fc.subgraphs}
        parent: dict[str, str] = {}
        for sg in fc.subgraphs:
            for m in sg.members:
                parent.setdefault(m, sg.id)

        def descendants(sid: str, seen: frozenset[str] = frozenset()) -> list[str]:
            out: list[str] = []
            for m in members.get(sid, ()):
                if m in members and m not in seen:
                    out += descendants(m, seen | {sid})
                elif m in self.nodes:
                    out.append(m)
            return out

        raw = [e for e in fc.edges if e.stroke != "invisible"]
        inner = [(e.start, e.end) for e in raw if e.start in self.nodes and e.end in self.nodes]

        def ends(sid: str, entry: bool) -> list[str]:
            inside = set(descendants(sid))
            linked = {(b if entry else a) for a, b in inner if a in inside and b in inside}
            return [n for n in descendants(sid) if n not in linked]

        self.succ: dict[str, list[Link]] = defaultdict(list)
        self.pred: dict[str, list[Link]] = defaultdict(list)
        for e in raw:
            starts = ends(e.start, entry=False) if e.start in members else [e.start]
            finishes = ends(e.end, entry=True) if e.end in members else [e.end]
            for a in starts:
                for b in finishes:
                    if a in self.nodes and b in self.nodes and a != b:
                        link = Link(a, b, e.text, (e.start, e.end))
                        self.succ[a].append(link)
                        self.pred[b].append(link)
        self.rank: dict[str, int] = {}
        self.enclosing: dict[str, list[str]] = {}
        for vid in self.nodes:
            chain, cur, seen = [], parent.get(vid), set()
            while cur is not None and cur not in seen:
                seen.add(cur)
                chain.append(titles[cur])
                if vid not in self.rank and (r := labels.rank_of_title(titles[cur])) is not None:
                    self.rank[vid] = r
                cur = parent.get(cur)
            self.enclosing[vid] = chain

    def label(self, vid: str) -> str:
        """A node's label as a reader sees it."""
        return labels.plain(self.nodes.get(vid, vid))

    def reachable(self, starts: list[str], stop: set[str] = frozenset()) -> set[str]:  # type: ignore[assignment]
        """Nodes reachable forward from ``starts`` (not included unless on a cycle), not passing
        beyond nodes of ``stop``."""
        seen: set[str] = set()
        todo = list(starts)
        while todo:
            for link in self.succ.get(todo.pop(), []):
                if link.end not in seen:
                    seen.add(link.end)
                    if link.end not in stop:
                        todo.append(link.end)
        return seen

    def order(self) -> list[str]:
        """Nodes in a topological order (Kahn); nodes on a cycle follow in drawing order."""
        indeg = {n: len(self.pred.get(n, [])) for n in self.nodes}
        todo = [n for n in self.nodes if indeg[n] == 0]
        out: list[str] = []
        while todo:
            n = todo.pop(0)
            out.append(n)
            for link in self.succ.get(n, []):
                indeg[link.end] -= 1
                if indeg[link.end] == 0:
                    todo.append(link.end)
        return out + [n for n in self.nodes if n not in set(out)]
