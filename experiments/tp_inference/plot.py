"""The speedup-curve PNG of a TP inference result (matplotlib, no display needed).

Left: prefill speedup against the tokens in one prefill (batch x prompt length), one line per batch
size across the prompt lengths. Right: decode speedup against the batch size, one line per prompt
length. Each TP degree ``t`` has its own colour;
the dotted lines are "no gain" (1) and the ideal (``t``). When the result also timed PyTorch's
``parallelize_module`` (``--torch-tp``), both panels add its speedup over the same TP-1 baseline as
thin dashed lines with ``x`` markers, so the gap between the two TP implementations shows directly.
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
    base = {(m["batch_size"], m["prompt_len"]): m for m in result["measurements"] if m["tp"] == 1}
    torch_rows = [m for m in result["measurements"] if "torch_tp_decode_step_s" in m and
                  (m["batch_size"], m["prompt_len"]) in base]
    for t in sorted({m["tp"] for m in torch_rows}):
        rows = [m for m in torch_rows if m["tp"] == t]
        for batch in sorted({m["batch_size"] for m in rows}):
            line = sorted((m for m in rows if m["batch_size"] == batch), key=lambda m: m["prompt_len"])
            pre.plot([m["batch_size"] * m["prompt_len"] for m in line],
                     [base[(m["batch_size"], m["prompt_len"])]["prefill_s"]["median"]
                      / m["torch_tp_prefill_s"]["median"] for m in line],
                     "x--", color=colours.get(t, "black"), linewidth=0.8, label=f"torch TP {t}, batch {batch}")
        for plen in sorted({m["prompt_len"] for m in rows}):
            line = sorted((m for m in rows if m["prompt_len"] == plen), key=lambda m: m["batch_size"])
            dec.plot([m["batch_size"] for m in line],
                     [base[(m["batch_size"], m["prompt_len"])]["decode_step_s"]["median"]
                      / m["torch_tp_decode_step_s"]["median"] for m in line],
                     "x--", color=colours.get(t, "black"), linewidth=0.8, label=f"torch TP {t}, prompt {plen}")
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
        f"{m['parameters'] / 1e6:.1f}M-parameter GPT, {m['dtype']}; dotted: 1 and ideal t"
        + ("; x dashed: torch parallelize_module" if torch_rows else ""),
        fontsize=10,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
