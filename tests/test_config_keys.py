"""Every config key takes effect or is refused (issue #15): a walk over the typed config.

For each key, two configs that differ in that key alone go through what the key is for, and what a
user can observe is compared: the model's parameter layout and fixed-seed outputs, search results, the
LR schedule, a two-update training run (weights, metrics.jsonl, training state, files, start-up line),
a tiny `mtkit prepare` (vocabulary, shards, meta.json, files). A key set where it cannot apply (the
other architecture, another LR schedule, …) is refused with one line naming it and the key it depends
on. A config key with no case below and no line in INFORMATIONAL fails
``test_every_key_is_classified``: a new key must show its effect before it can be added.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import random
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from unittest import mock

import pytest
import torch
from rich.console import Console

from mtkit import checkpoint as files
from mtkit.config.checks import Not, conditions, unmet
from mtkit.config.experiment import SECTIONS, from_dict
from mtkit.data.bpe import Bpe, train_bpe
from mtkit.data.prepare import prepare
from mtkit.data.shards import ParallelData
from mtkit.decode.search import search
from mtkit.decode.translator import Translator
from mtkit.errors import ConfigError, MtkitError
from mtkit.metrics_log import read_metrics
from mtkit.models import build_model
from mtkit.train import update as update_module
from mtkit.train.schedules import LRSchedule
from mtkit.train.trainer import Trainer, train

sys.path.insert(0, str(Path(__file__).parent))
from train_helpers import make_data_dir  # noqa: E402

FIELDS = {f"{s}.{f.name}": f for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)}

#: keys that feed no computation: they only name things (meta.json, reports, export manifests)
INFORMATIONAL = {
    "data.src_lang": "language code: meta.json, reports, the Argos package's metadata; what the cleaning "
                     "filters expect (the clean.* cases set it)",
    "data.tgt_lang": "language code: meta.json, reports, the Argos package's metadata; what the cleaning "
                     "filters expect (the clean.* cases set it)",
    "clean.examples": "how many dropped pairs the cleaning report shows per reason",
    "clean.workers": "processes only: the same pairs with any number of them (tests/test_cleaning.py)",
}

TINY_T = {"model.arch": "transformer", "model.d_model": 16, "model.heads": 2, "model.d_ff": 32,
          "model.encoder_layers": 1, "model.decoder_layers": 1, "model.dropout": 0.0}
TINY_R = {"model.arch": "rnn", "model.emb_dim": 8, "model.hidden_size": 8, "model.encoder_layers": 1,
          "model.decoder_layers": 1, "model.dropout": 0.0}


@dataclass
class Case:
    """Compare ``probe`` on ``base`` with ``probe`` on ``base`` plus ``key: value`` (and ``also``)."""

    probe: str  # a key of PROBES
    value: Any
    base: dict[str, Any] = field(default_factory=dict)  # dotted keys set on both sides
    also: dict[str, Any] = field(default_factory=dict)  # changed with the key (only where said why)
    # effect: the observations differ; refused: the changed side fails in one line naming the key;
    # stops: the changed side ends in an error, and that is the key's effect (max_nonfinite)
    expect: Literal["effect", "refused", "stops"] = "effect"
    view: tuple[str, ...] = ()  # compare only these parts of a dict observation (where said why)
    label: str = ""


def _in(section: str, kw: dict[str, Any]) -> dict[str, Any]:
    return {f"{section}.{k}": v for k, v in kw.items()}


def both(value: Any, **base: Any) -> list[Case]:
    """A model key of both families: each is walked (the Transformer once ignored tie_embeddings)."""
    return [Case("model", value, {**TINY_T, **_in("model", base)}, label="transformer"),
            Case("model", value, {**TINY_R, **_in("model", base)}, label="rnn")]


def tr(value: Any, **base: Any) -> list[Case]:
    return [Case("model", value, {**TINY_T, **_in("model", base)})]


def rnn(value: Any, **base: Any) -> list[Case]:
    return [Case("model", value, {**TINY_R, **_in("model", base)})]


def run(value: Any, probe: str = "run", **base: Any) -> list[Case]:
    return [Case(probe, value, _in("training", base))]


def prep(value: Any, **base: Any) -> list[Case]:
    return [Case("prepare", value, {(k if "." in k else f"data.{k}"): v for k, v in base.items()})]


def dec(value: Any) -> list[Case]:
    return [Case("search", value)]


# a prepare whose training pairs are cleaned: NOISY's pairs, each caught by one rule, and clean ones
NOISY_TRAIN = {"data.train_src": "{corpus}/noisy.src", "data.train_tgt": "{corpus}/noisy.tgt",
               "data.src_lang": "en", "data.tgt_lang": "de"}
NOISY = [
    ("Open the file in the editor.", "Öffnen Sie die Datei im Editor."),
    ("Open the file in the editor.", "Öffnen Sie die Datei im Editor."),  # duplicate
    ("Save the document before closing.", "Speichern Sie das Dokument vor dem Schließen."),
    ("Save the document before closing.", "Sichern Sie das Dokument vor dem Beenden."),  # same source
    ("Print the current page.", "Print the current page."),  # copy
    ("Print the current pages now.", "Print the current page now."),  # near copy
    ("The window is closed.", "Ã–ffnen Sie das Fenster."),  # mojibake
    ("Close the window.", "Закройте окно."),  # another script
    ("Delete the selected rows from the table.", "Borre las filas seleccionadas de la tabla."),  # Spanish
    ("<b>Bold</b> text is shown.", "Fetter Text wird angezeigt."),  # markup on one side
    ("Cannot open %s.", "Kann nicht geöffnet werden."),  # a placeholder lost
    ("See https://example.org for details.", "Siehe https://beispiel.org für Details."),  # another URL
    ("Insert 25 rows.", "Fügen Sie 52 Zeilen ein."),  # other numbers
    ("This option sets the width of the column in the table.", "Diese Option legt die Breite der"),  # cut
    ("A long sentence about the settings of the printer and the paper size of each page.",
     "Ein Satz über den Drucker."),  # too short for its source
    ("Yes.", "Ja, das ist eine sehr lange Antwort auf eine sehr kurze Frage, die niemand gestellt hat."),
    ("The printer is ready.", "Der Drucker ist bereit."),
    ("Select a color for the background.", "Wählen Sie eine Farbe für den Hintergrund."),
    ("The network connection was lost.", "Die Netzwerkverbindung wurde unterbrochen."),
    ("Enter your password to continue.", "Geben Sie Ihr Passwort ein, um fortzufahren."),
]


def cleaned(value: Any, expect: Literal["effect", "refused", "stops"] = "effect", **base: Any) -> list[Case]:
    return [Case("prepare", value, {**NOISY_TRAIN, "clean.enabled": True, **base}, expect=expect)]


# a multilingual prepare: two corpora of unequal size (40 and 6 pairs), so the temperature tells
CORPUS_XY = {"train_src": "{corpus}/train.src", "train_tgt": "{corpus}/train.tgt", "src_lang": "xx",
             "tgt_lang": "yy", "dev_src": "{corpus}/dev.src", "dev_tgt": "{corpus}/dev.tgt"}
CORPUS_XZ = {"train_src": "{corpus}/dev.src", "train_tgt": "{corpus}/dev2.src", "src_lang": "xx",
             "tgt_lang": "zz"}
# the single-pair files that data.corpora replaces
NO_PAIR = {"data.train_src": "", "data.train_tgt": "", "data.dev_src": "", "data.dev_tgt": ""}


# The walk. "{root}" is a fresh directory per side; "{corpus}", "{data}", "{parent}" come from `env`.
CASES: dict[str, list[Case]] = {
    # data: a tiny prepare (its vocabulary, shards, meta.json and files)
    "data.train_src": prep("{corpus}/train2.src"),
    "data.train_tgt": prep("{corpus}/train2.src"),
    "data.dev_src": prep("{corpus}/dev2.src"),
    "data.dev_tgt": prep("{corpus}/dev2.src"),
    "data.test_src": prep("{corpus}/dev2.src", test_src="{corpus}/dev.src", test_tgt="{corpus}/dev.tgt"),
    "data.test_tgt": prep("{corpus}/dev2.src", test_src="{corpus}/dev.src", test_tgt="{corpus}/dev.tgt"),
    "data.dir": prep("{root}/elsewhere"),
    "data.max_len": prep(4),
    "data.min_len": prep(3),
    "data.max_len_ratio": prep(1.2),
    "data.filter_dev": prep(True, max_len=4),
    # several corpora instead of one pair (mtkit.data.corpora): tagged sources, a languages record
    "data.corpora": [Case("prepare", [CORPUS_XY], also=NO_PAIR)],
    "data.temperature": [Case("prepare", 1.0, {"data.corpora": [CORPUS_XY, CORPUS_XZ], **NO_PAIR})],
    "data.language_tag": [Case("prepare", "decoder", {"data.corpora": [CORPUS_XY, CORPUS_XZ], **NO_PAIR})],
    "data.markup_augmentation": prep(0.5),  # placeholders and tags in half the training pairs
    # several training corpora of one pair, read and cleaned (mtkit.data.cleaning)
    "data.sources": [Case("prepare", [{"src": "{corpus}/noisy.src", "tgt": "{corpus}/noisy.tgt"}],
                          also={"data.train_src": "", "data.train_tgt": ""})],
    # cleaning in prepare: a corpus with one pair of each kind of noise (NOISY) and clean pairs
    "clean.enabled": prep(True, **NOISY_TRAIN),
    "clean.dedup": cleaned(False),
    "clean.dedup_source": cleaned(True),
    "clean.length_ratio": cleaned(0.0),
    "clean.copies": cleaned(False, **{"clean.langid": False}),  # else the identifier drops the English
    "clean.copy_similarity": cleaned(1.0, **{"clean.langid": False}),  # a near copy, not identical
    "clean.charset": cleaned(False),
    "clean.script": cleaned(False, **{"clean.langid": False}),  # else the identifier drops the Russian
    "clean.script_min_share": cleaned(0.0, **{"clean.langid": False}),
    "clean.langid": cleaned(False),
    "clean.langid_min_prob": cleaned(0.0),
    "clean.langid_candidates": cleaned([]),  # among en and de alone, the Spanish line passes as German
    "clean.markup": cleaned(False),
    "clean.placeholders": cleaned(False),
    "clean.urls": cleaned(True),
    "clean.numbers": cleaned(True),
    "clean.truncation": cleaned(False),
    "clean.truncation_ratio": cleaned(0.0),
    "clean.score_min": cleaned(0.5, expect="refused"),  # for `mtkit clean --score-models` only
    "clean.score_keep": cleaned(0.5, expect="refused"),
    "bpe.joint": prep(False),
    "bpe.vocab_size": prep(40),
    "bpe.character_coverage": prep(0.99),  # the five rare characters: < 1 %
    "bpe.input_sentence_size": prep(10),
    "bpe.model": prep("{corpus}/given.model"),
    "bpe.src_model": prep("{corpus}/given.model", **{"bpe.joint": False}),
    "bpe.tgt_model": prep("{corpus}/given.model", **{"bpe.joint": False}),
    "bpe.model_from": prep("{parent}"),
    "bpe.seed": prep(5, **{"bpe.input_sentence_size": 10}),
    # model: parameter layout, and fixed-seed outputs in eval and (dropout) train mode
    "model.arch": [Case("model", "rnn", {"model.encoder_layers": 1, "model.decoder_layers": 1})],
    "model.emb_dim": rnn(12),
    "model.dropout": both(0.3),
    "model.encoder_layers": both(2),
    "model.decoder_layers": both(2),
    "model.tie_embeddings": both(False),  # share_all_embeddings stays true: the combination of issue #15
    "model.share_all_embeddings": both(False),
    # a two-update run whose width auto chooses: RUN_BASE gives the width, so auto times that width
    # alone and records its choice (tests/test_sizing.py walks the ladder)
    "model.size": [Case("run", "auto", {"training.max_time": 60})],
    "model.d_model": tr(24),
    "model.heads": tr(8),
    "model.d_ff": tr(48),
    "model.attention_dropout": tr(0.3),
    "model.activation_dropout": tr(0.3),
    "model.activation": tr("gelu"),
    "model.norm": tr("pre"),
    "model.positions": tr("learned"),
    "model.max_positions": tr(32, positions="learned"),
    "model.max_relative_distance": tr(2, positions="relative"),
    "model.sinusoid_layout": tr("halves"),
    "model.embed_scale": tr(False),
    "model.source_eos": tr(True),
    "model.source_bos": tr(True),  # M2M100/NLLB's source-language token (mtkit.models.prefixed)
    "model.decoder_bos": tr(True),  # M2M100/NLLB's </s> before the target-language token
    "model.output_bias": tr(True),  # a buffer in the layout (zero until an import fills it)
    "model.rnn_type": rnn("gru"),
    "model.hidden_size": rnn(12),
    "model.bidirectional": rnn(False),
    "model.attention": rnn("dot"),
    "model.attention_style": rnn("luong"),
    "model.input_feeding": rnn(False, attention_style="luong"),
    "model.bridge": rnn(False),
    # training: a two-update run on tiny data (weights, metrics, state, files, start-up line)
    "training.model_dir": run("{root}/elsewhere"),
    "training.seed": run(2),
    "training.max_tokens": run(150),
    "training.update_freq": run(2),
    "training.optimizer": run("adamw", weight_decay=0.1),  # adam and adamw differ by the weight decay
    "training.lr": run(1e-2),
    "training.betas": run([0.5, 0.9]),
    "training.eps": run(0.1),
    "training.weight_decay": run(0.1),
    "training.schedule": run("inverse_sqrt"),
    "training.warmup_steps": run(4),
    "training.warmup_fraction": run(0.5, schedule="linear"),  # of the 2 planned updates: a warm-up of 1
    "training.cooldown_fraction": run(0.5),  # the constant LR decays to 0 over the second update
    "training.ema_decay": run(0.9),  # validation scores the average too (events), the better is kept
    "training.plateau_factor": run(0.1, "schedule", schedule="plateau", plateau_patience=0),
    "training.plateau_patience": run(0, "schedule", schedule="plateau"),
    "training.min_lr": run(3e-3, schedule="inverse_sqrt"),
    "training.clip_norm": run(1e-4, eps=1e-3),
    "training.label_smoothing": run(0.2),
    "training.max_steps": run(3),
    "training.max_epochs": run(2, max_steps=0, max_epochs=1),
    "training.max_time": run(1e-9, max_steps=3),
    "training.validate_every": run(1),
    "training.valid_metric": run("chrf"),
    "training.valid_max_sentences": run(1),
    "training.keep_best": run(1, validate_every=1, max_steps=3, keep_last=0),
    "training.keep_last": run(0, validate_every=1, max_steps=3, keep_best=1),
    "training.save_every": run(1, "crash", validate_every=10, max_steps=3),
    "training.patience": run(1, lr=0.0, validate_every=1, max_steps=4),  # lr 0: no validation improves
    "training.log_every": run(2),
    "training.device": [Case("run", "cuda:99", expect="refused")],  # no such device anywhere: refused
    "training.precision": run("bf16"),
    "training.compile": run(True),  # the probe records torch.compile calls instead of compiling
    "training.threads": run(2),
    "training.shape_buckets": run("on"),  # padded batches: other tokens/s counts, padding, weights
    "training.cuda_graphs": [Case("run", "on", expect="refused")],  # needs CUDA: refused on this CPU
    # p(gold) with the default ss_k (2000) is 0.9999 for two updates: no token would be swapped
    "training.scheduled_sampling": [Case("run", "linear", also={"training.ss_k": 1.0})],
    "training.ss_k": run(1.0, scheduled_sampling="linear"),
    "training.ss_min": run(0.2, scheduled_sampling="linear", ss_k=1.0),
    # the logged loss includes the penalty; the weights are no witness: asking for attention weights
    # takes another attention kernel, whose rounding Adam turns into lr-sized steps of the key biases
    # (their gradient is zero in exact arithmetic), penalty or not
    "training.diversity_penalty": [Case("run", 0.5, view=("events",))],
    # every loss is NaN: the run aborts at the first update instead of skipping two
    "training.max_nonfinite": [Case("nan", 1, expect="stops")],
    # minimum risk training: two updates of the tiny model, its candidates scored against the references
    "training.objective": run("mrt"),
    "training.mrt_candidates": run(3, objective="mrt"),
    "training.mrt_search": run("sample", objective="mrt"),
    "training.mrt_alpha": run(0.5, objective="mrt"),
    "training.mrt_metric": run("chrf", objective="mrt"),
    "training.mrt_ce_weight": run(0.0, objective="mrt"),
    # the same costs either way (tests/test_costs.py): what changes is where they are computed
    "training.mrt_cost_workers": [Case("run", 2, {"training.objective": "mrt"}, view=("started",))],
    "training.init_from": run("{parent}"),
    "training.init_from_sha256": [Case("run", "0" * 64, {"training.init_from": "{parent}"},
                                       expect="refused")],
    "training.init_keep": run(["step"], init_from="{parent}"),
    "training.freeze": run(["encoder"]),
    # decoding: beam search and sampling with a tiny random model
    "decoding.beam_size": dec(1),
    "decoding.length_penalty": dec(0.2),
    "decoding.length_norm": dec("none"),
    "decoding.max_len_a": dec(0.5),
    "decoding.max_len_b": dec(2),
    "decoding.min_len": dec(8),
    "decoding.eos_at_limit": dec("free"),
    "decoding.beam_stop": [Case("search_many", "so_far", {"decoding.length_norm": "average"}),
                           Case("search_many", "finished", {"decoding.length_norm": "average"})],
    "decoding.length_offset": [Case("search_many", 3, {"decoding.length_norm": "average"})],
    "decoding.no_repeat_ngram": dec(1),
    "decoding.max_input_tokens": [Case("translate", 8)],
    "decoding.temperature": dec(3.0),
    "decoding.top_k": dec(2),
    "decoding.top_p": dec(0.5),
}


# ------------------------------------------------------------------------------------------- probes
@dataclass(frozen=True)
class Refused:
    """What a probe saw when the config (or the stage) refused to run."""

    kind: str
    message: str


@dataclass
class Env:
    corpus: Path
    data: Path
    parent: Path


V = 12  # vocabulary of the model and search probes
RTOL, ATOL = 1e-4, 1e-6  # what `same` calls equal: an effect moves weights by ~lr (3e-3) in one update
RUN_BASE = {**TINY_T, "data.dir": "{data}", "training.model_dir": "{root}/model", "training.max_tokens": 400,
            "training.lr": 3e-3, "training.schedule": "constant", "training.warmup_steps": 0,
            "training.label_smoothing": 0.0, "training.log_every": 1, "training.validate_every": 2,
            "training.max_steps": 2, "training.threads": 1, "training.device": "cpu",
            "training.precision": "fp32", "training.valid_metric": "loss", "decoding.beam_size": 1,
            "decoding.max_len_a": 1.0, "decoding.max_len_b": 5}
PROBE_BASE: dict[str, dict[str, Any]] = {
    "model": {},
    "search": {**TINY_T}, "search_many": {**TINY_T},
    "translate": {},
    "schedule": {"training.schedule": "constant", "training.warmup_steps": 0},
    "run": RUN_BASE, "crash": RUN_BASE, "nan": RUN_BASE,
    "prepare": {"data.train_src": "{corpus}/train.src", "data.train_tgt": "{corpus}/train.tgt",
                "data.dev_src": "{corpus}/dev.src", "data.dev_tgt": "{corpus}/dev.tgt",
                "data.dir": "{root}/data", "bpe.vocab_size": 100},
}


def nested(dotted: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for key, value in dotted.items():
        section, name = key.split(".")
        raw.setdefault(section, {})[name] = value
    return raw


def _tokens(seed: int, lengths: tuple[int, ...]) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), max(lengths), dtype=torch.long)  # PAD_ID 0
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, V, (n,), generator=g)
    return out


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def probe_model(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    torch.manual_seed(0)
    model = build_model(cfg.model, V, V, joint_vocab=True)
    layout = [(name, tuple(p.shape)) for name, p in model.named_parameters()]  # a tied tensor once
    layout += [(name, tuple(b.shape)) for name, b in model.named_buffers()]  # model.output_bias
    src, tgt = _tokens(1, (5, 3, 4)), _tokens(2, (4, 4, 2))
    with torch.no_grad():
        evaluated = model.eval()(src, tgt)[0]
        torch.manual_seed(1)
        trained = model.train()(src, tgt)[0]
    return layout, evaluated, trained


def probe_search(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    torch.manual_seed(0)
    model = build_model(cfg.model, V, V, joint_vocab=True).eval()
    src = _tokens(3, (6, 2, 4))
    beam = search(model, src, cfg.decoding)  # the 1-best: an n-best list would widen a narrow beam
    generator = torch.Generator().manual_seed(0)
    samples = search(model, src, cfg.decoding, nbest=4, sample=True, generator=generator)
    return [[(h.tokens, h.score) for h in hyps] for hyps in beam + samples]


def probe_search_many(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    """Beam search over 64 sources: where a rare choice (when a sentence stops) decides some. The
    weights are perturbed so that sentences end (an initial model runs to the length limit)."""
    torch.manual_seed(0)
    model = build_model(cfg.model, V, V, joint_vocab=True).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    src = _tokens(5, tuple(2 + n % 7 for n in range(64)))
    return [[(h.tokens, h.score) for h in hyps] for hyps in search(model, src, cfg.decoding)]


def probe_translate(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    overrides = [f"{k}={v}" for k, v in dotted.items() if k.startswith("decoding.")]
    translator = Translator(env.parent, device="cpu", threads=1, precision="fp32", overrides=overrides)
    return translator.translate([" ".join(["abc def ghi jkl"] * 6)])


def probe_schedule(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    schedule, rates = LRSchedule(cfg.training, 16), []
    for step in range(1, 9):
        rates.append(schedule(step))
        if step % 2 == 0:
            schedule.observe(False)  # a validation without improvement
    return rates


def probe_run(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    compiled: list[str] = []

    def record(model: Any, **kwargs: Any) -> Any:
        compiled.append(type(model).__name__)
        return model

    log = io.StringIO()
    with mock.patch.object(torch, "compile", record), contextlib.redirect_stderr(log):
        train(cfg)
    model_dir = Path(cfg.training.model_dir)
    last = files.load_checkpoint(model_dir / files.LAST)
    timing = ("elapsed", "tokens_per_s", "rss_mib", "peak_rss_mib")  # what differs between two runs
    return {"weights": last["model"], "files": _files(root), "compiled": compiled,
            "state": {k: v for k, v in last["train_state"].items() if k != "elapsed"},
            "events": [{k: v for k, v in e.items() if k not in timing}
                       for e in read_metrics(model_dir / files.METRICS_FILE)],
            "started": [line for line in log.getvalue().splitlines() if " parameters | " in line]}


class _Killed(Exception):
    """The process dies (a crash, a kill) before its second update."""


def probe_crash(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    real = Trainer._update

    def update(self: Trainer, group: Any) -> None:
        if self.state.step >= 1:
            raise _Killed
        real(self, group)

    with mock.patch.object(Trainer, "_update", update), pytest.raises(_Killed), \
            contextlib.redirect_stderr(io.StringIO()):
        train(cfg)
    return _files(root)  # what a restart finds


def probe_nan(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    real = update_module.projected_label_smoothed_nll

    def poisoned(*args: Any, **kwargs: Any) -> Any:
        loss, nll = real(*args, **kwargs)
        return loss * float("nan"), nll

    with mock.patch.object(update_module, "projected_label_smoothed_nll", poisoned):
        return probe_run(cfg, dotted, root, env)


def probe_prepare(cfg: Any, dotted: dict, root: Path, env: Env) -> Any:
    meta = prepare(cfg, console=Console(file=io.StringIO()))
    out = Path(cfg.data.dir)
    pieces = {}
    for name in {meta.src_bpe, meta.tgt_bpe}:
        bpe = Bpe(out / name)  # the vocabulary, not the file: that also records the training options
        pieces[name] = [bpe.sp.id_to_piece(i) for i in range(len(bpe))]
    shards = {split: [(data.src[i].tolist(), data.tgt[i].tolist()) for i in range(len(data))]
              for split in meta.splits for data in [ParallelData(out, split)]}
    described = dataclasses.asdict(meta)
    del described["fingerprint"], described["mtkit_version"]  # a hash of the config; the version
    return {"pieces": pieces, "shards": shards, "meta": described, "files": _files(root)}


PROBES = {"model": probe_model, "search": probe_search, "search_many": probe_search_many,
          "translate": probe_translate, "schedule": probe_schedule, "run": probe_run, "crash": probe_crash,
          "nan": probe_nan, "prepare": probe_prepare}


def _expand(dotted: dict[str, Any], **places: Path) -> dict[str, Any]:
    def fill(v: Any) -> Any:  # inside lists of mappings too (data.corpora)
        if isinstance(v, str):
            return v.format(**places)
        if isinstance(v, list):
            return [fill(x) for x in v]
        return {k: fill(x) for k, x in v.items()} if isinstance(v, dict) else v
    return {k: fill(v) for k, v in dotted.items()}


def observe(probe: str, dotted: dict[str, Any], root: Path, env: Env) -> Any:
    """What ``probe`` sees for its base config plus ``dotted``, run in the fresh directory ``root``."""
    dotted = _expand({**PROBE_BASE[probe], **dotted}, root=root, corpus=env.corpus, data=env.data,
                     parent=env.parent)
    root.mkdir(parents=True, exist_ok=True)
    try:
        return PROBES[probe](from_dict(nested(dotted)), dotted, root, env)
    except MtkitError as exc:
        return Refused(type(exc).__name__, str(exc))


def same(a: Any, b: Any) -> bool:
    """Equal, numbers up to rounding: a key must change results, not only the order of a sum (asking the
    model for its attention weights takes another kernel: that alone is no diversity penalty)."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and (torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, RTOL, ATOL))))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL) or (a != a and b != b)  # NaN: a skipped update
    return a == b


