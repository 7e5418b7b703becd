"""Input hygiene and segmentation for translation: control characters out, and lines longer than a
model handles cut into sentences (or, for a sentence that is itself too long, windows of subwords)."""

from __future__ import annotations

import re
import unicodedata

from mtkit.bpe import Bpe

_SENTENCE_END = re.compile(r"(?<=[.!?…;。！？])\s+")


def clean_line(line: str) -> str:
    """Control characters become spaces (they are never meaningful input and some tokenizers
    choke on them); runs of whitespace collapse to one space."""
    if any(unicodedata.category(c) == "Cc" for c in line):
        line = "".join(" " if unicodedata.category(c) == "Cc" else c for c in line)
    return " ".join(line.split())


def split_long(text: str, ids: list[int], bpe: Bpe, limit: int) -> list[list[int]]:
    """Segments of at most ``limit`` subwords: whole sentences packed together where possible,
    fixed windows of subwords for a sentence that is itself too long."""
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    encoded = bpe.encode_ids(sentences) if len(sentences) > 1 else [ids]
    segments: list[list[int]] = []
    current: list[int] = []
    for sent in encoded:
        if len(sent) > limit:
            if current:
                segments.append(current)
                current = []
            segments.extend(sent[i:i + limit] for i in range(0, len(sent), limit))
        elif len(current) + len(sent) > limit:
            segments.append(current)
            current = list(sent)
        else:
            current.extend(sent)
    if current:
        segments.append(current)
    return segments


__all__ = ["clean_line", "split_long"]
