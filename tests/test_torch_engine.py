"""The torch engine's decoding path: the in-place key/value cache gives what full decoding gives, and
``--precision int8`` quantizes the linear layers for the CPU and stays close to fp32."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from mtkit.config.experiment import DecodingConfig, ModelConfig
from mtkit.decode import search as search_module
from mtkit.decode.quantize import int8_backend, quantize_int8
from mtkit.decode.search import search
from mtkit.device import ct2_compute_type, decode_dtype, decode_int8
from mtkit.errors import ConfigError
from mtkit.models import build_model
from mtkit.models.base import Seq2Seq
from mtkit.models.transformer import CACHE_CHUNK, Transformer, TransformerState, reorder_cache
from mtkit.vocab import PAD_ID

V = 29
#: every shape the cache must serve: post/pre-norm, tied/untied output, relu/gelu/swish, positions
SHAPES = {
    "post-tied-relu": {},
    "pre-untied-gelu": {"norm": "pre", "tie_embeddings": False, "activation": "gelu"},
    "pre-tied-swish-learned": {"norm": "pre", "activation": "swish", "positions": "learned"},
    "post-relative": {"positions": "relative"},
}


def tiny(**kw) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(arch="transformer", d_model=16, heads=2, d_ff=24, encoder_layers=2, decoder_layers=2,
                      max_relative_distance=3, max_positions=128, dropout=0.0, **kw)
    model = build_model(cfg, V, V, joint_vocab=True).eval()
    with torch.no_grad():  # sharper distributions than the init's: searches then differ by model
        model.output_proj.weight.mul_(4.0)
    return model


def sources(b: int = 5, s: int = 9, seed: int = 1) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (b, s), generator=g)
    src[1, 6:] = PAD_ID
    src[3, 2:] = PAD_ID
    return src


class FullDecoding(Seq2Seq):
    """The model without a cache: each step runs the teacher-forced ``forward`` over the whole prefix
    and keeps the last position, so its state is only the tokens so far (reordered by rows)."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def encode(self, src: Tensor):  # the encoder output carries the source for forward
        enc = self.model.encode(src)
        enc.memory = src
        return enc

    def init_state(self, enc) -> Tensor:
        return torch.empty((enc.memory.size(0), 0), dtype=torch.long)

    def step(self, prev_tokens, state, enc, need_attention=False, attn_layer=-1, normalize=True):
        prefix = torch.cat((state, prev_tokens.unsqueeze(1)), 1)
        logits, _ = self.model(enc.memory, prefix)
        return torch.log_softmax(logits[:, -1].float(), -1), prefix, None


def config(**kw) -> DecodingConfig:
    return DecodingConfig(**{"max_len_a": 1.5, "max_len_b": 5, **kw})


@pytest.mark.parametrize("shape", list(SHAPES))
def test_cached_search_equals_full_decoding(shape: str) -> None:
    model = tiny(**SHAPES[shape])
    src = sources()
    for beam in (1, 4):
        cached = search(model, src, config(), beam_size=beam, nbest=beam)
        full = search(FullDecoding(model), src, config(), beam_size=beam, nbest=beam)
        for got, want in zip(cached, full, strict=True):
            assert [h.tokens for h in got] == [h.tokens for h in want], (shape, beam)
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)


def test_beam_of_one_is_greedy_and_long_outputs_outgrow_the_first_chunk() -> None:
    model = tiny(norm="pre")
    src = sources()
    cfg = config(max_len_a=0.0, max_len_b=CACHE_CHUNK + 8, min_len=CACHE_CHUNK + 4)  # the cache grows
    greedy = search(model, src, cfg, beam_size=1)
    with torch.inference_mode():
        beam_one = search_module._beam(model, src, cfg, 1, 1, False, -1)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam_one]
    assert min(len(h[0].tokens) for h in greedy) > CACHE_CHUNK
    full = search(FullDecoding(model), src, cfg, beam_size=1)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in full]


