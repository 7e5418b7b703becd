"""Cleaning noisy parallel corpora: read (`mtkit.data.readers`), drop duplicates, run the pair rules
(`mtkit.data.filters`) on every core, write the kept pairs and a report of what was dropped and why.

The road of one pair, cheapest first:

1. read from its corpus (a Moses pair, a TSV or a TMX file), with the file and line it came from;
2. with ``--shard K/N``, kept only by the shard its normalised source hashes to, so that every copy of
   a sentence meets the others in one shard and the shards' outputs together are the whole run's;
3. an empty side: dropped ("empty"); a copy of a pair already kept (its normalised source and target),
   or of a kept pair's source (``clean.dedup_source``): dropped ("duplicate") without more work;
4. the rules of its corpus (`PairRules`), in worker processes, a chunk of pairs at a time, at most a
   few chunks in flight so that reading never runs ahead of the workers;
5. passed the rules: dropped if a kept pair has it (a copy that was in flight with its original), else
   kept and remembered. Only kept pairs are remembered, so a pair one corpus's rules drop is still kept
   from a corpus whose rules keep it. The hashes are kept as sorted numpy runs of 8-byte hashes (16
   bytes a pair with both keys), so memory grows by bytes, not by Python objects, with the corpus;
6. kept: written, ``weight`` times (a fraction of a time: the pairs whose hash falls below it).

Every decision is a function of the pair, its corpus and the pairs before it in the input: the same
input gives the same output with any number of workers.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import multiprocessing
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
from rich.console import Console

from mtkit.config.clean_section import CleanConfig
from mtkit.config.experiment import Config, source_clean
from mtkit.cpus import allowed_cpus
from mtkit.data.filters import REASONS, PairRules, normalized
from mtkit.data.readers import CorpusSpec, Pair, corpus_format, read_corpus
from mtkit.data.split_stats import progress_display
from mtkit.errors import ConfigError
from mtkit.textio import output_file

CLEAN_REPORT = "clean.report.json"  # the report `mtkit prepare` keeps in the data directory
CHUNK_PAIRS = 2_000  # pairs a worker judges per task: large enough to amortise the round trip
IN_FLIGHT = 4  # chunks per worker submitted ahead of the writer: bounded memory, busy workers
#: an input of fewer chunks is judged in this process: starting workers (a process each, the language
#: model loaded in each: about 2 s) costs more than judging a few thousand pairs
SMALL_RUN_CHUNKS = 3


@dataclass(frozen=True)
class Corpus:
    """One corpus to clean: where it is, how it is filtered, and how often its kept pairs are written."""

    spec: CorpusSpec
    clean: CleanConfig
    weight: float = 1.0

    @property
    def name(self) -> str:
        return " + ".join(self.spec.paths)


@dataclass
class CleanReport:
    """What a cleaning run read, kept and dropped: written as PREFIX.report.json."""

    corpora: list[dict[str, Any]] = field(default_factory=list)
    read: int = 0
    in_shard: int = 0
    kept: int = 0
    written: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: {r: 0 for r in REASONS})
    examples: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    shard: str = ""
    workers: int = 1
    seconds: float = 0.0
    scoring: dict[str, Any] = field(default_factory=dict)  # dual conditional cross-entropy, if run

    def as_json(self) -> dict[str, Any]:
        rate = self.read / self.seconds if self.seconds > 0 else 0.0
        return {"read": self.read, "in_shard": self.in_shard, "kept": self.kept, "written": self.written,
                "dropped": {r: n for r, n in self.dropped.items() if n}, "corpora": self.corpora,
                "shard": self.shard, "workers": self.workers, "seconds": round(self.seconds, 2),
                "pairs_per_s": round(rate, 1), **({"scoring": self.scoring} if self.scoring else {}),
                "examples": self.examples}

    def summary(self) -> str:
        dropped = ", ".join(f"{r} {n:,}" for r, n in self.dropped.items() if n) or "none"
        share = 100.0 * (self.in_shard - self.kept) / self.in_shard if self.in_shard else 0.0
        shard = f" ({self.in_shard:,} in shard {self.shard})" if self.shard else ""
        return f"read {self.read:,} pairs{shard}, kept {self.kept:,}, dropped {share:.1f}% ({dropped})"


# ------------------------------------------------------------------------------------- hashing, dedup
def hash64(text: str) -> int:
    """A 64-bit hash of a text, the same in every process and on every machine (unlike hash())."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "little")


