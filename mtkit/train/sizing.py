"""``model.size: auto``: the Transformer's width chosen for the time budget from this machine's speed.

Under a fixed budget a model can be too wide to learn much: on a 2-core CPU with fp32 products (AVX2,
no bf16) the demo's d_model 256 made 648 updates in 9 minutes and scored 8.06 test BLEU, d_model 128
made 1,781 and scored 12.27; with native bf16 the same 256 made 1,218 updates and beat 128 (13.18
against 12.48). Per update the wider model learns more; per second it may learn less. Auto weighs the
two with what was measured of each (docs/notebook/budget.md, "The width chosen for the budget"):

1. **Speed.** Each width of ``LADDER`` runs ``PROBE_WARMUP`` untimed and ``PROBE_UPDATES`` timed real
   training updates (forward, loss, backward, Adam step; the run's first batches, precision and threads)
   on a throw-away model, the widths taking turns. The median seconds per update, times
   ``LOOP_OVERHEAD`` (what the training loop and its validations add to an update, measured), predict
   each width's updates in ``training.max_time``.
2. **Learning curve.** Each width's dev loss after U updates of a budgeted run, fitted to the demo's
   runs at every width (``bench/studies/size_curves.py``): ``floor + scale · (U / 1000) ** -DECAY``.
3. **Choice** (`choose`, a pure function of the measured seconds: the same speeds give the same
   shape): the width whose curve is lowest at its predicted updates. A longer budget or a faster
   machine moves the choice to a wider model, never to a narrower one.
4. **Dropout** 0 where the run is predicted to see fewer than ``DROPOUT_EPOCHS`` epochs (a run of about
   two epochs scored 2.2 BLEU more without it), else ``DEFAULT_DROPOUT``; and the **peak LR** the
   width's curve was measured at (``training.lr``: 4e-3 for 128, 2e-3 for the wider ones).

Keys given in the config file or with ``--set`` stay as given (`given_keys`); auto fills only the others
(a given d_model is the only candidate: auto then chooses the dropout). A resumed run keeps the shape its
model directory records and probes nothing. The choice, with the measured speeds and predictions, goes
into metrics.jsonl (event ``size``) and the resolved config.yaml. The curves are the demo's (30k verse
pairs, 8,000 joint pieces, batches of 1,536 tokens, 3+3 layers); on other data their levels differ, and
what is assumed is only that the widths rank as they did there.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mtkit.config.experiment import Config, ModelConfig, given_keys
from mtkit.data.batching import Batch
from mtkit.data.meta import DataMeta
from mtkit.device import DistInfo
from mtkit.errors import ConfigError
from mtkit.models import build_model
from mtkit.train.runtime import make_optimizer
from mtkit.train.update import Updater


@dataclass(frozen=True)
class Shape:
    """One width (layers stay as configured: a 1-layer decoder measured no gain), with its learning
    curve where one was measured (floor, scale: see the module docstring)."""

    d_model: int
    d_ff: int
    heads: int
    floor: float | None = None
    scale: float | None = None
    lr: float | None = None  # the peak LR its curve was measured at (None: the config's)

    @property
    def name(self) -> str:
        return f"d_model {self.d_model} (d_ff {self.d_ff}, {self.heads} heads)"

    def dev_loss(self, updates: int) -> float | None:
        """The curve's dev loss after this many updates (None: no curve measured for this shape)."""
        if self.floor is None or self.scale is None:
            return None
        return self.floor + self.scale * (max(updates, 1) / 1000) ** -DECAY


#: the widths measured under the demo's budget, narrowest first, with their fitted curves and the peak LR
#: those were measured at (128 learned far more per update at 4e-3 than at 2e-3; 192 learned the same at
#: both); wider ones (384, 512: what a long run or a GPU may want) are not here: no run measured them
DECAY = 0.3299
LADDER = (Shape(128, 512, 4, 0.3912, 3.1283, lr=0.004), Shape(192, 768, 4, 0.3536, 3.1466, lr=0.002),
          Shape(256, 1024, 4, 0.0, 3.3347, lr=0.002))
#: the keys auto chooses, by section (those given in the config or with --set are kept)
AUTO_KEYS = {"model": ("d_model", "d_ff", "heads", "dropout"), "training": ("lr",)}
#: a second of the budget per probe-second of update: the loop's own seconds per update measured 0.85-1.15
#: of the probe's (bf16 and AVX2, 128 and 256 wide), and the demo's validations take ~5% of its budget
LOOP_OVERHEAD = 1.05
#: below this many predicted epochs auto sets dropout 0, above it DEFAULT_DROPOUT (ModelConfig's default)
DROPOUT_EPOCHS = 3.0
DEFAULT_DROPOUT: float = ModelConfig.dropout
PROBE_WARMUP = 2
PROBE_UPDATES = 5


