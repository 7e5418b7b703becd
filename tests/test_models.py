"""build_model, parameter counts (the paper's base model), `mtkit params`, checkpoint round trips, the
named encoder outputs and their one generic reordering, the embedding both families share."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import yaml
from typer.testing import CliRunner

from mtkit.cli.app import app
from mtkit.config.experiment import ModelConfig
from mtkit.models import build_model
from mtkit.models.base import EncoderOutput, embedding, select_rows
from mtkit.models.ensemble import Ensemble, EnsembleEncoderOutput
from mtkit.models.rnn import RNNEncoderOutput, RNNSeq2Seq
from mtkit.models.summary import build_on_meta, parameter_breakdown
from mtkit.models.transformer import Transformer, TransformerEncoderOutput
from mtkit.vocab import PAD_ID

BASE = {"arch": "transformer", "d_model": 512, "heads": 8, "d_ff": 2048, "encoder_layers": 6,
        "decoder_layers": 6, "tie_embeddings": True, "share_all_embeddings": True}



def test_build_model_dispatches_on_arch() -> None:
    assert isinstance(build_model(ModelConfig(d_model=16, heads=2, d_ff=8), 10, 10), Transformer)
    rnn = build_model(ModelConfig(arch="rnn", emb_dim=4, hidden_size=4), 10, 12)
    assert isinstance(rnn, RNNSeq2Seq) and rnn.num_attention_heads == 1


def test_paper_base_transformer_parameter_count() -> None:
    """Vaswani et al. (2017), Table 3 "base": N=6, d_model=512, h=8, d_ff=2048, shared 37k BPE vocabulary.
    The paper reports 65M; our exact count is 63.1M (see docs/models.md for the difference)."""
    model = build_on_meta(ModelConfig(**BASE), 37000, 37000, joint_vocab=True)
    d, ff, n, v = 512, 2048, 6, 37000
    attention = 4 * (d * d + d)
    ffn = d * ff + ff + ff * d + d
    expected = v * d + n * (attention + ffn + 2 * 2 * d) + n * (2 * attention + ffn + 3 * 2 * d)
    assert model.num_parameters() == expected
    assert 60e6 < model.num_parameters() < 66e6
    rows = {label: count for label, count, _ in parameter_breakdown(model)}
    assert rows["output projection"] == 0 and rows["source embedding"] == 0  # tied, counted once
    assert sum(rows.values()) == model.num_parameters()


def test_params_command_prints_the_breakdown(tmp_path) -> None:
    config = tmp_path / "base.yaml"
    config.write_text(yaml.safe_dump({"model": BASE, "data": {"dir": str(tmp_path / "none")}}))
    result = CliRunner().invoke(app, ["params", str(config), "--src-vocab", "37000", "--tgt-vocab", "37000",
                                      "--joint"])
    assert result.exit_code == 0, result.output
    assert "63,082,496" in result.output and "encoder" in result.output
    smaller = CliRunner().invoke(app, ["params", str(config), "--set", "model.encoder_layers=1",
                                       "--src-vocab", "37000", "--tgt-vocab", "37000", "--joint"])
    assert smaller.exit_code == 0 and "63,082,496" not in smaller.output
    mismatch = CliRunner().invoke(app, ["params", str(config), "--src-vocab", "100", "--tgt-vocab", "200",
                                        "--joint"])
    assert mismatch.exit_code != 0


FAMILIES = {"transformer": {"d_model": 16, "heads": 2, "d_ff": 8}, "rnn": {"arch": "rnn", "emb_dim": 8,
                                                                       "hidden_size": 12}}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("tie", "share"), [(True, True), (False, True), (True, False), (False, False)])
def test_tie_and_share_mean_the_same_in_both_families(family: str, tie: bool, share: bool) -> None:
    """share_all_embeddings: one source/target embedding; tie_embeddings: the output projection is the
    target embedding. Independent keys: the Transformer once stayed tied whenever share_all was true."""
    cfg = ModelConfig(**FAMILIES[family], tie_embeddings=tie, share_all_embeddings=share)
    model = build_model(cfg, 20, 20, joint_vocab=True)
    assert (model.src_embed is model.tgt_embed) is share
    assert (model.output_proj.weight is model.tgt_embed.weight) is tie
    notes = {label: note for label, _, note in parameter_breakdown(model)}  # what `mtkit params` prints
    assert (notes["output projection"] == "tied to the target embedding") is tie
    assert ("the output projection" in notes["target embedding"]) is tie
    assert ("the source embedding" in notes["target embedding"]) is share
    separate = build_model(cfg, 20, 24, joint_vocab=False)  # separate vocabularies: nothing to share
    assert separate.src_embed is not separate.tgt_embed
    assert (separate.output_proj.weight is separate.tgt_embed.weight) is tie


@pytest.mark.parametrize("family", FAMILIES)
def test_features_are_what_the_output_layer_projects(family: str) -> None:
    """forward(project=False), which training's blocked loss takes, is the output layer's input,
    dropout included: projecting it gives forward()'s logits under the same random draws."""
    cfg = ModelConfig(**FAMILIES[family], dropout=0.3)
    model = build_model(cfg, 20, 20, joint_vocab=True).train()
    src, tgt = torch.randint(4, 20, (2, 5)), torch.randint(4, 20, (2, 4))
    torch.manual_seed(3)
    logits, _ = model(src, tgt)
    torch.manual_seed(3)
    features, _ = model(src, tgt, project=False)
    assert features.shape == (2, 4, model.output_proj.in_features)
    assert torch.allclose(model.output_proj(features), logits, atol=1e-6)


