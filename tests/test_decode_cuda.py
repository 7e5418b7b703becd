"""Decoding on a CUDA GPU: what the CPU tests of test_search.py, test_constrained.py and
test_attention.py state, on the card's kernels. Constrained search (which `--placeholders`, catalogs
and glossaries use; it once mixed a host tensor into the card's) meets its constraints; greedy rows that
ride along after finishing change nothing; beams that share one encoder row find what K copies find; a
one-query step equals the fused kernel; bf16 weights decode to finite scores. These need a GPU;
elsewhere they skip (the same behaviour is tested on the CPU, with forced ISAs, in the modules named)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mtkit.config.experiment import DecodingConfig, ModelConfig
from mtkit.decode.constrained import constrained_search
from mtkit.decode.search import Hypothesis, search
from mtkit.formats.placeholders import kept
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


@pytest.mark.parametrize("source_eos", [False, True])
def test_beams_sharing_one_encoder_row_search_as_with_k_copies(source_eos):
    model, src = transformer(seed=3, source_eos=source_eos), random_src(9, seed=8)
    assert model.beams_share_encoder
    decoding = DecodingConfig(max_len_a=1.5, max_len_b=3)
    shared = search(model, src, decoding, beam_size=4, nbest=3, need_attention=True)
    model.beams_share_encoder = False  # the instance only: K copies of each encoder row
    copies = search(model, src, decoding, beam_size=4, nbest=3, need_attention=True)
    assert tokens(shared) == tokens(copies)
    for mine, theirs in zip(shared, copies, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-5)
            assert torch.allclose(a.attention, b.attention, atol=1e-5)


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


def test_placeholders_translate_on_the_card(tmp_path):
    """`mtkit translate --placeholders --device cuda`: one line per line, every placeholder kept (the
    path through masking, constrained retries and the alignment)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_translator import make_model_dir

    model_dir = make_model_dir(tmp_path / "model", beam_size=2, max_len_a=1.0, max_len_b=6)
    lines = ["the house %s is small", "where are {0} you going", "we like <b>green</b> tea", "", "plain cat"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "mtkit", "translate", "-m", str(model_dir), "-i", str(src),
                          "--placeholders", "--device", "cuda"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = run.stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    for source, target in zip(lines, out, strict=True):
        assert kept(source, target) == "", (source, target)
