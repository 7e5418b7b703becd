"""Sentencepiece BPE: training, encoding, decoding, and mtkit's fixed special-token ids.

Every mtkit vocabulary has the same four ids, so models, batching and search can use constants:
PAD_ID = 0, UNK_ID = 1, BOS_ID = 2, EOS_ID = 3.
"""

from __future__ import annotations

import itertools
import random
import re
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

import sentencepiece as spm

from mtkit.cpus import allowed_cpus
from mtkit.errors import DataError, MtkitError
from mtkit.textio import chunked, read_lines
from mtkit.vocab import BOS_ID, BPE_SAMPLE_SENTENCES, EOS_ID, PAD_ID, UNK_ID  # noqa: F401 - ids it assigns


def _threads() -> int:
    """Cores this process may use (sentencepiece parallelises batch encoding and training)."""
    return min(16, allowed_cpus())


def _trainer_message(exc: RuntimeError) -> str:
    """sentencepiece's errors carry a C++ source location and the failed check; keep the prose."""
    text = str(exc).strip().splitlines()[-1]
    return re.sub(r"^.*\] ", "", text)


def _nonempty_lines(inputs: list[str]) -> Iterator[str]:
    for path in inputs:
        for line in read_lines(path, strict=True):
            if line.strip():
                yield line


def _sample_sentences(inputs: list[str], limit: int, seed: int) -> Iterator[str]:
    """`limit` non-empty lines drawn uniformly across all inputs (all lines when limit is 0 or more
    than there are), in input order.

    The draw keeps line numbers, not lines (a reservoir of ``limit`` integers), and a second pass
    over the files yields the chosen lines to the trainer as it reads them: mtkit holds no copy of
    the sample, only sentencepiece does. Small inputs (no more lines than ``limit``) are read once.
    """
    rng = random.Random(seed)
    reservoir = array("q")
    buffered: list[str] | None = []  # the lines themselves while they are still all chosen
    for seen, line in enumerate(_nonempty_lines(inputs)):
        if limit <= 0 or seen < limit:
            reservoir.append(seen)
            if buffered is not None:
                buffered.append(line)
        else:
            buffered = None
            j = rng.randrange(seen + 1)
            if j < limit:
                reservoir[j] = seen
    if buffered is not None:
        yield from buffered
        return
    chosen = iter(sorted(reservoir))
    wanted = next(chosen, -1)
    for number, line in enumerate(_nonempty_lines(inputs)):
        if number == wanted:
            yield line
            wanted = next(chosen, -1)
            if wanted < 0:
                return


def train_bpe(inputs: list[str], model_prefix: str, vocab_size: int = 8000,
              character_coverage: float = 1.0, input_sentence_size: int = BPE_SAMPLE_SENTENCES,
              seed: int = 1, symbols: list[str] | None = None) -> Path:
    """Train a BPE model on one or more files (joint when several); returns PREFIX.model. ``symbols``
    become pieces of their own, never split or merged (the language tags of `mtkit.data.corpora`)."""
    if not inputs:
        raise MtkitError("bpe train: give at least one --input file")
    sentences = _sample_sentences(inputs, input_sentence_size, seed)
    first = next(sentences, None)
    if first is None:
        raise DataError(f"bpe train: no non-empty lines in {', '.join(inputs)}")
    Path(model_prefix).parent.mkdir(parents=True, exist_ok=True)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=itertools.chain([first], sentences),
            model_prefix=str(model_prefix),
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
            max_sentence_length=1 << 16,
            num_threads=_threads(),
            minloglevel=2,
            hard_vocab_limit=False,
            **({"user_defined_symbols": list(symbols)} if symbols else {}),
        )
    except RuntimeError as exc:
        raise MtkitError(f"bpe train: sentencepiece failed: {_trainer_message(exc)}") from None
    return Path(f"{model_prefix}.model")


class Bpe:
    """A loaded sentencepiece model with line-safe encode/decode."""

    def __init__(self, model_path: str | Path):
        path = Path(model_path)
        if not path.is_file():
            raise DataError(f"BPE model not found: {path}")
        self.path = path
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.Load(str(path))
        except (OSError, RuntimeError):
            raise DataError(f"{path}: not a sentencepiece model") from None
        if (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id()) != (
            PAD_ID, UNK_ID, BOS_ID, EOS_ID
        ):
            raise DataError(f"{path}: special ids differ from mtkit's pad=0 unk=1 bos=2 eos=3")

    def __len__(self) -> int:
        return self.sp.GetPieceSize()

    def encode_ids(self, lines: list[str]) -> list[list[int]]:
        return self.sp.Encode(lines, out_type=int, num_threads=_threads())

    def encode_pieces(self, lines: list[str]) -> list[list[str]]:
        return self.sp.Encode(lines, out_type=str, num_threads=_threads())

    def decode_ids(self, ids: list[list[int]]) -> list[str]:
        return [self.sp.Decode(x) for x in ids]

    def decode_pieces(self, pieces: list[list[str]]) -> list[str]:
        return [self.sp.DecodePieces(x) for x in pieces]

    def piece_ids(self, pieces: list[str], what: str) -> dict[str, int]:
        """The id of each of ``pieces``, which must be in the vocabulary (``what`` names it in errors)."""
        ids = {p: self.sp.PieceToId(p) for p in pieces}
        missing = [p for p, i in ids.items() if i == UNK_ID]
        if missing:
            raise DataError(f"{what} has no piece {missing[0]} (a language tag: the model was not trained "
                            "with it)")
        return ids

    def id_to_piece(self, ids: list[int]) -> list[str]:
        return [self.sp.IdToPiece(i) for i in ids]

    def pieces(self) -> list[str]:
        """Every piece, by id: the vocabulary as CTranslate2 and vocabulary maps name it."""
        return self.id_to_piece(list(range(len(self))))

    def normalize_text(self, line: str) -> str:
        """sentencepiece's normalisation alone (NFKC, whitespace collapsed), without the trip through
        the vocabulary: decode(encode(x)) equals this unless x holds characters the model lacks."""
        return self.sp.Normalize(line).replace("\u2581", " ").strip()


def encode_stream(bpe: Bpe, lines: Iterable[str], fmt: str = "pieces",
                  chunk: int = 1000) -> Iterator[str]:
    """Encode lines to space-joined pieces or ids, one output line per input line."""
    if fmt not in ("pieces", "ids"):
        raise MtkitError(f"--format must be pieces or ids, not {fmt!r}")
    for batch in chunked(lines, chunk):
        if fmt == "ids":
            for ids in bpe.encode_ids(batch):
                yield " ".join(map(str, ids))
        else:
            for pieces in bpe.encode_pieces(batch):
                yield " ".join(pieces)


def decode_stream(bpe: Bpe, lines: Iterable[str], fmt: str = "pieces", name: str = "<stdin>",
                  chunk: int = 1000) -> Iterator[str]:
    if fmt not in ("pieces", "ids"):
        raise MtkitError(f"--format must be pieces or ids, not {fmt!r}")
    lineno = 0
    for batch in chunked(lines, chunk):
        if fmt == "ids":
            parsed = []
            for line in batch:
                lineno += 1
                try:
                    ids = [int(t) for t in line.split()]
                except ValueError:
                    raise DataError(f"{name}:{lineno}: expected space-separated integer ids") from None
                if any(i < 0 or i >= len(bpe) for i in ids):
                    raise DataError(f"{name}:{lineno}: id out of range 0..{len(bpe) - 1}")
                parsed.append(ids)
            yield from bpe.decode_ids(parsed)
        else:
            lineno += len(batch)
            yield from bpe.decode_pieces([line.split() for line in batch])
