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
* Length limits are per sentence: the sentences of a batch with the same limit go to CTranslate2 as one
  asynchronous call, all calls submitted before any is awaited. At a limit CTranslate2 stops the
  hypothesis where mtkit would append a forced end of sentence (same text for greedy search; the
  score then lacks that EOS, which is scored apart where a score is read or ranks hypotheses, and
  beam search may rank the cut hypotheses differently).

ctranslate2 is an optional dependency (``pip install 'mtkit[ct2]'``): it is imported only when an
exported model is loaded or written, so everything else works without it. Loading changes no
process-wide setting: CTranslate2 runs its own worker threads (``intra_threads``), and sampling
with a fixed seed, which would need its process-wide random generator, is refused.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from mtkit.config.experiment import Config, DecodingConfig, apply_overrides, from_dict
from mtkit.data.bpe import Bpe
from mtkit.data.meta import DataMeta
from mtkit.decode.translation import Hypothesis, normalise
from mtkit.device import check_decode_precision
from mtkit.errors import CheckpointError, ConfigError, DataError, MtkitError
from mtkit.textio import warn
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    from mtkit.options import LoadOptions

MANIFEST = "mtkit_export.json"
VMAP = "vmap.txt"  # the vocabulary map (shortlist) `mtkit export --shortlist` writes (mtkit.decode.shortlist)
#: source subwords of one CPU sub-batch (see Ct2Model); divided by the beam size for int8 weights
SUB_BATCH_TOKENS = 1024
#: the batch budget of --max-tokens 0 (auto) on CPU: more than a chunk of lines holds (see Ct2Model)
CPU_BATCH_TOKENS = 10_000_000
FORMAT = "mtkit-ct2"
FORMAT_VERSION = 2  # 2: the manifest's config holds data.max_len (version 1 exports lacked it)


def require_ctranslate2() -> ModuleType:
    """The ctranslate2 module, or one line saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise MtkitError("the ct2 engine needs the optional package ctranslate2: "
                         "pip install 'mtkit[ct2]' (or pip install 'ctranslate2>=4.5,<5')") from None
    return ctranslate2


def is_exported(path: str | Path) -> bool:
    """True for a directory written by `mtkit export --format ct2` (checked without ctranslate2)."""
    path = Path(path)
    return path.is_dir() and (path / MANIFEST).is_file() and (path / "model.bin").is_file()


@dataclass
class ExportManifest:
    """What ``mtkit_export.json`` records beside the CTranslate2 files."""

    config: Config  # the exported model's config (its decoding section is the default search)
    meta: DataMeta  # vocabulary sizes, languages, sentencepiece file names (beside the manifest)
    max_positions: int | None  # longest sequence the exported position table covers (None: any)
    quantization: str
    checkpoint: str
    step: int | None


def read_manifest(directory: str | Path, overrides: Sequence[str] = ()) -> ExportManifest:
    """Read and check the manifest of an exported directory; ``overrides`` are ``decoding.key=value``
    strings applied over the stored decoding section (as for a model directory)."""
    path = Path(directory) / MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable export manifest ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an mtkit export manifest")
    if raw.get("version") not in (1, FORMAT_VERSION):
        raise CheckpointError(f"{path}: export format version {raw.get('version')} is not "
                              f"{FORMAT_VERSION}; export the model again with this mtkit")
    try:
        if raw["version"] == 1 or "max_len" not in dict(raw["config"]).get("data", {}):
            warn(f"{path}: written by an older mtkit without the model's input limit (data.max_len), so "
                 "long sentences are cut at decoding.max_input_tokens only, unlike the model directory; "
                 "export the model again")
        config = from_dict(apply_overrides(raw["config"], list(overrides)), stored=True)
        meta = DataMeta.from_dict(raw["meta"], str(path))
        positions = raw.get("max_positions")
        return ExportManifest(config, meta, int(positions) if positions is not None else None,
                              str(raw["quantization"]), str(raw["checkpoint"]), raw.get("step"))
    except (KeyError, TypeError, ValueError, DataError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise CheckpointError(f"{path}: corrupt export manifest ({exc})") from None


def resolve_device(name: str, ct2: ModuleType) -> tuple[str, int]:
    """CTranslate2's (device, index) for mtkit's --device: auto is CUDA when CTranslate2 sees a GPU."""
    gpus = ct2.get_cuda_device_count()
    if name == "auto":
        return ("cuda", 0) if gpus > 0 else ("cpu", 0)
    if name == "cpu":
        return "cpu", 0
    if name == "cuda" or name.startswith("cuda:"):
        index = name.partition(":")[2]
        if index and not index.isdigit():
            raise ConfigError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
        if gpus == 0:
            raise ConfigError(f"--device {name}: CTranslate2 sees no CUDA GPU on this machine "
                              "(use cpu or auto)")
        if int(index or 0) >= gpus:
            raise ConfigError(f"--device {name}: GPU {index} requested but CTranslate2 sees only {gpus}")
        return "cuda", int(index or 0)
    raise ConfigError(f"--device {name!r}: the ct2 engine runs on auto, cpu, cuda or cuda:N")


_COMPUTE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "auto": "default"}


def compute_type(precision: str, int8: bool) -> str:
    """CTranslate2's compute_type for --precision/--int8; auto keeps the type chosen at export."""
    check_decode_precision(precision, int8)
    if int8:
        return "int8_float32"
    return _COMPUTE[precision]


