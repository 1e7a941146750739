"""Which plan layers a node's label names: module paths, common names, declared aliases, fused nodes.

A label names a layer by its module path (whole or qualified), a common name of its last part (Hugging Face GPT-2,
Llama, GPT-NeoX / Megatron-LM, the textbook ``Wq``/``Wk``/``Wv``), an alias declared with the plan or the workspace
(:class:`~pytest_distcheck.diagram.plan.LayerNames`), or a fused group's name. The longer, more qualified name wins;
a label still naming several layers is ambiguous unless they are one declared fused group.
Design record: docs/design/diagram.md.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from pytest_distcheck.diagram import labels
from pytest_distcheck.diagram.plan import LayerNames

# Families of names for one kind of layer (lower case): (names that are distinctive alone, names
# that count only after a parent's name). Sources: Hugging Face transformers' GPT-2, Llama and
# GPT-NeoX modules, Megatron-LM's ParallelAttention/ParallelMLP, vLLM's LlamaForCausalLM.
_QKV_PARTS = ("q_proj", "k_proj", "v_proj", "wq", "wk", "wv", "w_q", "w_k", "w_v")
_LEAF_FAMILIES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("qkv_proj", "c_attn", "query_key_value", "qkv", "wqkv", "w_qkv", "in_proj", *_QKV_PARTS), ("qkv",)),
    (("q_proj", "wq", "w_q"), ("q", "query")),
    (("k_proj", "wk", "w_k"), ("k", "key")),
    (("v_proj", "wv", "w_v"), ("v", "value")),
    (("o_proj", "out_proj", "c_proj", "wo", "w_o"), ("out", "o", "proj", "dense")),
    (("up_proj", "c_fc", "fc1", "fc_in", "dense_h_to_4h"), ("up", "fc")),
    (("gate_proj",), ("gate",)),
    (("gate_up_proj",), ("gate_up",)),
    (("down_proj", "c_proj", "fc2", "fc_out", "dense_4h_to_h"), ("down",)),
)
_PARENT_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("attn", "attention", "self_attn", "self_attention", "selfattention"),
    ("mlp", "ffn", "feed_forward", "feedforward"),
)


def common_names(path: str) -> tuple[str, ...]:
    """Names diagrams commonly give the layer at ``path`` (besides the path), most specific first."""
    parent, _, leaf = path.rpartition(".")
    leaf_l = leaf.lower()
    alone: list[str] = []
    qualified: list[str] = [leaf_l]
    for distinct, generic in _LEAF_FAMILIES:
        if leaf_l in distinct or leaf_l in generic:
            alone += distinct
            qualified += [*distinct, *generic]
    parents = next((f for f in _PARENT_FAMILIES if parent.lower() in f), (parent.lower(),)) if parent else ()
    out = [f"{p}.{q}" for p in parents for q in dict.fromkeys(qualified)]
    return tuple(dict.fromkeys([*out, *(n for n in alone if n != path.lower())]))


@dataclass(frozen=True)
class Namer:
    """Finds the plan layers a label names.

    Args (of the constructor): the plan's module paths in order, and its :class:`LayerNames`.
    """

    paths: tuple[str, ...]
    names: Mapping[str, tuple[str, ...]]
    fused: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, plan: Iterable[str], extra: LayerNames | None = None) -> Namer:
        """A namer for ``plan``'s module paths with ``extra`` aliases and fused groups."""
        extra = extra or LayerNames()
        paths = tuple(plan)
        names: dict[str, tuple[str, ...]] = {}
        for path in paths:
            own = [path, *extra.aliases.get(path, ()),
                   *(name for name, members in extra.fused.items() if path in members)]
            names[path] = tuple(dict.fromkeys([*own, *common_names(path)]))
        return cls(paths, names, dict(extra.fused))

    def layers(self, text: str) -> list[str]:
        """The plan layers ``text`` names, in plan order (see the module docstring)."""
        spans: dict[str, list[tuple[int, int]]] = {}
        for path in self.paths:
            found = [s for n in self.names[path] for s in labels.name_spans(text, n)]
            if found:
                spans[path] = found
        every = [s for found in spans.values() for s in found]

        def inside(s: tuple[int, int]) -> bool:
            return any(o[0] <= s[0] and s[1] <= o[1] and (o[1] - o[0]) > (s[1] - s[0]) for o in every)

        return [p for p, found in spans.items() if not all(inside(s) for s in found)]

    def named_later(self, text: str, path: str) -> str:
        """The words of a label naming ``path`` when other words come first (``g: all-reduce (sum of attn.out)``
        gives ``attn.out``), as written; ``""`` when the label starts with them or does not name ``path``."""
        spans = [s for n in self.names[path] for s in labels.name_spans(text, n)]
        if not spans:
            return ""
        start, end = min(spans, key=lambda s: (s[0], -s[1]))
        plain = labels.plain(text)
        return plain[start:end] if plain[:start].strip() else ""

    def fused_group(self, layers: list[str]) -> str | None:
        """The declared fused group holding all of ``layers``, or ``None``."""
        return next((name for name, members in self.fused.items() if set(layers) <= set(members)), None)

    def looked_for(self) -> str:
        """The names searched for, for a message: each path with a few of its other names."""
        parts = []
        for path in self.paths:
            others = [n for n in self.names[path] if n != path and "." not in n][:3]
            parts.append(f"{path} ({', '.join(others)}, ...)" if others else path)
        return "; ".join(parts)

    def closest(self, found_labels: Iterable[str]) -> list[tuple[str, str]]:
        """(path, label) pairs: for each plan layer, the label that spells one of its names most
        nearly, ignoring case, spaces and punctuation (``'Q K V projection'`` for ``qkv_proj``).

        A name counts as spelled when :class:`difflib.SequenceMatcher`'s matching blocks cover at
        least 85% of it, in order; among those the label with the highest ``ratio()`` wins.
        """
        shown = list(dict.fromkeys(labels.plain(t) for t in found_labels if labels.plain(t)))
        squashed = {t: re.sub(r"[\W_]", "", t.lower()) for t in shown}
        out = []
        for path in self.paths:
            best: tuple[float, float, str] | None = None
            for name in self.names[path]:
                if "." in name and name != path:
                    continue  # qualified common names: their parent part matches too easily
                n = re.sub(r"[\W_]", "", name.lower())
                for label, flat in squashed.items():
                    m = difflib.SequenceMatcher(None, n, flat, autojunk=False)
                    cover = sum(b.size for b in m.get_matching_blocks()) / max(len(n), 1)
                    if cover >= 0.85 and (best is None or (cover, m.ratio()) > best[:2]):
                        best = (cover, m.ratio(), label)
            if best is not None:
                out.append((path, best[2]))
        return out
