"""How likely a model finds a given translation: the per-token cross-entropy of a target under a
source, by one teacher-forced pass (no search). Corpus cleaning scores pairs with it (dual conditional
cross-entropy, `mtkit.data.dual_score`); it is the number a reranker or a data selector needs too.

The cross-entropy of a pair is −(1/|y|) Σ log p(y_t | y_<t, x) over the target's subwords and EOS, in
nats, computed in float32 from the model's logits whatever precision the model runs in. Sentences are
batched by length (sorted, at most ``max_tokens`` padded target tokens a batch) and the scores come back
in input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from mtkit.data.batching import pack_sorted
from mtkit.data.bpe import Bpe
from mtkit.decode.loader import load_model
from mtkit.device import autocast, decode_dtype, resolve_device
from mtkit.errors import ConfigError
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID


class ForcedScorer:
    """A trained model (its directory) that scores given translations: ``cross_entropy(src, tgt)``."""

    def __init__(self, model: str | Path, device: str = "auto", precision: str = "auto",
                 checkpoint: str = "best", max_tokens: int = 6000, max_len: int = 250) -> None:
        self.device = resolve_device(device)
        self.loaded = load_model(model, checkpoint, (), self.device)
        meta = self.loaded.meta
        if meta.languages:
            raise ConfigError(f"{model}: a multilingual model; scoring takes a model of one language pair")
        self.src_bpe = Bpe(self.loaded.model_dir / meta.src_bpe)
        self.tgt_bpe = (self.src_bpe if meta.tgt_bpe == meta.src_bpe
                        else Bpe(self.loaded.model_dir / meta.tgt_bpe))
        dtype = decode_dtype(precision, self.device)
        self.autocast_dtype = None if dtype == torch.float32 else dtype
        self.max_tokens, self.max_len = max_tokens, max_len
        self.model = self.loaded.model.eval()

    @torch.inference_mode()
    def cross_entropy(self, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        """Per-token cross-entropy (nats) of each target given its source, in input order. Sentences
        longer than ``max_len`` subwords are cut there (they are scored on their beginning)."""
        src_ids = [ids[: self.max_len] for ids in self.src_bpe.encode_ids(list(sources))]
        tgt_ids = [ids[: self.max_len - 1] for ids in self.tgt_bpe.encode_ids(list(targets))]
        order = np.argsort([len(t) + len(s) / 1000 for s, t in zip(src_ids, tgt_ids, strict=True)],
                           kind="stable")
        lengths = np.array([len(t) + 1 for t in tgt_ids], dtype=np.int64)  # with EOS
        scores = np.zeros(len(order), dtype=np.float64)
        for batch in pack_sorted(order, lengths, self.max_tokens):  # rows × longest target ≤ max_tokens
            scores[batch] = self._batch([src_ids[i] for i in batch], [tgt_ids[i] for i in batch])
        return scores.tolist()

    def _batch(self, srcs: list[list[int]], tgts: list[list[int]]) -> np.ndarray:
        n = len(srcs)
        src = torch.full((n, max(1, max(len(s) for s in srcs))), PAD_ID, dtype=torch.long)
        length = max(len(t) for t in tgts) + 1
        tgt_in = torch.full((n, length), PAD_ID, dtype=torch.long)
        tgt_out = torch.full((n, length), PAD_ID, dtype=torch.long)
        for row, (s, t) in enumerate(zip(srcs, tgts, strict=True)):
            if s:
                src[row, : len(s)] = torch.tensor(s)
            else:
                src[row, 0] = EOS_ID  # an empty source: the encoder needs one position
            tgt_in[row, 0] = BOS_ID
            tgt_in[row, 1: len(t) + 1] = torch.tensor(t, dtype=torch.long)
            tgt_out[row, : len(t)] = torch.tensor(t, dtype=torch.long)
            tgt_out[row, len(t)] = EOS_ID
        src, tgt_in, tgt_out = (x.to(self.device) for x in (src, tgt_in, tgt_out))
        with autocast(self.device, self.autocast_dtype):
            logits, _ = self.model(src, tgt_in)
        # one fused kernel (log-softmax and the gold token's entry, in float32), not a [B, T, V] copy
        nll = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(),
                                                ignore_index=PAD_ID, reduction="none").view(n, length)
        return (nll.sum(-1) / (tgt_out != PAD_ID).sum(-1)).cpu().numpy()





def dual_conditional_cross_entropy(forward: ForcedScorer, backward: ForcedScorer, sources: Sequence[str],
                                   targets: Sequence[str]) -> list[float]:
    """Junczys-Dowmunt's (2018) dual conditional cross-entropy of each pair, as an adequacy in (0, 1]:
    exp(−(|H_fwd − H_bwd| + (H_fwd + H_bwd) / 2)), where H_fwd is the per-token cross-entropy of the
    target under the source→target model and H_bwd that of the source under the target→source model.
    A pair both models find likely, and equally so, scores near 1; a misaligned pair, which neither
    model can explain, near 0."""
    h_fwd = np.array(forward.cross_entropy(sources, targets))
    h_bwd = np.array(backward.cross_entropy(targets, sources))
    return np.exp(-(np.abs(h_fwd - h_bwd) + (h_fwd + h_bwd) / 2)).tolist()
__all__ = ["ForcedScorer", "dual_conditional_cross_entropy"]
