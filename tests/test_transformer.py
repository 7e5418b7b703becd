"""Transformer behaviour: causality, padding invariance, incremental = teacher-forced, gradients, ties."""

from __future__ import annotations

import itertools

import pytest
import torch

from mtkit.config.experiment import ModelConfig
from mtkit.errors import MtkitError
from mtkit.models import build_model
from mtkit.models.transformer import Transformer
from mtkit.vocab import BOS_ID, PAD_ID

V = 23
VARIANTS = list(itertools.product(["sinusoidal", "learned", "relative"], ["post", "pre"]))



def tiny(positions: str = "sinusoidal", norm: str = "post", **kw) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(arch="transformer", d_model=16, heads=2, d_ff=24, encoder_layers=2, decoder_layers=2,
                      positions=positions, norm=norm, max_relative_distance=3, max_positions=64, **kw)
    return build_model(cfg, V, V, joint_vocab=True).eval()


def batch(seed: int = 1, b: int = 3, s: int = 7, t: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (b, s), generator=g)
    src[1, 5:] = PAD_ID
    src[2, 3:] = PAD_ID
    tgt = torch.randint(4, V, (b, t), generator=g)
    tgt[:, 0] = BOS_ID
    tgt[2, 4:] = PAD_ID
    return src, tgt


@pytest.mark.parametrize("positions,norm", VARIANTS)
def test_causality(positions: str, norm: str) -> None:
    model = tiny(positions, norm)
    src, tgt = batch()
    with torch.no_grad():
        ref, _ = model(src, tgt)
        for t in range(tgt.size(1) - 1):
            changed = tgt.clone()
            changed[:, t + 1:] = torch.randint(4, V, changed[:, t + 1:].shape)
            out, _ = model(src, changed)
            assert torch.allclose(out[:, : t + 1], ref[:, : t + 1], atol=1e-5)
            assert not torch.allclose(out[:, t + 1:], ref[:, t + 1:], atol=1e-3)


@pytest.mark.parametrize("positions,norm", VARIANTS)
def test_padding_changes_no_real_output(positions: str, norm: str) -> None:
    model = tiny(positions, norm)
    src, tgt = batch()
    pad = lambda x, n: torch.cat((x, torch.full((x.size(0), n), PAD_ID)), 1)  # noqa: E731
    with torch.no_grad():
        ref, ref_att = model(src, tgt, need_attention=True)
        # extra PAD columns on both sides
        out, att = model(pad(src, 4), pad(tgt, 3), need_attention=True)
        assert torch.allclose(out[:, : tgt.size(1)], ref, atol=1e-5)
        assert torch.allclose(att[:, :, : tgt.size(1), : src.size(1)], ref_att, atol=1e-5)
        assert torch.all(att[..., src.size(1):] == 0)
        # one sentence alone equals the same sentence in a padded batch
        alone, _ = model(src[2:, :3], tgt[2:, :4])
        assert torch.allclose(alone[0], ref[2, :4], atol=1e-5)