def predicted_updates(seconds_per_update: float, budget_seconds: float) -> int:
    """Updates a run of ``budget_seconds`` makes at this probe speed."""
    return int(budget_seconds / (seconds_per_update * LOOP_OVERHEAD)) if seconds_per_update > 0 else 0


@dataclass
class SizeChoice:
    """What auto chose, and the measurements it chose from (written to metrics.jsonl)."""

    shape: Shape
    dropout: float
    measured: list[tuple[Shape, float]]  # (shape, seconds per update), widest first
    budget_seconds: float
    epochs: float  # predicted epochs of the chosen shape
    probe_seconds: float = 0.0

    def _predictions(self) -> list[tuple[Shape, float, int, float | None]]:
        return [(shape, seconds, n, shape.dev_loss(n)) for shape, seconds in self.measured
                for n in [predicted_updates(seconds, self.budget_seconds)]]

    def describe(self, kept: Sequence[str] = ()) -> str:
        measured = ", ".join(f"{shape.d_model}: {seconds:.3f} s/update → ~{n:,} updates"
                             + (f" → dev loss ~{loss:.2f}" if loss is not None else "")
                             for shape, seconds, n, loss in self._predictions())
        kept_note = f"; kept as given: {', '.join(kept)}" if kept else ""
        lr = "" if self.shape.lr is None else f", lr {self.shape.lr:g}"
        return (f"model.size auto: {self.shape.name}, dropout {self.dropout:g}{lr} ({measured} in "
                f"{self.budget_seconds / 60:g} min on the demo's curves; ~{self.epochs:.1f} epochs; "
                f"probe {self.probe_seconds:.1f} s){kept_note}")

    def record(self) -> dict:
        predictions = self._predictions()
        return {"event": "size", "d_model": self.shape.d_model, "d_ff": self.shape.d_ff,
                "heads": self.shape.heads, "dropout": self.dropout, "lr": self.shape.lr,
                "seconds_per_update": {str(s.d_model): round(t, 4) for s, t, _, _ in predictions},
                "predicted_updates": {str(s.d_model): n for s, _, n, _ in predictions},
                "predicted_dev_loss": {str(s.d_model): None if loss is None else round(loss, 3)
                                       for s, _, _, loss in predictions},
                "epochs": round(self.epochs, 2), "probe_seconds": round(self.probe_seconds, 2)}


def choose(measured: Sequence[tuple[Shape, float]], budget_seconds: float, epoch_updates: int,
           default_dropout: float = DEFAULT_DROPOUT) -> SizeChoice:
    """The shape for these measured speeds ((shape, seconds per update) pairs): the one whose learning
    curve is lowest at the updates its speed allows (a single candidate: that one). Deterministic: no
    clock, no randomness; ties go to the wider shape."""
    if not measured:
        raise ValueError("no shape was measured")
    widest_first = sorted(measured, key=lambda item: -item[0].d_model)

    def predicted_loss(item: tuple[Shape, float]) -> float:
        loss = item[0].dev_loss(predicted_updates(item[1], budget_seconds))
        return float("inf") if loss is None else loss

    chosen, seconds = min(widest_first, key=predicted_loss)  # min keeps the first (widest) of equals
    epochs = predicted_updates(seconds, budget_seconds) / max(1, epoch_updates)
    dropout = 0.0 if epochs < DROPOUT_EPOCHS else default_dropout
    return SizeChoice(chosen, dropout, widest_first, budget_seconds, epochs)


def apply_choice(cfg: Config, choice: SizeChoice) -> tuple[Config, list[str]]:
    """The config with the chosen keys, except those the user gave; and the names of those kept."""
    chosen = {"model": {"d_model": choice.shape.d_model, "d_ff": choice.shape.d_ff,
                        "heads": choice.shape.heads, "dropout": choice.dropout},
              "training": {} if choice.shape.lr is None else {"lr": choice.shape.lr}}
    resolved = _fill_unless_given(cfg, chosen)
    if resolved.model.d_model % resolved.model.heads:
        raise ConfigError(f"model.size auto chose d_model {resolved.model.d_model}, which model.heads "
                          f"({resolved.model.heads}, as given) does not divide: give model.d_model too")
    kept = [f"{section}.{key}" for section, keys in AUTO_KEYS.items()
            for key in keys if key in given_keys(getattr(cfg, section))]
    return resolved, kept


