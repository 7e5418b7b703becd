"""`mtkit score`: corpus BLEU, chrF and TER through sacrebleu, plus WER; paired bootstrap across systems.

BLEU/chrF/TER go through sacrebleu's public Python API only: the metric classes with their default
settings and references given to the constructor, ``corpus_score``, ``get_signature``, and
``sacrebleu.significance.PairedTest`` for the bootstrap. So the numbers and p-values are those of the
``sacrebleu`` command line, with its reproducibility signatures, and a newer sacrebleu does not break
this module (it used to reach into private attributes, which pinned sacrebleu to one minor version).

WER is computed here (word edit distance summed over the corpus / reference words summed). It is not a
sacrebleu ``Metric`` subclass, because sacrebleu's hooks for subclasses are underscore methods that may
change in any release. Its paired bootstrap repeats sacrebleu's paired test step by step (same seed,
same resamples, same confidence interval and p-value; `paired_bootstrap`, checked against sacrebleu's
own test in tests/test_score.py), so WER sits in the same table on the same terms.

Speed: sacrebleu's TER is pure Python and slow on long segments. Without a bootstrap, each (system,
metric) corpus score runs in a forked worker process when there is enough work. With the bootstrap,
sacrebleu's test computes each system's statistics once, the other systems in parallel, and its scores
are the corpus scores (only BLEU, cheap, is scored again for its precisions and lengths).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest, Result, estimate_ci

from mtkit import __version__
from mtkit.cpus import allowed_cpus
from mtkit.errors import DataError, MtkitError
from mtkit.textio import read_lines

METRICS = ("bleu", "chrf", "ter", "wer")
LOWER_IS_BETTER = {"ter", "wer"}
#: metrics whose score carries details besides the number (BLEU's precisions and lengths, WER's totals)
DETAILED = {"bleu", "wer"}


# ---------------------------------------------------------------------------------------------- WER
def edit_distance(ref: Sequence[Any], hyp: Sequence[Any]) -> int:
    """Levenshtein distance between two token sequences (unit costs), bit-parallel.

    Myers/Hyyrö's algorithm: one column of the DP matrix is held as +1/-1 bit vectors in two Python
    integers (any length fits in one), so each hypothesis token costs a few big-int operations instead
    of a loop over the reference: O(len(hyp)) integer ops rather than O(len(ref)·len(hyp)) steps."""
    m = len(ref)
    if m == 0:
        return len(hyp)
    if not hyp:
        return m
    match: dict[Any, int] = {}
    for i, token in enumerate(ref):
        match[token] = match.get(token, 0) | (1 << i)
    full = (1 << m) - 1
    top = 1 << (m - 1)
    pv, mv, dist = full, 0, m  # vertical deltas of column 0 are all +1 (D[i][0] = i)
    for token in hyp:
        eq = match.get(token, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & full)
        mh = pv & xh
        if ph & top:
            dist += 1
        elif mh & top:
            dist -= 1
        ph = ((ph << 1) | 1) & full  # row 0 grows by one per hypothesis token: shift in +1
        mh = (mh << 1) & full
        pv = mh | (~(xv | ph) & full)
        mv = ph & xv
    return dist


def wer_of(edits: float, ref_words: float) -> float:
    """WER in percent from corpus totals; with empty references, as sacrebleu's TER: 100 if anything
    was produced, else 0."""
    if ref_words > 0:
        return 100.0 * float(edits) / float(ref_words)
    return 100.0 if edits > 0 else 0.0


@dataclass(frozen=True)
class WERScore:
    score: float
    edits: int
    ref_words: int
    name: str = "WER"

    @property
    def details(self) -> str:
        return f"(edits = {self.edits}, reference words = {self.ref_words})"


class WER:
    """Word error rate in percent: word-level edits summed over the corpus / reference words summed.

    Words are whitespace-separated tokens, case-sensitive, punctuation untouched. With several
    references only the first is used (WER has no standard multi-reference form). Called like a
    sacrebleu metric (references as a list of reference streams, given here or to ``corpus_score``)."""

    def __init__(self, references: Sequence[Sequence[str]] | None = None):
        self.nrefs = len(references) if references else 0
        self.ref_words = [line.split() for line in references[0]] if references else None

    def statistics(self, hypotheses: Sequence[str],
                   references: Sequence[Sequence[str]] | None = None) -> list[tuple[int, int]]:
        """(edits, reference words) of each segment."""
        refs = [line.split() for line in references[0]] if references else self.ref_words
        if refs is None:
            raise ValueError("WER: no references given")
        return [(edit_distance(ref, hyp.split()), len(ref))
                for hyp, ref in zip(hypotheses, refs, strict=True)]

    def corpus_score(self, hypotheses: Sequence[str],
                     references: Sequence[Sequence[str]] | None = None) -> WERScore:
        stats = self.statistics(hypotheses, references)
        edits, ref_words = sum(e for e, _ in stats), sum(r for _, r in stats)
        return WERScore(wer_of(edits, ref_words), edits, ref_words)

    def signature(self, samples: int = 0) -> str:
        """sacrebleu-style: what the number depends on; the bootstrap's samples and seed when it ran."""
        test = f"bs:{samples}|seed:{str(sacrebleu_seed()).lower()}|" if samples else ""
        return f"nrefs:{self.nrefs}|{test}case:mixed|tok:whitespace|ref:first|version:mtkit-{__version__}"


