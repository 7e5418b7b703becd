"""Training metrics: the `metrics.jsonl` log and the learning-curve plot of `mtkit plot`.

Every line of ``metrics.jsonl`` is one JSON object with an "event" of "train" (periodic training
statistics) or "valid" (a validation), the update "step", "epoch" and "elapsed" seconds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mtkit.errors import MtkitError


class MetricsLog:
    """Appends events to metrics.jsonl; on resume drops the events newer than the checkpoint."""

    def __init__(self, path: Path, resume_step: int | None):
        self.path = Path(path)
        if resume_step is None:
            self.path.write_text("", encoding="utf-8")
        elif self.path.exists():
            kept = [e for e in read_metrics(self.path) if int(e.get("step", 0)) <= resume_step]
            tmp = self.path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(json.dumps(e) + "\n" for e in kept), encoding="utf-8")
            tmp.replace(self.path)

    def write(self, event: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in event.items()}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(clean) + "\n")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
    return events


def plot_curves(model_dir: str | Path, output: str | Path | None = None) -> Path:
    """Train/dev loss and dev BLEU/chrF against updates, as a PNG (default model_dir/curves.png)."""
    model_dir = Path(model_dir)
    metrics = model_dir / "metrics.jsonl"
    if not metrics.is_file():
        raise MtkitError(f"plot: {metrics} not found (train a model first)")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MtkitError("plot needs matplotlib: pip install 'mtkit[plot]'") from None
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