def _state(rows: int = 4, length: int = 3) -> TransformerState:
    cache = torch.arange(2 * 2 * rows * 2 * 8 * 4, dtype=torch.float32).view(2, 2, rows, 2, 8, 4)
    return TransformerState(cache, length)


def test_reordering_the_cache_selects_rows_and_copies_nothing_for_the_identity() -> None:
    with torch.inference_mode():
        state = _state()
        same = reorder_cache(state, torch.arange(4))
        assert same is state
        expected = state.cache[:, :, [2, 2, 0], :, :3].clone()
        moved = reorder_cache(state, torch.tensor([2, 2, 0]))
        assert torch.equal(moved.cache[:, :, :, :, :3], expected) and moved.length == 3
        assert moved.spare is state.cache  # the old buffer is the next reorder's target
        again = reorder_cache(moved, torch.tensor([1, 0]))
        assert again.cache.data_ptr() == state.cache.data_ptr()  # gathered back, nothing allocated
        assert torch.equal(again.cache[:, :, :, :, :3], expected[:, :, [1, 0]])
        grown = reorder_cache(_state(rows=2), torch.tensor([0, 0, 1, 1]))
        assert grown.cache.size(2) == 4


def test_scheduled_sampling_steps_keep_their_gradients() -> None:
    model = tiny(norm="pre")
    src = sources()
    enc = model.encode(src)
    state = model.init_state(enc)
    prev = torch.full((src.size(0),), 1)
    total = torch.zeros(())
    for _ in range(3):
        log_probs, state, _ = model.step(prev, state, enc)
        state = model.reorder_state(state, torch.arange(src.size(0)).flip(0))
        enc = model.reorder_encoder(enc, torch.arange(src.size(0)).flip(0))
        prev = log_probs.argmax(-1)
        total = total + log_probs.max(-1).values.sum()
    total.backward()
    assert model.decoder_layers[0].self_attn.qkv.weight.grad.abs().sum() > 0


def test_precision_int8_is_the_int8_flag_on_cpu_only() -> None:
    cpu = torch.device("cpu")
    assert decode_int8("int8") and decode_int8("auto", True) and not decode_int8("bf16")
    assert decode_dtype("int8", cpu) is torch.float32
    assert ct2_compute_type("int8", False) == ct2_compute_type("auto", True)
    with pytest.raises(ConfigError, match="int8 quantizes for the CPU"):
        decode_dtype("int8", torch.device("cuda"))
    with pytest.raises(ConfigError, match="int8"):
        decode_dtype("int4", cpu)


def test_int8_backend_is_onednn_where_the_cpu_has_int8_instructions() -> None:
    supported = torch.backends.quantized.supported_engines
    if "onednn" in supported:
        assert int8_backend(frozenset({"avx2", "amx_int8"})) == "onednn"
        assert int8_backend(frozenset({"avx2", "avx512_vnni"})) == "onednn"
    assert int8_backend(frozenset({"avx2", "fma"})) != "onednn"


@pytest.mark.parametrize("backend", sorted({int8_backend(), int8_backend(frozenset())}))
def test_int8_decoding_stays_close_to_fp32(backend: str) -> None:
    model = tiny(norm="pre", tie_embeddings=False, activation="gelu")
    before = torch.backends.quantized.engine
    quantized = quantize_int8(tiny(norm="pre", tie_embeddings=False, activation="gelu"), backend)
    assert torch.backends.quantized.engine == before
    assert not any(type(m) is nn.Linear for m in quantized.modules())
    src = sources(b=8)
    agree = total = 0
    with torch.inference_mode():
        for m, q in ((model, quantized),):
            enc, qenc = m.encode(src), q.encode(src)
            state, qstate = m.init_state(enc), q.init_state(qenc)
            prev = torch.full((src.size(0),), 1)
            for _ in range(6):
                lp, state, _ = m.step(prev, state, enc)
                qlp, qstate, _ = q.step(prev, qstate, qenc)
                assert (qlp - lp).abs().max() < 1.0
                agree += int((qlp.argmax(-1) == lp.argmax(-1)).sum())
                total += lp.size(0)
                prev = lp.argmax(-1)
    assert agree >= 0.8 * total


