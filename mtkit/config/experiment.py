"""Typed experiment configuration: one YAML file, five sections, validated on load.

Every field carries its documentation in ``metadata["doc"]``; ``mtkit config-keys`` prints them
all, and docs/config.md is generated from the same source (``mtkit config-keys --markdown``). Ranges
live in ``metadata["min"]`` / ``metadata["max"]`` so a bad value is reported with the key's full
dotted name; ``metadata["when"]`` says where a key applies (one architecture, one LR schedule, …), and
a key set where it would have no effect is refused (mtkit.config.checks).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mtkit.config.checks import Condition, Not, check_applicable, coerce, suggest
from mtkit.config.clean_section import CleanConfig
from mtkit.config.data_sections import BpeConfig, DataConfig, SourceConfig
from mtkit.config.data_sections import config_field as _f
from mtkit.errors import ConfigError

#: the resolved config beside the data it made (data.dir) and the model it trained (model_dir)
CONFIG_FILE = "config.yaml"


RNN: dict[str, Condition] = {"arch": ("rnn",)}
CE: dict[str, Condition] = {"objective": ("ce",)}
MRT: dict[str, Condition] = {"objective": ("mrt",)}
TRANSFORMER: dict[str, Condition] = {"arch": ("transformer",)}
#: the LR schedules whose decay ends with the budget (mtkit.train.schedules); a `when` condition too
BUDGET_SCHEDULES: tuple[str, ...] = ("linear", "cosine")


@dataclass
class ModelConfig:
    """The network. Some keys apply to one architecture only (`applies to`): set for the other, they
    are refused."""

    arch: Literal["transformer", "rnn"] = _f("transformer", "Model family.")
    # shared
    emb_dim: int = _f(256, "Embedding size (the Transformer's is d_model).", 1, when=RNN)
    dropout: float = _f(0.1, "Dropout on embeddings, sublayer outputs and RNN outputs.", 0, 1)
    encoder_layers: int = _f(3, "Number of encoder layers.", 1)
    decoder_layers: int = _f(3, "Number of decoder layers.", 1)
    tie_embeddings: bool = _f(True, "Tie the output projection to the target embedding (one matrix).")
    share_all_embeddings: bool = _f(
        True, "Share the source and target embeddings (with a joint BPE vocabulary; with separate "
        "vocabularies each side keeps its own). Independent of tie_embeddings."
    )
    # transformer
    size: Literal["fixed", "auto"] = _f(
        "fixed", "fixed: the width keys as given. auto: `mtkit train` chooses d_model, d_ff, heads, "
        "dropout and training.lr for the time budget (training.max_time) from a few timed updates of each "
        "width on this machine, and prints what it chose and why; keys given in the config or with --set "
        "stay as given (docs/training.md#the-width-for-the-budget-modelsize-auto).", when=TRANSFORMER)
    d_model: int = _f(256, "Model width.", 8, when=TRANSFORMER)
    heads: int = _f(4, "Attention heads (d_model must be divisible by heads).", 1, when=TRANSFORMER)
    d_ff: int = _f(1024, "Inner width of the feed-forward sublayer.", 1, when=TRANSFORMER)
    attention_dropout: float = _f(0.0, "Dropout on attention weights.", 0, 1, when=TRANSFORMER)
    activation_dropout: float = _f(0.0, "Dropout after the FFN activation.", 0, 1, when=TRANSFORMER)
    activation: Literal["relu", "gelu", "swish"] = _f(
        "relu", "FFN activation; swish is SiLU, x·sigmoid(x) (OPUS-MT's MarianMT models).", when=TRANSFORMER)
    norm: Literal["post", "pre"] = _f(
        "post", "LayerNorm after each residual (paper) or before each sublayer (pre-norm).", when=TRANSFORMER
    )
    positions: Literal["sinusoidal", "learned", "relative"] = _f(
        "sinusoidal", "Position information: fixed sinusoids, learned, or relative (Shaw 2018).",
        when=TRANSFORMER,
    )
    sinusoid_layout: Literal["interleaved", "halves", "fairseq"] = _f(
        "interleaved", "Where sin and cos go in the sinusoid table: interleaved (PE[2i] = sin, "
        "PE[2i+1] = cos, as in the paper), halves (all sines, then all cosines, same frequencies: "
        "MarianMT's) or fairseq (M2M100's and NLLB's: halves with frequencies 10000^(-i/(d/2-1)), "
        "positions numbered from 2).",
        when={**TRANSFORMER, "positions": ("sinusoidal",)})
    embed_scale: bool = _f(True, "Multiply token embeddings by √d_model before adding positions (false: "
                           "MarianMT's scale_embedding: false).", when=TRANSFORMER)
    source_eos: bool = _f(False, "The model appends EOS to every source sentence before encoding it "
                          "(MarianMT's tokenizer adds </s>); every stage then does, the data stay as "
                          "prepared.",
                          when=TRANSFORMER)
    source_bos: bool = _f(False, "The model puts BOS before every source sentence before encoding it "
                          "(M2M100's and NLLB's source-language token: `mtkit import-hf` gives the source "
                          "BOS that token's embedding); alignments leave it out.", when=TRANSFORMER)
    decoder_bos: bool = _f(False, "The decoder reads BOS before its first input (M2M100 and NLLB read </s> "
                           "and then the target-language token, a decoder-side language tag); its output "
                           "there is no prediction.", when=TRANSFORMER)
    output_bias: bool = _f(
        False, "A fixed bias added to the output logits, kept with the weights but never trained (MarianMT's "
        "final_logits_bias; `mtkit import-hf` sets it, with a large negative entry for a padding token "
        "MarianMT lacks).", when=TRANSFORMER)
    max_positions: int = _f(1024, "Longest sequence for learned positions.", 1,
                            when={**TRANSFORMER, "positions": ("learned",)})
    max_relative_distance: int = _f(16, "Clipping distance δ of relative positions.", 1,
                                    when={**TRANSFORMER, "positions": ("relative",)})
    # rnn
    rnn_type: Literal["lstm", "gru"] = _f("lstm", "Recurrent cell.", when=RNN)
    hidden_size: int = _f(512, "Hidden size of the decoder (and of the encoder, per direction).", 1, when=RNN)
    bidirectional: bool = _f(True, "Bidirectional encoder.", when=RNN)
    attention: Literal["dot", "scaled_dot", "general", "additive", "none"] = _f(
        "additive", "Attention scorer; none = plain seq2seq on the final encoder state.", when=RNN
    )
    attention_style: Literal["bahdanau", "luong"] = _f(
        "bahdanau", "bahdanau: attend from s_{t-1}, feed context into the RNN; luong: attend after the step.",
        when=RNN,
    )
    input_feeding: bool = _f(True, "Feed the previous attentional state as input.",
                             when={**RNN, "attention_style": ("luong",)})
    bridge: bool = _f(True, "Initialise the decoder state from the encoder through a learned layer.",
                      when=RNN)


@dataclass
class TrainingConfig:
    """Optimisation, batching, validation and checkpointing of `mtkit train`."""

    model_dir: str = _f("model", "Directory for checkpoints, resolved config, BPE models and logs.")
    seed: int = _f(1, "Random seed (initialisation, batch order, dropout).")
    max_tokens: int = _f(
        4096, "Token budget of a batch: sentences × max(src_len, tgt_len + 1), padding included.", 1
    )
    update_freq: int = _f(1, "Accumulate gradients over this many batches per update.", 1)
    optimizer: Literal["adam", "adamw"] = _f("adam", "Optimizer.")
    lr: float = _f(1e-3, "Peak learning rate (noam: scale factor of the formula).", 0)
    betas: list[float] = _f([0.9, 0.98], "Adam β1, β2.")
    eps: float = _f(1e-9, "Adam ε.", 0)
    weight_decay: float = _f(0.0, "Weight decay (decoupled for adamw).", 0)
    schedule: Literal["noam", "inverse_sqrt", "constant", "plateau", "linear", "cosine"] = _f(
        "inverse_sqrt", "Learning-rate schedule; linear and cosine decay to min_lr exactly when the budget "
        "(max_steps, max_epochs, or the updates max_time allows, measured as the run goes) ends "
        "(docs/training.md#budget-aware-training)."
    )
    warmup_steps: int = _f(
        1000, "Warm-up steps: linear for inverse_sqrt/constant/plateau/linear/cosine; noam's formula has "
        "its own. With warmup_fraction: the ramp until the budget is first planned.", 0
    )
    warmup_fraction: float = _f(
        0.0, "Warm-up as a share of the planned updates (0 = warmup_steps).", 0, 0.5,
        when={"schedule": BUDGET_SCHEDULES})
    cooldown_fraction: float = _f(
        0.0, "Decay the LR linearly to min_lr over this last share of the budget (max_steps, max_epochs or "
        "the updates max_time allows), the schedule's own shape before it (0 = off).", 0, 1,
        when={"schedule": ("noam", "inverse_sqrt", "constant", "plateau")})
    plateau_factor: float = _f(0.5, "Multiply the LR by this when the dev metric stalls.", 0, 1,
                               when={"schedule": ("plateau",)})
    plateau_patience: int = _f(2, "Validations without improvement before decaying the LR.", 0,
                               when={"schedule": ("plateau",)})
    min_lr: float = _f(0.0, "Lower bound of the learning rate once warm-up is over.", 0)
    ema_decay: float = _f(
        0.0, "Keep an exponential moving average of the weights with this decay (e.g. 0.999; 0 = off); "
        "validation scores it beside the trained weights, and the better one is saved as the step's "
        "checkpoint.", 0, 0.99999)
    clip_norm: float = _f(1.0, "Clip the gradient norm to this (0 disables).", 0)
    label_smoothing: float = _f(0.1, "Label smoothing ε.", 0, 1)
    max_steps: int = _f(0, "Stop after this many updates (0 = no limit).", 0)
    max_epochs: int = _f(0, "Stop after this many epochs (0 = no limit).", 0)
    max_time: float = _f(0.0, "Stop after this many minutes of training (0 = no limit).", 0)
    validate_every: int = _f(1000, "Validate (and checkpoint) every N updates.", 1)
    valid_metric: Literal["bleu", "chrf", "loss", "ppl"] = _f(
        "bleu", "Dev metric that picks the best checkpoints (and drives plateau and early stopping)."
    )
    valid_max_sentences: int = _f(0, "Translate at most this many dev sentences for BLEU (0 = all).", 0)
    keep_best: int = _f(3, "Keep the best k checkpoints by valid_metric (plus the last).", 1)
    keep_last: int = _f(
        5, "Also keep the step checkpoints of the last N validations (for `mtkit average --last`).", 0
    )
    save_every: int = _f(
        0, "Write checkpoint_last.pt every N updates between validations (0 = at validations only).", 0
    )
    patience: int = _f(0, "Early stopping: validations without improvement before stopping (0 = off).", 0)
    log_every: int = _f(100, "Log training metrics every N updates.", 1)
    device: str = _f("auto", "auto, cpu, cuda, cuda:N or mps.")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = _f(
        "auto",
        "Autocast precision (weights stay fp32); auto = bf16 on CUDA GPUs and on CPUs with native bf16 "
        "(AVX512-BF16/AMX), else fp32.",
    )
    compile: bool = _f(False, "Compile the model with torch.compile.")
    shape_buckets: Literal["auto", "on", "off"] = _f(
        "auto", "Pad every batch to one of ~16 shapes (lengths rounded up to multiples of 8, up to 1/8 "
        "above 64; a fixed row count per length), so a GPU meets each shape once; auto = on for CUDA.")
    cuda_graphs: Literal["auto", "on", "off"] = _f(
        "auto", "Replay each update as CUDA graphs (one per batch shape, needs shape_buckets); auto = "
        "wherever the run allows it (a Transformer on one CUDA GPU in bf16/fp32 without scheduled "
        "sampling, diversity penalty or compile), on = required, off = eager updates (4x slower for "
        "transformer-small on an H100: docs/results.md).")
    threads: int = _f(0, "CPU threads for PyTorch (0 = all allowed cores).", 0)
    scheduled_sampling: Literal["none", "linear", "exponential", "inverse_sigmoid"] = _f(
        "none", "Decay of the probability of feeding the gold previous token (Bengio et al. 2015).",
        when=CE,
    )
    ss_k: float = _f(
        2000.0,
        "Scheduled sampling speed k: linear = steps to reach ss_min; exponential = steps to halve "
        "(p = 0.5^(step/k)); inverse_sigmoid: p = k/(k+exp(step/k)).",
        0, when={"scheduled_sampling": Not("none")},
    )
    ss_min: float = _f(0.75, "Lowest probability of feeding the gold token.", 0, 1,
                       when={"scheduled_sampling": Not("none")})
    diversity_penalty: float = _f(0.0, "Weight of the multi-head diversity penalty ||AA^T - I||^2 (needs "
                                  "attention weights).", 0, when={"model.attention": Not("none"), **CE})
    max_nonfinite: int = _f(5, "Abort after this many consecutive non-finite losses.", 1)
    # minimum risk training (docs/training.md#minimum-risk-training)
    objective: Literal["ce", "mrt"] = _f(
        "ce", "What an update minimises: ce = label-smoothed cross-entropy of the reference; mrt = minimum "
        "risk training (Shen et al. 2016): the expected cost of the model's own candidates (+ mrt_ce_weight "
        "× ce); start it from a trained model (init_from).")
    mrt_candidates: int = _f(4, "Candidates generated per source sentence (duplicates dropped).", 2, when=MRT)
    mrt_search: Literal["sample", "beam", "both"] = _f(
        "beam", "How candidates are generated, by mtkit's search with the model being trained: "
        "sample (ancestral, temperature 1, reseeded from seed, rank and update), beam (the n-best of a "
        "beam of mrt_candidates), or both (half each, the beam's rounded up). At mrt_alpha 1 samples "
        "get almost no weight: sample and both suit a small alpha.", when=MRT)
    mrt_alpha: float = _f(1.0, "Sharpness α: candidate weights Q(y|x) ∝ P(y|x)^α, renormalised over a "
                          "sentence's candidates (P is the sequence probability, EOS included); the risk's "
                          "gradient scales with it.", 0, when=MRT)
    mrt_metric: Literal["bleu", "chrf"] = _f(
        "bleu", "The cost of a candidate: 1 − sentence BLEU/100 (sacrebleu, exponential smoothing, "
        "effective order) or 1 − sentence chrF/100, against the reference, detokenised.", when=MRT)
    mrt_ce_weight: float = _f(0.2, "Weight of the reference's label-smoothed cross-entropy (per token) "
                              "beside the risk (per sentence); 0 = risk alone.", 0, when=MRT)
    mrt_cost_workers: int = _f(0, "Processes that score candidates (sacrebleu) in parallel; 0 = auto: on "
                               "a GPU the spare CPU cores, at most 8; on a CPU none (the cores train). "
                               "The costs are the same either way.", 0, when=MRT)
    # fine-tuning (docs/finetune.md)
    init_from: str = _f("", "Start from a trained model's weights (model dir or checkpoint file), keeping "
                        "its architecture and vocabulary; read when the run starts; recorded as that file.")
    init_from_sha256: str = _f("", "SHA-256 of the init_from checkpoint, recorded by `mtkit train`; when "
                               "set, the parent must match it.", when={"init_from": Not("")})
    init_keep: list[Literal["optimizer", "schedule", "step"]] = _f(
        [], "Also carry over the parent's optimizer state, the LR schedule's place, the step count.",
        when={"init_from": Not("")})
    freeze: list[Literal["embeddings", "encoder", "decoder", "output"]] = _f(
        [], "Parameter groups left untrained (tied embeddings and output projection are one tensor).")


@dataclass
class DecodingConfig:
    """Search settings used by `mtkit translate` and by validation."""

    beam_size: int = _f(5, "Beam size (1 = greedy).", 1)
    length_penalty: float = _f(1.0, "GNMT length penalty α: score / ((5+len)/6)^α (0 disables).", 0,
                               when={"length_norm": ("gnmt",)})
    length_norm: Literal["gnmt", "average", "none"] = _f(
        "gnmt", "Length normalisation: GNMT penalty, plain average log-prob, or none."
    )
    max_len_a: float = _f(1.2, "Longest output is max_len_a · source_len + max_len_b tokens.", 0)
    max_len_b: int = _f(10, "See max_len_a.", 0)
    min_len: int = _f(1, "Shortest output in tokens (EOS is blocked before).", 0)
    eos_at_limit: Literal["scored", "free"] = _f(
        "scored", "The EOS forced at the length limit: scored adds its log-probability to the hypothesis' "
        "score; free adds 0, as Transformers' forced_eos_token_id does (imported MarianMT models).")
    beam_stop: Literal["ended", "so_far", "finished"] = _f(
        "ended", "When beam search stops a sentence under length_norm average (K finished hypotheses "
        "and): ended, the best live beam ended now (its length + EOS) would not beat the worst of them; "
        "so_far, the same with its length so far, as Transformers' generate stops (imported MarianMT "
        "models); finished, at K finished hypotheses alone, as generate with early_stopping true. "
        "Torch engine only.")
    length_offset: int = _f(
        0, "Tokens added to every hypothesis' length where a length norm divides by it: 1 for imported "
        "M2M100/NLLB models, whose generate counts the forced target-language token. Torch engine only.", 0)
    no_repeat_ngram: int = _f(0, "Forbid repeating any n-gram of this size (0 = off).", 0)
    max_input_tokens: int = _f(
        400, "Longer inputs are split into sentences or windows of this many subwords and rejoined.", 8
    )
    temperature: float = _f(1.0, "Sampling temperature (`mtkit translate --sample`).", 0)
    top_k: int = _f(0, "Sample from the k most likely tokens (0 = all; with --sample).", 0)
    top_p: float = _f(1.0, "Nucleus sampling mass (with --sample).", 0, 1)


@dataclass
class Config:
    """A whole experiment."""

    data: DataConfig = field(default_factory=DataConfig)
    clean: CleanConfig = field(default_factory=CleanConfig)
    bpe: BpeConfig = field(default_factory=BpeConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    decoding: DecodingConfig = field(default_factory=DecodingConfig)


# get_type_hints, not Field.type: with `from __future__ import annotations` the latter is a string
SECTIONS: dict[str, type] = typing.get_type_hints(Config)


#: keys that used to be config keys and are now runtime options: refused in a user's config with a
#: pointer to the option, dropped silently from configs stored in older checkpoints
MOVED_KEYS = {
    "decoding.max_tokens": "it is a runtime setting, not a fact of the model: use `mtkit translate "
                           "--max-tokens N` (or Translator(max_tokens=N))",
}


def _build_section(cls: type, values: dict[str, Any], section: str, stored: bool = False) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(f"{section}: expected a mapping of keys, got {values!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        moved = MOVED_KEYS.get(f"{section}.{key}")
        if moved is not None and key not in fields:
            if stored:
                continue
            raise ConfigError(f"{section}.{key} is no longer a config key: {moved}")
        if key not in fields:
            raise ConfigError(f"unknown key '{section}.{key}'{suggest(key, list(fields))}")
        name = f"{section}.{key}"
        value = coerce(value, hints[key], name)
        meta = fields[key].metadata
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "min" in meta and value < meta["min"]:
                raise ConfigError(f"{name}: {value} is below the minimum {meta['min']}")
            if "max" in meta and value > meta["max"]:
                raise ConfigError(f"{name}: {value} is above the maximum {meta['max']}")
        kwargs[key] = value
    built = cls(**kwargs)
    built._given = frozenset(kwargs)  # not a field: equality, asdict and the saved config ignore it
    return built


def given_keys(section: Any) -> frozenset[str]:
    """The keys of a section that its config file or --set gave (recorded by `from_dict`; none for a
    section built in code or copied with dataclasses.replace): what ``model.size: auto`` keeps as given."""
    return getattr(section, "_given", frozenset())


def _check_consistency(cfg: Config) -> None:
    m = cfg.model
    if m.arch == "transformer" and m.d_model % m.heads:
        raise ConfigError(f"model.d_model ({m.d_model}) must be divisible by model.heads ({m.heads})")
    if len(cfg.training.betas) != 2:
        raise ConfigError("training.betas: expected two numbers [beta1, beta2]")
    if cfg.data.corpora:  # its items are checked with the file that holds them, as every key is
        from mtkit.data.corpora import check_corpora

        check_corpora(cfg.data)
    for n, source in enumerate(cfg.data.sources):
        source_clean(cfg, source, f"data.sources[{n}]")


def source_clean(cfg: Config, source: SourceConfig, where: str = "data.sources") -> CleanConfig:
    """The clean settings of one corpus of data.sources: the clean section with the corpus's own
    ``clean`` keys over it, each checked as a key of the clean section is."""
    given = _build_section(CleanConfig, source.clean, f"{where}.clean")
    return dataclasses.replace(cfg.clean, **{key: getattr(given, key) for key in source.clean})


def from_dict(raw: dict[str, Any] | None, stored: bool = False) -> Config:
    """Validate a nested mapping (as read from YAML) into a Config. ``stored``: the config comes from a
    checkpoint written by an earlier version, whose keys that became runtime options are dropped and
    whose keys that do not apply to it (``check_applicable``) are not refused."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError("the config must be a mapping with sections data, bpe, model, training, decoding")
    sections = {}
    for key, value in raw.items():
        if key not in SECTIONS:
            raise ConfigError(f"unknown section '{key}'{suggest(key, list(SECTIONS))}")
        sections[key] = _build_section(SECTIONS[key], value or {}, key, stored)
    cfg = Config(**sections)
    _check_consistency(cfg)
    if not stored:  # an earlier version accepted keys of the other architecture: its models still load
        check_applicable(cfg)
    return cfg