def recorded_choice(cfg: Config, recorded: Config) -> Config:
    """The config with the keys auto chose when the run started (``recorded``: its config.yaml), except
    those given now (a resumed run must train the shape its checkpoint holds)."""
    return _fill_unless_given(cfg, {section: {key: getattr(getattr(recorded, section), key) for key in keys}
                                    for section, keys in AUTO_KEYS.items()})


def _fill_unless_given(cfg: Config, values: dict[str, dict[str, object]]) -> Config:
    """``cfg`` with ``values`` (by section, then key) set, except the keys the user gave (`given_keys`)."""
    sections = {}
    for section, keys in values.items():
        current = getattr(cfg, section)
        given = given_keys(current)
        sections[section] = dataclasses.replace(current, **{k: v for k, v in keys.items() if k not in given})
    return dataclasses.replace(cfg, **sections)


def check_auto(cfg: Config) -> None:
    """Refuse what auto cannot serve, before any work."""
    if cfg.model.arch != "transformer":
        raise ConfigError("model.size auto chooses a Transformer's width; set model.size: fixed for an RNN")
    if not cfg.training.max_time:
        raise ConfigError("model.size auto chooses the width for a time budget: set training.max_time "
                          "(--max-time), or model.size: fixed")


def shape_candidates(model: ModelConfig) -> list[Shape]:
    """The ladder, widest first; where d_model is given, only that width (auto then picks the rest)."""
    given = given_keys(model)
    if "d_model" in given:
        return [Shape(model.d_model, model.d_ff if "d_ff" in given else 4 * model.d_model,
                      model.heads if "heads" in given else 4)]
    return sorted(LADDER, key=lambda shape: -shape.d_model)


class _Candidate:
    """A throw-away model of one shape with its optimizer and updater, and its timed updates."""

    def __init__(self, cfg: Config, shape: Shape, meta: DataMeta, device: torch.device,
                 autocast_dtype: torch.dtype | None):
        model_cfg = dataclasses.replace(cfg.model, d_model=shape.d_model, d_ff=shape.d_ff, heads=shape.heads)
        torch.manual_seed(cfg.training.seed)
        model = build_model(model_cfg, meta.src_vocab_size, meta.tgt_vocab_size, meta.one_vocabulary())
        model.to(device).train()
        optimizer = make_optimizer(model, cfg.training, device)
        scaler = torch.amp.GradScaler(device.type) if autocast_dtype == torch.float16 else None
        self.shape, self.device, self.seconds = shape, device, []
        self.updater = Updater(model, model, optimizer, scaler, cfg.training, DistInfo(), device,
                               autocast_dtype, graphed=False)

    def update(self, batches: list[Batch], step: int, timed: bool) -> None:
        start = time.perf_counter()
        self.updater.update(list(batches), step)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if timed:
            self.seconds.append(time.perf_counter() - start)

    def median(self) -> float:
        return sorted(self.seconds)[len(self.seconds) // 2]


def time_updates(cfg: Config, shapes: Sequence[Shape], meta: DataMeta, updates: Sequence[list[Batch]],
                 device: torch.device, autocast_dtype: torch.dtype | None) -> list[tuple[Shape, float]]:
    """Seconds per training update of each shape: ``PROBE_WARMUP`` untimed updates, then the median of
    ``PROBE_UPDATES`` timed ones, the shapes taking turns update by update (a VM's speed drifts by 20%
    within seconds: in turns, each shape sees the same drift)."""
    candidates = [_Candidate(cfg, shape, meta, device, autocast_dtype) for shape in shapes]
    for n in range(PROBE_WARMUP + PROBE_UPDATES):
        for candidate in candidates:
            candidate.update(updates[n % len(updates)], n + 1, timed=n >= PROBE_WARMUP)
    return [(candidate.shape, candidate.median()) for candidate in candidates]


def probe_and_choose(cfg: Config, meta: DataMeta, updates: Sequence[list[Batch]], epoch_updates: int,
                     device: torch.device, autocast_dtype: torch.dtype | None) -> SizeChoice:
    """Time every candidate and choose."""
    started = time.monotonic()
    measured = time_updates(cfg, shape_candidates(cfg.model), meta, updates, device, autocast_dtype)
    choice = choose(measured, cfg.training.max_time * 60, epoch_updates)
    choice.probe_seconds = time.monotonic() - started
    return choice
