"""RNN encoder-decoder: incremental = teacher-forced for every scorer/style/cell, padding, gradients."""

from __future__ import annotations

import itertools

import pytest
import torch

from mtkit.config.experiment import ModelConfig
from mtkit.models import build_model
from mtkit.models.rnn import RNNSeq2Seq
from mtkit.vocab import BOS_ID, PAD_ID

V = 19
SCORERS = ["dot", "scaled_dot", "general", "additive", "none"]
# (style, input_feeding): Bahdanau, Luong with and without input feeding
STYLES = [("bahdanau", True), ("luong", True), ("luong", False)]



def tiny(attention: str = "additive", style: str = "bahdanau", rnn_type: str = "lstm",
         bidirectional: bool = True, input_feeding: bool = True, **kw) -> RNNSeq2Seq:
    torch.manual_seed(0)
    cfg = ModelConfig(arch="rnn", emb_dim=6, hidden_size=8, encoder_layers=2, decoder_layers=2,
                      attention=attention, attention_style=style, rnn_type=rnn_type,
                      bidirectional=bidirectional, input_feeding=input_feeding, **kw)
    return build_model(cfg, V, V, joint_vocab=True).eval()


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (3, 7), generator=g)
    src[1, 5:] = PAD_ID
    src[2, 3:] = PAD_ID
    tgt = torch.randint(4, V, (3, 6), generator=g)
    tgt[:, 0] = BOS_ID
    tgt[2, 4:] = PAD_ID
    return src, tgt


def _step_through(model: RNNSeq2Seq, src: torch.Tensor, tgt: torch.Tensor, rows: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Decode tgt[rows] one step at a time, shuffling the rows after step 2 as beam search would."""
    enc = model.encode(src)
    state = model.reorder_state(model.init_state(enc), rows)
    enc = model.reorder_encoder(enc, rows)
    log_probs, attention = [], []
    for t in range(tgt.size(1)):
        lp, state, att = model.step(tgt[rows, t], state, enc, need_attention=True)
        assert lp.dtype == torch.float32
        log_probs.append(lp)
        attention.append(att)
        if t == 2:
            shuffle = torch.roll(torch.arange(len(rows)), 1)
            enc, state = model.reorder_encoder(enc, shuffle), model.reorder_state(state, shuffle)
            rows = rows[shuffle]
            log_probs = [x[shuffle] for x in log_probs]
            attention = [None if a is None else a[shuffle] for a in attention]
    att = None if attention[0] is None else torch.stack(attention, 2)
    return torch.stack(log_probs, 1), att, rows


CASES = [(a, s, f, r, bi) for a, (s, f), r, bi in
         itertools.product(SCORERS, STYLES, ["lstm", "gru"], [True, False])]


@pytest.mark.parametrize("attention,style,feeding,rnn_type,bidirectional", CASES)
def test_incremental_decoding_equals_teacher_forcing(attention: str, style: str, feeding: bool,
                                                     rnn_type: str, bidirectional: bool) -> None:
    model = tiny(attention, style, rnn_type, bidirectional, feeding)
    src, tgt = batch()
    with torch.no_grad():
        logits, ref_att = model(src, tgt, need_attention=True)
        expected = torch.log_softmax(logits, -1)
        log_probs, att, rows = _step_through(model, src, tgt, torch.tensor([2, 0, 1, 0]))
    real = tgt.ne(PAD_ID)[rows]
    assert torch.allclose(log_probs[real], expected[rows][real], atol=1e-5)
    if attention == "none":
        assert att is None and ref_att is None
    else:
        assert att.shape == (4, 1, tgt.size(1), src.size(1))
        assert torch.allclose(att, ref_att[rows], atol=1e-5)
        assert torch.all(ref_att[2, :, :, 3:] == 0) and torch.all(ref_att[1, :, :, 5:] == 0)
        assert torch.allclose(ref_att.sum(-1), torch.ones(3, 1, tgt.size(1)), atol=1e-5)


@pytest.mark.parametrize("attention,style,feeding", [
    ("additive", "bahdanau", True), ("general", "luong", True), ("dot", "luong", False),
    ("none", "bahdanau", True),
])
def test_padding_changes_no_real_output(attention: str, style: str, feeding: bool) -> None:
    model = tiny(attention, style, input_feeding=feeding)
    src, tgt = batch()
    pad = lambda x, n: torch.cat((x, torch.full((x.size(0), n), PAD_ID)), 1)  # noqa: E731
    with torch.no_grad():
        ref, _ = model(src, tgt)
        out, _ = model(pad(src, 4), pad(tgt, 3))
        assert torch.allclose(out[:, : tgt.size(1)], ref, atol=1e-5)
        alone, _ = model(src[2:, :3], tgt[2:, :4])  # the short sentence without its batch
        assert torch.allclose(alone[0], ref[2, :4], atol=1e-5)


def test_causality() -> None:
    model = tiny("general", "luong")
    src, tgt = batch()
    with torch.no_grad():
        ref, _ = model(src, tgt)
        changed = tgt.clone()
        changed[:, 3:] = torch.randint(4, V, changed[:, 3:].shape)
        out, _ = model(src, changed)
    assert torch.allclose(out[:, :3], ref[:, :3], atol=1e-6)
    assert not torch.allclose(out[:, 3:], ref[:, 3:], atol=1e-3)


@pytest.mark.parametrize("attention,style,rnn_type",
                         list(itertools.product(SCORERS, ["bahdanau", "luong"], ["lstm", "gru"])))
def test_gradients_reach_every_parameter(attention: str, style: str, rnn_type: str) -> None:
    model = tiny(attention, style, rnn_type, tie_embeddings=False, share_all_embeddings=False).train()
    src, tgt = batch()
    logits, _ = model(src, tgt)
    logits.logsumexp(-1).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_bridge_and_zero_initial_state() -> None:
    src, _ = batch()
    with torch.no_grad():
        plain = tiny(bridge=False)
        hidden, cell = plain.init_state(plain.encode(src)).hidden
        assert torch.all(hidden == 0) and torch.all(cell == 0)
        bridged = tiny(bridge=True, rnn_type="gru")
        state = bridged.init_state(bridged.encode(src)).hidden
        assert state.shape == (2, 3, 8) and state.abs().sum() > 0
        # the bridged state is a function of each sentence alone
        alone = bridged.init_state(bridged.encode(src[2:, :3])).hidden
        assert torch.allclose(alone[:, 0], state[:, 2], atol=1e-6)


def test_tied_output_uses_embedding_size_and_dot_needs_no_extra_sizes() -> None:
    model = tiny("dot", "luong", tie_embeddings=True)
    assert model.output_proj.weight is model.tgt_embed.weight and model.out_dim == 6
    untied = tiny("dot", "luong", tie_embeddings=False, share_all_embeddings=False)
    assert untied.output_proj.weight.shape == (V, 8)
    assert untied.src_embed is not untied.tgt_embed
