"""Running an exported model with CTranslate2: the `ct2` engine behind `mtkit.Translator`.

`mtkit export` writes a CTranslate2 model directory plus what mtkit needs to use it the way it uses a
model directory: the sentencepiece model(s) and a manifest (``mtkit_export.json``) holding the
model's config, vocabulary meta and how text is tokenized. ``Ct2Model`` loads such a directory into
a ``ctranslate2.Translator`` and answers ``search`` for batches of source subword ids with the same
``Hypothesis`` objects as ``mtkit.decode.search``, so cleaning, long-line splitting, batching, order,
n-best lists and output formats stay the Translator's, shared by both engines.

How mtkit's search settings map (docs/export.md has the full table):

* Greedy search and sampling are the same algorithm in both engines.
* Beam search: CTranslate2 keeps the K best non-EOS extensions of the 2K best, like mtkit. With
  ``length_norm`` gnmt or average it stops a sentence at K finished hypotheses (mtkit's rule for
  gnmt); the raw log-probabilities are recovered and the hypotheses reranked with
  ``mtkit.decode.translation.normalise``. With ``length_norm`` none it stops when the best beam ends, which
  finds the same best hypothesis as mtkit's bound.
* Length limits are per sentence, and each sentence gets what a search with its own limit finds.
  Sentences of close limits go to CTranslate2 as one asynchronous call at the highest of them (all
  calls submitted before any is awaited): a greedy hypothesis that ran on is cut at its own limit,
  a beam search that ran on to its own limit is searched again with it. At a limit CTranslate2
  stops the hypothesis where mtkit would append a forced end of sentence (same text for greedy
  search; the EOS is scored apart where a score is read or ranks hypotheses, and beam search may
  rank the cut hypotheses differently).

ctranslate2 is an optional dependency (``pip install 'mtkit[ct2]'``): it is imported only when an
exported model is loaded or written, so everything else works without it. Loading changes no
process-wide setting: CTranslate2 runs its own worker threads (``intra_threads``), and sampling
with a fixed seed, which would need its process-wide random generator, is refused.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from mtkit.config.experiment import Config, DecodingConfig
from mtkit.data.bpe import Bpe
from mtkit.data.meta import DataMeta
from mtkit.decode.translation import Hypothesis, normalise
from mtkit.device import ct2_compute_type, ct2_device
from mtkit.errors import CheckpointError, ConfigError, MtkitError
from mtkit.interop.manifest import VMAP, read_manifest, require_ctranslate2
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    from mtkit.options import LoadOptions

#: source subwords of one CPU sub-batch (see Ct2Model); divided by the beam size for int8 weights
SUB_BATCH_TOKENS = 1024
#: the batch budget of --max-tokens 0 (auto) on CPU: more than a chunk of lines holds (see Ct2Model)
CPU_BATCH_TOKENS = 10_000_000
#: the highest length limit of one CTranslate2 call over its lowest (`_limit_buckets`)
LIMIT_SPREAD = 1.25


@dataclass
class _Job:
    """A search submitted to CTranslate2 (`Ct2Model._submit`) and what reading its results needs."""

    source: list[list[str]]
    options: dict[str, Any]
    penalty: float
    copies: int
    pending: list[Any]  # ctranslate2.AsyncTranslationResult, one a sentence


class _Search(NamedTuple):
    """What one `Ct2Model.search` asked for."""

    cfg: DecodingConfig
    k: int  # the beam (1: greedy search or sampling)
    nbest: int
    need_attention: bool
    sample: bool
    scores: bool  # every score exact (else only those that rank a sentence's hypotheses)


@dataclass
class _Found:
    """One sentence's hypotheses as its own length limit gives them (`Ct2Model._fit`)."""

    source: list[str]  # its subwords
    hypotheses: list[list[str]]  # target subwords, ending in EOS unless cut at the limit
    log_probs: list[float]  # of each hypothesis's tokens (without a forced EOS)
    exact: list[bool]  # False: a greedy one cut at the limit, log_probs to be computed again
    attention: list[Any]  # rows per hypothesis (None: not asked for)
    copies: int  # top-k 1 "samples" are drawn once and copied
    scoring: list[tuple[int, Any]] = field(default_factory=list)  # (hypothesis, its pending scoring)


