"""Validation during training: dev loss and perplexity, and BLEU/chrF of greedy translations.

Loss and perplexity are the plain (unsmoothed) per-token NLL over the whole dev split. BLEU and chrF
(sacrebleu defaults) compare detokenized greedy output (``search`` with beam_size=1) with the dev
references as stored in the shards, decoded by the same target BPE model: both sides go through
sentencepiece's normalisation, so the score can differ slightly from one on the raw reference text.
For a multilingual model (data.corpora) BLEU and chrF are computed per direction, and dev_bleu /
dev_chrf are their mean: the best checkpoint is the best on average, not on the largest direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np
import torch

from mtkit.config.experiment import Config
from mtkit.data.batching import TokenBatchSampler, collate
from mtkit.data.bpe import Bpe
from mtkit.data.corpora import line_directions
from mtkit.data.shards import ParallelData
from mtkit.decode.search import search
from mtkit.models.base import Seq2Seq
from mtkit.train.loss import projected_label_smoothed_nll

#: token budget of the greedy-search batches (source tokens): validation's own, not a model setting.
#: Larger budgets were barely faster and raised the resident size much more; smaller ones were slower
#: (measured in docs/results.md).
SEARCH_MAX_TOKENS = 4000


@dataclass
class DevSet:
    data: ParallelData
    loss_batches: list[np.ndarray]
    search_batches: list[np.ndarray]
    references: list[str]
    directions: list[str] | None = None  # a multilingual model's: the direction of each reference


def build_dev_set(data: ParallelData, cfg: Config, tgt_bpe: Bpe) -> DevSet:
    """Fixed (unshuffled, length-sorted) batches for the dev loss and for greedy search."""
    tc = cfg.training
    loss_sampler = TokenBatchSampler(data.src.lengths, data.tgt.lengths, tc.max_tokens, shuffle=False)
    n_search = len(data) if tc.valid_max_sentences == 0 else min(len(data), tc.valid_max_sentences)
    search_sampler = TokenBatchSampler(data.src.lengths[:n_search], np.zeros(n_search, dtype=np.int64),
                                       SEARCH_MAX_TOKENS, shuffle=False)
    skip = int(data.decoder_tagged)  # a decoder-side language tag is no word of the reference
    refs = tgt_bpe.decode_ids([data.tgt[i].tolist()[skip:] for i in range(n_search)])
    directions = line_directions(data.meta.languages, "dev", len(data), n_search)
    return DevSet(data, loss_sampler.epoch_batches(0), search_sampler.epoch_batches(0), refs, directions)


@torch.no_grad()
def evaluate(model: Seq2Seq, dev: DevSet, cfg: Config, device: torch.device,
             autocast: AbstractContextManager | None, tgt_bpe: Bpe,
             decoding: Callable[[Seq2Seq], Seq2Seq] | None = None) -> dict[str, float]:
    """dev_loss, dev_ppl, dev_bleu, dev_chrf of `model` (switched to eval mode and back). The dev loss
    is computed as training computes it (``autocast``); the translations scored by BLEU and chrF are
    searched by ``decoding(model)`` where given (`mtkit.decode.loader.decoding_copy`: the model as
    `mtkit translate` decodes it, without autocast), else by the model under ``autocast``."""
    import contextlib

    import sacrebleu

    was_training = model.training
    model.eval()
    amp = autocast if autocast is not None else contextlib.nullcontext()
    try:
        nll_total = torch.zeros((), device=device, dtype=torch.float64)
        tokens = 0
        for ids in dev.loss_batches:
            batch = collate(dev.data, ids).to(device)
            with amp:  # the output layer and the loss in row blocks, as in training
                features, _ = model(batch.src, batch.tgt_in, project=False)
                _, nll = projected_label_smoothed_nll(features, model.output_proj.weight, batch.tgt_out, 0.0,
                                                      bias=model.logit_bias())
            nll_total += nll.double()
            tokens += batch.num_tgt_tokens
        hyps: list[str] = [""] * len(dev.references)
        searcher = decoding(model) if decoding is not None else model
        search_amp = amp if searcher is model else contextlib.nullcontext()
        for ids in dev.search_batches:
            batch = collate(dev.data, ids)
            with search_amp:
                results = search(searcher, batch.src.to(device), cfg.decoding, beam_size=1,
                                 start=batch.tgt_in[:, 0],  # BOS, or the decoder-side language tag
                                 scores=False)  # the text alone is scored
            texts = tgt_bpe.decode_ids([r[0].tokens for r in results])
            for i, text in zip(ids.tolist(), texts, strict=True):
                hyps[i] = text
    finally:
        model.train(was_training)
    loss = float(nll_total) / max(1, tokens)
    out = {"dev_loss": loss, "dev_ppl": math.exp(min(loss, 100.0))}
    if dev.references and dev.directions:  # a multilingual model: each direction, and their mean
        pairs = list(dict.fromkeys(dev.directions))
        picked = {p: [i for i, d in enumerate(dev.directions) if d == p] for p in pairs}
        for name, metric in (("bleu", sacrebleu.corpus_bleu), ("chrf", sacrebleu.corpus_chrf)):
            scores = {p: metric([hyps[i] for i in rows], [[dev.references[i] for i in rows]]).score
                      for p, rows in picked.items()}
            out[f"dev_{name}"] = sum(scores.values()) / len(scores)
            out[f"dev_{name}_by_direction"] = scores  # type: ignore[assignment]
    elif dev.references:
        out["dev_bleu"] = sacrebleu.corpus_bleu(hyps, [dev.references]).score
        out["dev_chrf"] = sacrebleu.corpus_chrf(hyps, [dev.references]).score
    return out