class SeenHashes:
    """A set of 64-bit hashes kept as sorted numpy runs, merged as a binary counter merges carries (a
    run is merged with the previous one when it grows as large): lookups cost one binary search a run,
    of which there are O(log n), and memory is 8 bytes a hash."""

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(r) for r in self.runs)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """For each hash of ``hashes``, whether the set holds it (nothing is added)."""
        found = np.zeros(len(hashes), dtype=bool)
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, hashes), len(run) - 1)
            found |= run[at] == hashes
        return found

    def fresh(self, hashes: np.ndarray) -> np.ndarray:
        """For each hash of ``hashes`` (in order), whether it is new: not in the set and not earlier in
        ``hashes`` (nothing is added)."""
        new = np.zeros(len(hashes), dtype=bool)
        if len(hashes):
            new[np.unique(hashes, return_index=True)[1]] = True
            new &= ~self.contains(hashes)
        return new

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        """`fresh`, and the new ones added."""
        new = self.fresh(hashes)
        self.add(hashes[new])
        return new

    def add(self, hashes: np.ndarray) -> None:
        """``hashes`` (none of them in the set yet, none twice) added."""
        if not len(hashes):
            return
        self.runs.append(np.sort(hashes))
        while len(self.runs) > 1 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            top = self.runs.pop()
            self.runs[-1] = np.sort(np.concatenate([self.runs[-1], top]), kind="mergesort")


# ------------------------------------------------------------------------------------------- workers
_RULES: list[PairRules] = []


def _start_worker(corpora: list[Corpus]) -> None:
    """A worker's rules, one set per corpus, built once (the language identifier loads here)."""
    _RULES[:] = [PairRules(c.clean, c.spec.src_lang, c.spec.tgt_lang) for c in corpora]


def _judge(task: tuple[int, list[tuple[str, str]]]) -> list[str | None]:
    index, pairs = task
    rules = _RULES[index]
    return [rules.reject_reason(src, tgt) for src, tgt in pairs]


def worker_count(workers: int = 0) -> int:
    """``workers`` (clean.workers), or one per core this process may use when 0."""
    return workers or allowed_cpus()


# ------------------------------------------------------------------------------------------- the run
@dataclass
class _Pending:
    corpus: int
    pairs: list[Pair]
    reasons: list[str | None]  # the main process's verdicts; None: ask the rules
    hashes: list[int]  # of the normalised pair
    source_hashes: list[int]


