"""Model FLOPs of an update and the peak FLOP/s the MFU divides by."""

from __future__ import annotations

import numpy as np
import torch

from mtkit.config.experiment import ModelConfig
from mtkit.models import build_model
from mtkit.train.flops import PEAK_ENV, peak_flops, update_flops


def test_flops_count_every_matrix_product_of_a_transformer():
    """Count the multiply-accumulates of one sentence by hand from the parameters the matrices have."""
    cfg = ModelConfig(arch="transformer", d_model=16, heads=2, d_ff=40, encoder_layers=2, decoder_layers=3)
    vocab, s, t = 50, 7, 5  # t: target tokens without EOS
    model = build_model(cfg, vocab, vocab, True)
    d, f, tt = 16, 40, t + 1
    enc_layer = sum(p.numel() for n, p in model.encoder_layers[0].named_parameters()
                    if p.dim() == 2)  # 4d² + 2df
    assert enc_layer == 4 * d * d + 2 * d * f
    forward_macs = (2 * (s * enc_layer + 2 * s * s * d)
                    + 3 * (tt * (6 * d * d + 2 * d * f) + 2 * s * d * d + 2 * tt * tt * d + 2 * tt * s * d)
                    + tt * d * vocab)
    assert update_flops(cfg, vocab, np.array([s]), np.array([t])) == 6 * forward_macs
    # a batch is the sum of its sentences
    both = update_flops(cfg, vocab, np.array([s, 3]), np.array([t, 9]))
    assert both == update_flops(cfg, vocab, np.array([s]), np.array([t])) + update_flops(
        cfg, vocab, np.array([3]), np.array([9]))
    assert update_flops(ModelConfig(arch="rnn"), vocab, np.array([s]), np.array([t])) is None


def test_peak_flops_known_cards_and_the_override(monkeypatch):
    monkeypatch.delenv(PEAK_ENV, raising=False)
    assert peak_flops("NVIDIA H100 80GB HBM3", True) == 989e12
    assert peak_flops("NVIDIA H100 PCIe", True) == 756e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", True) == 312e12
    assert peak_flops("NVIDIA H100 80GB HBM3", False) is None  # fp32: no tensor-core peak to compare
    assert peak_flops(None, True) is None and peak_flops("Some Future GPU", True) is None
    monkeypatch.setenv(PEAK_ENV, "100")
    assert peak_flops(None, False) == 100e12
    assert torch.cuda.is_available() or peak_flops("cpu", True) == 100e12
