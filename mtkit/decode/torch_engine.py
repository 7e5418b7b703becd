"""The torch engine behind `mtkit.Translator`: a trained model directory (a checkpoint, or an
ensemble of model directories) searched by `mtkit.decode.search` in PyTorch.

It loads the model on its device in its decoding dtype (or dynamically quantized to int8), pads each
batch of subword ids into one tensor and runs the search under ``torch.inference_mode`` with
PyTorch's thread count set for the call and restored after it (a library object leaves the
program's setting as it found it). Sampling draws from the engine's own seeded generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from mtkit.config.experiment import DecodingConfig
from mtkit.decode.constrained import constrained_search
from mtkit.decode.loader import is_int8, load_for_decoding
from mtkit.decode.search import search
from mtkit.decode.translation import Hypothesis
from mtkit.device import auto_int8, decode_dtype, decode_int8, resolve_device, threads
from mtkit.vocab import PAD_ID

if TYPE_CHECKING:
    from mtkit.options import LoadOptions


class TorchEngine:
    """A model (or ensemble) on its device, searched one padded batch at a time."""

    def __init__(self, model: str | Path, load: LoadOptions, overrides: Sequence[str], threads_: int,
                 attention_layer: int = -1, seed: int | None = None) -> None:
        self.device = resolve_device(load.device)
        self.auto_max_tokens = 0  # the Translator's CPU and GPU budgets
        self.dtype = decode_dtype(load.precision, self.device, load.int8)
        self.threads = threads_
        self.attention_layer = attention_layer
        with threads(threads_):
            main, self.model = load_for_decoding(model, load.checkpoint, overrides, self.device,
                                                 self.dtype, decode_int8(load.precision, load.int8),
                                                 load.ensemble, auto_int8(load.precision, self.device))
        self.int8 = is_int8(self.model)  # asked for, or chosen by auto (a Transformer on an AVX2 CPU)
        self.config, self.meta, self.model_dir = main.config, main.meta, main.model_dir
        m = self.config.model
        self.max_positions = m.max_positions if m.arch == "transformer" and m.positions == "learned" else None
        self.generator = torch.Generator(self.device)
        self.generator.manual_seed(seed if seed is not None else torch.Generator().seed())

    @property
    def num_attention_heads(self) -> int:
        return self.model.num_attention_heads

    def search(self, batch: list[list[int]], cfg: DecodingConfig, nbest: int = 1,
               need_attention: bool = False, sample: bool = False, start: int | None = None,
               scores: bool = True) -> list[list[Hypothesis]]:
        """Hypotheses (best first, at most ``nbest``) for each source in ``batch`` (subword ids);
        ``start``: the decoder's first input (BOS where None). ``scores=False``: greedy search leaves
        the scores NaN (it skips each step's log-normaliser); other searches score anyway."""
        if not batch:
            return []
        src = self._padded(batch)
        with threads(self.threads), torch.inference_mode():
            return search(self.model, src.to(self.device), cfg, nbest=nbest, need_attention=need_attention,
                          sample=sample, generator=self.generator, attn_layer=self.attention_layer,
                          start=self._start(len(batch), start), scores=scores)

    def search_constrained(self, batch: list[list[int]], cfg: DecodingConfig,
                           constraints: list[list[list[int]]], nbest: int = 1, need_attention: bool = False,
                           soft_bonus: float | None = None, word_pieces: Sequence[int] = (),
                           start: int | None = None) -> list[list[Hypothesis]]:
        """Like ``search``, each output containing its sentence's ``constraints`` (subword runs): hard,
        or with ``soft_bonus`` a bonus per constraint subword (`mtkit.decode.constrained`). ``word_pieces``:
        the ids of subwords that continue a word (none may follow a completed constraint)."""
        if not batch:
            return []
        src = self._padded(batch)
        mask = None
        if word_pieces:
            mask = torch.zeros(self.meta.tgt_vocab_size, dtype=torch.bool, device=self.device)
            mask[torch.tensor(list(word_pieces), device=self.device)] = True
        with threads(self.threads), torch.inference_mode():
            return constrained_search(self.model, src.to(self.device), cfg, constraints,
                                      beam_size=cfg.beam_size, nbest=nbest, hard=soft_bonus is None,
                                      bonus=soft_bonus or 0.0, need_attention=need_attention,
                                      attn_layer=self.attention_layer, word_pieces=mask,
                                      start=self._start(len(batch), start))

    def _start(self, rows: int, start: int | None) -> torch.Tensor | None:
        return None if start is None else torch.full((rows,), start, dtype=torch.long, device=self.device)

    @staticmethod
    def _padded(batch: list[list[int]]) -> torch.Tensor:
        src = torch.full((len(batch), max(len(ids) for ids in batch)), PAD_ID, dtype=torch.long)
        for row, ids in enumerate(batch):
            src[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return src


__all__ = ["TorchEngine"]