class Cleaner:
    """Clean ``corpora`` into one stream of kept pairs (`run`), counting everything in ``report``."""

    def __init__(self, corpora: list[Corpus], workers: int = 1, shard: tuple[int, int] | None = None,
                 decisions: IO[str] | None = None, progress: Callable[[int], None] | None = None) -> None:
        if not corpora:
            raise ConfigError("nothing to clean: give at least one corpus")
        self.corpora = corpora
        self.shard = shard
        self.decisions = decisions
        self.progress = progress or (lambda n: None)
        # the hashes of the kept pairs and of their sources, each kept only where a corpus checks it
        self.seen = [(SeenHashes(), "duplicate", any(c.clean.dedup for c in corpora)),
                     (SeenHashes(), "duplicate_source", any(c.clean.dedup_source for c in corpora))]
        self.report = CleanReport(shard=f"{shard[0]}/{shard[1]}" if shard else "", workers=workers)
        self.examples = max(c.clean.examples for c in corpora)

    def run(self, write: Callable[[str, str], None]) -> CleanReport:
        """Read, judge and ``write(src, tgt)`` every kept pair (``weight`` times), in input order."""
        started = time.perf_counter()
        chunks = self._chunks()
        head = list(itertools.islice(chunks, SMALL_RUN_CHUNKS))  # a small input starts no processes
        if len(head) < SMALL_RUN_CHUNKS:
            self.report.workers = 1
        workers = self.report.workers
        if workers <= 1:
            _start_worker(self.corpora)
            for chunk in itertools.chain(head, chunks):
                self._finish(chunk, _judge((chunk.corpus, self._asked(chunk))), write)
        else:
            context = multiprocessing.get_context("spawn")  # no inherited threads or locks
            with context.Pool(workers, initializer=_start_worker, initargs=(self.corpora,)) as pool:
                pending: collections.deque[tuple[_Pending, Any]] = collections.deque()
                for chunk in itertools.chain(head, chunks):
                    pending.append((chunk, pool.apply_async(_judge, ((chunk.corpus, self._asked(chunk)),))))
                    while len(pending) > IN_FLIGHT * workers:
                        done, result = pending.popleft()
                        self._finish(done, result.get(), write)
                while pending:
                    done, result = pending.popleft()
                    self._finish(done, result.get(), write)
        self.report.seconds = time.perf_counter() - started
        return self.report

    @staticmethod
    def _asked(chunk: _Pending) -> list[tuple[str, str]]:
        return [(p.src, p.tgt) for p, r in zip(chunk.pairs, chunk.reasons, strict=True) if r is None]

    def _chunks(self) -> Iterator[_Pending]:
        """Each corpus's pairs in chunks, with the verdicts the main process gives (shard, empty,
        duplicates) already made."""
        for index, corpus in enumerate(self.corpora):
            skipped: collections.Counter[str] = collections.Counter()
            record = {"corpus": corpus.name, "format": corpus_format(corpus.spec.paths), "read": 0,
                      "kept": 0, "written": 0}
            self.report.corpora.append(record)
            batch: list[Pair] = []
            for pair in read_corpus(corpus.spec, skipped):
                batch.append(pair)
                if len(batch) == CHUNK_PAIRS:
                    yield self._first_verdicts(index, batch)
                    batch = []
            if batch:
                yield self._first_verdicts(index, batch)
            if skipped:
                record["skipped"] = dict(skipped)

    def _first_verdicts(self, index: int, pairs: list[Pair]) -> _Pending:
        keys = [normalized(p.src) for p in pairs]
        source_hashes = [hash64(k) for k in keys]
        pair_hashes = [hash64(k + "\t" + normalized(p.tgt)) for k, p in zip(keys, pairs, strict=True)]
        reasons: list[str | None] = [None] * len(pairs)
        if self.shard is not None:
            k, n = self.shard
            reasons = [None if h % n == k else "shard" for h in source_hashes]
        for i, p in enumerate(pairs):
            if reasons[i] is None and (not p.src.strip() or not p.tgt.strip()):
                reasons[i] = "empty"
        # a copy of a pair (or source) already kept needs no rules: "duplicate" now; copies of pairs
        # still in flight are judged and deduplicated in order when their verdicts come (_finish)
        pending = _Pending(index, pairs, reasons, pair_hashes, source_hashes)
        for (seen, reason, _), hashes, on in self._checks(pending):
            if on:
                _mark(reasons, hashes, reason, lambda h, seen=seen: ~seen.contains(h))
        return pending

    def _checks(self, chunk: _Pending) -> list[tuple[tuple[SeenHashes, str, bool], list[int], bool]]:
        """For each kind of duplicate: its hashes seen, its reason, whether any corpus checks it; the
        chunk's hashes of that kind; whether the chunk's corpus checks it."""
        clean = self.corpora[chunk.corpus].clean
        return list(zip(self.seen, (chunk.hashes, chunk.source_hashes), (clean.dedup, clean.dedup_source),
                        strict=True))

    def _deduplicate(self, chunk: _Pending, reasons: list[str | None]) -> None:
        """Of the pairs the rules kept, in input order, drop those whose pair (or, with
        clean.dedup_source, source) a kept pair already has, then remember the ones kept. Only kept
        pairs count: a pair dropped by its corpus's rules (or as a duplicate of its source) does not
        take its copy in another corpus, whose rules may keep it."""
        checks = self._checks(chunk)
        for (seen, reason, _), hashes, on in checks:
            if on:
                _mark(reasons, hashes, reason, seen.fresh)
        kept = [i for i, r in enumerate(reasons) if r is None]
        for (seen, _, tracked), hashes, _ in checks:
            if tracked and kept:  # their first copies: a kept pair with its source twice in the chunk
                seen.first_seen(np.array([hashes[i] for i in kept], dtype=np.uint64))

    def _finish(self, chunk: _Pending, judged: list[str | None], write: Callable[[str, str], None]) -> None:
        corpus = self.corpora[chunk.corpus]
        record = self.report.corpora[chunk.corpus]
        verdicts = iter(judged)
        reasons = [r if r is not None else next(verdicts) for r in chunk.reasons]
        self._deduplicate(chunk, reasons)
        whole, part = divmod(corpus.weight, 1.0)
        for pair, reason, h in zip(chunk.pairs, reasons, chunk.hashes, strict=True):
            self.report.read += 1
            record["read"] += 1
            if self.decisions is not None:
                self.decisions.write(f"{reason or 'keep'}\n")
            if reason == "shard":
                continue
            self.report.in_shard += 1
            if reason is not None:
                self.report.dropped[reason] += 1
                shown = self.report.examples.setdefault(reason, []) if self.examples else []
                if len(shown) < self.examples:
                    shown.append({"where": f"{corpus.spec.paths[0]}:{pair.line}", "src": pair.src,
                                  "tgt": pair.tgt})
                continue
            self.report.kept += 1
            record["kept"] += 1
            times = int(whole) + (part > 0 and (h >> 11) / 2.0**53 < part)  # the same pairs in any shard
            for _ in range(times):
                write(pair.src, pair.tgt)
            self.report.written += times
            record["written"] += times
        self.progress(len(chunk.pairs))