def test_meta_build_counts_like_a_real_build() -> None:
    cfg = ModelConfig(arch="rnn", emb_dim=8, hidden_size=12, attention="general", attention_style="luong")
    real = build_model(cfg, 30, 40)
    assert build_on_meta(cfg, 30, 40, False).num_parameters() == real.num_parameters()
    assert real.num_parameters() == sum(p.numel() for p in {id(p): p for p in real.parameters()}.values())


@pytest.mark.parametrize("cfg", [
    ModelConfig(d_model=16, heads=2, d_ff=8, positions="relative", norm="pre"),
    ModelConfig(d_model=16, heads=2, d_ff=8, positions="learned"),
    ModelConfig(arch="rnn", emb_dim=6, hidden_size=8, attention="additive"),
])
def test_state_dict_round_trip_reproduces_outputs(cfg: ModelConfig) -> None:
    torch.manual_seed(0)
    model = build_model(cfg, 20, 20, joint_vocab=True).eval()
    torch.manual_seed(1)
    fresh = build_model(cfg, 20, 20, joint_vocab=True).eval()
    src, tgt = torch.randint(4, 20, (2, 5)), torch.randint(4, 20, (2, 4))
    with torch.no_grad():
        assert not torch.allclose(fresh(src, tgt)[0], model(src, tgt)[0])
        fresh.load_state_dict(model.state_dict())
        assert torch.equal(fresh(src, tgt)[0], model(src, tgt)[0])


# ------------------------------------------------------------------ encoder outputs and reordering
@dataclasses.dataclass(eq=False)
class _Inner:
    rows: torch.Tensor
    note: str


@dataclasses.dataclass(eq=False)
class _Outer(EncoderOutput):
    layers: list[torch.Tensor]
    pair: tuple[torch.Tensor, None]
    inner: _Inner
    missing: torch.Tensor | None


def test_select_rows_reorders_every_tensor_of_a_nested_dataclass() -> None:
    rows = lambda n: torch.arange(n * 4).view(n, 4)  # noqa: E731  row i starts with 4·i
    shared = rows(3)
    enc = _Outer(shared, rows(3) > 5, [rows(3), shared], (rows(3), None), _Inner(rows(3), "kept"), None)
    index = torch.tensor([2, 0, 2])
    out = select_rows(enc, index)
    assert type(out) is _Outer and out is not enc
    pairs = [(enc.memory, out.memory), (enc.src_mask, out.src_mask), (enc.layers[0], out.layers[0]),
             (enc.pair[0], out.pair[0]), (enc.inner.rows, out.inner.rows)]
    for before, after in pairs:
        assert torch.equal(after, before[index])
    assert out.pair[1] is None and out.missing is None and out.inner.note == "kept"
    assert out.layers[1] is out.memory  # a tensor reachable twice is selected once and stays shared
    assert torch.equal(enc.memory, rows(3))  # the input is left as it was
    with pytest.raises(TypeError, match="dict"):
        select_rows(_Inner({"a": shared}, "x"), index)  # type: ignore[arg-type]


def _tensors(obj: object) -> list[torch.Tensor | None]:
    """Every tensor (and None) in an encoder output, in field order, through lists and members."""
    if isinstance(obj, torch.Tensor) or obj is None:
        return [obj]
    if isinstance(obj, list | tuple):
        return [t for o in obj for t in _tensors(o)]
    return [t for f in dataclasses.fields(obj) for t in _tensors(getattr(obj, f.name))]