# -------------------------------------------------------------------------------- paired bootstrap
def sacrebleu_seed() -> int | None:
    """The resampling seed as sacrebleu reads it: SACREBLEU_SEED, 12345 by default, "none" for none."""
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    return None if seed.lower() == "none" else int(seed)


def paired_bootstrap(stats: Sequence[Sequence[Sequence[float]]], score: Callable[[Any], float],
                     samples: int) -> list[Result]:
    """sacrebleu's paired bootstrap resampling test (Koehn 2004; ``PairedTest(test_type="bs")``) over
    segment statistics computed by the caller: ``stats[k]`` holds system k's statistics, one row per
    segment, system 0 being the baseline; ``score`` turns a row of summed statistics into the metric.

    Step by step as sacrebleu 2.x does it, so that its results are sacrebleu's for any metric: the
    corpus score from the exact sums; resample rows summed in float32; the baseline's 95% interval from
    a generator seeded with `sacrebleu_seed`, each comparison's from one seeded again (with ``seed or
    None``, as sacrebleu); p = (resamples whose centred |difference| exceeds the real one + 1) /
    (samples + 1)."""
    seed = sacrebleu_seed()
    n = len(stats[0])
    arrays = [np.array(s, dtype="float32") for s in stats]
    actual = [score(np.array(s).sum(0)) for s in stats]

    def resampled(k: int, idxs: np.ndarray) -> np.ndarray:
        return np.array([score(rows.sum(0)) for rows in arrays[k][idxs]])

    def draw(rng_seed: int | None) -> np.ndarray:
        return np.random.default_rng(rng_seed).choice(n, size=(samples, n), replace=True)

    results = [Result(actual[0], None, *estimate_ci(resampled(0, draw(seed))))]
    for k in range(1, len(stats)):
        idxs = draw(seed if seed else None)
        base, system = resampled(0, idxs), resampled(k, idxs)
        diffs = np.abs(system - base)
        centred = diffs - diffs.mean()
        p = (np.sum(centred > abs(actual[0] - actual[k])).item() + 1) / (samples + 1)
        results.append(Result(actual[k], p, *estimate_ci(system)))
    return results


# ------------------------------------------------------------------------------------------ scoring
@dataclass
class SystemResult:
    name: str
    scores: dict[str, float]
    details: dict[str, str] = field(default_factory=dict)  # sacrebleu's verbose part (BLEU precisions...)
    p_values: dict[str, float] = field(default_factory=dict)  # vs the first system, bootstrap only
    ci: dict[str, float] = field(default_factory=dict)  # 95% half-width from the bootstrap


@dataclass
class ScoreReport:
    systems: list[SystemResult]
    signatures: dict[str, str]
    references: list[str]
    sentences: int
    labels: dict[str, str]  # metric key → sacrebleu's display name (BLEU, chrF2, TER, WER)
    bootstrap_samples: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "references": self.references,
            "sentences": self.sentences,
            "signatures": self.signatures,
            "labels": self.labels,
            "bootstrap_samples": self.bootstrap_samples,
            "systems": [
                {"name": s.name, "scores": s.scores, "details": s.details,
                 **({"p_values": s.p_values, "ci95": s.ci} if self.bootstrap_samples else {})}
                for s in self.systems
            ],
        }


def parse_metrics(text: str) -> list[str]:
    names = [m.strip().lower() for m in text.split(",") if m.strip()]
    if not names:
        raise MtkitError("--metrics: give at least one of " + ", ".join(METRICS))
    for name in names:
        if name not in METRICS:
            raise MtkitError(f"--metrics: unknown metric {name!r} (choose from {', '.join(METRICS)})")
    return list(dict.fromkeys(names))


def read_corpus(path: str) -> list[str]:
    """All lines of a file (hypotheses must be held to score them), right-stripped as sacrebleu's CLI
    does, so both give identical numbers."""
    return [line.rstrip() for line in read_lines(path, strict=True)]


def _display(path: str) -> str:
    return "<stdin>" if path == "-" else path