@dataclass
class _Job:
    """A search submitted to CTranslate2 (`Ct2Model._submit`) and what reading its results needs."""

    source: list[list[str]]
    options: dict[str, Any]
    penalty: float
    copies: int
    pending: list[Any]  # ctranslate2.AsyncTranslationResult, one a sentence


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
        kind = compute_type(load.precision, load.int8)
        device, index = resolve_device(load.device, ct2)
        # On CPU, `threads` one-thread translators side by side, each taking sub-batches of about
        # SUB_BATCH_TOKENS source subwords (int8: that many subwords × beam, its kernels prefer small
        # products): on 2 cores up to 4× faster than one translator with 2 threads, and smaller
        # (docs/results.md, "Engines"). On a GPU, one translator takes whole batches.
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
        self.src_pieces = _pieces(self.model_dir / self.meta.src_bpe)
        tgt_pieces = (self.src_pieces if self.meta.tgt_bpe == self.meta.src_bpe
                      else _pieces(self.model_dir / self.meta.tgt_bpe))
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
        ``scores`` False: the forced EOS of a hypothesis cut at the length limit is scored only where
        it ranks the hypotheses of one sentence (`_forced_eos`)."""
        if start is not None:
            raise MtkitError("the ct2 engine starts every translation from BOS; it cannot start from a "
                             "language tag")
        if not batch:
            return []
        limits = [max(1, math.floor(len(ids) * cfg.max_len_a + cfg.max_len_b)) for ids in batch]
        if self.max_positions is not None:  # the Translator keeps inputs inside; this is a backstop
            limits = [min(n, self.max_positions) for n in limits]
        k = 1 if sample else max(cfg.beam_size, nbest)
        groups: dict[int, list[int]] = {}
        for i, limit in enumerate(limits):
            groups.setdefault(limit, []).append(i)
        # One asynchronous call per length limit, all submitted before any result is awaited: each
        # sentence is searched once with its own limit (no second round for those that ran past it),
        # and CTranslate2's translators take sub-batches of one call after another without waiting
        # for each other at the end of a call. Longest first, so that the last sub-batches are short.
        jobs = [(idx, self._submit([batch[i] for i in idx], limit, cfg, k, nbest, need_attention, sample))
                for limit, idx in sorted(groups.items(), reverse=True)]
        results: list[list[Hypothesis]] = [[] for _ in batch]
        for idx, job in jobs:
            for i, hyps in zip(idx, self._collect(job, cfg, nbest, need_attention, scores), strict=True):
                results[i] = hyps
        return results

    def _submit(self, batch: list[list[int]], limit: int, cfg: DecodingConfig, k: int, nbest: int,
                need_attention: bool, sample: bool) -> _Job:
        """Start searching ``batch`` with the length limit ``limit``; `_collect` waits for it."""
        penalty = _length_penalty(batch, cfg) if k > 1 and not sample else 0.0
        options: dict[str, Any] = {
            "beam_size": k, "patience": 1.0, "max_decoding_length": limit, "max_input_length": 0,
            "min_decoding_length": min(cfg.min_len, limit), "no_repeat_ngram_size": cfg.no_repeat_ngram,
            "suppress_sequences": self._suppress, "return_scores": True, "return_end_token": True,
            "return_attention": need_attention, "length_penalty": penalty,
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
            per_beam = k if self.translator.compute_type.startswith("int8") else 1
            options.update(max_batch_size=max(1, self.sub_batch // per_beam), batch_type="tokens")
        source = [[self.src_pieces[i] for i in ids] for ids in batch]
        try:
            pending = self.translator.translate_batch(source, asynchronous=True, **options)
        except (RuntimeError, ValueError) as exc:
            raise MtkitError(f"the ct2 engine cannot search with these settings ({_first_line(exc)})"
                             ) from None
        return _Job(source, options, penalty, copies, pending)

    def _collect(self, job: _Job, cfg: DecodingConfig, nbest: int, need_attention: bool,
                 scores: bool = True) -> list[list[Hypothesis]]:
        """The hypotheses of a submitted search, best first; ``scores`` False skips the forced-EOS
        scores unless they rank one sentence's hypotheses."""
        try:
            results = [r.result() for r in job.pending]
        except (RuntimeError, ValueError) as exc:
            raise MtkitError(f"the ct2 engine cannot search with these settings ({_first_line(exc)})"
                             ) from None
        source, options, penalty = job.source, job.options, job.penalty
        ranked = options["num_hypotheses"] > 1  # the forced EOS then decides which hypothesis is best
        scored = (scores or ranked) and cfg.eos_at_limit == "scored"  # free: a forced EOS adds nothing
        eos = self._forced_eos(source, [r.hypotheses for r in results]) if scored else {}
        rows = self._attention_rows(source, [r.hypotheses for r in results], options) if need_attention \
            else {}
        out = []
        for n, result in enumerate(results):
            attention = [rows.get((n, j), a) for j, a in enumerate(result.attention)] if need_attention \
                else [None] * len(result.hypotheses)
            hyps = [self._hypothesis(tokens, score, eos.get((n, j), 0.0), att, penalty, cfg)
                    for j, (tokens, score, att) in enumerate(zip(result.hypotheses, result.scores, attention,
                                                                 strict=True))]
            hyps.sort(key=lambda h: -h.score)
            out.append((hyps * job.copies)[:nbest])
        return out

    def _forced_eos(self, source: list[list[str]], found: list[list[list[str]]]
                    ) -> dict[tuple[int, int], float]:
        """log p(EOS | tokens) of each hypothesis cut at its length limit, keyed (sentence, rank):
        mtkit ends such a hypothesis with a forced EOS, and so its score includes that token."""
        cut = [(n, j) for n, hyps in enumerate(found) for j, h in enumerate(hyps) if h and h[-1] != self._eos]
        if not cut:
            return {}
        scored = self.translator.score_batch([source[n] for n, _ in cut], [found[n][j] for n, j in cut],
                                             max_input_length=0)
        return {key: r.log_probs[-1] for key, r in zip(cut, scored, strict=True)}

    def _attention_rows(self, source: list[list[str]], found: list[list[list[str]]], options: dict[str, Any]
                        ) -> dict[tuple[int, int], list[list[float]]]:
        """Attention of each beam-search hypothesis, keyed (sentence, rank), from a second, greedy pass
        that forces the hypothesis as a target prefix. CTranslate2 4.x returns beam-search attention
        whose earlier rows belong to other beams (up to 0.3 off the model's attention on the found
        hypothesis; greedy search's is right, to 1e-6), so alignments and heatmaps would be wrong. The
        pass reads one step past the prefix: the row of the step that ends the hypothesis (its EOS,
        forced or not), which mtkit's attention always has."""
        if options["beam_size"] == 1:
            return {}
        keys = [(n, j) for n, hyps in enumerate(found) for j in range(len(hyps))]
        prefixes = [[p for p in found[n][j] if p != self._eos] for n, j in keys]
        forced = ({"max_batch_size": options["max_batch_size"], "batch_type": "tokens"} if self.sub_batch
                  else {})
        try:
            again = self.translator.translate_batch(
                [source[n] for n, _ in keys], target_prefix=prefixes, beam_size=1, max_input_length=0,
                max_decoding_length=max(len(p) for p in prefixes) + 1, return_attention=True,
                return_end_token=True, suppress_sequences=self._suppress, **forced)
        except (RuntimeError, ValueError) as exc:
            raise MtkitError(f"the ct2 engine cannot compute attention here ({_first_line(exc)})") from None
        return {key: r.attention[0][: len(p) + 1] for key, p, r in zip(keys, prefixes, again, strict=True)}

    def _hypothesis(self, pieces: list[str], score: float, forced_eos: float,
                    attention: list[list[float]] | None, penalty: float, cfg: DecodingConfig) -> Hypothesis:
        """One CTranslate2 hypothesis (pieces ending in EOS unless cut at the limit) as mtkit's."""
        ended = bool(pieces) and pieces[-1] == self._eos
        ids = [self.tgt_ids[p] for p in (pieces[:-1] if ended else pieces)]
        log_prob = score * len(pieces) ** penalty + forced_eos  # CTranslate2 divided by length^penalty
        att = None
        if attention is not None:
            import torch  # attention matrices are tensors, for both engines

            att = torch.tensor(attention, dtype=torch.float32).reshape(len(attention), -1)
            if len(att) < len(ids) + 1:  # mtkit's rows end with the EOS step; a greedy cut one had none
                att = torch.cat([att, att.new_zeros(len(ids) + 1 - len(att), att.size(1))])
            att = att.unsqueeze(0)  # [1 (the mean of the heads), len(ids) + 1, S]
        return Hypothesis(ids, float(normalise(log_prob, len(ids) + 1, cfg)), log_prob, att)


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


def _pieces(path: Path) -> list[str]:
    bpe = Bpe(path)
    return bpe.id_to_piece(list(range(len(bpe))))


__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "Ct2Model", "ExportManifest", "compute_type",
           "is_exported", "read_manifest", "require_ctranslate2", "resolve_device"]
