"""How a sharding diagram says what it shows: the labelling convention the diagram check reads.

A person writes labels; this module reads them from the parsed diagram's vertices, edges and
subgraphs (it never scans the diagram's source text). The convention, also explained on the page
the generator's output and ``docs/tp-sharding.md`` follow:

- **Layer**: a node whose label names a module path of the plan, whole or qualified
  (``attn.qkv``, ``layers.0.attn.qkv``), or one of its other names (:mod:`.names`: the common
  names ``qkv_proj``, ``c_attn``, ``o_proj``, ``down_proj``, ..., and aliases declared with the plan).
- **Style**: ``column-parallel`` or ``row-parallel`` (also ``colwise``, ``column-wise``,
  ``col-parallel``, ``rowwise``, ``row-wise``, any case, with space, ``-`` or ``_``) or a framework's
  class name: ``ColumnParallelLinear``/``RowParallelLinear`` (Megatron-LM, picotron, vLLM),
  ``MergedColumnParallelLinear``/``QKVParallelLinear`` (vLLM), ``ColwiseParallel``/``RowwiseParallel``
  (``torch.distributed.tensor.parallel``). Read from the node's label or class (which must not
  disagree), else from the label of the edge into it, else from the title of its nearest enclosing
  subgraph that states one style.
- **All-reduce**: a node or edge label containing ``all-reduce`` (or ``allreduce``, ``all_reduce``,
  ``AllReduce``). One directly followed by ``backward``/``bwd`` (``all-reduce in backward``,
  ``all-reduce (backward)``) names a backward collective, e.g. Megatron's ``f`` operator, and does
  not count as a forward all-reduce. Every edge is read as forward data flow (an edge labelled
  ``f: identity (all-reduce in backward)`` still carries the forward activations).
- **All-gather**: a node or edge labelled ``all-gather`` (or ``gather``, ``concat``) makes shards whole.
- **Reduce-scatter**: a node labelled ``reduce-scatter`` sums partial sums into one shard per rank
  (Megatron-LM's sequence parallelism, Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2, in
  place of the all-reduce; an all-gather later makes the tensor whole).
- **Split**: an edge labelled ``split``, ``slice``, ``scatter``, ``chunk`` or ``Shard(-1)`` (a DTensor
  placement) hands each rank its own slice of a replicated tensor.
- **Rank**: a subgraph whose title (or, untitled, whose id) says ``rank N``, ``GPU N``,
  ``device N``, ``tp_rank N`` or ``cuda:N`` (``Rank 1 (GPU 1)``, ``tp_rank=1``, ``rank1``); a node
  belongs to the rank of its nearest such subgraph.
"""

from __future__ import annotations

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
_BACKWARD_QUALIFIER = re.compile(r"\W*(?:(?:in|on|during|for)\s+(?:the\s+)?)?(?:backward|bwd)\b", re.IGNORECASE)
_RANK = re.compile(r"(?<![a-z])(?:tp[\s_-]?)?(?:rank|gpu|device|cuda)[\s_#:=-]*(\d+)(?![\w.])", re.IGNORECASE)
_ALL_GATHER = re.compile(r"all[\s_-]?gather|(?<![a-z])(?:gather|concat(?:enate)?)(?![a-z])", re.IGNORECASE)
_REDUCE_SCATTER = re.compile(r"reduce[\s_-]?scatter", re.IGNORECASE)
_SPLIT = re.compile(r"(?<![a-z])(?:split|slice|scatter|chunk|shard\s*\(\s*-?\d)", re.IGNORECASE)
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


def name_spans(text: str, name: str) -> list[tuple[int, int]]:
    """Where a label names ``name`` as a whole, any case, possibly qualified: ``attn.qkv`` is named by
    ``attn.qkv`` and ``layers.0.attn.qkv`` but not by ``attn.qkv_bias``, ``xattn.qkv`` or
    ``attn.qkv.weight``. Spans index :func:`plain` of the label."""
    pat = rf"(?<!\w){re.escape(name)}(?!\w|\.\w)"
    return [m.span() for m in re.finditer(pat, plain(text), re.IGNORECASE)]


def names_layer(text: str, path: str) -> bool:
    """Whether a label names the module path ``path`` (see :func:`name_spans`)."""
    return bool(name_spans(text, path))


def forward_all_reduce(text: str) -> bool:
    """Whether a label names an all-reduce of the forward pass (see the module docstring)."""
    text = plain(text)
    return any(not _BACKWARD_QUALIFIER.match(text, m.end()) for m in _ALL_REDUCE.finditer(text))



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