class Ct2Model:
    """An exported model in a ``ctranslate2.Translator``, searched one batch of subword ids at a time."""

    def __init__(self, model: str | Path, load: LoadOptions, overrides: Sequence[str], threads: int,
                 attention_layer: int = -1, seed: int | None = None) -> None:
        if load.ensemble:
            raise ConfigError("--ensemble: the ct2 engine runs one exported model; ensemble model "
                              "directories with --engine torch")
        if load.checkpoint != "best":
            raise ConfigError(f"--checkpoint {load.checkpoint}: an exported model holds the one checkpoint "
                              "chosen at export time (mtkit export --checkpoint)")
        if seed is not None:
            raise ConfigError("--seed: the ct2 engine samples from CTranslate2's process-wide random "
                              "generator, which mtkit does not reseed; use --engine torch for reproducible "
                              "samples")
        ct2 = require_ctranslate2()
        self.model_dir = Path(model)
        manifest = read_manifest(self.model_dir, overrides)
        self.config: Config = manifest.config
        self.meta: DataMeta = manifest.meta
        self.max_positions = manifest.max_positions
        self.layers = self.config.model.decoder_layers
        if attention_layer not in (-1, self.layers - 1):
            raise ConfigError(f"--attention-layer {attention_layer}: the ct2 engine gives the attention of "
                              f"the last decoder layer only (-1); use --engine torch for another layer")
        kind = ct2_compute_type(load.precision, load.int8)
        device, index = ct2_device(load.device, ct2)
        # On CPU, `threads` one-thread translators side by side, each taking sub-batches of about
        # SUB_BATCH_TOKENS source subwords (int8: that many subwords × beam, its kernels prefer small
        # products): faster than one translator with all the threads, and smaller (measured in
        # docs/results.md). On a GPU, one translator takes whole batches.
        self.sub_batch = 0 if device == "cuda" else SUB_BATCH_TOKENS
        # On CPU the translators take sub-batches themselves, so a batch's size only decides how often
        # they wait for each other at the end of a search: a whole chunk of lines is one search.
        self.auto_max_tokens = 0 if device == "cuda" else CPU_BATCH_TOKENS
        replicas, per_replica = (1, threads) if device == "cuda" else (threads, 1)
        torch = sys.modules.get("torch")  # loaded by the program, or not at all
        before = torch.get_num_threads() if torch else None
        try:
            self.translator = ct2.Translator(str(self.model_dir), device=device, device_index=index,
                                             compute_type=kind, inter_threads=replicas,
                                             intra_threads=per_replica)
        except (RuntimeError, ValueError) as exc:
            raise CheckpointError(f"{self.model_dir}: CTranslate2 cannot run it here with compute type "
                                  f"{kind} on {device} ({_first_line(exc)})") from None
        finally:
            # CTranslate2 loads with its thread count set in the calling thread, where it is also
            # PyTorch's (one OpenMP runtime); its worker threads set their own, so this one is restored
            if torch and torch.get_num_threads() != before:
                torch.set_num_threads(before)
        self.model = self.translator
        # a shortlisted export: each batch may use only its source words' candidates (mtkit.decode.shortlist)
        self.use_vmap = load.shortlist and (self.model_dir / VMAP).is_file()
        self.device = f"{device}:{index}" if device == "cuda" else device
        self.dtype = self.translator.compute_type
        self.src_pieces = Bpe(self.model_dir / self.meta.src_bpe).pieces()
        tgt_pieces = (self.src_pieces if self.meta.tgt_bpe == self.meta.src_bpe
                      else Bpe(self.model_dir / self.meta.tgt_bpe).pieces())
        self.tgt_ids = {piece: i for i, piece in enumerate(tgt_pieces)}
        self._suppress = [[tgt_pieces[PAD_ID]], [tgt_pieces[BOS_ID]]]  # mtkit never emits them
        self._eos = tgt_pieces[EOS_ID]

    @property
    def num_attention_heads(self) -> int:
        """CTranslate2 returns attention averaged over the heads, so no single head can be chosen."""
        raise ConfigError("--attention-head: the ct2 engine gives attention averaged over the heads only "
                          "(--attention-head avg); use --engine torch for one head")

    # ------------------------------------------------------------------------------------ search
    def search(self, batch: list[list[int]], cfg: DecodingConfig, nbest: int = 1,
               need_attention: bool = False, sample: bool = False, start: int | None = None,
               scores: bool = True) -> list[list[Hypothesis]]:
        """Hypotheses (best first, at most ``nbest``) for each source in ``batch`` (subword ids); an
        exported model always starts from BOS (`mtkit export` refuses a decoder-side language tag).
        Each sentence gets what a search with its own length limit finds. ``scores`` False: a score
        that ranks nothing is left inexact (the forced EOS of a hypothesis cut at its limit, the
        log-probability of a greedy hypothesis cut shorter than it was found: `_fit`)."""
        if start is not None:
            raise MtkitError("the ct2 engine starts every translation from BOS; it cannot start from a "
                             "language tag")
        if not batch:
            return []
        limits = [max(1, math.floor(len(ids) * cfg.max_len_a + cfg.max_len_b)) for ids in batch]
        if self.max_positions is not None:  # the Translator keeps inputs inside; this is a backstop
            limits = [min(n, self.max_positions) for n in limits]
        k = 1 if sample else max(cfg.beam_size, nbest)
        search = _Search(cfg, k, nbest, need_attention, sample, scores)
        # Sentences whose limits are close share one asynchronous call at the highest of them, all
        # calls submitted before any is awaited, longest first: CTranslate2's translators then take
        # sub-batches of one call after another without waiting for each other, and the last ones are
        # short. (A call per distinct limit cut a server's batch into many calls of one or two
        # sentences, which was slower.)
        found: list[_Found | None] = [None] * len(batch)
        buckets = _limit_buckets(limits, [len(ids) for ids in batch], self._sub_batch_tokens(k))
        self._run([(idx, max(limits[i] for i in idx)) for idx in buckets], batch, limits, search, found)
        # A beam search that ran on past a sentence's own limit may have ended otherwise at it: such
        # sentences (degenerate ones, rare in a trained model's domain) are searched again with it.
        again: dict[int, list[int]] = {}
        for i, f in enumerate(found):
            if f is None:
                again.setdefault(limits[i], []).append(i)
        self._run([(idx, limit) for limit, idx in sorted(again.items(), reverse=True)], batch, limits,
                  search, found)
        return self._finish([f for f in found if f is not None], search)

    def _run(self, calls: list[tuple[list[int], int]], batch: list[list[int]], limits: list[int],
             search: _Search, found: list[_Found | None]) -> None:
        """Submit one call per (sentence indices, length limit), all before any is awaited; then put
        each sentence's results, as its own limit would have given them, into ``found`` (None where
        only a search with its own limit can tell: `_fit`), each call's scoring pass submitted as soon
        as its results are in (`_score_cut`)."""
        jobs = [(idx, limit, self._submit([batch[i] for i in idx], limit, search.cfg, search.k, search.nbest,
                                          search.need_attention, search.sample)) for idx, limit in calls]
        for idx, limit, job in jobs:
            try:
                results = [r.result() for r in job.pending]
            except (RuntimeError, ValueError) as exc:
                raise MtkitError(f"the ct2 engine cannot search with these settings ({_first_line(exc)})"
                                 ) from None
            for n, (i, result) in enumerate(zip(idx, results, strict=True)):
                found[i] = self._fit(job, n, result, limits[i], limit)
            self._score_cut([f for f in (found[i] for i in idx) if f is not None], search)

    def _sub_batch_tokens(self, k: int) -> int:
        """Source subwords of one CPU sub-batch for a beam of ``k`` (int8 kernels prefer small
        products: the budget is divided by the beam); 0 on a GPU, where a call is not cut."""
        if not self.sub_batch:
            return 0
        per_beam = k if self.translator.compute_type.startswith("int8") else 1
        return max(1, self.sub_batch // per_beam)

    def _submit(self, batch: list[list[int]], limit: int, cfg: DecodingConfig, k: int, nbest: int,
                need_attention: bool, sample: bool) -> _Job:
        """Start searching ``batch`` with the length limit ``limit``; `_collect` waits for it."""
        penalty = _length_penalty(batch, cfg) if k > 1 and not sample else 0.0
        options: dict[str, Any] = {
            "beam_size": k, "patience": 1.0, "max_decoding_length": limit, "max_input_length": 0,
            "min_decoding_length": min(cfg.min_len, limit), "no_repeat_ngram_size": cfg.no_repeat_ngram,
            "suppress_sequences": self._suppress, "return_scores": True, "return_end_token": True,
            # a beam's attention is read from a forced pass (`_attention_rows`), greedy search's here
            "return_attention": need_attention and k == 1, "length_penalty": penalty,
            # with a penalty CTranslate2 stops a sentence at K finished hypotheses and returns them all,
            # to be reranked here; without one it stops when the best beam ends
            "num_hypotheses": k if penalty else nbest, "use_vmap": self.use_vmap,
        }
        copies = 1
        if sample:
            options.update(sampling_topk=cfg.top_k, sampling_topp=cfg.top_p,
                           sampling_temperature=cfg.temperature)
            if cfg.top_k == 1:  # CTranslate2 draws top-k 1 "samples" once: they are all the same
                copies, options["num_hypotheses"] = nbest, 1
        if self.sub_batch:
            options.update(max_batch_size=self._sub_batch_tokens(k), batch_type="tokens")
        source = [[self.src_pieces[i] for i in ids] for ids in batch]
        try:
            pending = self.translator.translate_batch(source, asynchronous=True, **options)
        except (RuntimeError, ValueError) as exc:
            raise MtkitError(f"the ct2 engine cannot search with these settings ({_first_line(exc)})"
                             ) from None
        return _Job(source, options, penalty, copies, pending)


    def _fit(self, job: _Job, n: int, result: Any, own: int, searched: int) -> _Found | None:
        """Sentence ``n`` of ``job``, searched with the limit ``searched``, as a search with its
        ``own`` limit would have found it; None where only such a search can tell.

        CTranslate2 counts EOS in the limit. Greedy search and sampling choose each token from the
        tokens before it alone, so a hypothesis found with a higher limit and cut to ``own`` tokens is
        the one the own limit gives (the log-probability of a cut one is computed again, where read). A
        beam search is the same up to its last step, where CTranslate2 ends every beam: where every
        hypothesis ended before ``own`` tokens, the search stopped before the own limit's last step
        (it stops at the step where the last hypothesis it returns ends) and found the same."""
        hyps = list(result.hypotheses)
        attention = list(result.attention) if job.options["return_attention"] else [None] * len(hyps)
        # CTranslate2 divided each score by length^penalty
        log_probs = [score * len(h) ** job.penalty for h, score in zip(hyps, result.scores, strict=True)]
        exact = [True] * len(hyps)
        if job.options["beam_size"] > 1:
            if own < searched and any(len(h) >= own or h[-1:] != [self._eos] for h in hyps):
                return None
        else:
            for j, h in enumerate(hyps):
                if len(h) > own:
                    hyps[j] = h[:own]
                    if attention[j] is not None:
                        attention[j] = attention[j][:own]
                # cut at its limit: scored again where read, whatever limit found it, so that its
                # score does not depend on the sentences it was searched with
                exact[j] = hyps[j][-1:] == [self._eos]
        return _Found(job.source[n], hyps, log_probs, exact, attention, job.copies)

    def _score_cut(self, found: list[_Found], search: _Search) -> None:
        """Submit the scoring pass of these sentences where a score is read (``search.scores``) or
        ranks a sentence's hypotheses: each greedy hypothesis cut at its limit is scored again (its
        tokens and the EOS mtkit forces there), each beam hypothesis cut there gets its forced EOS
        scored. Asynchronous and in sub-batches, so that it runs beside the searches still going."""
        forced = search.cfg.eos_at_limit == "scored"  # free: a forced EOS adds nothing
        cut = [(f, j) for f in found if search.scores or len(f.hypotheses) > 1
               for j, h in enumerate(f.hypotheses) if not f.exact[j] or (forced and h[-1:] != [self._eos])]
        if not cut:
            return
        options = {"max_batch_size": self.sub_batch, "batch_type": "tokens"} if self.sub_batch else {}
        pending = self.translator.score_batch([f.source for f, _ in cut], [f.hypotheses[j] for f, j in cut],
                                              max_input_length=0, asynchronous=True, **options)
        for (f, j), result in zip(cut, pending, strict=True):
            f.scoring.append((j, result))

    def _finish(self, found: list[_Found], search: _Search) -> list[list[Hypothesis]]:
        """mtkit's hypotheses, best first, from each sentence's fitted results and scoring pass; one
        forced pass for beam search's attention where asked for (`_attention_rows`)."""
        cfg = search.cfg
        forced = cfg.eos_at_limit == "scored"
        for f in found:
            for j, pending in f.scoring:  # log_probs: each token's, then EOS's
                log_probs = pending.result().log_probs
                tokens = f.log_probs[j] if f.exact[j] else sum(log_probs[:-1])
                f.log_probs[j] = tokens + (log_probs[-1] if forced else 0.0)
        if search.need_attention and search.k > 1:  # only for the hypotheses given back
            keys = [(n, j) for n, f in enumerate(found) for j in self._best(f, cfg, search.nbest)]
            self._attention_rows(found, search.k, keys)
        out = []
        for f in found:
            hyps = [self._hypothesis(h, lp, att, cfg)
                    for h, lp, att in zip(f.hypotheses, f.log_probs, f.attention, strict=True)]
            hyps.sort(key=lambda h: -h.score)
            out.append((hyps * f.copies)[:search.nbest])
        return out

    def _best(self, f: _Found, cfg: DecodingConfig, nbest: int) -> list[int]:
        """The indices of the ``nbest`` hypotheses of ``f`` that `_finish` gives back (best first, as
        it sorts them): the only ones whose attention is read."""
        scores = [self._hypothesis(h, lp, None, cfg).score
                  for h, lp in zip(f.hypotheses, f.log_probs, strict=True)]
        return sorted(range(len(scores)), key=lambda j: -scores[j])[:nbest]

    def _attention_rows(self, found: list[_Found], k: int, keys: list[tuple[int, int]]) -> None:
        """The attention of each beam-search hypothesis of ``keys`` ((sentence, hypothesis) pairs),
        from a second, greedy pass that forces the hypothesis as a target prefix. CTranslate2 4.x
        returns beam-search attention whose earlier rows belong to other beams (up to 0.3 off the
        model's attention on the found hypothesis; greedy search's is right, to 1e-6), so alignments
        and heatmaps would be wrong, and the beam search is not asked for it (`_submit`). The pass reads
        one step past the prefix: the row of the step that ends the hypothesis (its EOS, forced or
        not), which mtkit's attention always has."""
        if not keys:
            return
        prefixes = [[p for p in found[n].hypotheses[j] if p != self._eos] for n, j in keys]
        forced = ({"max_batch_size": self._sub_batch_tokens(k), "batch_type": "tokens"}
                  if self.sub_batch else {})
        try:
            again = self.translator.translate_batch(
                [found[n].source for n, _ in keys], target_prefix=prefixes, beam_size=1, max_input_length=0,
                max_decoding_length=max(len(p) for p in prefixes) + 1, return_attention=True,
                return_end_token=True, suppress_sequences=self._suppress, **forced)
        except (RuntimeError, ValueError) as exc:
            raise MtkitError(f"the ct2 engine cannot compute attention here ({_first_line(exc)})") from None
        for (n, j), p, r in zip(keys, prefixes, again, strict=True):
            found[n].attention[j] = r.attention[0][: len(p) + 1]

    def _hypothesis(self, pieces: list[str], log_prob: float, attention: list[list[float]] | None,
                    cfg: DecodingConfig) -> Hypothesis:
        """One CTranslate2 hypothesis (pieces ending in EOS unless cut at the limit) as mtkit's."""
        ended = bool(pieces) and pieces[-1] == self._eos
        ids = [self.tgt_ids[p] for p in (pieces[:-1] if ended else pieces)]
        att = None
        if attention is not None:
            import torch  # attention matrices are tensors, for both engines

            att = torch.tensor(attention, dtype=torch.float32).reshape(len(attention), -1)
            if len(att) < len(ids) + 1:  # mtkit's rows end with the EOS step; a greedy cut one had none
                att = torch.cat([att, att.new_zeros(len(ids) + 1 - len(att), att.size(1))])
            att = att.unsqueeze(0)  # [1 (the mean of the heads), len(ids) + 1, S]
        return Hypothesis(ids, float(normalise(log_prob, len(ids) + 1, cfg)), log_prob, att)


def _limit_buckets(limits: list[int], lengths: list[int], capacity: int = 0,
                   spread: float = LIMIT_SPREAD) -> list[list[int]]:
    """The sentences (indices) in the groups searched together, highest limits first. The sentences
    of one limit stay together; the next limit down joins a group while the group's highest limit is
    at most ``spread`` times it and the group holds fewer than ``capacity`` source subwords (0: no
    such bound), what one of CTranslate2's sub-batches takes: joining fuller groups would gain
    nothing and cost searches again (`Ct2Model.search`)."""
    by_limit: dict[int, list[int]] = {}
    for i, limit in enumerate(limits):
        by_limit.setdefault(limit, []).append(i)
    groups: list[list[int]] = []
    held = 0  # source subwords of the last group
    for limit, idx in sorted(by_limit.items(), reverse=True):
        if groups and limits[groups[-1][0]] <= spread * limit and (not capacity or held < capacity):
            groups[-1].extend(idx)
            held += sum(lengths[i] for i in idx)
        else:
            groups.append(list(idx))
            held = sum(lengths[i] for i in idx)
    return groups


def _length_penalty(batch: list[list[int]], cfg: DecodingConfig) -> float:
    """CTranslate2's length penalty β (it ranks finished hypotheses by log_prob / n^β) for a beam search
    reranked with mtkit's normalisation.

    Any β > 0 gives mtkit's stopping rule for gnmt (K finished hypotheses). When more than K finish
    at once, CTranslate2 keeps the K best by its own ranking, so β is chosen to rank like mtkit:
    β = 1 is mtkit's average exactly, and for gnmt ((5 + n) / 6)^α has the slope of n^β where
    β = α·n/(5 + n), at the batch's typical length n. none: β = 0, no reranking (stop when the best
    beam ends, which finds mtkit's best hypothesis)."""
    if cfg.length_norm == "none":
        return 0.0
    if cfg.length_norm == "average":
        return 1.0
    n = sum(len(ids) for ids in batch) / max(1, len(batch)) + 1
    return max(cfg.length_penalty * n / (5.0 + n), 1e-3)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


__all__ = ["Ct2Model"]