def build_metric(name: str, refs: list[list[str]], tokenize: str | None) -> BLEU | CHRF | TER | WER:
    """One metric with sacrebleu's defaults, its references given once (as the sacrebleu CLI does)."""
    if name == "bleu":
        return BLEU(tokenize=tokenize, references=refs)
    if name == "chrf":
        return CHRF(references=refs)
    if name == "ter":
        return TER(references=refs)
    return WER(references=refs)


def score_files(hyps: list[str], refs: list[str], metrics: list[str], *, tokenize: str | None = None,
                bootstrap: int = 1000) -> ScoreReport:
    """Score each hypothesis file against the reference file(s); with several systems and
    bootstrap > 0, run sacrebleu's paired bootstrap test of each system against the first."""
    if not hyps or not refs:
        raise MtkitError("score: give at least one --hyp and one --ref")
    if sum(p == "-" for p in hyps + refs) > 1:
        raise MtkitError("score: stdin ('-') can be read only once")
    ref_lines = [read_corpus(r) for r in refs]
    systems = [(_display(h), read_corpus(h)) for h in hyps]
    n = len(ref_lines[0])
    for r, lines in zip(refs[1:], ref_lines[1:], strict=True):
        if len(lines) != n:
            raise DataError(f"reference {_display(refs[0])} has {n} lines but reference {_display(r)} "
                            f"has {len(lines)}")
    for name, lines in systems:
        if len(lines) != n:
            raise DataError(f"hypothesis {name} has {len(lines)} lines but reference "
                            f"{_display(refs[0])} has {n}")
    if n == 0:
        raise DataError(f"nothing to score: {_display(refs[0])} is empty")

    if tokenize is not None:
        if "bleu" not in metrics:
            raise MtkitError("--tokenize applies to BLEU only; add bleu to --metrics")
        if tokenize not in BLEU.TOKENIZERS:
            raise MtkitError(f"--tokenize: unknown tokenizer {tokenize!r} (sacrebleu has "
                             f"{', '.join(BLEU.TOKENIZERS)})")
    try:
        objects = {m: build_metric(m, ref_lines, tokenize) for m in metrics}
    except (ImportError, ValueError, RuntimeError) as exc:  # e.g. ja-mecab without its optional package
        raise MtkitError(f"score: {exc}") from None

    report = ScoreReport([SystemResult(name, {}) for name, _ in systems], {}, [_display(r) for r in refs],
                         n, {})
    samples = max(bootstrap, 0) if len(systems) > 1 else 0
    # with the bootstrap, its scores are the corpus scores: only scores with details are computed again
    plain = {m: metric for m, metric in objects.items() if not samples or m in DETAILED}
    for (m, i), (value, label, details) in _corpus_scores(plain, [lines for _, lines in systems]).items():
        report.systems[i].scores[m] = value
        report.labels[m] = label
        if details:
            report.systems[i].details[m] = details
    for m, metric in objects.items():
        report.signatures[m] = (metric.signature() if isinstance(metric, WER)
                                else metric.get_signature().format())
    if samples > 0:
        _add_paired_bootstrap(report, systems, objects, samples)
    report.labels = {m: report.labels[m] for m in metrics}
    for res in report.systems:  # in the order asked for
        res.scores = {m: res.scores[m] for m in metrics}
    return report


# the state a forked worker reads: metric objects and systems
_JOB_STATE: dict[str, Any] = {}


def _workers(tasks: int, segments: int) -> int:
    """Processes for ``tasks`` jobs that score ``segments`` segments in all: one, unless there is enough
    work to pay for forking (and the platform forks)."""
    if segments < 1000 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(allowed_cpus(), tasks)


def _corpus_score(metric: BLEU | CHRF | TER | WER, hyps: list[str]) -> tuple[float, str, str]:
    """(score, display name, details) of one system: plain values, cheap to send back from a worker.
    sacrebleu's details (BLEU's precisions and lengths) come from its documented JSON format."""
    sc = metric.corpus_score(hyps, None)
    if isinstance(sc, WERScore):
        return sc.score, sc.name, sc.details
    as_json = json.loads(sc.format(signature=metric.get_signature().format(), is_json=True))
    return float(sc.score), sc.name, as_json.get("verbose_score", "")


def _corpus_job(job: tuple[str, int]) -> tuple[float, str, str]:
    name, system = job
    return _corpus_score(_JOB_STATE["metrics"][name], _JOB_STATE["systems"][system])


