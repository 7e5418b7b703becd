"""Loading trained models for decoding: rebuild a model from a checkpoint's stored config and
vocabulary, put it on its device in its decoding dtype (or int8), and join ensembles.

Checkpoints are read with ``weights_only=True`` (`mtkit.checkpoint.load_checkpoint`): loading never
runs code from the file.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from mtkit.checkpoint import load_checkpoint, resolve_checkpoint
from mtkit.config.checks import check_applicable
from mtkit.config.experiment import Config, apply_overrides, from_dict
from mtkit.data.meta import DataMeta, read_meta
from mtkit.errors import CheckpointError, ConfigError, DataError
from mtkit.models import Seq2Seq, build_model
from mtkit.models.ensemble import Ensemble
from mtkit.models.transformer import Transformer


@dataclass
class LoadedModel:
    model: Seq2Seq
    config: Config
    meta: DataMeta
    model_dir: Path
    checkpoint: Path


def load_model(model: str | Path, checkpoint: str = "best", overrides: Sequence[str] = (),
               device: torch.device | None = None) -> LoadedModel:
    """Rebuild a model from the config and vocabulary meta stored in its checkpoint; ``overrides``
    are ``decoding.key=value`` strings applied over the stored decoding section."""
    file, model_dir = resolve_checkpoint(model, checkpoint)
    state = load_checkpoint(file)
    raw = copy.deepcopy(state["config"])
    if not isinstance(raw, dict):
        raise CheckpointError(f"{file}: the stored config is not a mapping")
    cfg = from_dict(apply_overrides(raw, list(overrides)), stored=True)
    check_applicable(cfg, [item.split("=", 1)[0].strip() for item in overrides])  # no silent --set
    try:
        meta = (DataMeta.from_dict(state["vocab"], str(file)) if state.get("vocab")
                else read_meta(model_dir))
    except DataError as exc:
        raise CheckpointError(f"{file}: no usable vocabulary meta ({exc})") from None
    net = build_model(cfg.model, meta.src_vocab_size, meta.tgt_vocab_size, meta.one_vocabulary())
    try:
        net.load_state_dict(state["model"])
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise CheckpointError(f"{file}: weights do not fit the model in its config ({first[:200]})") from None
    net.eval()
    if device is not None:
        net.to(device)
    return LoadedModel(net, cfg, meta, model_dir, file)


#: the narrowest Transformer ``--precision auto`` quantizes: int8 was measured faster than fp32 at the
#: same BLEU on d_model 256 (docs/notebook/engines.md); a narrower model's matrix products are small
#: beside the per-call cost of quantizing its activations
AUTO_INT8_MIN_D_MODEL = 256


def load_for_decoding(model: str | Path, checkpoint: str, overrides: Sequence[str], device: torch.device,
                      dtype: torch.dtype, int8: bool = False,
                      ensemble: Sequence[str | Path] = (), auto_int8: bool = False
                      ) -> tuple[LoadedModel, Seq2Seq]:
    """The main model (whose config, vocabulary and BPE models rule) and the network to search with:
    the model itself, or an ``Ensemble`` of it and the ``ensemble`` models, converted once to ``dtype``
    (or dynamically quantized to int8 on CPU). ``auto_int8`` (`mtkit.device.auto_int8`): quantize
    where every model is a Transformer at least ``AUTO_INT8_MIN_D_MODEL`` wide, what int8 was measured
    on; RNNs and narrower models stay in ``dtype``."""
    if int8 and device.type != "cpu":
        raise ConfigError("--precision int8 (--int8) quantizes for the CPU; use it with --device cpu")
    main = load_model(model, checkpoint, overrides, device)
    models = [main.model]
    for other in ensemble:
        extra = load_model(other, checkpoint, (), device)
        if not extra.meta.same_vocabulary(main.meta):
            raise ConfigError(f"--ensemble {other}: its vocabulary ({extra.meta.src_vocab_size}/"
                              f"{extra.meta.tgt_vocab_size}) differs from that of {model} "
                              f"({main.meta.src_vocab_size}/{main.meta.tgt_vocab_size}); ensembled models "
                              "must share vocabularies")
        models.append(extra.model)
    if int8 or (auto_int8 and all(int8_measured_on(m) for m in models)):
        models = [quantize_int8(m) for m in models]
    elif dtype != torch.float32:
        models = [m.to(dtype) for m in models]
    net = models[0] if len(models) == 1 else Ensemble(models).eval()
    return main, net


def quantize_int8(model: Seq2Seq) -> Seq2Seq:
    """int8 weights in the linear layers, for the CPU (`mtkit.decode.quantize`)."""
    from mtkit.decode.quantize import quantize_int8 as quantize

    return quantize(model)  # type: ignore[return-value]


def int8_measured_on(model: Seq2Seq) -> bool:
    """Whether ``--precision auto`` may quantize ``model`` where it picks int8: a Transformer at least
    ``AUTO_INT8_MIN_D_MODEL`` wide."""
    return isinstance(model, Transformer) and model.d_model >= AUTO_INT8_MIN_D_MODEL


def decoding_copy(model: Seq2Seq, device: torch.device) -> Seq2Seq:
    """``model`` as the torch engine decodes it with ``--precision auto`` on ``device``: a copy with int8
    linear layers where auto picks int8 for it, a copy in bf16 (fp16) where auto picks that, else the
    model itself (fp32). Validation during training searches this, so that it costs per sentence
    what `mtkit translate` does and scores what it would translate."""
    from mtkit.device import auto_int8, decode_dtype

    if auto_int8("auto", device) and int8_measured_on(model):
        return quantize_int8(model)  # PyTorch's quantize_dynamic copies the model
    dtype = decode_dtype("auto", device)
    return model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)


def is_int8(net: torch.nn.Module) -> bool:
    """Whether ``net`` (a model or an ensemble) computes its linear layers in int8."""
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    return any(isinstance(module, Int8Linear) for module in net.modules())


__all__ = ["AUTO_INT8_MIN_D_MODEL", "LoadedModel", "decoding_copy", "int8_measured_on", "is_int8",
           "load_for_decoding", "load_model", "quantize_int8"]
