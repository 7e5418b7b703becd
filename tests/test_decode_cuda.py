"""Decoding on a CUDA GPU: what the CPU tests of test_search.py, test_constrained.py and
test_attention.py state, on the card's kernels. Constrained search (which `--placeholders`, catalogs
and glossaries use; it once mixed a host tensor into the card's) meets its constraints; greedy rows that
ride along after finishing change nothing; a one-query step equals the fused kernel; bf16 weights decode
to finite scores. These need a GPU; elsewhere they skip (the same behaviour is tested on the CPU, with
forced ISAs, in the modules named). Beams sharing one encoder row (test_search.py) and `--placeholders`
end to end (test_formats_placeholders.py) take a ``device`` parameter there instead."""

from __future__ import annotations

import pytest
import torch

from mtkit.config.experiment import DecodingConfig, ModelConfig
from mtkit.decode.constrained import constrained_search
from mtkit.decode.search import Hypothesis, search
from mtkit.models import build_model
from mtkit.models.attention import additive_key_mask, attend
from mtkit.models.base import Seq2Seq
from mtkit.vocab import PAD_ID

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

VOCAB = 24
CUDA = torch.device("cuda", 0)


@pytest.fixture(autouse=True)
def exact_fp32():
    """fp32 means fp32: no TF32 matrix products, which round to 10 bits and can break a tie."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def transformer(seed: int = 0, source_eos: bool = False) -> Seq2Seq:
    torch.manual_seed(seed)
    cfg = ModelConfig(arch="transformer", d_model=32, heads=4, d_ff=64, encoder_layers=2, decoder_layers=2,
                      dropout=0.0, source_eos=source_eos)
    return build_model(cfg, VOCAB, VOCAB, True).eval().to(CUDA)


def random_src(batch: int, seed: int, lo: int = 1, hi: int = 12) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi, (batch,), generator=g)
    src = torch.full((batch, int(lengths.max())), PAD_ID, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
    return src.to(CUDA)


def tokens(results: list[list[Hypothesis]]) -> list[list[list[int]]]:
    return [[h.tokens for h in hyps] for hyps in results]


@pytest.mark.parametrize("fraction", [0.25, 1.0])
def test_greedy_same_whether_finished_rows_leave_at_once_or_ride_along(fraction, monkeypatch):
    import mtkit.decode.search as search_module

    model, src = transformer(), random_src(16, seed=21)
    cfg = DecodingConfig(max_len_a=1.5, max_len_b=2)
    monkeypatch.setattr(search_module, "COMPACT_FRACTION", 0.0)
    at_once = search(model, src, cfg, beam_size=1, need_attention=True)
    monkeypatch.setattr(search_module, "COMPACT_FRACTION", fraction)
    riding = search(model, src, cfg, beam_size=1, need_attention=True)
    assert tokens(riding) == tokens(at_once)
    for a, b in zip(at_once, riding, strict=True):
        assert a[0].score == pytest.approx(b[0].score, abs=1e-5)
        assert torch.allclose(a[0].attention.float(), b[0].attention.float(), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_query_step_equals_the_fused_kernel(dtype):
    torch.manual_seed(0)
    q = torch.randn(6, 4, 1, 8, dtype=dtype, device=CUDA)
    cache = torch.randn(2, 6, 4, 12, 8, dtype=dtype, device=CUDA)
    k, v = cache[0, :, :, :7], cache[1, :, :, :7]
    key_mask = torch.ones(6, 7, dtype=torch.bool, device=CUDA)
    key_mask[:3, 4:] = False
    mask = additive_key_mask(key_mask, dtype)
    with torch.inference_mode():
        for m in (None, mask):
            out, _ = attend(q, k, v, m)
            expected = torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), attn_mask=None if m is None else m.float())
            assert torch.allclose(out.float(), expected, atol=1e-5 if dtype == torch.float32 else 2e-2)


@pytest.mark.parametrize("beam", [1, 4])
def test_bf16_weights_decode_to_finite_scores_of_the_right_shape(beam):
    model, src = transformer(seed=5).to(torch.bfloat16), random_src(11, seed=2)
    results = search(model, src, DecodingConfig(max_len_a=1.5, max_len_b=3), beam_size=beam,
                     nbest=min(beam, 2), need_attention=True)
    assert len(results) == src.size(0)
    for row, hyps in zip(src, results, strict=True):
        assert len(hyps) == min(beam, 2)
        for h in hyps:
            assert torch.isfinite(torch.tensor(h.score))
            assert h.attention.shape[-1] == int(row.ne(PAD_ID).sum())


def test_hard_constraints_are_met_on_the_card():
    model, src = transformer(seed=7), random_src(5, seed=4, lo=3)
    cfg = DecodingConfig(beam_size=4, max_len_a=1.0, max_len_b=3)
    written = {tok for hyps in search(model, src, cfg, beam_size=4) for tok in hyps[0].tokens}
    never = [t for t in range(4, VOCAB) if t not in written][:2]
    assert never, "the model writes every token: pick another seed"
    pieces = torch.zeros(VOCAB, dtype=torch.bool, device=CUDA)
    pieces[never[-1]] = True  # a word piece: nothing of that kind may follow a met constraint
    found = constrained_search(model, src, cfg, [[never]] * src.size(0), beam_size=4, nbest=2,
                               need_attention=True, word_pieces=pieces)
    for hyps in found:
        assert len(hyps) == 2
        for h in hyps:
            assert any(h.tokens[i:i + len(never)] == never for i in range(len(h.tokens)))

