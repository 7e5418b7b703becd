"""Attention heatmaps: what each target subword attended to while it was produced.

Source subwords run along the x axis, target subwords (and the final EOS) down the y axis, as in the
figures of Bahdanau et al. (2015). matplotlib is an optional dependency (``pip install mtkit[plot]``)
and is imported only when a plot is asked for, with the non-interactive Agg backend.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from torch import Tensor

from mtkit.decode.outputs import select_head
from mtkit.errors import MtkitError


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MtkitError("attention plots need matplotlib: pip install 'mtkit[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_attention(attention: Tensor, source_tokens: list[str], target_tokens: list[str], path: str | Path,
                   title: str = "", head: int | str = "avg") -> Path:
    """Write a heatmap of ``attention`` [H, T, S] (rows: target tokens, EOS last if T exceeds the
    target tokens) to ``path`` (PNG). ``head`` is a head number or "avg" (mean over heads)."""
    plt = _pyplot()
    weights = select_head(attention, head).cpu().numpy()
    rows, cols = weights.shape
    ylabels = list(target_tokens[:rows]) + ["</s>"] * max(0, rows - len(target_tokens))
    xlabels = list(source_tokens[:cols]) + [""] * max(0, cols - len(source_tokens))
    # about a third of an inch per token keeps labels legible; bounded so huge inputs stay sane
    width = min(max(4.0, 0.32 * cols + 2.2), 60.0)
    height = min(max(3.0, 0.32 * rows + 1.8), 60.0)
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    try:
        image = ax.imshow(weights, cmap="viridis", aspect="auto", interpolation="nearest",
                          vmin=0.0, vmax=max(float(weights.max()), 1e-6))
        ax.set_xticks(range(cols))
        ax.set_xticklabels(xlabels, rotation=90, fontsize=9)
        ax.set_yticks(range(rows))
        ax.set_yticklabels(ylabels, fontsize=9)
        ax.set_xlabel("source")
        ax.set_ylabel("target")
        ax.tick_params(top=False, bottom=True)
        if title:
            ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, fraction=0.046 if cols > rows else 0.03, pad=0.02)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():  # scripts the font lacks (e.g. CJK) draw as boxes, not errors
            warnings.filterwarnings("ignore", message=".*[Gg]lyph.*")
            fig.tight_layout()
            fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def head_label(head: int | str, layer: int, heads: int | None = None) -> str:
    """E.g. "last layer, mean of heads" or "layer 0, head 2" (for plot titles); a model with one
    attention of one head (the RNN) has nothing to choose: "attention"."""
    if heads == 1 and head in ("avg", 0) and layer in (-1, 0):
        return "attention"
    where = "last layer" if layer == -1 else f"layer {layer}"
    what = "mean of heads" if head == "avg" else f"head {head}"
    return f"{where}, {what}"


__all__ = ["head_label", "plot_attention"]