def to_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings; values are parsed as YAML scalars (so 1e-3, true, [1,2] work)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        path, text = item.split("=", 1)
        parts = path.strip().split(".")
        if len(parts) != 2:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. training.lr=0.001")
        section, key = parts
        if section not in SECTIONS:
            raise ConfigError(f"--set: unknown section '{section}'{suggest(section, list(SECTIONS))}")
        import yaml  # here: loading it costs every command start-up time, and most never read YAML

        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {item!r}: cannot parse value: {exc}") from None
        raw.setdefault(section, {})
        if raw[section] is None:
            raw[section] = {}
        raw[section][key] = value
    return raw


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a YAML config (or start from defaults when path is None) and apply --set overrides."""
    raw: dict[str, Any] = {}
    if path is not None:
        import yaml

        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{p}{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{p}: not valid UTF-8") from None
    raw = apply_overrides(raw, overrides or [])
    try:
        return from_dict(raw)
    except ConfigError as exc:  # name the file the mistake is in (it may be one of several)
        if path is None or str(exc).startswith(str(path)):
            raise
        raise ConfigError(f"{path}: {exc}") from None


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config (every key, defaults included) as YAML."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # libyaml's emitter where PyYAML was built with it: the same text, about 4 times faster (6 → 1.4 ms
    # for a whole config); every training run and export writes one
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(to_dict(cfg), Dumper=dumper, sort_keys=False, allow_unicode=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # atomic: a reader never sees half a file
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
