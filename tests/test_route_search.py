"""A server route as the formats' search (mtkit.serve.route_search): through a pivot a placeholder is
masked where any leg cannot write it (the first leg must carry it into the pivot text), the word
alignment is offered on a direct route only, and the vocabularies' answers are kept across requests.
Stand-in legs with a vocabulary of a few characters and a search that drops what they cannot write."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
from mtkit.decode.translation import Candidate, Translation  # noqa: E402
from mtkit.placeholders.strings import translate_strings  # noqa: E402
from mtkit.serve import route_search  # noqa: E402
from mtkit.serve.route_search import RouteSearch  # noqa: E402

LETTERS = "abcdefghijklmnopqrstuvwxyzO0123456789 "


class _Vocabulary:
    """A target vocabulary that knows some characters (any other is the unknown subword, id 1), and
    counts how often it is asked."""

    def __init__(self, characters: str):
        self.characters, self.asked = characters, 0

    def encode_ids(self, lines):
        self.asked += 1
        return [[5 if ch in self.characters else 1 for ch in line] for line in lines]


def _leg(name: str, characters: str | None):
    translator = SimpleNamespace(tgt_bpe=None if characters is None else _Vocabulary(characters),
                                 can_constrain=False)
    return SimpleNamespace(name=name, translator=translator, default_beam=1)


class _Search(RouteSearch):
    """The route's search with each leg's batcher replaced by its stand-in: a leg writes the line
    with what its vocabulary cannot write dropped; ``seen`` records what each leg was given."""

    def __init__(self, legs):
        super().__init__(SimpleNamespace(), SimpleNamespace(legs=tuple(legs)))
        self.seen: list[tuple[str, list[str]]] = []

    def _run(self, model, lines, settings, constraints=None):
        self.seen.append((model.name, list(lines)))
        vocabulary = model.translator.tgt_bpe
        out = []
        for line in lines:
            text = line if vocabulary is None else "".join(c for c in line if c in vocabulary.characters)
            text = " ".join(text.split())
            out.append(Translation(0, line, [], [Candidate(text, 0.0, 0.0, [], [])]))
        return out


def test_a_pivot_masks_a_placeholder_any_leg_cannot_write():
    cannot, can = _leg("en-x", LETTERS), _leg("x-de", LETTERS + "%")
    assert not _Search([cannot, can]).can_write("%s")  # the first leg would drop it before the last
    assert not _Search([can, cannot]).can_write("%s")
    assert _Search([can, _leg("x-de", LETTERS + "%")]).can_write("%s")
    assert _Search([can]).can_write("%s") and not _Search([cannot]).can_write("%s")
    assert _Search([_leg("x", None), can]).can_write("%s")  # no vocabulary: taken to write anything

    search = _Search([cannot, can])
    out = translate_strings(["Open %s now"], search)
    assert search.seen[0] == ("en-x", ["Open 901 now"])  # masked before the first leg, not after a failure
    assert (out[0].text, out[0].rescued) == ("Open %s now", "sentinels")
    assert len(search.seen) == 2  # one search along the route


def test_the_word_alignment_is_offered_on_a_direct_route_only():
    leg = _leg("en-de", LETTERS)
    assert hasattr(_Search([leg]), "aligned")
    assert not hasattr(_Search([leg, _leg("de-fr", LETTERS)]), "aligned")


def test_the_vocabularys_answers_are_kept_across_requests():
    route_search.writes_cached.cache_clear()
    first, last = _leg("en-x", LETTERS), _leg("x-de", LETTERS + "%{}")
    for _ in range(3):  # a request (a page, a document) builds its own RouteSearch
        search = _Search([first, last])
        assert not search.can_write("%s")
        assert search.can_write("{0}") is False  # the first leg writes no brace
        assert search.can_write("ok 1")
    assert first.translator.tgt_bpe.asked == 3  # once per text, not once per request
    assert last.translator.tgt_bpe.asked == 1  # asked only where the first leg writes it
