"""The Transformer (Vaswani et al. 2017) behind the ``Seq2Seq`` interface.

Training runs each sublayer over the whole sequence through SDPA (causal masking by ``is_causal``).
Decoding keeps the key/value cache of the decoder self-attention in one preallocated buffer written in
place, and the encoder-decoder keys and values of every layer are projected once in ``encode``, so a
``step`` only processes one new token: one fused Q/K/V matmul, the attention over strided views of the
cache, the other sublayers' matmuls and the output projection of that single position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.config.experiment import ModelConfig
from mtkit.models.attention import MultiHeadAttention, additive_key_mask
from mtkit.models.base import EncoderOutput, Seq2Seq, embedding, log_softmax_float
from mtkit.models.positions import LearnedPositions, RelativePositions, SinusoidalPositions
from mtkit.vocab import EOS_ID, PAD_ID


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, with dropout after the activation."""

    def __init__(self, d_model: int, d_ff: int, activation: str, activation_dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.act = {"gelu": F.gelu, "swish": F.silu}.get(activation, F.relu)
        self.activation_dropout = activation_dropout
        for fc in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(fc.weight)
            nn.init.zeros_(fc.bias)

    def forward(self, x: Tensor) -> Tensor:
        h = self.act(self.fc1(x))
        if self.activation_dropout > 0 and self.training:
            h = F.dropout(h, self.activation_dropout, True)
        return self.fc2(h)


def _relative(cfg: ModelConfig) -> RelativePositions | None:
    if cfg.positions != "relative":
        return None
    return RelativePositions(cfg.d_model // cfg.heads, cfg.max_relative_distance)


class _Residual(nn.Module):
    """Wraps a sublayer with dropout, the residual connection and LayerNorm (post- or pre-norm)."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = dropout
        self.pre_norm = pre_norm

    def before(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def after(self, residual: Tensor, y: Tensor) -> Tensor:
        if self.dropout > 0 and self.training:
            y = F.dropout(y, self.dropout, True)
        return residual + y if self.pre_norm else self.norm(residual + y)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, True,
                                            _relative(cfg))
        self.self_res = _Residual(cfg.d_model, cfg.dropout, pre)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        self.ffn_res = _Residual(cfg.d_model, cfg.dropout, pre)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        y, _ = self.self_attn.forward_self(self.self_res.before(x), mask)
        x = self.self_res.after(x, y)
        return self.ffn_res.after(x, self.ffn(self.ffn_res.before(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, True,
                                            _relative(cfg))
        self.self_res = _Residual(cfg.d_model, cfg.dropout, pre)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, False)
        self.cross_res = _Residual(cfg.d_model, cfg.dropout, pre)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        self.ffn_res = _Residual(cfg.d_model, cfg.dropout, pre)

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor, need_weights: bool = False
                ) -> tuple[Tensor, Tensor | None]:
        y, _ = self.self_attn.forward_self(self.self_res.before(x), causal=True)
        x = self.self_res.after(x, y)
        keys, values = self.cross_attn.project_memory(memory)
        y, weights = self.cross_attn.forward_cross(self.cross_res.before(x), keys, values, mask, need_weights)
        x = self.cross_res.after(x, y)
        return self.ffn_res.after(x, self.ffn(self.ffn_res.before(x))), weights

    def step(self, x: Tensor, cache: Tensor, t: int, keys: Tensor, values: Tensor, mask: Tensor,
             need_weights: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        """The newest position x [B, 1, D] at position ``t``; ``cache`` [2, B, H, capacity, dk] is this
        layer's key/value cache (see ``MultiHeadAttention.forward_self_step``)."""
        y, kv = self.self_attn.forward_self_step(self.self_res.before(x), cache, t)
        x = self.self_res.after(x, y)
        y, weights = self.cross_attn.forward_cross(self.cross_res.before(x), keys, values, mask, need_weights)
        x = self.cross_res.after(x, y)
        return self.ffn_res.after(x, self.ffn(self.ffn_res.before(x))), kv, weights


@dataclass(eq=False)
class TransformerEncoderOutput(EncoderOutput):
    """The encoder output and what every decoding step reuses: the additive source mask [B, 1, 1, S]
    and, per decoder layer, the encoder-decoder keys and values [B, H, S, dk], projected once."""

    attn_mask: Tensor
    cross_keys: list[Tensor]
    cross_values: list[Tensor]


@dataclass(eq=False)
class TransformerState:
    """Decoder self-attention cache of all layers in one buffer [L, 2, B, H, capacity, dk] (keys,
    then values), of which the first ``length`` positions are filled; None before the first step.

    A step writes its position in place (the state it returns shares the buffer with the one it was
    given: a state is used once, as search does). The capacity grows by ``CACHE_CHUNK`` positions at
    a time, so growing copies the cache once per chunk, not once per step. ``spare`` is a second
    buffer of the same capacity that beam reordering gathers into (the two then swap), so reordering
    copies the filled positions once and allocates nothing."""

    cache: Tensor | None
    length: int
    spare: Tensor | None = None


#: positions the key/value cache grows by when full
CACHE_CHUNK = 32


def reorder_cache(state: TransformerState, index: Tensor) -> TransformerState:
    """The state with batch rows ``index`` (beam reordering, finished sentences leaving).

    The identity copies nothing. Otherwise the filled positions of the rows ``index`` names are
    gathered into the spare buffer in one copy, and the buffers swap. Under autograd (scheduled
    sampling) the cache is selected into a new tensor."""
    cache, t = state.cache, state.length
    if cache is None:
        return state
    rows = index.numel()
    if torch.is_grad_enabled():
        return TransformerState(cache.index_select(2, index), t)
    if rows == cache.size(2) and bool((index == torch.arange(rows, device=index.device)).all()):
        return state
    spare = state.spare
    if spare is None or spare.size(2) < rows or spare.size(4) != cache.size(4):
        shape = list(cache.shape)
        shape[2] = max(rows, cache.size(2))
        spare = cache.new_empty(shape)
    torch.index_select(cache[:, :, :, :, :t], 2, index, out=spare[:, :, :rows, :, :t])
    return TransformerState(spare[:, :, :rows], t, cache)


class Transformer(Seq2Seq):
    """Encoder-decoder Transformer with post-/pre-norm, sinusoidal/learned/relative positions."""

    beams_share_encoder = True

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int,
                 joint_vocab: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.d_model = d
        self.num_attention_heads = cfg.heads
        self.embed_scale = math.sqrt(d) if cfg.embed_scale else 1.0
        self.dropout = cfg.dropout
        self.tgt_embed = embedding(tgt_vocab_size, d)  # × √d in the forward pass → unit scale
        share_all = joint_vocab and cfg.share_all_embeddings and src_vocab_size == tgt_vocab_size
        self.src_embed = self.tgt_embed if share_all else embedding(src_vocab_size, d)
        if cfg.positions == "sinusoidal":
            self.positions: nn.Module | None = SinusoidalPositions(d, layout=cfg.sinusoid_layout)
        elif cfg.positions == "learned":
            self.src_positions = LearnedPositions(d, cfg.max_positions)
            self.positions = LearnedPositions(d, cfg.max_positions)
        else:
            self.positions = None
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        pre = cfg.norm == "pre"
        self.encoder_norm = nn.LayerNorm(d) if pre else None
        self.decoder_norm = nn.LayerNorm(d) if pre else None
        self.output_proj = nn.Linear(d, tgt_vocab_size, bias=False)
        # the two keys are independent, as in the RNN: share_all_embeddings = one source/target
        # embedding, tie_embeddings = the output projection is the target embedding
        if cfg.tie_embeddings:
            self.output_proj.weight = self.tgt_embed.weight
        else:
            nn.init.normal_(self.output_proj.weight, std=d ** -0.5)
        if cfg.output_bias:  # a buffer: saved and loaded with the weights, never trained (as in MarianMT)
            self.register_buffer("output_bias", torch.zeros(tgt_vocab_size))

    def logit_bias(self) -> Tensor | None:
        return self.output_bias if self.cfg.output_bias else None

    # ------------------------------------------------------------------------------ helpers
    def _embed(self, tokens: Tensor, embedding: nn.Embedding, positions: nn.Module | None,
               offset: int = 0) -> Tensor:
        x = embedding(tokens) * self.embed_scale
        if positions is not None:
            x = x + positions(tokens.size(1), offset, x.device).to(x.dtype)
        if self.dropout > 0 and self.training:
            x = F.dropout(x, self.dropout, True)
        return x

    def _src_positions(self) -> nn.Module | None:
        return self.src_positions if self.cfg.positions == "learned" else self.positions

    def _encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Encoder output, the mask of the real source tokens [B, S] and the additive key mask (over one
        more position per row, the appended EOS, when ``model.source_eos``)."""
        src_mask = src.ne(PAD_ID)
        if self.cfg.source_eos:  # MarianMT's tokenizer appends </s>: here, so every stage gets it
            src = F.pad(src, (0, 1), value=PAD_ID).scatter_(1, src_mask.sum(1, keepdim=True), EOS_ID)
        attn_mask = additive_key_mask(src.ne(PAD_ID), self.src_embed.weight.dtype)
        x = self._embed(src, self.src_embed, self._src_positions())
        for layer in self.encoder_layers:
            x = layer(x, attn_mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, src_mask, attn_mask

    def _features(self, x: Tensor) -> Tensor:
        return self.decoder_norm(x) if self.decoder_norm is not None else x

    def _project(self, x: Tensor) -> Tensor:
        logits = self.output_proj(self._features(x))
        bias = self.logit_bias()
        return logits if bias is None else logits + bias.to(logits.dtype)

    def _layer_index(self, attn_layer: int) -> int:
        return attn_layer % len(self.decoder_layers)

    def _source_columns(self, weights: Tensor, src_mask: Tensor) -> Tensor:
        """Attention [..., S(+1)] over the source tokens only: without the column of the appended EOS
        (``model.source_eos``), so alignments and glossaries see the sentence's own tokens."""
        if not self.cfg.source_eos:
            return weights
        cols = torch.arange(src_mask.size(1), device=weights.device).unsqueeze(0)
        index = cols + (cols >= src_mask.sum(1, keepdim=True)).long()  # [B, S]: skip each row's EOS
        shape = (index.size(0),) + (1,) * (weights.dim() - 2) + (index.size(1),)
        return weights.gather(-1, index.view(shape).expand(*weights.shape[:-1], index.size(1)))

    # ---------------------------------------------------------------------------- interface
    def forward(self, src: Tensor, tgt_in: Tensor, need_attention: bool = False,
                attn_layer: int = -1, project: bool = True, source_rows: Tensor | None = None
                ) -> tuple[Tensor, Tensor | None]:
        memory, src_mask, attn_mask = self._encode(src)
        if source_rows is not None:
            memory, attn_mask = memory.index_select(0, source_rows), attn_mask.index_select(0, source_rows)
            src_mask = src_mask.index_select(0, source_rows)
        x = self._embed(tgt_in, self.tgt_embed, self.positions)
        wanted = self._layer_index(attn_layer) if need_attention else -1
        attention = None
        for i, layer in enumerate(self.decoder_layers):
            x, weights = layer(x, memory, attn_mask, need_weights=i == wanted)
            if weights is not None:
                attention = self._source_columns(weights, src_mask)
        return (self._project(x) if project else self._features(x)), attention

    def encode(self, src: Tensor) -> TransformerEncoderOutput:
        """Encoder output plus the additive source mask and every decoder layer's encoder-decoder
        keys and values, so that ``step`` projects nothing on the source side."""
        memory, src_mask, attn_mask = self._encode(src)
        keys: list[Tensor] = []
        values: list[Tensor] = []
        for layer in self.decoder_layers:
            k, v = layer.cross_attn.project_memory(memory, contiguous=True)
            keys.append(k)
            values.append(v)
        return TransformerEncoderOutput(memory, src_mask, attn_mask=attn_mask, cross_keys=keys,
                                        cross_values=values)

    def init_state(self, enc: TransformerEncoderOutput) -> TransformerState:
        return TransformerState(None, 0)

    def reorder_state(self, state: TransformerState, index: Tensor) -> TransformerState:
        return reorder_cache(state, index)

    def _cache_with_room(self, state: TransformerState, like: Tensor) -> Tensor:
        """The state's cache with a free slot at position ``state.length`` (grown by a chunk if full).
        With gradients, the filled positions only: each step then concatenates (see
        ``MultiHeadAttention.forward_self_step``)."""
        cache, t = state.cache, state.length
        grad = torch.is_grad_enabled()
        if cache is not None and (t < cache.size(4) or grad):
            return cache
        heads = self.num_attention_heads
        rows = like.size(0) if cache is None else cache.size(2)
        capacity = 0 if grad else t + CACHE_CHUNK
        grown = like.new_empty((len(self.decoder_layers), 2, rows, heads, capacity, self.d_model // heads))
        if cache is not None:
            grown[:, :, :, :, :t] = cache[:, :, :, :, :t]
        return grown

    def step(self, prev_tokens: Tensor, state: TransformerState, enc: TransformerEncoderOutput,
             need_attention: bool = False, attn_layer: int = -1, normalize: bool = True
             ) -> tuple[Tensor, TransformerState, Tensor | None]:
        t = state.length
        x = self._embed(prev_tokens.unsqueeze(1), self.tgt_embed, self.positions, t)
        cache = self._cache_with_room(state, x)
        wanted = self._layer_index(attn_layer) if need_attention else -1
        attention = None
        grown: list[Tensor] = []
        for i, layer in enumerate(self.decoder_layers):
            x, kv, weights = layer.step(x, cache[i], t, enc.cross_keys[i], enc.cross_values[i], enc.attn_mask,
                                        i == wanted)
            grown.append(kv)
            if weights is not None:
                src_mask = enc.src_mask
                if src_mask.size(0) != x.size(0):  # one encoder row per sentence for its beams
                    src_mask = src_mask.repeat_interleave(x.size(0) // src_mask.size(0), 0)
                attention = self._source_columns(weights[:, :, 0], src_mask)
        if torch.is_grad_enabled():
            cache = torch.stack(grown)
        log_probs = log_softmax_float(self._project(x[:, 0]), normalize)
        spare = state.spare if cache is state.cache else None  # a grown cache outgrew the spare
        return log_probs, TransformerState(cache, t + 1, spare), attention


__all__ = ["Transformer", "TransformerEncoderOutput", "TransformerState"]
