"""Search behaviour: beam 1 is greedy, beam finds what exhaustive search finds, batching and
ensembling change nothing, constraints hold, sampling is reproducible — on a toy model with a known
transition table and on the real (tiny, random) Transformer and RNN."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from mtkit.config.experiment import DecodingConfig, ModelConfig
from mtkit.decode.search import (
    Hypothesis,
    _beam,
    _best_extensions,
    _keep_k_best,
    log_normalizer,
    normalise,
    search,
)
from mtkit.models import build_model
from mtkit.models.base import EncoderOutput, Seq2Seq
from mtkit.models.ensemble import Ensemble
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

VOCAB = 24


class ToyModel(Seq2Seq):
    """The next-token distribution is a fixed random row chosen by a hash of (source, prefix):
    a model whose every probability is known, so search results can be checked by enumeration."""

    def __init__(self, vocab: int = 8, seed: int = 0, buckets: int = 211):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("table", (torch.randn(buckets, vocab, generator=g) * 2.0).log_softmax(-1))
        self.buckets = buckets

    def encode(self, src):
        mask = src.ne(PAD_ID)
        return EncoderOutput(src.float().unsqueeze(-1), mask)

    def init_state(self, enc):
        tokens = enc.memory.squeeze(-1).long() * enc.src_mask
        weights = torch.arange(1, tokens.size(1) + 1, device=tokens.device)
        return (tokens * weights).sum(1) % self.buckets

    def step(self, prev_tokens, state, enc, need_attention=False, attn_layer=-1, normalize=True):
        state = (state * 7 + prev_tokens + 1) % self.buckets
        attn = None
        if need_attention:
            scores = (state.unsqueeze(1) * (torch.arange(enc.src_mask.size(1)) + 1)) % 5
            attn = scores.float().masked_fill(~enc.src_mask, float("-inf")).softmax(-1).unsqueeze(1)
        return self.table[state], state, attn
    # reorder_state: Seq2Seq's default (the state [B] has the batch in dim 0)


def real_model(arch: str, seed: int = 0, attention: str = "additive") -> Seq2Seq:
    torch.manual_seed(seed)
    cfg = ModelConfig(arch=arch, d_model=32, heads=4, d_ff=64, encoder_layers=2, decoder_layers=2,
                      emb_dim=16, hidden_size=32, dropout=0.0, attention=attention)
    return build_model(cfg, VOCAB, VOCAB, True).eval()


def random_src(batch: int, seed: int = 0, vocab: int = VOCAB, lo: int = 2, hi: int = 9) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi, (batch,), generator=g)
    src = torch.full((batch, int(lengths.max())), PAD_ID, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src


MODELS = {
    "toy": lambda: ToyModel(VOCAB),
    "transformer": lambda: real_model("transformer"),
    "rnn": lambda: real_model("rnn"),
}


@pytest.fixture(params=list(MODELS), scope="module")
def model(request):
    return MODELS[request.param]()


def tokens(results: list[list[Hypothesis]]) -> list[list[list[int]]]:
    return [[h.tokens for h in hyps] for hyps in results]


# --------------------------------------------------------------------------------------- greedy/beam
def test_beam_size_one_equals_greedy(model):
    src = random_src(6, seed=1)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=3)
    greedy = search(model, src, cfg, beam_size=1)
    with torch.inference_mode():
        beam1 = _beam(model, src, cfg, 1, 1, False, -1)
    assert tokens(greedy) == tokens(beam1)
    for g, b in zip(greedy, beam1, strict=True):
        assert g[0].score == pytest.approx(b[0].score, abs=1e-4)


def test_greedy_without_scores_finds_the_same_tokens_and_leaves_scores_nan(model):
    """scores=False (plain text output) skips each step's log-normaliser: the same argmax tokens, and
    scores that say they were not computed rather than a wrong number."""
    src = random_src(6, seed=4)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=3)
    scored = search(model, src, cfg, beam_size=1)
    plain = search(model, src, cfg, beam_size=1, scores=False)
    assert tokens(plain) == tokens(scored)
    assert all(math.isnan(h[0].score) for h in plain) and all(math.isfinite(h[0].score) for h in scored)


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_a_step_without_normalising_returns_the_logits_of_its_log_probs(arch):
    model = real_model(arch, seed=2)
    src = random_src(3, seed=5)
    with torch.inference_mode():
        enc = model.encode(src)
        prev = torch.full((3,), BOS_ID)
        log_probs, _, _ = model.step(prev, model.init_state(enc), enc)
        logits, _, _ = model.step(prev, model.init_state(enc), enc, normalize=False)
    assert logits.dtype is torch.float32 and not torch.allclose(logits.exp().sum(-1), torch.ones(3))
    assert torch.allclose(logits.log_softmax(-1), log_probs, atol=1e-5)
    assert torch.allclose(log_normalizer(logits), logits.logsumexp(-1), atol=1e-5)


@pytest.mark.parametrize(("k", "vocab", "beams"), [(3, 50, 3), (4, 9, 4), (5, 8, 1), (2, 3, 1)])
def test_best_extensions_rank_what_the_full_beam_by_vocabulary_sum_ranks(k, vocab, beams):
    """Normalising only each row's 2K best tokens finds the 2K best (beam, token) extensions of the
    full [K, V] sum: the same scores, beams and tokens; a vocabulary narrower than 2K at the first
    step (one row per sentence) pads with -inf."""
    g = torch.Generator().manual_seed(k * vocab)
    n = 4
    scores = torch.randn(n, k, generator=g)
    if beams == 1:
        scores[:, 1:] = float("-inf")
    logits = torch.randn(n * beams, vocab, generator=g) * 3
    logits[0, 2] = float("-inf")  # a masked token
    ext = _best_extensions(scores, logits.clone(), k, log_normalizer(logits))
    full = (scores[:, :beams].unsqueeze(2) + logits.log_softmax(-1).view(n, beams, vocab)).view(n, -1)
    width = min(2 * k, full.size(1))
    expected, index = full.topk(width, dim=1)
    assert torch.allclose(ext.scores[:, :width], expected, atol=1e-5)
    finite = torch.isfinite(expected)  # -inf ties (a masked token, the padding) may come in any order
    assert torch.equal(ext.beam[:, :width][finite], (index // vocab)[finite])
    assert torch.equal(ext.token[:, :width][finite], (index % vocab)[finite])
    assert torch.isinf(ext.scores[:, width:]).all()


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
@pytest.mark.parametrize("norm", ["gnmt", "average", "none"])
def test_beam_sorted_and_not_worse_than_greedy(arch, norm):
    """Not a theorem (the greedy prefix can fall out of a beam, see the next test), but what a
    beam of 5 must deliver on ordinary models: never a worse best hypothesis than greedy."""
    model = MODELS[arch]()
    src = random_src(8, seed=2)
    cfg = DecodingConfig(length_norm=norm, max_len_a=1.5, max_len_b=3)
    greedy = search(model, src, cfg, beam_size=1)
    beam = search(model, src, cfg, beam_size=5, nbest=5)
    for g, hyps in zip(greedy, beam, strict=True):
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert hyps[0].score >= g[0].score - 1e-5


def test_beam_can_lose_the_greedy_path_on_a_peaked_model():
    """Why the test above is not run on the toy model: with peaked distributions the greedy prefix
    is pruned by beam 5 (a known property of beam search, not a bug); a wider beam recovers it."""
    model = ToyModel(VOCAB)
    src = random_src(8, seed=2)[4:5]
    src = src[:, : int(src.ne(PAD_ID).sum())]
    cfg = DecodingConfig(length_norm="gnmt", max_len_a=1.5, max_len_b=3)
    greedy = search(model, src, cfg, beam_size=1)[0][0]
    assert search(model, src, cfg, beam_size=5)[0][0].score < greedy.score
    assert search(model, src, cfg, beam_size=10)[0][0].score >= greedy.score


def _sequence_log_prob(model: Seq2Seq, src: torch.Tensor, seq: list[int]) -> float:
    enc = model.encode(src)
    state = model.init_state(enc)
    prev = torch.tensor([BOS_ID])
    total = 0.0
    for tok in seq:
        lp, state, _ = model.step(prev, state, enc)
        total += float(lp[0, tok])
        prev = torch.tensor([tok])
    return total


def test_wide_beam_matches_exhaustive_search():
    """With a beam wider than the number of prefixes, beam search is exhaustive: its n-best list
    must be exactly the top of the enumerated list, scores included."""
    model = ToyModel(vocab=6, seed=3)  # three possible tokens: UNK (allowed, as in fairseq), 4 and 5
    src = torch.tensor([[4, 5, 5]])
    cfg = DecodingConfig(max_len_a=0.0, max_len_b=3, min_len=1, length_norm="gnmt", length_penalty=1.0)
    enumerated = []
    with torch.inference_mode():
        for length in range(1, 4):
            for body in itertools.product([1, 4, 5], repeat=length):
                lp = _sequence_log_prob(model, src, [*body, EOS_ID])
                enumerated.append((normalise(lp, length + 1, cfg), list(body)))
    enumerated.sort(key=lambda x: -x[0])
    hyps = search(model, src, cfg, beam_size=32, nbest=5)[0]  # 27 prefixes of length 3
    assert [h.tokens for h in hyps] == [seq for _, seq in enumerated[:5]]
    for h, (score, _) in zip(hyps, enumerated, strict=False):
        assert h.score == pytest.approx(score, abs=1e-5)


def test_finished_list_keeps_the_k_best_not_the_k_first():
    kept = [Hypothesis([4], -1.0, -1.0), Hypothesis([5], -3.0, -3.0)]
    assert _keep_k_best(kept, Hypothesis([6], -2.0, -2.0), k=3) == -3.0  # now full: worst is -3
    assert _keep_k_best(kept, Hypothesis([7], -0.5, -0.5), k=3) == -2.0  # -3 made room
    assert sorted(h.score for h in kept) == [-2.0, -1.0, -0.5]
    assert _keep_k_best([], Hypothesis([4], -1.0, -1.0), k=2) is None  # fewer than K: no bound yet


def test_batched_equals_one_by_one(model):
    src = random_src(7, seed=3)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=3)
    for beam in (1, 4):
        batched = search(model, src, cfg, beam_size=beam, nbest=min(beam, 2))
        for i in range(src.size(0)):
            row = src[i: i + 1]
            row = row[:, : int(row.ne(PAD_ID).sum())]  # unpadded
            alone = search(model, row, cfg, beam_size=beam, nbest=min(beam, 2))[0]
            assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
            for a, b in zip(alone, batched[i], strict=True):
                assert a.score == pytest.approx(b.score, abs=1e-4)


@pytest.mark.parametrize("fraction", [0.25, 1.0])
def test_greedy_same_whether_finished_rows_leave_at_once_or_ride_along(model, fraction, monkeypatch):
    """Greedy search keeps finished rows in the batch until a share of them has finished: they must
    neither finish twice nor change what the live rows write, their scores or their attention."""
    import mtkit.decode.search as search_module

    src = random_src(12, seed=21, lo=1, hi=12)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=2)
    monkeypatch.setattr(search_module, "COMPACT_FRACTION", 0.0)  # every finished row leaves at once
    at_once = search(model, src, cfg, beam_size=1, need_attention=True)
    monkeypatch.setattr(search_module, "COMPACT_FRACTION", fraction)
    riding = search(model, src, cfg, beam_size=1, need_attention=True)
    assert [len(h) for h in riding] == [1] * src.size(0)
    assert tokens(riding) == tokens(at_once)
    for a, b in zip(at_once, riding, strict=True):
        assert a[0].score == pytest.approx(b[0].score, abs=1e-5)
        if a[0].attention is not None:
            assert torch.allclose(a[0].attention.float(), b[0].attention.float(), atol=1e-5)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))])
@pytest.mark.parametrize("source_eos", [False, True])
def test_beams_sharing_one_encoder_row_search_as_with_k_copies(source_eos, device):
    """The Transformer's beams read one copy of their sentence's encoder output (their queries
    grouped); beam search must find the same hypotheses, scores and attention as with K copies,
    sentences leaving the batch included (on a GPU too, where PyTorch's default leaves TF32 off)."""
    torch.manual_seed(3)
    cfg = ModelConfig(arch="transformer", d_model=32, heads=4, d_ff=64, encoder_layers=2, decoder_layers=2,
                      dropout=0.0, source_eos=source_eos)
    model = build_model(cfg, VOCAB, VOCAB, True).eval().to(device)
    assert model.beams_share_encoder
    src = random_src(9, seed=8, lo=1, hi=12).to(device)
    decoding = DecodingConfig(max_len_a=1.5, max_len_b=3)
    shared = search(model, src, decoding, beam_size=4, nbest=3, need_attention=True)
    model.beams_share_encoder = False  # the instance only: K copies of each encoder row
    copies = search(model, src, decoding, beam_size=4, nbest=3, need_attention=True)
    assert tokens(shared) == tokens(copies)
    for mine, theirs in zip(shared, copies, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-5)
            assert torch.allclose(a.attention, b.attention, atol=1e-5)


def test_nbest_distinct_and_scored(model):
    src = random_src(4, seed=4)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=4)
    for hyps in search(model, src, cfg, beam_size=6, nbest=4):
        assert len(hyps) == 4
        assert len({tuple(h.tokens) for h in hyps}) == 4
        for h in hyps:
            assert h.score == pytest.approx(normalise(h.log_prob, len(h.tokens) + 1, cfg))
            assert all(t not in (PAD_ID, BOS_ID, EOS_ID) for t in h.tokens)