def _mark(reasons: list[str | None], hashes: list[int], reason: str,
          is_new: Callable[[np.ndarray], np.ndarray]) -> None:
    """``reason`` for each pair not yet judged whose hash ``is_new`` says is not new."""
    live = [i for i, r in enumerate(reasons) if r is None]
    if live:
        new = is_new(np.array([hashes[i] for i in live], dtype=np.uint64))
        for i, fresh in zip(live, new.tolist(), strict=True):
            if not fresh:
                reasons[i] = reason


def clean_into(cleaner: Cleaner, src_path: Path, tgt_path: Path) -> CleanReport:
    """Run ``cleaner`` and write the kept pairs as a Moses pair, each file through a temporary file
    renamed into place only when the whole run succeeded (`mtkit.textio.output_file`)."""
    with output_file(src_path) as fs, output_file(tgt_path) as ft:
        def write(src: str, tgt: str) -> None:
            fs.write(src + "\n")
            ft.write(tgt + "\n")
        return cleaner.run(write)


def training_corpora(cfg: Config) -> list[Corpus]:
    """The training corpora `mtkit prepare` reads through the cleaner: data.sources (each with its own
    clean settings), or the one pair of train files when clean.enabled; [] when neither (prepare reads
    the train files as they are). A corpus whose settings do not enable cleaning is only read."""
    data = cfg.data
    default = CleanConfig()
    for key in ("score_min", "score_keep"):
        if getattr(cfg.clean, key) != getattr(default, key):
            raise ConfigError(f"clean.{key} chooses among pairs scored by `mtkit clean --score-models`; "
                              "`mtkit prepare` scores none: remove it, or clean with `mtkit clean` first")
    if not data.sources:
        if not cfg.clean.enabled:
            return []
        spec = CorpusSpec((data.train_src, data.train_tgt), data.src_lang, data.tgt_lang)
        return [Corpus(spec, cfg.clean)]
    corpora = []
    for n, source in enumerate(data.sources):
        paths = (source.path,) if source.path else (source.src, source.tgt)
        if not all(paths) or (source.path and (source.src or source.tgt)):
            raise ConfigError(f"data.sources[{n}]: give path (a TSV or TMX file) or src and tgt (a Moses "
                              "pair), not both")
        if source.weight <= 0:
            raise ConfigError(f"data.sources[{n}].weight must be above 0, not {source.weight}")
        settings = source_clean(cfg, source, f"data.sources[{n}]")
        spec = CorpusSpec(paths, data.src_lang, data.tgt_lang, source.src_column, source.tgt_column,
                          quoting=source.quoting)
        corpus_format(spec.paths)
        corpora.append(Corpus(spec, settings if settings.enabled else reading_only(settings), source.weight))
    return corpora


def reading_only(clean: CleanConfig) -> CleanConfig:
    """Settings that drop nothing but empty pairs: a corpus read, not cleaned."""
    return dataclasses.replace(clean, dedup=False, dedup_source=False, length_ratio=0.0, copies=False,
                               charset=False, script=False, langid=False, markup=False, placeholders=False,
                               urls=False, numbers=False, truncation=False)


def run_cleaner(corpora: list[Corpus], workers: int, src: Path, tgt: Path, console: Console,
                shard: tuple[int, int] | None = None, decisions: IO[str] | None = None) -> CleanReport:
    """Clean ``corpora`` into ``src`` / ``tgt`` with a progress line: what `mtkit clean` and `mtkit
    prepare` both run."""
    with progress_display(console) as progress:
        task = progress.add_task("clean", total=None)
        cleaner = Cleaner(corpora, worker_count(workers), shard, decisions,
                          lambda n: progress.advance(task, n))
        return clean_into(cleaner, src, tgt)


def write_report(report: CleanReport, path: Path) -> None:
    """PREFIX.report.json, atomically."""
    with output_file(path) as f:
        f.write(json.dumps(report.as_json(), ensure_ascii=False, indent=1) + "\n")


__all__ = ["CHUNK_PAIRS", "CLEAN_REPORT", "CleanReport", "Cleaner", "Corpus", "SeenHashes", "clean_into",
           "hash64", "reading_only", "run_cleaner", "training_corpora", "worker_count", "write_report"]