def _incremental(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, rows: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Step through tgt; with ``rows``, select those batch rows first and shuffle them again after
    step 2 (as beam search does). Returns log-probs [R, T, V] and the batch row each output row is."""
    enc = model.encode(src)
    state = model.init_state(enc)
    if rows is None:
        rows = torch.arange(src.size(0))
    else:
        enc, state = model.reorder_encoder(enc, rows), model.reorder_state(state, rows)
    log_probs = []
    for t in range(tgt.size(1)):
        lp, state, _ = model.step(tgt[rows, t], state, enc)
        assert lp.dtype == torch.float32
        log_probs.append(lp)
        if t == 2 and len(rows) > 1:
            shuffle = torch.roll(torch.arange(len(rows)), 1)
            enc, state = model.reorder_encoder(enc, shuffle), model.reorder_state(state, shuffle)
            rows = rows[shuffle]
            log_probs = [x[shuffle] for x in log_probs]
    return torch.stack(log_probs, 1), rows


@pytest.mark.parametrize("positions,norm", VARIANTS)
def test_incremental_decoding_equals_teacher_forcing(positions: str, norm: str) -> None:
    model = tiny(positions, norm)
    src, tgt = batch()
    with torch.no_grad():
        logits, attention = model(src, tgt, need_attention=True, attn_layer=0)
        expected = torch.log_softmax(logits, -1)
        log_probs, rows = _incremental(model, src, tgt)
        real = tgt.ne(PAD_ID)
        assert torch.allclose(log_probs[real[rows]], expected[rows][real[rows]], atol=1e-5)
        # attention of layer 0 per head, and after reordering the batch
        enc = model.encode(src)
        _, state, att0 = model.step(tgt[:, 0], model.init_state(enc), enc, need_attention=True, attn_layer=0)
        assert att0.shape == (3, 2, src.size(1))
        assert torch.allclose(att0, attention[:, :, 0], atol=1e-5)
        # rows selected with a duplicate, as beam search makes, and reordered mid-sentence
        log_probs, rows = _incremental(model, src, tgt, torch.tensor([2, 0, 1, 0]))
        assert torch.allclose(log_probs[real[rows]], expected[rows][real[rows]], atol=1e-5)


def test_step_without_attention_returns_none_and_long_inputs_work() -> None:
    model = tiny("sinusoidal")
    src = torch.randint(4, V, (2, 300))  # longer than the initial sinusoid table
    with torch.no_grad():
        enc = model.encode(src)
        lp, state, att = model.step(torch.full((2,), BOS_ID), model.init_state(enc), enc)
    assert att is None and torch.isfinite(lp).all()
    assert torch.allclose(lp.exp().sum(-1), torch.ones(2), atol=1e-5)
    learned = tiny("learned")
    with pytest.raises(MtkitError, match="max_positions"):
        learned.encode(torch.randint(4, V, (1, 65)))


@pytest.mark.parametrize("positions,norm", VARIANTS)
def test_gradients_reach_every_parameter(positions: str, norm: str) -> None:
    model = tiny(positions, norm, tie_embeddings=False, share_all_embeddings=False).train()
    src, tgt = batch()
    logits, _ = model(src, tgt)
    logits.logsumexp(-1).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_incremental_step_under_autograd_matches_too() -> None:
    """Scheduled sampling may run step() with gradients on: the cache is then built functionally."""
    model = tiny("relative")
    src, tgt = batch()
    logits, _ = model(src, tgt)
    log_probs, rows = _incremental(model, src, tgt)
    real = tgt.ne(PAD_ID)[rows]
    assert torch.allclose(log_probs[real], torch.log_softmax(logits, -1)[rows][real], atol=1e-5)
    log_probs[real].sum().backward()
    assert model.tgt_embed.weight.grad is not None


def test_embedding_sharing() -> None:
    shared = tiny()
    assert shared.src_embed is shared.tgt_embed and shared.output_proj.weight is shared.tgt_embed.weight
    cfg = ModelConfig(d_model=16, heads=2, d_ff=24, encoder_layers=1, decoder_layers=1)
    separate = build_model(cfg, 30, 40, joint_vocab=False)
    assert separate.src_embed is not separate.tgt_embed
    assert separate.output_proj.weight is separate.tgt_embed.weight  # tie_embeddings still applies
    untied = build_model(ModelConfig(d_model=16, heads=2, d_ff=24, tie_embeddings=False,
                                     share_all_embeddings=False), 30, 30, joint_vocab=True)
    assert untied.output_proj.weight is not untied.tgt_embed.weight
    assert untied.num_parameters() > shared.num_parameters()


def test_bf16_autocast_runs_and_returns_float32_log_probs() -> None:
    model = tiny("relative")
    src, tgt = batch()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits, _ = model(src, tgt)
        enc = model.encode(src)
        lp, _, att = model.step(tgt[:, 0], model.init_state(enc), enc, need_attention=True)
    assert torch.isfinite(logits).all()
    assert lp.dtype == torch.float32 and torch.isfinite(lp).all()
    assert torch.allclose(lp, torch.log_softmax(logits[:, 0].float(), -1), atol=0.1)


def test_bf16_weights_decode_close_to_fp32() -> None:
    """Decoding with the weights themselves in bf16 (half the memory traffic) stays close to fp32."""
    model = tiny("sinusoidal")
    src, tgt = batch()
    with torch.no_grad():
        enc = model.encode(src)
        ref, _, _ = model.step(tgt[:, 0], model.init_state(enc), enc)
        half = tiny("sinusoidal").to(torch.bfloat16)
        enc = half.encode(src)
        lp, state, att = half.step(tgt[:, 0], half.init_state(enc), enc, need_attention=True)
        lp, _, _ = half.step(tgt[:, 1], state, enc)
    assert lp.dtype == torch.float32 and torch.isfinite(lp).all()
    assert torch.allclose(half.step(tgt[:, 0], half.init_state(enc), enc)[0], ref, atol=0.1)


def test_all_padding_source_row_gives_finite_outputs() -> None:
    model = tiny("relative")
    src, tgt = batch()
    src[0] = PAD_ID
    with torch.no_grad():
        logits, att = model(src, tgt, need_attention=True)
        enc = model.encode(src)
        lp, _, _ = model.step(tgt[:, 0], model.init_state(enc), enc)
    assert torch.isfinite(logits).all() and torch.isfinite(att).all() and torch.isfinite(lp).all()
