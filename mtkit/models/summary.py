"""Parameter counts per component, for `mtkit params` and the training log.

Models are built on the ``meta`` device, so even the paper's big configurations are counted in
milliseconds without allocating their weights.
"""

from __future__ import annotations

import torch

from mtkit.config.experiment import ModelConfig
from mtkit.models.base import Seq2Seq

# first segment of a parameter name → component
_COMPONENTS = {
    "src_embed": "source embedding",
    "tgt_embed": "target embedding",
    "positions": "positions",
    "src_positions": "positions",
    "encoder_layers": "encoder",
    "encoder_norm": "encoder",
    "encoder": "encoder",
    "decoder_layers": "decoder",
    "decoder_norm": "decoder",
    "decoder_rnn": "decoder",
    "attentional": "decoder",
    "scorer": "attention scorer",
    "bridge": "bridge",
    "output_proj": "output projection",
}


def build_on_meta(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, joint_vocab: bool) -> Seq2Seq:
    """Build the model without allocating weights (for counting and inspection only)."""
    from mtkit.models import build_model

    with torch.device("meta"):
        return build_model(cfg, src_vocab_size, tgt_vocab_size, joint_vocab)


def parameter_breakdown(model: Seq2Seq) -> list[tuple[str, int, str]]:
    """(component, trainable parameters, note) rows; tied weights are counted once, where they first
    appear, and the component that reuses them says so in its note."""
    counts: dict[str, int] = {}
    for name, p in model.named_parameters():  # deduplicated: a tied tensor is listed once
        if p.requires_grad:
            label = _COMPONENTS.get(name.split(".")[0], name.split(".")[0])
            counts[label] = counts.get(label, 0) + p.numel()
    notes: dict[str, str] = {}
    also: list[str] = []  # what else the target embedding is (share_all_embeddings, tie_embeddings)
    src, tgt = getattr(model, "src_embed", None), getattr(model, "tgt_embed", None)
    if src is not None and src is tgt:
        also.append("the source embedding")
        counts.setdefault("source embedding", 0)
        notes["source embedding"] = "shared with the target embedding"
    out = getattr(model, "output_proj", None)
    if out is not None and tgt is not None and out.weight is tgt.weight:
        also.append("the output projection")
        counts.setdefault("output projection", 0)
        notes["output projection"] = "tied to the target embedding"
    if also:
        notes["target embedding"] = "also " + " and ".join(also)
    order = list(dict.fromkeys(_COMPONENTS.values()))
    labels = sorted(counts, key=lambda k: order.index(k) if k in order else len(order))
    return [(label, counts[label], notes.get(label, "")) for label in labels]