# ------------------------------------------------------------------------------------------ fixtures
WORDS = ["alpha", "beta", "gamma", "delta", "eta", "theta", "iota", "kappa", "lambda", "sigma", "omega"]
RARE = ["åland", "øre", "straße", "café", "über"]


def _lines(seed: int, n: int, lo: int, hi: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    corpus = tmp_path_factory.mktemp("corpus")
    texts = {"train.src": _lines(1, 40, 1, 9), "train.tgt": _lines(2, 40, 1, 9),
             "train2.src": _lines(3, 40, 1, 9), "dev.src": _lines(4, 6, 2, 9), "dev.tgt": _lines(5, 6, 2, 9),
             "dev2.src": _lines(6, 6, 2, 9),
             "other.txt": [" zeta xi rho tau" * (i % 3 + 1) for i in range(30)]}  # for a given BPE model
    for i, word in enumerate(RARE):  # characters too rare for character_coverage 0.99
        texts["train.src"][i] = f"{word} {texts['train.src'][i]}"
    texts["noisy.src"], texts["noisy.tgt"] = ([pair[side] for pair in NOISY] for side in (0, 1))
    for name, lines in texts.items():
        (corpus / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    train_bpe([str(corpus / "other.txt")], str(corpus / "given"), vocab_size=30)
    data = make_data_dir(tmp_path_factory.mktemp("data"), n_train=40, n_dev=4)
    parent = tmp_path_factory.mktemp("parent") / "model"
    with contextlib.redirect_stderr(io.StringIO()):
        train(from_dict(nested(_expand(RUN_BASE, root=parent.parent, data=data))))
    return Env(corpus, data, parent)


# --------------------------------------------------------------------------------------------- tests
def test_every_key_is_classified() -> None:
    """The structural guard: a new config key needs a case that shows its effect (or is informational)."""
    missing = sorted(set(FIELDS) - set(CASES) - set(INFORMATIONAL))
    assert not missing, (f"config keys that nothing checks: {missing}; add a Case to CASES in "
                         "tests/test_config_keys.py that shows the key's effect (or, if it feeds no "
                         "computation at all, a line in INFORMATIONAL)")
    assert set(CASES) | set(INFORMATIONAL) <= set(FIELDS), "cases for keys that no longer exist"
    assert not set(CASES) & set(INFORMATIONAL)


def test_shared_model_keys_are_walked_on_both_families() -> None:
    for key, f in FIELDS.items():
        if key.startswith("model.") and key != "model.arch" and "model.arch" not in conditions("model", f):
            assert {c.base.get("model.arch") for c in CASES[key]} == {"transformer", "rnn"}, key


def _cases() -> list[Any]:
    return [pytest.param(key, case, id=f"{key}[{case.label}]" if case.label else key)
            for key, cases in CASES.items() for case in cases]


@pytest.mark.parametrize(("key", "case"), _cases())
def test_every_key_takes_effect_or_is_refused(key: str, case: Case, env: Env, tmp_path: Path) -> None:
    before = observe(case.probe, case.base, tmp_path / "a", env)
    assert not isinstance(before, Refused), f"{key}: the base config fails: {before}"
    after = observe(case.probe, {**case.base, key: case.value, **case.also}, tmp_path / "b", env)
    if case.expect == "refused":
        assert isinstance(after, Refused), f"{key}={case.value!r} was accepted"
        assert key in after.message and "\n" not in after.message, after.message
    elif case.expect == "stops":
        assert isinstance(after, Refused), f"{key}={case.value!r} changed nothing: the setting is ignored"
    else:
        assert not isinstance(after, Refused), f"{key}={case.value!r} fails: {after}"
        if case.view:
            before, after = ({k: v for k, v in seen.items() if k in case.view} for seen in (before, after))
        assert not same(before, after), f"{key}={case.value!r} changed nothing: the setting is ignored"


@pytest.mark.parametrize("probe", sorted({c.probe for cases in CASES.values() for c in cases}))
def test_each_probe_sees_the_same_thing_twice(probe: str, env: Env, tmp_path: Path) -> None:
    """Else every key would seem to take effect."""
    base = next(c.base for cases in CASES.values() for c in cases if c.probe == probe)
    assert same(observe(probe, base, tmp_path / "a", env), observe(probe, base, tmp_path / "b", env))


# -------------------------------------------------------------------------------- where keys apply
def _default(key: str) -> Any:
    f = FIELDS[key]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]


def _choices(key: str) -> list[Any]:
    tp = typing.get_type_hints(SECTIONS[key.split(".")[0]])[key.split(".")[1]]
    if typing.get_origin(tp) is Literal:
        return list(typing.get_args(tp))
    if typing.get_origin(tp) is list:  # data.corpora: none, or one corpus
        return [[], [{"train_src": "some/where", "train_tgt": "some/where", "src_lang": "xx",
                      "tgt_lang": "yy"}]]
    return {bool: [True, False], str: ["some/where"], int: [1, 0]}[tp]


def _satisfied(key: str) -> dict[str, Any]:
    """Dotted settings under which ``key`` applies."""
    out: dict[str, Any] = {}
    for other, cond in conditions(key.split(".")[0], FIELDS[key]).items():
        out.update(_satisfied(other))
        value = _default(other)
        if isinstance(cond, Not) and value == cond.value:
            value = next(v for v in _choices(other) if v != cond.value)
        elif not isinstance(cond, Not):
            value = cond[0]
        out[other] = value
    return out


def _refusals() -> list[Any]:
    return [pytest.param(key, other, id=f"{key}-vs-{other}")
            for key, f in FIELDS.items() for other in conditions(key.split(".")[0], f)]


@pytest.mark.parametrize(("key", "other"), _refusals())
def test_a_key_set_where_it_cannot_apply_is_refused(key: str, other: str) -> None:
    cond = conditions(key.split(".")[0], FIELDS[key])[other]
    dotted = {**_satisfied(key), **_satisfied(other)}
    dotted[other] = cond.value if isinstance(cond, Not) else next(v for v in _choices(other) if v not in cond)
    stored = from_dict(nested(dotted), stored=True)
    dotted = {k: v for k, v in dotted.items() if k == other or unmet(stored, k) is None}  # e.g. luong's keys
    dotted[key] = CASES[key][0].value
    with pytest.raises(ConfigError) as refused:
        from_dict(nested(dotted))
    message = str(refused.value)
    assert message.startswith(key) and other in message and "\n" not in message, message
    from_dict(nested(dotted), stored=True)  # a checkpoint of an earlier version still loads
    from_dict(nested({**dotted, key: _default(key)}))  # at its default, as every resolved config.yaml has it