def test_length_limits(model):
    src = random_src(5, seed=5)
    cfg = DecodingConfig(max_len_a=0.5, max_len_b=2, min_len=2)
    lengths = src.ne(PAD_ID).sum(1).tolist()
    for beam in (1, 3):
        for n, hyps in zip(lengths, search(model, src, cfg, beam_size=beam, nbest=beam), strict=True):
            for h in hyps:
                assert 2 <= len(h.tokens) <= math.floor(0.5 * n + 2)
    # min_len above the limit: the limit wins, every output has exactly the maximum length
    cfg = DecodingConfig(max_len_a=1.0, max_len_b=1, min_len=1000)
    for n, hyps in zip(lengths, search(model, src, cfg, beam_size=2), strict=True):
        assert len(hyps[0].tokens) == n + 1


def test_no_repeat_ngram_prevents_repeats(model):
    src = random_src(6, seed=6)
    cfg = DecodingConfig(max_len_a=2.0, max_len_b=6, min_len=8)

    def repeats(seq: list[int], n: int) -> bool:
        grams = [tuple(seq[i:i + n]) for i in range(len(seq) - n + 1)]
        return len(grams) != len(set(grams))

    if isinstance(model, ToyModel):  # few hash buckets: the toy falls into cycles, as real models do
        model = ToyModel(VOCAB, buckets=4)
    plain = search(model, src, cfg, beam_size=3)
    assert any(repeats(h[0].tokens, 2) for h in plain), "test needs outputs that do repeat bigrams"
    cfg.no_repeat_ngram = 2
    for beam in (1, 3):
        for hyps in search(model, src, cfg, beam_size=beam, nbest=beam):
            for h in hyps:
                assert not repeats(h.tokens, 2), h.tokens


