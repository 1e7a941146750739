"""Public model architectures the chooser knows by name (``distcheck strategy --model llama2-13b``).

Each preset gives the parameter count and the shape the activation estimate needs, with the sequence
length the model was trained at, and names its source. Parameter counts are those of the published
checkpoints' configurations (embeddings and an untied output layer included; the counts are re-derived
from those shapes in tests/test_strategy.py). GPT-3's is the paper's nominal 175B.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_distcheck.i18n import N_, _
from pytest_distcheck.strategy.model import Model


@dataclass(frozen=True)
class Architecture:
    """A published model: ``params`` (count), ``layers``, ``hidden``, ``heads``, ``kv_heads`` (key/value
    heads, grouped-query attention), ``seq_len`` (tokens per training sequence) and ``source``, an English
    catalog message with ``{checkpoint}`` for the configuration file's ``checkpoint`` (:attr:`cited`)."""

    params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    seq_len: int
    source: str
    checkpoint: str = ""

    @property
    def cited(self) -> str:
        """The source in the language in use, its checkpoint filled in."""
        return _(self.source).format(checkpoint=self.checkpoint)


_LLAMA2 = N_("Touvron et al. 2023 (Llama 2, arXiv:2307.09288) Table 1 (4k context, GQA for 70B); "
             "meta-llama/Llama-2-{checkpoint} config.json")
_LLAMA3 = N_("Dubey et al. 2024 (The Llama 3 Herd of Models, arXiv:2407.21783) Table 3 and sec. 3.4 (pre-training at "
             "8K tokens); meta-llama/Llama-3.1-{checkpoint} config.json")
ARCHITECTURES: dict[str, Architecture] = {
    "llama2-7b": Architecture(6_738_415_616, 32, 4096, 32, 32, 4096, _LLAMA2, "7b-hf"),
    "llama2-13b": Architecture(13_015_864_320, 40, 5120, 40, 40, 4096, _LLAMA2, "13b-hf"),
    "llama2-70b": Architecture(68_976_648_192, 80, 8192, 64, 8, 4096, _LLAMA2, "70b-hf"),
    "llama3-8b": Architecture(8_030_261_248, 32, 4096, 32, 8, 8192, _LLAMA3, "8B"),
    "llama3-70b": Architecture(70_553_706_496, 80, 8192, 64, 8, 8192, _LLAMA3, "70B"),
    "llama3-405b": Architecture(405_853_388_800, 126, 16384, 128, 8, 8192, _LLAMA3, "405B"),
    "gpt3-175b": Architecture(175e9, 96, 12288, 96, 96, 2048,
                              N_("Brown et al. 2020 (GPT-3, arXiv:2005.14165) Table 2.1 (175.0B, 96 layers, "
                                 "d_model 12288, 96 heads, context 2048)")),
}


def preset_model(name: str, **given: object) -> Model:
    """The :class:`Model` of preset ``name``, with the fields in ``given`` (not ``None``) taking precedence.

    Raises:
        KeyError: an unknown name (the caller lists :data:`ARCHITECTURES`).
    """
    arch = ARCHITECTURES[name]
    model = Model(arch.params, arch.layers, arch.hidden, arch.heads, arch.seq_len, kv_heads=arch.kv_heads)
    return replace(model, **{k: v for k, v in given.items() if v is not None})
