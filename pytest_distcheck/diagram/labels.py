"""How a sharding diagram says what it shows: the labelling convention the diagram check reads.

A person writes labels; this module reads them from the parsed diagram's vertices, edges and
subgraphs (it never scans the diagram's source text). The convention, also explained on the page
the generator's output and ``docs/tp-sharding.md`` follow:

- **Layer**: a node whose label contains the plan's module path (``attn.qkv``), one layer per node.
- **Style**: the same node's label says ``column-parallel`` or ``row-parallel`` (also accepted:
  ``colwise``, ``column-wise``, ``col-parallel``, ``ColwiseParallel``, ``rowwise``, ``row-wise``,
  ``RowwiseParallel``, any case, with space, ``-`` or ``_``), or the node has a class of such a name
  (``:::colwise``). Label and class must not disagree.
- **All-reduce**: a node or edge label containing ``all-reduce`` (or ``allreduce``, ``all_reduce``,
  ``AllReduce``). One directly followed by ``backward``/``bwd`` (``all-reduce in backward``,
  ``all-reduce (backward)``) names a backward collective, e.g. Megatron's ``f`` operator, and does
  not count as a forward all-reduce. Every edge is read as forward data flow (an edge labelled
  ``f: identity (all-reduce in backward)`` still carries the forward activations).
- **Rank**: a subgraph whose title (or, untitled, whose id) says ``rank N`` (``rank 0``,
  ``Rank 1 (GPU 1)``, ``rank1``); a node belongs to the rank of its nearest such subgraph.
"""

from __future__ import annotations

import html
import re

# Style name (as in pytest_distcheck.tp_plan.STYLES) -> the words a diagram uses for it.
STYLE_LABELS: dict[str, str] = {"colwise": "column-parallel", "rowwise": "row-parallel"}
STYLE_CLASSES: dict[str, str] = {"colwise": "colwise", "rowwise": "rowwise"}

_SEP = r"[\s_-]*"
_STYLE_PATTERNS: dict[str, re.Pattern[str]] = {
    "colwise": re.compile(
        rf"(?<![a-z])col(?:umn)?{_SEP}(?:wise{_SEP}(?:parallel)?|parallel)(?![a-z])", re.IGNORECASE
    ),
    "rowwise": re.compile(rf"(?<![a-z])row{_SEP}(?:wise{_SEP}(?:parallel)?|parallel)(?![a-z])", re.IGNORECASE),
}
_ALL_REDUCE = re.compile(r"all[\s_-]?reduce", re.IGNORECASE)
_BACKWARD_QUALIFIER = re.compile(r"\W*(?:(?:in|on|during|for)\s+(?:the\s+)?)?(?:backward|bwd)\b", re.IGNORECASE)
_RANK = re.compile(r"(?<![a-z])rank[\s_#:-]*(\d+)", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


def plain(text: str) -> str:
    """A label as a reader sees it: HTML tags (``<br/>``) and Markdown emphasis removed, entities
    decoded, whitespace collapsed."""
    text = html.unescape(_TAG.sub(" ", text)).replace("*", "").replace("`", "")
    return " ".join(text.split())


def styles_in_label(text: str) -> set[str]:
    """Style names (``colwise``, ``rowwise``) a label states."""
    text = plain(text)
    return {name for name, pat in _STYLE_PATTERNS.items() if pat.search(text)}


def styles_in_classes(classes: tuple[str, ...]) -> set[str]:
    """Style names that a node's CSS classes state (a class must be a style spelling in full)."""
    return {name for name, pat in _STYLE_PATTERNS.items() for c in classes if pat.fullmatch(c)}


def names_layer(text: str, path: str) -> bool:
    """Whether a label names the module path ``path`` as a whole (``attn.qkv`` but not
    ``attn.qkv_bias`` or ``xattn.qkv``)."""
    return re.search(rf"(?<![\w.]){re.escape(path)}(?!\w|\.\w)", plain(text)) is not None


def forward_all_reduce(text: str) -> bool:
    """Whether a label names an all-reduce of the forward pass (see the module docstring)."""
    text = plain(text)
    return any(not _BACKWARD_QUALIFIER.match(text, m.end()) for m in _ALL_REDUCE.finditer(text))



def rank_of_title(title: str) -> int | None:
    """The rank a subgraph title names (``rank 1`` -> 1), or ``None``."""
    match = _RANK.search(plain(title))
    return int(match.group(1)) if match else None