# ------------------------------------------------------------------------------------------- sampling
def test_sampling_reproducible_with_seed(model):
    src = random_src(5, seed=7)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=4, temperature=1.5)

    def run(seed: int) -> list[list[list[int]]]:
        g = torch.Generator().manual_seed(seed)
        return tokens(search(model, src, cfg, sample=True, nbest=3, generator=g))

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_top_k_one_sampling_is_greedy(model):
    src = random_src(5, seed=8)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=4, top_k=1, temperature=0.7)
    sampled = search(model, src, cfg, sample=True, generator=torch.Generator().manual_seed(0))
    assert tokens(sampled) == tokens(search(model, src, cfg, beam_size=1))


def test_top_p_keeps_the_nucleus_only():
    from mtkit.decode.token_rules import filter_logits as _filter_logits

    log_probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = torch.isfinite(_filter_logits(log_probs, DecodingConfig(top_p=0.75)))
    assert kept.tolist() == [[True, True, False, False]]
    kept = torch.isfinite(_filter_logits(log_probs, DecodingConfig(top_p=0.5)))
    assert kept.tolist() == [[True, False, False, False]]


# ------------------------------------------------------------------------------------------- ensemble
def test_ensemble_of_model_with_itself_equals_model(model):
    src = random_src(5, seed=9)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=3)
    pair = Ensemble([model, model]).eval()
    for beam in (1, 3):
        alone = search(model, src, cfg, beam_size=beam, nbest=beam)
        both = search(pair, src, cfg, beam_size=beam, nbest=beam)
        assert tokens(alone) == tokens(both)
        for a, b in zip(alone, both, strict=True):
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


