"""RNN encoder-decoder with attention (Bahdanau et al. 2015; Luong et al. 2015) or without (Cho/Sutskever).

Encoder: embeddings → (bi)LSTM/GRU over packed sequences (padding never enters a recurrence); with a
bidirectional encoder each position's two directions are concatenated and projected back to
``hidden_size`` so every scorer (dot included) sees equal query and key sizes.

Decoder, one step (s = top-layer RNN state, c = context, h̃ = attentional state, all per sentence):

* bahdanau: c_t = attend(s_{t-1}); s_t = RNN([E y_{t-1}; c_t], s_{t-1}); h̃_t = tanh(W[c_t; s_t])
* luong:    s_t = RNN([E y_{t-1}; h̃_{t-1}] (input feeding) or E y_{t-1}, s_{t-1});
            c_t = attend(s_t); h̃_t = tanh(W[c_t; s_t])
* attention ``none``: c_t is the same vector at every step, the encoder's final state (projected like
  the memory); ``step`` then returns attention None.

p(y_t | …) = softmax(W_out dropout(h̃_t)). A bridge maps the encoder's final top-layer state to the
decoder's initial state (tanh of a linear map); without it the decoder starts from zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mtkit.config.experiment import ModelConfig
from mtkit.models.attention import make_scorer
from mtkit.models.base import EncoderOutput, Seq2Seq, embedding, log_softmax_float
from mtkit.vocab import PAD_ID

Hidden = Tensor | tuple[Tensor, Tensor]  # GRU: h [L, B, H]; LSTM: (h, c)


def _rnn_class(rnn_type: str) -> type[nn.RNNBase]:
    return nn.LSTM if rnn_type == "lstm" else nn.GRU


class RNNEncoder(nn.Module):
    """Embeddings → multi-layer (bi)RNN over packed sequences → memory [B, S, hidden_size]."""

    def __init__(self, cfg: ModelConfig, embedding: nn.Embedding) -> None:
        super().__init__()
        self.embedding = embedding
        self.dropout = cfg.dropout
        self.directions = 2 if cfg.bidirectional else 1
        self.rnn = _rnn_class(cfg.rnn_type)(
            cfg.emb_dim, cfg.hidden_size, num_layers=cfg.encoder_layers, batch_first=True,
            dropout=cfg.dropout if cfg.encoder_layers > 1 else 0.0, bidirectional=cfg.bidirectional,
        )
        # both directions → one vector of the decoder's size (per position, and for the final state)
        self.combine = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size) if cfg.bidirectional else None

    @property
    def final_dim(self) -> int:
        return self.directions * self.rnn.hidden_size

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """src [B, S] → memory [B, S, H], src_mask [B, S], final top-layer state [B, directions·H]."""
        src_mask = src.ne(PAD_ID)
        x = self.embedding(src)
        if self.dropout > 0 and self.training:
            x = F.dropout(x, self.dropout, True)
        lengths = src_mask.sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, hidden = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        h_n = hidden[0] if isinstance(hidden, tuple) else hidden  # [layers·dirs, B, H]
        top = h_n.view(-1, self.directions, h_n.size(1), h_n.size(2))[-1]  # [dirs, B, H]
        final = top.transpose(0, 1).reshape(src.size(0), self.final_dim)
        if self.dropout > 0 and self.training:
            out = F.dropout(out, self.dropout, True)
        if self.combine is not None:
            out = self.combine(out)
        return out, src_mask, final


@dataclass(eq=False)
class RNNEncoderOutput(EncoderOutput):
    """The encoder output and what the decoder reuses at every step: the scorer's projected keys
    [B, S, H] (None without attention), else the fixed context [B, H] that replaces attention, and
    the encoder's final top-layer state [B, directions·H] (the bridge's input)."""

    keys: Tensor | None
    fixed_context: Tensor | None
    final: Tensor


@dataclass(eq=False)
class RNNState:
    """Decoder state: the RNN's hidden (and cell) state, and h̃_{t-1} for Luong input feeding.
    The hidden state has the batch in dim 1, hence ``RNNSeq2Seq.reorder_state``."""

    hidden: Hidden
    feed: Tensor | None = None


class RNNSeq2Seq(Seq2Seq):
    num_attention_heads = 1

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int,
                 joint_vocab: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        h, e = cfg.hidden_size, cfg.emb_dim
        self.is_lstm = cfg.rnn_type == "lstm"
        self.luong = cfg.attention_style == "luong"
        self.input_feeding = self.luong and cfg.input_feeding
        self.dropout = cfg.dropout
        self.tgt_embed = embedding(tgt_vocab_size, e)
        share_all = joint_vocab and cfg.share_all_embeddings and src_vocab_size == tgt_vocab_size
        self.src_embed = self.tgt_embed if share_all else embedding(src_vocab_size, e)
        self.encoder = RNNEncoder(cfg, self.src_embed)
        self.out_dim = e if cfg.tie_embeddings else h  # size of h̃ (must be e to tie with the embedding)
        self.scorer = None if cfg.attention == "none" else make_scorer(cfg.attention, h, h)
        if self.luong:
            rnn_input = e + (self.out_dim if self.input_feeding else 0)
        else:
            rnn_input = e + h
        self.decoder_rnn = _rnn_class(cfg.rnn_type)(
            rnn_input, h, num_layers=cfg.decoder_layers, batch_first=True,
            dropout=cfg.dropout if cfg.decoder_layers > 1 else 0.0,
        )
        self.attentional = nn.Linear(2 * h, self.out_dim)  # h̃ = tanh(W[c; s])
        states = cfg.decoder_layers * h * (2 if self.is_lstm else 1)
        self.bridge = nn.Linear(self.encoder.final_dim, states) if cfg.bridge else None
        self.output_proj = nn.Linear(self.out_dim, tgt_vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.output_proj.weight = self.tgt_embed.weight

    # ---------------------------------------------------------------------------- encoder side
    def encode(self, src: Tensor) -> RNNEncoderOutput:
        """With attention, the scorer's key-side work is done here once; without, the fixed context
        (the final state, projected like the memory) is."""
        memory, src_mask, final = self.encoder(src)
        if self.scorer is not None:
            return RNNEncoderOutput(memory, src_mask, keys=self.scorer.project_keys(memory),
                                    fixed_context=None, final=final)
        context = self.encoder.combine(final) if self.encoder.combine is not None else final
        return RNNEncoderOutput(memory, src_mask, keys=None, fixed_context=context, final=final)

    def init_state(self, enc: RNNEncoderOutput) -> RNNState:
        final = enc.final
        batch, h, layers = final.size(0), self.cfg.hidden_size, self.cfg.decoder_layers
        if self.bridge is not None:
            states = torch.tanh(self.bridge(final)).view(batch, -1, layers, h).permute(1, 2, 0, 3)
            hidden: Hidden = (states[0].contiguous(), states[1].contiguous()) if self.is_lstm \
                else states[0].contiguous()
        else:
            zeros = final.new_zeros(layers, batch, h)
            hidden = (zeros, zeros.clone()) if self.is_lstm else zeros
        feed = final.new_zeros(batch, self.out_dim) if self.input_feeding else None
        return RNNState(hidden, feed)

    def reorder_state(self, state: RNNState, index: Tensor) -> RNNState:
        if isinstance(state.hidden, tuple):
            hidden: Hidden = (state.hidden[0].index_select(1, index), state.hidden[1].index_select(1, index))
        else:
            hidden = state.hidden.index_select(1, index)
        feed = None if state.feed is None else state.feed.index_select(0, index)
        return RNNState(hidden, feed)

    # ---------------------------------------------------------------------------- decoder side
    def _context(self, query: Tensor, enc: RNNEncoderOutput) -> tuple[Tensor, Tensor | None]:
        """query [B, T, H] → context [B, T, H] and weights [B, T, S] (None without attention)."""
        if self.scorer is None:
            return enc.fixed_context.unsqueeze(1).expand(-1, query.size(1), -1), None
        return self.scorer(query, enc.keys, enc.memory, enc.src_mask)

    def _top(self, hidden: Hidden) -> Tensor:
        return (hidden[0] if isinstance(hidden, tuple) else hidden)[-1]

    def _attentional(self, context: Tensor, s: Tensor) -> Tensor:
        return torch.tanh(self.attentional(torch.cat((context, s), dim=-1)))

    def _embed_tgt(self, tokens: Tensor) -> Tensor:
        x = self.tgt_embed(tokens)
        if self.dropout > 0 and self.training:
            x = F.dropout(x, self.dropout, True)
        return x

    def _features(self, attentional: Tensor) -> Tensor:
        if self.dropout > 0 and self.training:
            attentional = F.dropout(attentional, self.dropout, True)
        return attentional

    def _logits(self, attentional: Tensor) -> Tensor:
        return self.output_proj(self._features(attentional))

    def _decode_one(self, emb: Tensor, state: RNNState, enc: RNNEncoderOutput
                    ) -> tuple[Tensor, RNNState, Tensor | None]:
        """emb [B, 1, E] → h̃ [B, 1, out], new state, weights [B, 1, S] or None."""
        if self.luong:
            rnn_in = torch.cat((emb, state.feed.unsqueeze(1)), dim=-1) if self.input_feeding else emb
            s, hidden = self.decoder_rnn(rnn_in, state.hidden)
            context, weights = self._context(s, enc)
        else:
            context, weights = self._context(self._top(state.hidden).unsqueeze(1), enc)
            s, hidden = self.decoder_rnn(torch.cat((emb, context), dim=-1), state.hidden)
        attentional = self._attentional(context, s)
        return attentional, RNNState(hidden, attentional[:, 0] if self.input_feeding else None), weights

    def step(self, prev_tokens: Tensor, state: RNNState, enc: RNNEncoderOutput, need_attention: bool = False,
             attn_layer: int = -1, normalize: bool = True) -> tuple[Tensor, RNNState, Tensor | None]:
        attentional, state, weights = self._decode_one(self._embed_tgt(prev_tokens.unsqueeze(1)), state, enc)
        log_probs = log_softmax_float(self._logits(attentional[:, 0]), normalize)
        return log_probs, state, weights if need_attention else None

    def forward(self, src: Tensor, tgt_in: Tensor, need_attention: bool = False,
                attn_layer: int = -1, project: bool = True, source_rows: Tensor | None = None
                ) -> tuple[Tensor, Tensor | None]:
        enc = self.encode(src)
        if source_rows is not None:
            enc = self.reorder_encoder(enc, source_rows)
        state = self.init_state(enc)
        emb = self._embed_tgt(tgt_in)
        recurrent_context = not self.luong and self.scorer is not None
        if recurrent_context or self.input_feeding:
            # the RNN input at t depends on step t-1's attention: go one step at a time
            outputs, all_weights = [], []
            for t in range(tgt_in.size(1)):
                attentional, state, weights = self._decode_one(emb[:, t: t + 1], state, enc)
                outputs.append(attentional)
                all_weights.append(weights)
            attentional = torch.cat(outputs, dim=1)
            weights = torch.cat(all_weights, dim=1) if self.scorer is not None else None
        else:
            # the RNN input is known for all steps: one call over the whole sequence, then attention
            if self.luong:
                s, _ = self.decoder_rnn(emb, state.hidden)
                context, weights = self._context(s, enc)
            else:  # bahdanau style without attention: the fixed context joins every input
                context, weights = self._context(emb, enc)
                s, _ = self.decoder_rnn(torch.cat((emb, context), dim=-1), state.hidden)
            attentional = self._attentional(context, s)
        out = self._logits(attentional) if project else self._features(attentional)
        return out, (weights.unsqueeze(1) if need_attention and weights is not None else None)
