"""Model FLOPs of a training update, and the model FLOP utilisation (MFU) they give on a GPU.

MFU = the model's arithmetic per second ÷ the card's peak. It counts what the model needs, not what
the kernels did: real (non-padding) tokens only, and the matrix products of the Transformer (the
elementwise work is small beside them). Per sentence of S source and T target tokens, in
multiply-accumulates of one forward pass, with d = d_model, f = d_ff, V = the target vocabulary:

    encoder, per layer:  S·(4d² + 2df) + 2S²d           (q, k, v, o; FFN; scores and weighted sum)
    decoder, per layer:  T·(6d² + 2df) + 2S·d² + 2T²d + 2TSd   (self q,k,v,o and cross q,o; FFN;
                                                        cross k,v over the source; both attentions)
    output layer:        T·d·V

FLOPs are 2 × MACs and a training step is ~3 forward passes (the backward computes two products
for each of the forward's). Other architectures (the RNN) are not counted: their MFU is not shown.
"""

from __future__ import annotations

import os

import numpy as np

from mtkit.config.experiment import ModelConfig

#: dense bf16/fp16 tensor-core peak in TFLOP/s by GPU name (vendor data sheets), first match wins
PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100", 989.0), ("H200", 989.0), ("H800", 989.0), ("GH200", 989.0),
               ("B200", 2250.0), ("A100", 312.0), ("A800", 312.0), ("L40S", 362.0), ("L40", 181.0),
               ("L4", 121.0), ("A10", 125.0), ("V100", 125.0))
PEAK_ENV = "MTKIT_PEAK_TFLOPS"


def update_flops(cfg: ModelConfig, tgt_vocab: int, src_lengths: np.ndarray,
                 tgt_lengths: np.ndarray) -> float | None:
    """Training FLOPs (forward and backward) of a batch of sentences with these real lengths (the
    target's counted with its EOS); None for architectures this does not count."""
    if cfg.arch != "transformer":
        return None
    s = np.asarray(src_lengths, dtype=np.float64)
    t = np.asarray(tgt_lengths, dtype=np.float64) + 1.0  # + EOS (tgt_in's BOS)
    d, f = float(cfg.d_model), float(cfg.d_ff)
    encoder = cfg.encoder_layers * (s.sum() * (4 * d * d + 2 * d * f) + 2 * d * (s * s).sum())
    decoder = cfg.decoder_layers * (t.sum() * (6 * d * d + 2 * d * f) + 2 * d * d * s.sum()
                                    + 2 * d * (t * t).sum() + 2 * d * (t * s).sum())
    output = t.sum() * d * tgt_vocab
    return 3 * 2 * float(encoder + decoder + output)


def peak_flops(device_name: str | None, half_precision: bool) -> float | None:
    """The card's peak FLOP/s for the MFU: ``MTKIT_PEAK_TFLOPS`` when set, else the data-sheet bf16
    figure of a known GPU when training in bf16/fp16; None otherwise (no MFU is shown)."""
    override = os.environ.get(PEAK_ENV)
    if override:
        try:
            return float(override) * 1e12
        except ValueError:
            return None
    if device_name is None or not half_precision:
        return None
    for name, tflops in PEAK_TFLOPS:
        if name in device_name:
            return tflops * 1e12
    return None