def test_ensemble_of_different_models_averages_log_probs():
    a, b = ToyModel(VOCAB, seed=1), ToyModel(VOCAB, seed=2)
    src = random_src(1, seed=10)
    pair = Ensemble([a, b])
    enc = pair.encode(src)
    lp, _, _ = pair.step(torch.tensor([BOS_ID]), pair.init_state(enc), enc)
    la, _, _ = a.step(torch.tensor([BOS_ID]), a.init_state(a.encode(src)), a.encode(src))
    lb, _, _ = b.step(torch.tensor([BOS_ID]), b.init_state(b.encode(src)), b.encode(src))
    assert torch.allclose(lp, ((la + lb) / 2).log_softmax(-1), atol=1e-6)


# ------------------------------------------------------------------------------------------ attention
def test_attention_follows_the_hypothesis(model):
    """Attention rows are distributions over the real source positions, one per produced token
    plus EOS, and equal the attention of re-running the chosen tokens step by step."""
    src = random_src(3, seed=11)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=3)
    lengths = src.ne(PAD_ID).sum(1).tolist()
    for beam in (1, 3):
        results = search(model, src, cfg, beam_size=beam, need_attention=True)
        for i, hyps in enumerate(results):
            h = hyps[0]
            if h.attention is None:
                pytest.skip("model without attention")
            assert h.attention.shape == (model.num_attention_heads, len(h.tokens) + 1, lengths[i])
            assert torch.allclose(h.attention.sum(-1), torch.ones(h.attention.shape[:2]), atol=1e-4)
            row = src[i: i + 1, : lengths[i]]
            with torch.inference_mode():
                enc = model.encode(row)
                state = model.init_state(enc)
                prev = torch.tensor([BOS_ID])
                for t, tok in enumerate([*h.tokens, EOS_ID]):
                    _, state, attn = model.step(prev, state, enc, need_attention=True)
                    assert torch.allclose(attn[0].float(), h.attention[:, t], atol=1e-4)
                    prev = torch.tensor([tok])


def test_rnn_without_attention_decodes():
    model = real_model("rnn", attention="none")
    src = random_src(3, seed=12)
    results = search(model, src, DecodingConfig(), beam_size=2, need_attention=True)
    assert len(results) == 3 and all(h[0].attention is None for h in results)


def test_empty_batch():
    assert search(ToyModel(), torch.empty((0, 3), dtype=torch.long), DecodingConfig()) == []
