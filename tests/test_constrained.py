"""Constrained beam search: a hard constraint always appears, constraints in a batch stay with their
sentence, a wide constrained beam finds what exhaustive search finds, soft constraints are a bonus."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from mtkit.config.experiment import DecodingConfig, ModelConfig
from mtkit.decode.constrained import constrained_search
from mtkit.decode.search import search
from mtkit.models import build_model
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

VOCAB = 24


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(3)
    cfg = ModelConfig(arch="transformer", d_model=32, heads=2, d_ff=64, encoder_layers=1, decoder_layers=1,
                      dropout=0.0)
    net = build_model(cfg, VOCAB, VOCAB, True)
    with torch.no_grad():  # make its outputs peaked, so that some tokens are never chosen
        net.output_proj.weight.mul_(6.0)
    return net.eval()


def _src(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD_ID] * (width - len(r)) for r in rows])


def _contains(tokens: list[int], run: list[int]) -> bool:
    return any(tokens[i:i + len(run)] == run for i in range(len(tokens) - len(run) + 1))


SOURCES = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16], [17, 18], [19, 20, 21, 22, 23, 4]]
CFG = DecodingConfig(beam_size=4, max_len_a=1.0, max_len_b=3)


def test_a_token_the_model_never_writes_appears_under_a_hard_constraint(model):
    plain = search(model, _src(SOURCES), CFG)
    written = {tok for hyps in plain for tok in hyps[0].tokens}
    never = [t for t in range(4, VOCAB) if t not in written]
    assert len(never) >= 2, "the fixture model writes nearly every token: pick another seed"
    runs = [[never[0]], [never[1], never[0]]]
    for run in runs:
        found = constrained_search(model, _src(SOURCES), CFG, [[run]] * len(SOURCES), beam_size=4)
        assert all(_contains(hyps[0].tokens, run) for hyps in found), run
    both = constrained_search(model, _src(SOURCES), CFG, [runs] * len(SOURCES), beam_size=4, nbest=2)
    assert all(_contains(h.tokens, r) for hyps in both for h in hyps for r in runs)


def test_greedy_with_constraints_still_meets_them(model):
    found = constrained_search(model, _src(SOURCES[:2]), CFG, [[[4, 4]], [[7]]], beam_size=1)
    assert _contains(found[0][0].tokens, [4, 4]) and _contains(found[1][0].tokens, [7])


def test_constraints_do_not_leak_between_sentences_of_a_batch(model):
    cons = [[[4]], [], [[9, 10]], [[11], [12]], [[13]]]
    batched = constrained_search(model, _src(SOURCES), CFG, cons, beam_size=4, nbest=2)
    for src, c, hyps in zip(SOURCES, cons, batched, strict=True):
        alone = constrained_search(model, _src([src]), CFG, [c], beam_size=4, nbest=2)[0]
        assert [h.tokens for h in hyps] == [h.tokens for h in alone]
        assert [h.score for h in hyps] == pytest.approx([h.score for h in alone], abs=1e-4)
    # the sentence without constraints gets what the ordinary beam gives it (same beam width)
    plain = search(model, _src([SOURCES[1]]), CFG, beam_size=4)[0][0]
    assert batched[1][0].tokens == plain.tokens


def _log_prob(model, src: torch.Tensor, tokens: list[int]) -> float:
    """Teacher-forced log-probability of ``tokens`` + EOS."""
    with torch.inference_mode():
        enc = model.encode(src)
        state = model.init_state(enc)
        prev, total = torch.tensor([BOS_ID]), 0.0
        for tok in [*tokens, EOS_ID]:
            log_probs, state, _ = model.step(prev, state, enc, False, -1)
            total += float(log_probs.float()[0, tok])
            prev = torch.tensor([tok])
        return total


@pytest.mark.parametrize("length_norm", ["none", "gnmt"])
def test_a_wide_constrained_beam_equals_exhaustive_search(length_norm):
    torch.manual_seed(7)
    cfg_model = ModelConfig(arch="transformer", d_model=16, heads=2, d_ff=32, encoder_layers=1,
                            decoder_layers=1, dropout=0.0)
    net = build_model(cfg_model, 8, 8, True).eval()  # 4 real tokens: 4, 5, 6, 7
    cfg = DecodingConfig(beam_size=1, max_len_a=0.0, max_len_b=2, length_norm=length_norm)
    src = _src([[4, 6, 5]])
    run = [6, 7]
    best, best_score = None, -math.inf
    for length in range(1, 5):  # max_len_b 2 + the constraint's 2 subwords
        for tokens in itertools.product(range(4, 8), repeat=length):
            if not _contains(list(tokens), run):
                continue
            lp = _log_prob(net, src, list(tokens))
            score = lp if length_norm == "none" else lp / ((5 + length + 1) / 6)
            if score > best_score:
                best, best_score = list(tokens), score
    found = constrained_search(net, src, cfg, [[run]], beam_size=400)[0][0]
    assert found.tokens == best
    assert found.score == pytest.approx(best_score, abs=1e-4)


def test_soft_constraints_are_a_bonus_not_a_rule(model):
    run = [[21, 22, 23]]
    # the length limit grows by the constraints' length, soft or hard: compare with the same limit
    plain = search(model, _src(SOURCES), DecodingConfig(beam_size=4, max_len_a=1.0, max_len_b=6))
    none = constrained_search(model, _src(SOURCES), CFG, [run] * 5, beam_size=4, hard=False, bonus=0.0)
    assert [h[0].tokens for h in none] == [h[0].tokens for h in plain]  # no bonus: the plain beam
    strong = constrained_search(model, _src(SOURCES), CFG, [run] * 5, beam_size=4, hard=False, bonus=50.0)
    assert all(_contains(h[0].tokens, run[0]) for h in strong)


def test_no_subword_continues_a_word_after_a_completed_constraint(model):
    """With ``word_pieces`` (subwords that glue onto the word before them) a term stays a whole word:
    what follows a completed constraint is never one of them."""
    run = [5, 7]

    def followers(found):
        out = []
        for hyps in found:
            tokens = hyps[0].tokens
            out += [tokens[i + 2] for i in range(len(tokens) - 2) if tokens[i:i + 2] == run]
        return out

    free = constrained_search(model, _src(SOURCES), CFG, [[run]] * 5, beam_size=4)
    glued = set(followers(free))
    assert glued, "nothing follows the constraint without the rule: the test would prove nothing"
    gluing = torch.zeros(VOCAB, dtype=torch.bool)
    gluing[sorted(glued)] = True  # what followed the term, taken to continue its word
    bounded = constrained_search(model, _src(SOURCES), CFG, [[run]] * 5, beam_size=4, word_pieces=gluing)
    assert all(_contains(h[0].tokens, run) for h in bounded)
    assert not set(followers(bounded)) & glued
