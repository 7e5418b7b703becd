"""Sentencepiece model files rewritten with another piece order: what turns a MarianMT tokenizer (two
sentencepiece models whose own ids mean nothing, and a ``vocab.json`` that numbers the pieces the
network reads) into models whose ids are the network's, with mtkit's special ids (pad 0, unk 1, bos 2,
eos 3), as `mtkit.data.bpe.Bpe` requires.

A ``.spm``/``.model`` file is a protocol buffer (``ModelProto``: repeated ``pieces`` = 1, ``trainer_spec``
= 2, ``normalizer_spec`` = 3, ``self_test_data`` = 4, ``denormalizer_spec`` = 5). It is read and written
here at the wire level, a few dozen lines, rather than through the ``protobuf`` package, which
sentencepiece's wheel does not install. The normaliser, the model type and every piece's score and type
are kept, so a sentence segments into the same pieces as before; a piece the vocabulary has but this
model lacks (the other side's pieces of a shared vocabulary) becomes UNUSED: sentencepiece never emits
it when segmenting, and decodes it when asked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mtkit.errors import DataError

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
#: mtkit's four special pieces, in id order, with their sentencepiece types
SPECIALS = (("<pad>", CONTROL), ("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL))
# TrainerSpec fields: unk_id 40, bos_id 41, eos_id 42, pad_id 43, unk_piece 45 … pad_piece 48
_SPECIAL_IDS = (43, 40, 41, 42)
_SPECIAL_PIECES = (48, 45, 46, 47)


@dataclass
class Piece:
    piece: str
    score: float = 0.0
    type: int = NORMAL


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _put_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int32s are written as ten-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def proto_fields(data: bytes) -> list[tuple[int, int, bytes]]:
    """(field number, wire type, raw value) of each field of a message, in order."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        field, wire = key >> 3, key & 7
        start = pos
        if wire == 0:
            _, pos = read_varint(data, pos)
            out.append((field, wire, data[start:pos]))
            continue
        if wire == 2:
            size, start = read_varint(data, pos)
            pos = start + size
        elif wire in (1, 5):
            pos = start + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(data):
            raise ValueError("truncated field")
        out.append((field, wire, data[start:pos]))
    return out


def _field(field: int, wire: int, raw: bytes) -> bytes:
    prefix = _put_varint(field << 3 | wire)
    return prefix + (_put_varint(len(raw)) + raw if wire == 2 else raw)


def read_pieces(data: bytes, where: str) -> list[Piece]:
    """The pieces of a serialized sentencepiece model, in id order."""
    try:
        pieces = []
        for field, wire, raw in proto_fields(data):
            if field != 1 or wire != 2:
                continue
            piece = Piece("")
            for sub, sub_wire, value in proto_fields(raw):
                if sub == 1 and sub_wire == 2:
                    piece.piece = value.decode("utf-8")
                elif sub == 2 and sub_wire == 5:
                    piece.score = struct.unpack("<f", value)[0]
                elif sub == 3 and sub_wire == 0:
                    piece.type = read_varint(value, 0)[0]
            pieces.append(piece)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{where}: not a sentencepiece model ({exc})") from None
    if not pieces:
        raise DataError(f"{where}: not a sentencepiece model (no pieces)")
    return pieces


def _piece_message(p: Piece) -> bytes:
    return (_field(1, 2, p.piece.encode("utf-8")) + _field(2, 5, struct.pack("<f", p.score))
            + _field(3, 0, _put_varint(p.type)))


def _trainer_spec(raw: bytes) -> bytes:
    """The trainer spec with mtkit's special ids and pieces (what sentencepiece reports as pad_id() …)."""
    replaced = set(_SPECIAL_IDS) | set(_SPECIAL_PIECES)
    kept = b"".join(_field(f, w, v) for f, w, v in proto_fields(raw) if f not in replaced)
    for i, (name, _) in enumerate(SPECIALS):
        kept += _field(_SPECIAL_IDS[i], 0, _put_varint(i)) + _field(_SPECIAL_PIECES[i], 2, name.encode())
    return kept


def reorder(data: bytes, vocab: list[str], where: str, missing_type: int = UNUSED) -> bytes:
    """A sentencepiece model whose piece ``i`` is ``vocab[i]``: ``vocab`` starts with mtkit's four
    special pieces; each other piece keeps this model's score and type, or is UNUSED where this model
    lacks it (``missing_type`` CONTROL: decoded as nothing, for M2M100's language tokens and other
    special rows). Refuses a model with a piece the vocabulary lacks (MarianMT would read it as <unk>, which
    sentencepiece cannot be made to do)."""
    own = read_pieces(data, where)
    names = [name for name, _ in SPECIALS]
    if list(vocab[:4]) != names:
        raise ValueError(f"vocab must start with {names}")
    by_name = {p.piece: p for p in own if p.type not in (CONTROL, UNKNOWN)}
    wanted = set(vocab)
    missing = [p for p in by_name if p not in wanted]
    if missing:
        raise DataError(f"{where}: {len(missing)} of its pieces are not in the vocabulary (first: "
                        f"{missing[0]!r}); mtkit cannot map them to <unk> as MarianTokenizer does")
    pieces = [Piece(name, 0.0, kind) for name, kind in SPECIALS]
    pieces += [by_name.get(name, Piece(name, 0.0, missing_type)) for name in vocab[4:]]
    try:
        fields = proto_fields(data)
    except ValueError as exc:
        raise DataError(f"{where}: not a sentencepiece model ({exc})") from None
    out = b"".join(_field(1, 2, _piece_message(p)) for p in pieces)
    for field, wire, raw in fields:
        if field == 2:
            out += _field(2, 2, _trainer_spec(raw))
        elif field not in (1, 4):  # self-test samples name the old segmentation's ids: dropped
            out += _field(field, wire, raw)
    return out


__all__ = ["CONTROL", "SPECIALS", "UNUSED", "Piece", "proto_fields", "read_pieces", "read_varint", "reorder"]