def test_auto_decodes_in_int8_on_an_avx2_cpu_without_bf16(monkeypatch) -> None:
    """auto is int8 where it measured faster at the same BLEU (x86 with AVX2, bf16 only emulated);
    never for an explicit precision, a GPU, a CPU with native bf16 or one without AVX2."""
    import mtkit.device as device

    cpu = torch.device("cpu")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    if "x86" in torch.backends.quantized.supported_engines:
        assert device.auto_int8("auto", cpu)
    for precision in ("fp32", "bf16", "int8"):
        assert not device.auto_int8(precision, cpu)
    assert not device.auto_int8("auto", torch.device("cuda"))
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    assert not device.auto_int8("auto", cpu)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # the same CPU capped as make test-isa caps it
    assert device.auto_int8("auto", cpu) == ("x86" in torch.backends.quantized.supported_engines)
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"sse4_2"}))
    assert not device.auto_int8("auto", cpu)


def test_int8_backend_under_a_onednn_cap_below_avx512_is_fbgemm(monkeypatch) -> None:
    import mtkit.decode.quantize as quantize

    monkeypatch.setattr(quantize, "cpu_flags", lambda: frozenset({"avx2", "avx512_vnni", "amx_int8"}))
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert int8_backend() != "onednn"
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    if "onednn" in torch.backends.quantized.supported_engines:
        assert int8_backend() == "onednn"


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_the_engine_quantizes_a_transformer_when_auto_chooses_int8(arch, tmp_path, monkeypatch) -> None:
    """Where auto picks int8 the engine's Transformer gets int8 linear layers (and says so); an RNN,
    on which int8 was not measured, stays fp32, and so does a Transformer narrower than measured."""
    from train_helpers import make_data_dir, tiny_config

    import mtkit.decode.loader as loader
    import mtkit.decode.torch_engine as torch_engine
    from mtkit.decode.loader import is_int8
    from mtkit.options import LoadOptions
    from mtkit.train.trainer import train

    data = make_data_dir(tmp_path, n_train=40, n_dev=4, random_ids=(3, 8), vocab_size=24)
    train(tiny_config(data, tmp_path / "model", arch=arch, max_steps=1, validate_every=1000, log_every=1000))
    monkeypatch.setattr(torch_engine, "auto_int8", lambda *a: True)
    engine = torch_engine.TorchEngine(tmp_path / "model", LoadOptions(device="cpu"), (), 1)
    assert not engine.int8 and not is_int8(engine.model)  # d_model 32 (train_helpers): below the floor
    monkeypatch.setattr(loader, "AUTO_INT8_MIN_D_MODEL", 32)
    engine = torch_engine.TorchEngine(tmp_path / "model", LoadOptions(device="cpu"), (), 1)
    assert engine.int8 == (arch == "transformer") == is_int8(engine.model)
    found = engine.search([[5, 6, 7]], DecodingConfig(beam_size=1, max_len_a=0.0, max_len_b=4), scores=False)
    assert len(found) == 1 and len(found[0][0].tokens) <= 4


def test_decoding_copy_is_what_auto_decodes_and_leaves_the_trained_model_alone(monkeypatch) -> None:
    import mtkit.device as device
    from mtkit.decode.loader import decoding_copy, is_int8

    cpu = torch.device("cpu")
    model = build_model(ModelConfig(arch="transformer", d_model=256, heads=4, d_ff=64, encoder_layers=1,
                                    decoder_layers=1, dropout=0.0), V, V, joint_vocab=True).eval()
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "amx_bf16"}))
    copy = decoding_copy(model, cpu)
    assert copy is not model and copy.output_proj.weight.dtype is torch.bfloat16
    assert model.output_proj.weight.dtype is torch.float32
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    if "x86" in torch.backends.quantized.supported_engines:
        copy = decoding_copy(model, cpu)
        assert is_int8(copy) and not is_int8(model)
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"sse4_2"}))
    assert decoding_copy(model, cpu) is model
