"""How a sharding diagram says what it shows: the labelling convention the diagram check reads.

Read from the parsed diagram's vertices, edges and subgraphs, never from its source text: a **layer** (a node naming
a plan module path or another of its names, :mod:`.names`), its **style** (column-/row-parallel or a framework's
class name, from the node, the edge into it or an enclosing subgraph), **all-reduce** (forward only; one with
"backward" just after or before it is Megatron's f), **all-gather**, **reduce-scatter**, **split** (an edge), and
**rank** (a subgraph titled ``rank N``, ``GPU N``, ...). Every spelling accepted: docs/design/diagram.md; the
learner's page: docs/tp-sharding.md.
"""

from __future__ import annotations

import functools
import html
import re

# Style name (as in pytest_distcheck.tp.plan.STYLES) -> the words a diagram uses for it.
STYLE_LABELS: dict[str, str] = {"colwise": "column-parallel", "rowwise": "row-parallel"}
STYLE_CLASSES: dict[str, str] = {"colwise": "colwise", "rowwise": "rowwise"}

_SEP = r"[\s_-]*"
_LINEAR = rf"(?:{_SEP}linear)?"
_STYLE_PATTERNS: dict[str, re.Pattern[str]] = {
    "colwise": re.compile(
        rf"(?<![a-z])(?:(?:merged{_SEP})?col(?:umn)?{_SEP}(?:wise{_SEP}(?:parallel)?|parallel){_LINEAR}"
        rf"|qkv{_SEP}parallel{_LINEAR})(?![a-z])",
        re.IGNORECASE,
    ),
    "rowwise": re.compile(
        rf"(?<![a-z])row{_SEP}(?:wise{_SEP}(?:parallel)?|parallel){_LINEAR}(?![a-z])", re.IGNORECASE
    ),
}
_ALL_REDUCE = re.compile(r"all[\s_-]?reduce", re.IGNORECASE)
# "all-reduce [of the gradient / del gradiente] [in the / en el] backward", in English or Spanish (docs/es/glosario.md
# keeps "backward" English).
_GRADIENT = r"(?:(?:of|del?)\s+(?:the\s+|los\s+)?gradi(?:ent|ente)s?\W+)?"
_IN_THE = r"(?:(?:in|on|during|for|en|durante|para)\s+(?:the\s+|el\s+|la\s+)?)?"
_BACKWARD_QUALIFIER = re.compile(rf"\W*{_GRADIENT}{_IN_THE}(?:backward|bwd)\b", re.IGNORECASE)
# "bwd all-reduce", "backward: all-reduce", "its backward is an all-reduce", "en el backward, all-reduce": the text
# before an all-reduce ends with "backward"/"bwd" and at most a separator, a verb and an article.
_BACKWARD_BEFORE = re.compile(
    r"(?<![a-z])(?:backward|bwd)\s*(?:pass\s*|pasada\s*)?(?:[:=,\u2013\u2014-]|->|\u2192|=>|(?:is|es|does|hace)\b)?"
    r"\s*(?:(?:an?|un|una)\s+)?$", re.IGNORECASE)
# ...where "in backward" right after a word ("identity in backward, all-reduce") qualifies that word, not the all-reduce
_IN_THE_END = re.compile(r"(?<![a-z])(?:in|on|during|for|en|durante|para)\s+(?:(?:the|el|la)\s+)?$", re.IGNORECASE)
_CLAUSE_END = re.compile(r"(?:^|[^\w\s]|(?<![a-z])(?:and|y|then|luego))\s*$", re.IGNORECASE)
_RANK = re.compile(r"(?<![a-z])(?:tp[\s_-]?)?(?:rank|gpu|device|cuda)[\s_#:=-]*(\d+)(?![\w.])", re.IGNORECASE)
_ALL_GATHER = re.compile(r"all[\s_-]?gather|(?<![a-z])(?:gather|concat(?:enate)?)(?![a-z])", re.IGNORECASE)
_REDUCE_SCATTER = re.compile(r"reduce[\s_-]?scatter", re.IGNORECASE)
_SPLIT = re.compile(r"(?<![a-z])(?:split|slice|scatter|chunk|shard\s*\(\s*-?\d)", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


@functools.lru_cache(maxsize=8192)  # pure, and asked again for every node and layer name
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


@functools.lru_cache(maxsize=65536)
def name_spans(text: str, name: str) -> tuple[tuple[int, int], ...]:
    """Where a label names ``name`` as a whole, any case, possibly qualified: ``attn.qkv`` is named by
    ``attn.qkv`` and ``layers.0.attn.qkv`` but not by ``attn.qkv_bias``, ``xattn.qkv`` or
    ``attn.qkv.weight``. Spans index :func:`plain` of the label."""
    pat = rf"(?<!\w){re.escape(name)}(?!\w|\.\w)"
    return tuple(m.span() for m in re.finditer(pat, plain(text), re.IGNORECASE))


def names_layer(text: str, path: str) -> bool:
    """Whether a label names the module path ``path`` (see :func:`name_spans`)."""
    return bool(name_spans(text, path))


def forward_all_reduce(text: str) -> bool:
    """Whether a label names an all-reduce of the forward pass (see the module docstring)."""
    text = plain(text)
    return any(not _BACKWARD_QUALIFIER.match(text, m.end()) and not _backward_before(text[:m.start()])
               for m in _ALL_REDUCE.finditer(text))


def _backward_before(before: str) -> bool:
    """Whether the text before an all-reduce ends with the backward qualifier of that all-reduce."""
    qualifier = _BACKWARD_BEFORE.search(before)
    if qualifier is None:
        return False
    lead = before[:qualifier.start()]
    prep = _IN_THE_END.search(lead)
    return prep is None or _CLAUSE_END.search(lead[:prep.start()]) is not None


def all_gather(text: str) -> bool:
    """Whether a node label names an all-gather (or a gather/concat that makes shards whole)."""
    return _ALL_GATHER.search(plain(text)) is not None


def reduce_scatter(text: str) -> bool:
    """Whether a node label names a reduce-scatter."""
    return _REDUCE_SCATTER.search(plain(text)) is not None


def split(text: str) -> bool:
    """Whether an edge label says the edge hands a rank its slice (``split``, ``slice``, ...)."""
    return _SPLIT.search(plain(text)) is not None


def rank_of_title(title: str) -> int | None:
    """The rank a subgraph title names (``rank 1``, ``GPU 1``, ``tp_rank=1`` -> 1), or ``None``."""
    match = _RANK.search(plain(title))
    return int(match.group(1)) if match else None