def _families() -> dict[str, tuple[object, type]]:
    torch.manual_seed(0)
    transformer = build_model(ModelConfig(d_model=16, heads=2, d_ff=8, decoder_layers=2), 20, 20).eval()
    rnn = build_model(ModelConfig(arch="rnn", emb_dim=6, hidden_size=8), 20, 20).eval()
    bare = build_model(ModelConfig(arch="rnn", emb_dim=6, hidden_size=8, attention="none"), 20, 20).eval()
    return {"transformer": (transformer, TransformerEncoderOutput), "rnn": (rnn, RNNEncoderOutput),
            "rnn-no-attention": (bare, RNNEncoderOutput),
            "ensemble": (Ensemble([transformer, rnn]).eval(), EnsembleEncoderOutput)}


@pytest.mark.parametrize("family", ["transformer", "rnn", "rnn-no-attention", "ensemble"])
def test_reorder_encoder_equals_encoding_the_reordered_batch(family: str) -> None:
    """Beam search relies on it: every named field of every family (ensemble members included)
    follows its batch rows."""
    model, kind = _families()[family]
    src = torch.randint(4, 20, (3, 5), generator=torch.Generator().manual_seed(1))
    src[1, 3:] = PAD_ID
    index = torch.tensor([2, 2, 0, 1])
    with torch.no_grad():
        enc = model.encode(src)
        assert type(enc) is kind
        reordered, direct = model.reorder_encoder(enc, index), model.encode(src[index])
    assert type(reordered) is kind
    got, want = _tensors(reordered), _tensors(direct)
    assert len(got) == len(want) > 2  # the family's own fields are there, not only memory and mask
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=1e-5)


def test_both_families_share_one_embedding_initialisation() -> None:
    emb = embedding(4000, 16)
    assert emb.padding_idx == PAD_ID and torch.all(emb.weight[PAD_ID] == 0)
    assert abs(float(emb.weight[1:].detach().std()) - 16 ** -0.5) < 0.01
    cfgs = [ModelConfig(d_model=16, heads=2, d_ff=8, share_all_embeddings=False),
            ModelConfig(arch="rnn", emb_dim=16, hidden_size=8, share_all_embeddings=False)]
    weights = []
    for cfg in cfgs:  # same seed, same sizes: the same first draws, whichever family
        torch.manual_seed(3)
        model = build_model(cfg, 30, 30)
        weights.append((model.tgt_embed.weight, model.src_embed.weight))
    assert torch.equal(weights[0][0], weights[1][0]) and torch.equal(weights[0][1], weights[1][1])


@pytest.mark.parametrize("cfg", [
    ModelConfig(d_model=16, heads=2, d_ff=8, decoder_layers=2),
    ModelConfig(arch="rnn", emb_dim=6, hidden_size=8),  # bahdanau: step by step
    ModelConfig(arch="rnn", emb_dim=6, hidden_size=8, attention="general", attention_style="luong",
                input_feeding=False),  # the whole sequence in one call
    ModelConfig(arch="rnn", emb_dim=6, hidden_size=8, attention="none"),
], ids=["transformer", "rnn-bahdanau", "rnn-luong", "rnn-no-attention"])
def test_source_rows_equal_encoding_each_row_own_copy_of_its_source(cfg: ModelConfig) -> None:
    """MRT encodes each source once for its reference and candidates (``source_rows``): the outputs
    and the encoder's gradients are those of a batch with the source repeated for every row."""
    torch.manual_seed(0)
    model = build_model(cfg, 20, 20, joint_vocab=True).eval()
    gen = torch.Generator().manual_seed(2)
    src, tgt = torch.randint(4, 20, (2, 5), generator=gen), torch.randint(4, 20, (5, 4), generator=gen)
    src[1, 2:] = PAD_ID
    rows = torch.tensor([0, 1, 0, 0, 1])
    grads = []
    for kwargs, source in (({"source_rows": rows}, src), ({}, src[rows])):
        model.zero_grad()
        out, _ = model(source, tgt, project=False, **kwargs)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads.append((out.detach(), model.src_embed.weight.grad.clone()))
    (shared, shared_grad), (repeated, repeated_grad) = grads
    assert torch.allclose(shared, repeated, atol=1e-5)
    assert shared_grad.abs().sum() > 0 and torch.allclose(shared_grad, repeated_grad, atol=1e-5)
