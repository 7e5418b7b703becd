"""The pictures a person would rather look at than numbers: attention heatmaps and learning curves.

Attention: source subwords run along the x axis, target subwords (and the final EOS) down the y axis,
as in the figures of Bahdanau et al. (2015). Learning curves: train/dev loss and dev BLEU/chrF
against updates, from a model directory's metrics.jsonl (`mtkit plot`). matplotlib is an optional
dependency (``pip install mtkit[plot]``) imported only when a plot is asked for, with the
non-interactive Agg backend.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from torch import Tensor

from mtkit.checkpoint import METRICS_FILE
from mtkit.decode.translation import Translation, select_head
from mtkit.errors import MtkitError
from mtkit.metrics_log import read_metrics


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MtkitError("plots need matplotlib: pip install 'mtkit[plot]'") from None
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



def plot_translation(tr: Translation, plot_dir: Path, head: int | str, layer: int) -> None:
    """The heatmap of a translation's best candidate (`mtkit translate --attention-plot`), if it has
    attention: ``plot_dir``/attention-NNNNNN.png, numbered by input line."""
    if not tr.hypotheses or tr.hypotheses[0].attention is None:
        return
    best = tr.hypotheses[0]
    label = head_label(head, layer, best.attention.size(0))
    plot_attention(best.attention, tr.source_tokens, best.tokens, plot_dir / f"attention-{tr.index:06d}.png",
                   title=f"sentence {tr.index} ({label})", head=head)

def head_label(head: int | str, layer: int, heads: int | None = None) -> str:
    """E.g. "last layer, mean of heads" or "layer 0, head 2" (for plot titles); a model with one
    attention of one head (the RNN) has nothing to choose: "attention"."""
    if heads == 1 and head in ("avg", 0) and layer in (-1, 0):
        return "attention"
    where = "last layer" if layer == -1 else f"layer {layer}"
    what = "mean of heads" if head == "avg" else f"head {head}"
    return f"{where}, {what}"


def plot_curves(model_dir: str | Path, output: str | Path | None = None) -> Path:
    """Train/dev loss and dev BLEU/chrF against updates, as a PNG (default model_dir/curves.png)."""
    model_dir = Path(model_dir)
    metrics = model_dir / METRICS_FILE
    if not metrics.is_file():
        raise MtkitError(f"plot: {metrics} not found (train a model first)")
    plt = _pyplot()
    events = read_metrics(metrics)
    train = [e for e in events if e.get("event") == "train" and e.get("loss") is not None]
    valid = [e for e in events if e.get("event") == "valid"]
    if not train and not valid:
        raise MtkitError(f"plot: {metrics} holds no training events yet")

    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        steps = [e["step"] for e in train]
        ax_loss.plot(steps, [e["loss"] for e in train], label="train loss (label-smoothed)")
        if all(e.get("nll") is not None for e in train):
            ax_loss.plot(steps, [e["nll"] for e in train], "--", label="train NLL")
    dev_loss = [e for e in valid if e.get("dev_loss") is not None]
    if dev_loss:
        ax_loss.plot([e["step"] for e in dev_loss], [e["dev_loss"] for e in dev_loss], "o-", label="dev NLL")
    ax_loss.set_xlabel("update")
    ax_loss.set_ylabel("loss (nats/token)")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    for key, label in (("dev_bleu", "dev BLEU"), ("dev_chrf", "dev chrF")):
        points = [e for e in valid if e.get(key) is not None]
        if points:
            ax_bleu.plot([e["step"] for e in points], [e[key] for e in points], "o-", label=label)
    ax_bleu.set_xlabel("update")
    ax_bleu.set_ylabel("score")
    if ax_bleu.lines:
        ax_bleu.legend()
    ax_bleu.grid(alpha=0.3)
    fig.suptitle(model_dir.name)
    fig.tight_layout()
    out = Path(output) if output is not None else model_dir / "curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


__all__ = ["head_label", "plot_attention", "plot_curves"]
