"""What a translation is (`Hypothesis` from a search, `Translation` and its `Candidate`s for a line)
and how it is written: plain text, n-best lists, JSON lines, Pharaoh alignments.

Every format keeps the line discipline of the input: plain and JSON write exactly one line per input
line; n-best writes exactly N lines per input line. Sentence indices are 0-based (as in fairseq and
Moses n-best lists); warnings about input lines name them 1-based, like ``file:line``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from mtkit.errors import ConfigError

if TYPE_CHECKING:  # attention is a tensor; torch is not needed to handle translations without it
    from torch import Tensor

    from mtkit.config.experiment import DecodingConfig


@dataclass
class Hypothesis:
    """One translation: ``tokens`` without BOS/EOS; ``score`` normalised (used for ranking),
    ``log_prob`` the plain sum; ``attention`` [H, len(tokens) + 1, source_len] (the last row is the
    step that produced EOS; source positions are the real, unpadded ones) when asked for."""

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor | None = None


def normalise(log_prob: float | Tensor, length: int | Tensor, cfg: DecodingConfig) -> Any:
    """The ranking score of a hypothesis of ``length`` tokens (EOS included; plus
    ``decoding.length_offset``)."""
    length = length + cfg.length_offset
    if cfg.length_norm == "gnmt":
        if cfg.length_penalty == 0:
            return log_prob
        return log_prob / ((5.0 + length) / 6.0) ** cfg.length_penalty
    if cfg.length_norm == "average":
        return log_prob / length
    return log_prob


@dataclass
class Candidate:
    """One hypothesis of a translation. ``tokens`` are target subword pieces; ``alignment`` pairs
    (source subword i, target subword j), 0-based; ``attention`` [H, len(tokens) + 1, len(source)]
    (the last row is EOS) when attention was asked for."""

    text: str
    score: float
    log_prob: float
    tokens: list[str]
    token_ids: list[int]
    alignment: list[tuple[int, int]] | None = None
    attention: Tensor | None = None

    @property
    def mean_log_prob(self) -> float:
        """The length-normalised log-probability: ``log_prob`` over the output length, EOS included."""
        return self.log_prob / (len(self.token_ids) + 1)

    @property
    def confidence(self) -> float:
        """The model's confidence in this translation, 0 to 1: exp(mean_log_prob), the geometric mean
        of the probabilities of its tokens (EOS included). A ranking signal (a lower value is more
        often a worse translation), not the probability that the translation is right
        (docs/translate.md#confidence)."""
        return math.exp(self.mean_log_prob)


@dataclass
class Translation:
    """The translation of input line ``index`` (0-based): n-best candidates, best first (none for an
    empty line). ``source`` is the cleaned input; ``source_tokens`` its subwords, the indices that
    alignments and attention refer to."""

    index: int
    source: str
    source_tokens: list[str] = field(default_factory=list)
    hypotheses: list[Candidate] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.hypotheses[0].text if self.hypotheses else ""

    @property
    def confidence(self) -> float:
        """The best candidate's confidence (1.0 for an empty line, whose empty translation is certain)."""
        return self.hypotheses[0].confidence if self.hypotheses else 1.0

    @property
    def mean_log_prob(self) -> float:
        return self.hypotheses[0].mean_log_prob if self.hypotheses else 0.0


OutputFormat = Literal["text", "nbest", "json"]

# characters that would split one output line into several for some reader (wc, Python, editors)
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """Make sure a translation is written as exactly one line."""
    return _LINE_BREAKS.sub(" ", text)


def alignment_from_attention(attention: Tensor, head: int | str = "avg") -> list[tuple[int, int]]:
    """Hard alignment from soft attention [H, T, S] whose T rows are the target tokens (callers drop
    the EOS row): for each target token j, the source token i with the largest weight, heads
    averaged (or one head)."""
    weights = select_head(attention, head)
    if weights.numel() == 0 or weights.size(-1) == 0:
        return []
    src_idx = weights.argmax(-1).tolist()
    return [(int(i), j) for j, i in enumerate(src_idx)]


def join_attention(blocks: list[Tensor]) -> Tensor:
    """Block-diagonal attention of a split line: each segment attends to its own source span. Rows
    are the segments' target tokens followed by one final EOS row (the last segment's)."""
    if len(blocks) == 1:
        return blocks[0]
    heads = blocks[0].size(0)
    rows = sum(b.size(1) - 1 for b in blocks) + 1
    cols = sum(b.size(2) for b in blocks)
    joined = blocks[0].new_zeros(heads, rows, cols)
    r = c = 0
    for n, b in enumerate(blocks):
        keep = b.size(1) if n == len(blocks) - 1 else b.size(1) - 1
        joined[:, r:r + keep, c:c + b.size(2)] = b[:, :keep]
        r += keep
        c += b.size(2)
    return joined


def select_head(attention: Tensor, head: int | str = "avg") -> Tensor:
    """[H, T, S] → [T, S]: the average over heads, or head number ``head`` (negative counts back)."""
    if head == "avg":
        return attention.float().mean(0)
    h = int(head)
    if not -attention.size(0) <= h < attention.size(0):
        heads = attention.size(0)
        raise ConfigError(f"--attention-head {h}: the model has {heads} heads (0..{heads - 1})")
    return attention[h].float()


def pharaoh(alignment: Sequence[tuple[int, int]]) -> str:
    """``i-j`` pairs (source index i, target index j, 0-based), space-separated."""
    return " ".join(f"{i}-{j}" for i, j in alignment)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _scores(confidence: float, mean_log_prob: float) -> str:
    """The two fields ``--scores`` adds after a translation: confidence and mean log-probability."""
    return f"\t{confidence:.4f}\t{mean_log_prob:.4f}"


def format_translation(tr: Translation, fmt: OutputFormat = "text", nbest: int = 1,
                       alignment: bool = False, scores: bool = False) -> list[str]:
    """The output lines of one input line (one line, or ``nbest`` lines for the n-best format).
    ``scores``: each translation is followed by TAB confidence TAB mean log-probability (before the
    alignment); JSON always has both."""
    if fmt == "json":
        return [json.dumps(_json_record(tr, nbest), ensure_ascii=False)]
    if fmt == "nbest":
        lines = []
        hyps = list(tr.hypotheses)
        for rank in range(nbest):
            if hyps:
                hyp = hyps[min(rank, len(hyps) - 1)]  # pad with the last when fewer were found
                line = f"{tr.index}\t{hyp.score:.4f}\t{one_line(hyp.text)}"
                if scores:
                    line += _scores(hyp.confidence, hyp.mean_log_prob)
                if alignment:
                    line += "\t" + pharaoh(hyp.alignment or [])
            else:  # empty input line
                line = f"{tr.index}\t0.0000\t" + (_scores(tr.confidence, 0.0) if scores else "")
                line += "\t" if alignment else ""
            lines.append(line)
        return lines
    text = one_line(tr.text)
    if scores:
        text += _scores(tr.confidence, tr.mean_log_prob)
    if alignment:
        best = tr.hypotheses[0].alignment if tr.hypotheses else None
        text += "\t" + pharaoh(best or [])
    return [text]


def _json_record(tr: Translation, nbest: int) -> dict:
    def hyp_record(h: Candidate) -> dict:
        return {
            "text": one_line(h.text),
            "score": _finite(h.score),
            "log_prob": _finite(h.log_prob),
            "mean_log_prob": _finite(h.mean_log_prob),
            "confidence": h.confidence,
            "tokens": h.tokens,
            "alignment": pharaoh(h.alignment) if h.alignment is not None else None,
            # a pivoted translation (mtkit.decode.pivot) also says what its last leg translated
            **({"pivot": one_line(h.pivot)} if isinstance(getattr(h, "pivot", None), str) else {}),
        }

    record: dict = {"index": tr.index, "source": tr.source, "source_tokens": tr.source_tokens}
    if tr.hypotheses:
        record.update(hyp_record(tr.hypotheses[0]))
    else:
        record.update({"text": "", "score": 0.0, "log_prob": 0.0, "mean_log_prob": 0.0, "confidence": 1.0,
                       "tokens": [], "alignment": ""})
    if nbest > 1:
        record["nbest"] = [hyp_record(h) for h in tr.hypotheses[:nbest]]
    return record


__all__ = ["Candidate", "Hypothesis", "OutputFormat", "Translation", "alignment_from_attention",
           "format_translation", "join_attention", "normalise", "one_line", "pharaoh", "select_head"]
