"""`mtkit prepare`: raw parallel text → checked, filtered, BPE-encoded shards plus meta.json.

The stage streams: lines are read, encoded in batches (sentencepiece encodes a batch on all cores) and
appended to the shard files, so memory holds one batch and the output offsets, never a corpus.
Steps, cheapest and most likely to fail first, so a bad corpus is rejected in seconds:

1. scan every input pair once at block speed: equal line counts, valid UTF-8 (file:line named);
2. train the BPE model(s) on the training text, or copy the given ones (bpe.model, or those of a
   trained model: bpe.model_from) into the data directory;
3. encode each split, drop bad training pairs (counted by reason), write shards;
4. write the resolved config, then meta.json last: a directory without meta.json is incomplete.

A fingerprint of the data/bpe config sections and of each input file's path, size and mtime is kept
in meta.json; re-running with the same fingerprint does nothing. BPE training has its own
fingerprint (bpe.fingerprint), so changing only a filter setting re-encodes without retraining.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from mtkit import __version__
from mtkit.config.experiment import CONFIG_FILE, BpeConfig, Config, DataConfig, save_config
from mtkit.data.bpe import Bpe, train_bpe
from mtkit.data.cleaning import CLEAN_REPORT, run_cleaner, training_corpora, write_report
from mtkit.data.corpora import bpe_sample, languages, split_tags, tag, write_tagged
from mtkit.data.markup_augment import write_augmented
from mtkit.data.meta import META_FILE, DataMeta, read_meta, write_meta
from mtkit.data.shards import ShardWriter, token_dtype
from mtkit.data.split_stats import SplitStats, print_summary, progress_display
from mtkit.errors import ConfigError, DataError, MtkitError
from mtkit.staging import staged_directory
from mtkit.textio import chunked, read_lines, scan_pair

PREPARE_VERSION = 1  # bump when the output format changes, so old data dirs are rebuilt
SPLITS = ("train", "dev", "test")
SIDES = ("src", "tgt")
CHUNK_LINES = 10_000  # pairs encoded per sentencepiece call: big enough for its threads, small in memory
BPE_STAMP = "bpe.fingerprint"


@dataclass
class SplitInput:
    name: str
    src: str
    tgt: str
    lines: int = 0


# ---------------------------------------------------------------------------------------- the stage
def prepare(cfg: Config, force: bool = False, console: Console | None = None) -> DataMeta:
    """Build (or confirm up to date) the data directory `cfg.data.dir`; returns its meta.json record."""
    console = console or Console(stderr=True, soft_wrap=True)
    if cfg.data.corpora:  # several corpora, one multilingual model: their tagged text is prepared
        if cfg.data.markup_augmentation:
            raise ConfigError("data.markup_augmentation applies to one pair of files (data.train_src, "
                              "data.train_tgt), not to data.corpora: remove one of them")
        if cfg.clean.enabled or cfg.data.sources:
            raise ConfigError("clean.enabled and data.sources are for one language pair, not data.corpora: "
                              "clean each corpus with `mtkit clean` first (docs/cleaning.md)")
        corpora = cfg.data.corpora  # checked when the config was loaded (mtkit.data.corpora.check_corpora)
        inputs = [SplitInput(s, *f) for c in corpora for s in SPLITS
                  if (f := (getattr(c, f"{s}_src"), getattr(c, f"{s}_tgt")))[0]]
        fp = fingerprint(cfg, inputs)
        if not force and is_up_to_date(Path(cfg.data.dir), fp):
            return _up_to_date(console, Path(cfg.data.dir))
        Path(cfg.data.dir).parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".tagged-", dir=Path(cfg.data.dir).parent) as tmp:
            side = cfg.data.language_tag
            tagged = {s: write_tagged(corpora, s, Path(tmp), cfg.data.temperature, cfg.bpe.seed, side)
                      for s in SPLITS}
            splits = [SplitInput(s, str(t.src), str(t.tgt)) for s, t in tagged.items() if t is not None]
            record = {**languages(corpora, side), **{s: t.counts for s, t in tagged.items() if t is not None}}
            mix = bpe_sample(tagged["train"], cfg.bpe.seed)  # BPE learns from the mix an epoch draws
            return _prepare(cfg, splits, fp, force, console, record, SplitInput("train", str(mix.src),
                                                                                str(mix.tgt)))
    splits = input_splits(cfg.data)
    bpe_plan(cfg, splits[0])  # config mistakes surface before any work
    corpora = training_corpora(cfg)  # data.sources, or the train files when clean.enabled; else []
    fp = fingerprint(cfg, splits, [p for c in corpora for p in c.spec.paths])
    if not force and is_up_to_date(Path(cfg.data.dir), fp):
        return _up_to_date(console, Path(cfg.data.dir))
    Path(cfg.data.dir).parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        def scratch(prefix: str) -> Path:
            return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix,
                                                                        dir=Path(cfg.data.dir).parent)))
        extra: dict[str, Path] = {}
        for s in splits[1:]:
            s.lines = check_pair(s)  # dev and test are named before the training corpora are read
        if corpora:  # the training pairs are read from data.sources and cleaned (docs/cleaning.md)
            tmp = scratch(".cleaned-")
            splits[0] = SplitInput("train", str(tmp / "train.src"), str(tmp / "train.tgt"))
            report = run_cleaner(corpora, cfg.clean.workers, Path(splits[0].src), Path(splits[0].tgt),
                                 console)
            write_report(report, tmp / CLEAN_REPORT)
            console.print(f"cleaned the training corpora: {report.summary()}")
            if report.written == 0:
                raise DataError(f"cleaning kept no training pair of {len(corpora)} corpora: see the "
                                f"reasons above ({cfg.data.dir} is unchanged)")
            extra[CLEAN_REPORT] = tmp / CLEAN_REPORT
        if cfg.data.markup_augmentation > 0:  # BPE and the shards read the training pairs with markup added
            splits[0].lines = check_pair(splits[0])  # the user's files are checked before they are rewritten
            src, tgt = write_augmented(splits[0].src, splits[0].tgt, scratch(".augmented-"),
                                       cfg.data.markup_augmentation, cfg.training.seed)
            splits[0] = SplitInput("train", str(src), str(tgt))
        return _prepare(cfg, splits, fp, force, console, {}, extra_files=extra)


def _up_to_date(console: Console, out: Path) -> DataMeta:
    console.print(f"{out}: up to date (inputs and data/bpe config unchanged); use --force to rebuild")
    return read_meta(out)


def _prepare(cfg: Config, splits: list[SplitInput], fp: str, force: bool, console: Console,
             langs: dict[str, Any], bpe_train: SplitInput | None = None,
             extra_files: dict[str, Path] | None = None) -> DataMeta:
    """Check, BPE, encode and write; ``langs``: the languages of a multilingual model ({} otherwise),
    whose training corpora's kept pairs are added to it; ``bpe_train``: BPE's text, if not the
    training split's; ``extra_files``: copied into the data directory under their names (the cleaning
    report)."""
    bpe_train = bpe_train or splits[0]
    out = Path(cfg.data.dir)
    started = time.perf_counter()
    for s in splits:  # read-only checks first: a failure here leaves an existing data dir intact
        s.lines = check_pair(s)
    if out.exists() and not out.is_dir():
        raise DataError(f"data.dir {out} exists and is not a directory")
    reusable = [BPE_STAMP] + [n for name, _, _ in bpe_plan(cfg, bpe_train)
                              for n in (name, str(Path(name).with_suffix(".vocab")))]
    shards = [name for split in SPLITS for name in _shard_files(split)]
    tags = [tag(lang) for lang in langs.get("tgt", [])]
    on_target = langs.get("tag") == "decoder"  # the tags are target subwords (data.language_tag)
    # built beside data.dir and moved in on success: a failure never damages a good data directory
    stale = [*shards, CLEAN_REPORT]  # a report of an earlier cleaning goes unless this one writes one
    with staged_directory(out, seed=reusable, stale=stale, last=META_FILE) as stage:
        bpe_started = time.perf_counter()
        (src_name, src_bpe), (tgt_name, tgt_bpe) = prepare_bpe(cfg, bpe_train, stage, console, retrain=force,
                                                               symbols=tags, symbols_on_target=on_target)
        bpe_seconds = time.perf_counter() - bpe_started
        tagging, tagging_name = (tgt_bpe, tgt_name) if on_target else (src_bpe, src_name)
        tag_ids = tagging.piece_ids(tags, f"{stage / tagging_name}: the BPE model")

        dtype = token_dtype(max(len(src_bpe), len(tgt_bpe)))
        stats: dict[str, SplitStats] = {}
        with progress_display(console) as progress:
            for s in splits:
                apply_filter = s.name == "train" or cfg.data.filter_dev
                corpora = langs.get("train", []) if s.name == "train" else []
                stats[s.name] = encode_split(s, src_bpe, tgt_bpe, stage, dtype, cfg.data, apply_filter,
                                             progress, tag_ids, on_target, [c["input"] for c in corpora])
                for count, kept in zip(corpora, stats[s.name].kept_by_group, strict=True):
                    count["kept"] = kept  # where each corpus lies in the shards (corpora.train_draws)
        for s in splits:
            if stats[s.name].sentences == 0:
                raise DataError(f"{s.name}: every pair was filtered out of {s.src} / {s.tgt}; check "
                                f"data.max_len, data.min_len and data.max_len_ratio ({out} is unchanged)")

        save_config(cfg, stage / CONFIG_FILE)
        for name, path in (extra_files or {}).items():
            shutil.copyfile(path, stage / name)
        meta = DataMeta(src_vocab_size=len(src_bpe), tgt_vocab_size=len(tgt_bpe), src_bpe=src_name,
                        tgt_bpe=tgt_name, joint=cfg.bpe.joint, shared_ids=_parent_shared_ids(cfg.bpe),
                        dtype=dtype.name, src_lang=cfg.data.src_lang,
                        tgt_lang=cfg.data.tgt_lang, splits={name: st.as_meta() for name, st in stats.items()},
                        fingerprint=fp, mtkit_version=__version__, languages=langs)
        write_meta(stage, meta)  # moved in last: its presence marks the directory complete
    print_summary(console, out, stats, bpe_seconds, time.perf_counter() - started)
    return meta


# ------------------------------------------------------------------------------------ inputs, checks
def input_splits(data: DataConfig) -> list[SplitInput]:
    """The configured (split, src, tgt) triples; train and dev are required, test is optional. With
    data.sources, the training split stands for them (its files are written by the cleaner)."""
    splits = []
    if data.sources:
        if data.train_src or data.train_tgt:
            raise ConfigError("data.sources replaces data.train_src / data.train_tgt: give the training "
                              "files in one of them")
        splits.append(SplitInput("train", "", ""))
    for name in SPLITS[1:] if data.sources else SPLITS:
        src, tgt = getattr(data, f"{name}_src"), getattr(data, f"{name}_tgt")
        if not src and not tgt:
            if name == "test":
                continue
            raise ConfigError(f"data.{name}_src and data.{name}_tgt are not set: "
                              f"the {name} files are required")
        if not src or not tgt:
            given, missing = (f"{name}_src", f"{name}_tgt") if src else (f"{name}_tgt", f"{name}_src")
            raise ConfigError(f"data.{given} is set but data.{missing} is not: give both sides")
        splits.append(SplitInput(name, src, tgt))
    return splits


def check_pair(s: SplitInput) -> int:
    """Both sides: same number of lines, valid UTF-8, not empty. Returns the line count."""
    n_src = scan_pair(s.src, s.tgt)
    if n_src == 0:
        raise DataError(f"{s.src} and {s.tgt} are empty: the {s.name} split needs at least one pair")
    return n_src


def _file_id(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not p.is_file():
        raise DataError(f"expected a file but found a directory: {path}")
    return {"path": str(p.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def _given_models(cfg: Config) -> list[str]:
    joint, src, tgt = reused_models(cfg.bpe)
    return [m for m in ((joint,) if cfg.bpe.joint else (src, tgt)) if m]


def reused_models(b: BpeConfig) -> tuple[str, str, str]:
    """(joint, source, target) BPE models to copy rather than train: bpe.model / src_model / tgt_model
    as given, or the ones of the model that bpe.model_from names, so that new data is encoded exactly
    as a parent model expects it (fine-tuning)."""
    if not b.model_from:
        return b.model, b.src_model, b.tgt_model
    if b.model or b.src_model or b.tgt_model:
        raise ConfigError("bpe.model_from and bpe.model / bpe.src_model / bpe.tgt_model both name BPE "
                          "models: give one of them")
    given = Path(b.model_from)
    if given.suffix == ".model" and given.is_file():
        if not b.joint:
            raise ConfigError(f"bpe.model_from: {given} is one joint model but bpe.joint is false; set "
                              "bpe.joint: true (or give a model directory with separate models)")
        return str(given), "", ""
    directory = given.parent if given.is_file() else given
    if not (directory / META_FILE).is_file():
        raise ConfigError(f"bpe.model_from: {given} is not a .model file, a model directory or a checkpoint "
                          f"in one (no {directory / META_FILE})")
    meta = read_meta(directory)
    if meta.joint != b.joint:
        kind = "a joint vocabulary" if meta.joint else "separate source and target vocabularies"
        raise ConfigError(f"bpe.model_from: {directory} has {kind}; set bpe.joint: {str(meta.joint).lower()}")
    src, tgt = directory / meta.src_bpe, directory / meta.tgt_bpe
    for model in (src, tgt):
        if not model.is_file():
            raise ConfigError(f"bpe.model_from: {model} not found (named in {directory / META_FILE})")
    return (str(src), "", "") if meta.joint else ("", str(src), str(tgt))


def _parent_shared_ids(b: BpeConfig) -> bool:
    """Whether the BPE models taken from a parent (bpe.model_from) number one vocabulary (an imported
    MarianMT model's two models), so that a fine-tune shares its embeddings as the parent does."""
    given = Path(b.model_from) if b.model_from else None
    directory = given.parent if given is not None and given.is_file() else given
    return directory is not None and (directory / META_FILE).is_file() and read_meta(directory).shared_ids


def fingerprint(cfg: Config, splits: list[SplitInput], cleaned: list[str] | None = None) -> str:
    """Hash of what the outputs depend on: data/bpe settings (not data.dir: a moved data dir stays valid),
    every input file's resolved path, size and mtime, and any reused BPE model; with ``cleaned`` (the
    training corpora that are cleaned), those files and the clean settings too."""
    data = {k: v for k, v in dataclasses.asdict(cfg.data).items() if k != "dir"}
    if data["corpora"]:  # since the shards hold each pair once and epochs draw the repetitions
        data["draws"] = "per epoch"
    if data["language_tag"] == "source":  # the default: a data dir prepared before the key stays valid
        del data["language_tag"]
    if data.pop("markup_augmentation"):  # the same; with it, its draws
        data.update(markup_augmentation=cfg.data.markup_augmentation, markup_seed=cfg.training.seed)
    files = [_file_id(p) for s in splits for p in (s.src, s.tgt) if p]  # data.sources: no train files
    models = [_file_id(m) for m in _given_models(cfg)]
    if not data["sources"]:  # a data dir prepared before the key stays valid
        del data["sources"]
    payload = {"version": PREPARE_VERSION, "data": data, "bpe": dataclasses.asdict(cfg.bpe), "files": files,
               "models": models}
    if cleaned:
        settings = {k: v for k, v in dataclasses.asdict(cfg.clean).items() if k != "workers"}  # no effect
        payload["cleaning"] = {"clean": settings,
                               "files": [_file_id(p) for p in cleaned]}
    return _digest(payload)


def _shard_files(split: str) -> list[str]:
    return [f"{split}.{side}.{ext}" for side in SIDES for ext in ("bin", "idx")]


def is_up_to_date(out: Path, fp: str) -> bool:
    if not (out / META_FILE).is_file():
        return False
    try:
        meta = read_meta(out)
    except DataError:
        return False
    if meta.fingerprint != fp:
        return False
    needed = [CONFIG_FILE, *meta.bpe_files()]
    needed += [f for split in meta.splits for f in _shard_files(split)]
    return all(name and (out / name).is_file() for name in needed)


# ---------------------------------------------------------------------------------------------- BPE
def bpe_plan(cfg: Config, train: SplitInput) -> list[tuple[str, str, list[str]]]:
    """(file name in the data dir, model to reuse or "", files to train on) for each model needed."""
    b = cfg.bpe
    if b.joint and (b.src_model or b.tgt_model):
        raise ConfigError("bpe.src_model / bpe.tgt_model are for separate models (bpe.joint: false); "
                          "give a joint model as bpe.model")
    if not b.joint and b.model:
        raise ConfigError("bpe.model is a joint model but bpe.joint is false; "
                          "set bpe.src_model and bpe.tgt_model, or bpe.joint: true")
    joint, src, tgt = reused_models(b)
    if b.joint:
        return [("bpe.model", joint, [train.src, train.tgt])]
    return [("src.model", src, [train.src]), ("tgt.model", tgt, [train.tgt])]


def prepare_bpe(cfg: Config, train: SplitInput, out: Path, console: Console, retrain: bool = False,
                symbols: list[str] | None = None, symbols_on_target: bool = False
                ) -> tuple[tuple[str, Bpe], tuple[str, Bpe]]:
    """Train or copy the BPE model(s) into `out`; returns ((src_name, src_bpe), (tgt_name, tgt_bpe)).
    ``symbols`` (language tags) become pieces of the joint model, or of the source model (of the
    target model with ``symbols_on_target``) where the two sides have their own.

    Unless `retrain`, reuses models already in `out` whose own fingerprint (bpe settings + training
    files) matches, so changing a filter setting does not retrain BPE."""
    b = cfg.bpe
    plan = bpe_plan(cfg, train)
    stamp_path = out / BPE_STAMP
    stamp = _digest({"version": PREPARE_VERSION, "bpe": dataclasses.asdict(b), "symbols": symbols or [],
                     **({"symbols_on_target": True} if symbols_on_target else {}),  # earlier stamps hold
                     "train": [_file_id(train.src), _file_id(train.tgt)],
                     "models": [_file_id(m) for m in _given_models(cfg)]})
    current = stamp_path.read_text(encoding="utf-8").strip() if stamp_path.is_file() else ""
    if not retrain and current == stamp and all((out / name).is_file() for name, _, _ in plan):
        console.print(f"reusing the BPE model(s) in {out} (same bpe settings and training files)")
    else:
        stamp_path.unlink(missing_ok=True)
        for name, given, inputs in plan:
            if given:
                _copy_model(given, out / name)
                console.print(f"using BPE model {given} (copied to {out / name})")
            else:
                other_side = "src.model" if symbols_on_target else "tgt.model"
                _train_into(name, inputs, out, cfg, console, symbols if name != other_side else None)
        stamp_path.write_text(stamp + "\n", encoding="utf-8")

    models = [(name, Bpe(out / name)) for name, _, _ in plan]
    return models[0], models[-1]


def _copy_model(given: str, target: Path) -> None:
    Bpe(given)  # reject a file that is not a model with mtkit's special ids before copying
    src = Path(given)
    for suffix in (".model", ".vocab"):
        a, b = src.with_suffix(suffix), target.with_suffix(suffix)
        if not a.is_file() or (b.exists() and os.path.samefile(a, b)):
            continue
        tmp = b.with_name(b.name + ".tmp")
        shutil.copyfile(a, tmp)
        os.replace(tmp, b)


def _train_into(name: str, inputs: list[str], out: Path, cfg: Config, console: Console,
                symbols: list[str] | None = None) -> None:
    b = cfg.bpe
    started = time.perf_counter()
    with console.status(f"training BPE {name} (vocab {b.vocab_size}) on {' + '.join(inputs)}"):
        tmp_prefix = out / f".{Path(name).stem}.training"
        model = train_bpe(inputs, str(tmp_prefix), b.vocab_size, b.character_coverage,
                          b.input_sentence_size, b.seed, symbols or [])
    target = out / name
    os.replace(model, target)
    vocab = Path(f"{tmp_prefix}.vocab")
    if vocab.is_file():
        os.replace(vocab, target.with_suffix(".vocab"))
    seconds = time.perf_counter() - started
    console.print(f"trained BPE {target} ({len(Bpe(target))} pieces) in {seconds:.1f} s")


# ------------------------------------------------------------------------------------------ encoding
def reject_reason(src_len: int, tgt_len: int, data: DataConfig) -> str | None:
    """Why a training pair is dropped (the first rule it breaks), or None to keep it."""
    if src_len == 0 or tgt_len == 0:
        return "empty"
    if src_len > data.max_len or tgt_len > data.max_len:
        return "too_long"
    if src_len < data.min_len or tgt_len < data.min_len:
        return "too_short"
    if data.max_len_ratio > 0 and max(src_len, tgt_len) > data.max_len_ratio * min(src_len, tgt_len):
        return "ratio"
    return None


def encode_split(s: SplitInput, src_bpe: Bpe, tgt_bpe: Bpe, out: Path, dtype: Any, data: DataConfig,
                 apply_filter: bool, progress: Progress, tag_ids: dict[str, int] | None = None,
                 on_target: bool = False, groups: list[int] | None = None) -> SplitStats:
    """Stream one split through BPE into its two shards; dev/test keep pairs with an empty side. With
    ``tag_ids``, a source line's leading language tag (a target line's, ``on_target``) becomes that
    one id (`mtkit.data.corpora`); a target's tag counts for no filter. ``groups``: the line counts of
    consecutive corpora, whose kept pairs are counted (``stats.kept_by_group``)."""
    started = time.perf_counter()
    stats = SplitStats()
    task = progress.add_task(f"{s.name:5}", total=s.lines)
    writers = {side: ShardWriter(out / f"{s.name}.{side}", dtype) for side in SIDES}
    # equal lengths were checked by check_pair; a file changed since is caught by the count below
    pairs = zip(read_lines(s.src), read_lines(s.tgt), strict=False)
    ends = list(itertools.accumulate(groups or []))  # each corpus's first line after it
    stats.kept_by_group = [0] * len(ends)
    tagged_side, tagging_bpe, other_bpe = (1, tgt_bpe, src_bpe) if on_target else (0, src_bpe, tgt_bpe)
    for batch in chunked(pairs, CHUNK_LINES):
        texts, leads = split_tags([p[tagged_side] for p in batch], tag_ids or {})
        tagged = [ids if lead is None else [lead, *ids]
                  for lead, ids in zip(leads, tagging_bpe.encode_ids(texts), strict=True)]
        other = other_bpe.encode_ids([p[1 - tagged_side] for p in batch])
        src_ids, tgt_ids = (other, tagged) if on_target else (tagged, other)
        for line, (src, tgt) in enumerate(zip(src_ids, tgt_ids, strict=True), stats.input_sentences):
            reason = reject_reason(len(src), len(tgt) - on_target, data) if apply_filter else None
            if reason is not None:
                stats.dropped[reason] += 1
                continue
            if not src or len(tgt) == on_target:
                stats.empty_kept += 1
            if ends:
                stats.kept_by_group[bisect.bisect_right(ends, line)] += 1
            writers["src"].add(src)
            writers["tgt"].add(tgt)
        stats.input_sentences += len(batch)
        progress.advance(task, len(batch))
    for w in writers.values():
        w.close()
    if stats.input_sentences != s.lines:  # a file changed under us between the scan and now
        raise MtkitError(f"{s.src}: read {stats.input_sentences} lines, expected {s.lines} (changed while "
                         "preparing?)")
    stats.sentences = len(writers["src"])
    stats.src_tokens, stats.tgt_tokens = writers["src"].num_tokens, writers["tgt"].num_tokens
    stats.seconds = time.perf_counter() - started
    return stats


