"""The speedup-curve PNG of a TP inference result (matplotlib, no display needed).

Left: prefill speedup against the tokens in one prefill (batch x prompt length), one line per batch
size across the prompt lengths. Right: decode speedup against the batch size, one line per prompt
length. Each TP degree ``t`` has its own colour;
the dotted lines are "no gain" (1) and the ideal (``t``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_speedups(result: dict[str, Any], path: Path | str) -> None:
    """Write the two-panel speedup figure of ``result`` (a tp-inference-result dict) to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speedups = result["speedups"]
    degrees = sorted({s["tp"] for s in speedups})
    colours = {t: plt.get_cmap("tab10")(i) for i, t in enumerate(degrees)}
    fig, (pre, dec) = plt.subplots(1, 2, figsize=(11, 4.3), constrained_layout=True)
    styles = ["o-", "s--", "^-.", "d:"]
    for t in degrees:
        rows = [s for s in speedups if s["tp"] == t]
        for k, batch in enumerate(sorted({s["batch_size"] for s in rows})):
            line = sorted((s for s in rows if s["batch_size"] == batch), key=lambda s: s["prompt_len"])
            pre.plot([s["batch_size"] * s["prompt_len"] for s in line], [s["prefill"] for s in line],
                     styles[k % 4], color=colours[t], label=f"TP {t}, batch {batch}")
        for k, plen in enumerate(sorted({s["prompt_len"] for s in rows})):
            line = sorted((s for s in rows if s["prompt_len"] == plen), key=lambda s: s["batch_size"])
            dec.plot([s["batch_size"] for s in line], [s["decode"] for s in line],
                     styles[k % 4], color=colours[t], label=f"TP {t}, prompt {plen}")
    for ax, xlabel, title in (
        (pre, "tokens per prefill (batch x prompt length)", "Prefill: latency(TP 1) / latency(TP t)"),
        (dec, "batch size", "Decode: step latency(TP 1) / step latency(TP t)"),
    ):
        ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        for t in degrees:
            ax.axhline(t, color=colours[t], linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("speedup over TP 1")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    dev, m = result["device"], result["model"]
    fig.suptitle(
        f"TP inference speedup, {result['world_size']} ranks on {dev['count']} x {dev['name']} ({result['backend']}), "
        f"{m['parameters'] / 1e6:.1f}M-parameter GPT, {m['dtype']}; dotted: 1 and ideal t",
        fontsize=10,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