def _corpus_scores(objects: dict[str, Any],
                   systems: list[list[str]]) -> dict[tuple[str, int], tuple[float, str, str]]:
    """Every (metric, system) corpus score, each a job of its own, in parallel where there is enough work."""
    jobs = [(name, i) for name in objects for i in range(len(systems))]
    workers = _workers(len(jobs), len(systems[0]) * len(jobs))
    if workers > 1:
        _JOB_STATE.update(metrics=objects, systems=systems)
        try:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                outcomes = pool.map(_corpus_job, jobs, chunksize=1)
        finally:
            _JOB_STATE.clear()
    else:
        outcomes = [_corpus_score(objects[name], systems[i]) for name, i in jobs]
    return dict(zip(jobs, outcomes, strict=True))


def _add_paired_bootstrap(report: ScoreReport, systems: list[tuple[str, list[str]]], objects: dict[str, Any],
                          samples: int) -> None:
    """Paired bootstrap resampling (Koehn 2004), sacrebleu's for its metrics and the same algorithm for
    WER: p-value of each system against the first, and each system's 95% confidence half-width."""
    hyps = [lines for _, lines in systems]
    jobs = _workers(len(systems) - 1, len(hyps[0]) * (len(systems) - 1))
    for m, metric in objects.items():
        if isinstance(metric, WER):
            label, signature = "WER", metric.signature(samples)
            stats = [metric.statistics(lines) for lines in hyps]
            results = paired_bootstrap(stats, lambda row: wer_of(row[0], row[1]), samples)
        else:  # one metric a test: its results are keyed by the metric's display name (chrF2, ...)
            test = PairedTest(systems, {m: metric}, references=None, test_type="bs", n_samples=samples,
                              n_jobs=jobs)
            signatures, table = test()
            ((label, sig),) = signatures.items()
            signature, results = sig.format(), table[label]
        report.labels[m], report.signatures[m] = label, signature
        for res, r, lines in zip(report.systems, results, hyps, strict=True):
            res.scores.setdefault(m, float(r.score))
            if r.ci is not None:
                res.ci[m] = float(r.ci)
            if r.p_value is not None:
                # sacrebleu gives identical outputs its smallest p-value (no resample beats a zero
                # difference); the honest answer to "is this difference due to chance" is: there is none
                res.p_values[m] = 1.0 if lines == hyps[0] else float(r.p_value)
    report.bootstrap_samples = samples


# ------------------------------------------------------------------------------------------ output
def render(report: ScoreReport, json_out: bool = False) -> None:
    if json_out:
        print(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        return
    if len(report.systems) == 1:
        # one system: sacrebleu's familiar "BLEU|signature = 23.4 ..." lines
        res = report.systems[0]
        for m, value in res.scores.items():
            detail = f" {res.details[m]}" if m in res.details else ""
            print(f"{report.labels[m]}|{report.signatures[m]} = {value:.2f}{detail}")
        return
    _table(report)


def _table(report: ScoreReport) -> None:
    from rich.console import Console
    from rich.table import Table

    metrics = list(report.systems[0].scores)
    title = f"{report.sentences} sentences, reference{'s' if len(report.references) > 1 else ''}: " \
            f"{', '.join(report.references)}"
    table = Table("system", *(f"{report.labels[m]} {'↓' if m in LOWER_IS_BETTER else '↑'}" for m in metrics),
                  title=title, title_justify="left")
    for i, res in enumerate(report.systems):
        cells = []
        for m in metrics:
            cell = f"{res.scores[m]:.2f}"
            if m in res.ci:
                cell += f" ± {res.ci[m]:.2f}"
            if i > 0 and m in res.p_values:
                p = res.p_values[m]
                cell += f" (p = {p:.4f}){' *' if p < 0.05 else ''}"
            cells.append(cell)
        table.add_row(("baseline: " if i == 0 and report.bootstrap_samples else "") + res.name, *cells)
    console = Console()
    if not console.is_terminal:  # a file or pipe has no width to respect: never wrap cells
        console = Console(width=max(console.width, 240))
    console.print(table)
    if report.bootstrap_samples:
        console.print(f"paired bootstrap resampling, {report.bootstrap_samples} samples, against the first "
                      "system; ± is the 95% confidence half-width; * marks p < 0.05", highlight=False,
                      soft_wrap=True)
    for m, sig in report.signatures.items():
        console.print(f"{report.labels[m]}: {sig}", highlight=False, soft_wrap=True)


def score(hyps: list[str], refs: list[str], metrics: str = "bleu,chrf", *, json_out: bool = False,
          tokenize: str | None = None, bootstrap: int = 1000) -> ScoreReport:
    """The `mtkit score` stage: compute, then print a table (or JSON) on stdout."""
    report = score_files(hyps, refs, parse_metrics(metrics), tokenize=tokenize, bootstrap=bootstrap)
    render(report, json_out)
    sys.stdout.flush()
    return report

