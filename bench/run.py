#!/usr/bin/env python3
"""`make bench`: how fast mtkit prepares, trains and translates on a real corpus, on this machine.

One run measures, on the Debian en→de corpus (DATA, default ../shared/data/deb-en-de beside the repo):

* prepare    pairs/s of `mtkit prepare` (joint BPE 8000 trained + every split encoded) and its peak RSS;
* train      target tokens/s of transformer-small and of the RNN (the deb-en-de recipe configs) over a
             fixed number of updates after a warm-up, read from the run's metrics.jsonl; peak RSS, and
             the resident size at update 200 and at the last (validations on 300 dev sentences every
             third of the run, as in the recipe); `--steps 580 --archs transformer` is issue #11's run;
* translate  sentences/s of greedy and beam-5 search on the test set, for the whole command and for the
             model alone (the whole command minus the same command on an empty input); peak RSS.
* paragraphs whether a long line is translated whole: the first 600 test lines joined into paragraphs
             of 10, 50 and 300 lines, translated (greedy) as paragraphs and line by line; the words of
             the paragraph translation per word of the joined line translation, and both BLEUs against
             the joined references. Many test lines are headings or messages without a final stop,
             which no splitter can tell from the next line once joined; so the same again ("_marked")
             with the first 600 lines that end with . ! ? and start with a capital or digit.
* engines    one model run every way mtkit can (PyTorch fp32/bf16/int8, CTranslate2 float32/int8):
             speed, BLEU, peak RSS, lines equal to PyTorch fp32 (bench/engines.py; needs --model);
* processes  the test set translated by 1 process and by 2 (torchrun): speed, RSS, BLEU, lines equal
             (bench/processes.py; needs --model);
* scale      prepare at 145k, 1.4M and 14.2M pairs (the training data repeated), and training on the
             smallest and largest (bench/scale.py; ~15 minutes, 1.1 GB of corpus, 1.6 GB of shards).
* gpu        training and decoding on one CUDA GPU: tokens/s, MFU, first-epoch speed, host memory, BLEU
             (bench/gpu.py; skipped without a GPU).
* serve      `mtkit serve` under load from 1, 8 and 64 concurrent HTTP clients: requests/s, p50/p95/p99
             latency, against `mtkit translate`'s speed on the same engine (bench/serve.py; needs --model).

Every stage runs as its own `mtkit` subprocess, exactly as a user runs it; its peak RSS is measured by a
small launcher process (getrusage of its children), so the bench's own memory does not leak into it.
Results go to bench/results.json with the machine (CPU, cores, torch) and a table is printed.
`--only`/`--skip` run some parts (the others are kept from an earlier results.json); `--quick` is a
smoke run on a slice of the data, written to bench/work/quick/ instead.

Translation speed depends on what the model outputs: a barely trained model babbles until the length
limit. So translate uses the --model directories given, else the models of the deb-en-de recipe when it
has been run (recipes/deb-en-de/work/{transformer,rnn}); with neither it is skipped (noted in the
results); paragraphs uses the same models. Only --quick translates with the bench's own short training
runs, marked "undertrained".
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "deb-en-de"
PARTS = ("prepare", "train", "translate", "paragraphs", "engines", "processes", "scale", "gpu", "serve")
PARAGRAPH_LINES = 600
PARAGRAPH_SIZES = (10, 50, 300)
ARCHS = ("transformer", "rnn")
SRC, TGT = "en", "de"


class BenchError(Exception):
    """Printed as one line; the run stops with a non-zero exit."""


# ------------------------------------------------------------------------------------------- running
# Runs a command and writes the peak RSS of it (and its children) to a file. A child's ru_maxrss starts
# from its parent's RSS at fork (Linux carries it across exec), so the bench, which has torch loaded,
# must not be that parent: this small launcher is.
_LAUNCHER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[2:])\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "open(sys.argv[1], 'w').write(str(peak))\n"
    "sys.exit(rc)\n"
)


def run_measured(cmd: list[str], log: Path) -> tuple[float, float | None]:
    """Run `cmd` with its output in `log`; return (wall seconds, peak RSS of that process in MiB)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="160")
    peak_file = log.with_suffix(".peak")
    peak_file.unlink(missing_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _LAUNCHER, str(peak_file), *cmd], stdout=out,
                              stderr=subprocess.STDOUT, env=env, cwd=REPO)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        what = " ".join(cmd[2:5])
        raise BenchError(f"`{what} ...` failed (exit {proc.returncode}): {tail[0]} [log: {log}]")
    try:
        peak = int(peak_file.read_text())
    except (OSError, ValueError):
        return wall, None
    # ru_maxrss is in KiB on Linux, in bytes on macOS
    return wall, peak / (2**20 if sys.platform == "darwin" else 2**10)


def mtkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "mtkit", *args]


# ------------------------------------------------------------------------------------------- machine
def machine_info() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from mtkit.cpus import allowed_cpus

    allowed = allowed_cpus()
    info: dict[str, Any] = {
        "cpu": cpu, "cpu_count": os.cpu_count(), "cpus_allowed": allowed,
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(), "platform": platform.platform(),
    }
    try:
        from mtkit import __version__

        info["mtkit"] = __version__
    except ImportError:  # pragma: no cover
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, timeout=10)
        if commit.returncode == 0:
            info["commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


# ---------------------------------------------------------------------------------------------- data
def corpus_files(data: Path) -> dict[str, Path]:
    files = {"train_src": data / f"train.{SRC}.gz", "train_tgt": data / f"train.{TGT}.gz",
             "dev_src": data / f"dev.{SRC}", "dev_tgt": data / f"dev.{TGT}",
             "test_src": data / f"test.{SRC}", "test_tgt": data / f"test.{TGT}"}
    for path in files.values():
        if not path.is_file():
            raise BenchError(f"{path} not found; set DATA=/path/to/deb-en-de or --data")
    return files


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def slice_corpus(files: dict[str, Path], out: Path, sizes: dict[str, int]) -> dict[str, Path]:
    """The first N lines of each split (for --quick), as plain files under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    sliced = {}
    for key, path in files.items():
        split = key.split("_")[0]
        target = out / f"{split}.{SRC if key.endswith('src') else TGT}"
        with _open_text(path) as src, open(target, "w", encoding="utf-8") as dst:
            for i, line in enumerate(src):
                if i >= sizes[split]:
                    break
                dst.write(line)
        sliced[key] = target
    return sliced


def count_lines(path: Path) -> int:
    with _open_text(path) as f:
        return sum(1 for _ in f)


def write_config(arch: str, path: Path, files: dict[str, Path], data_bin: Path, model_dir: Path,
                 training: dict[str, Any], bpe_vocab: int | None = None) -> Path:
    """The deb-en-de recipe's config for `arch`, pointed at the bench's data and directories."""
    cfg = yaml.safe_load((RECIPE / f"{arch}.yaml").read_text(encoding="utf-8"))
    cfg["data"].update({key: str(p) for key, p in files.items()})
    cfg["data"]["dir"] = str(data_bin)
    if bpe_vocab:
        cfg["bpe"]["vocab_size"] = bpe_vocab
    cfg["training"].update({"model_dir": str(model_dir), **training})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- prepare
def bench_prepare(args: argparse.Namespace, files: dict[str, Path]) -> dict[str, Any]:
    vocab = 1000 if args.quick else _config_value("transformer", "bpe", "vocab_size")
    cfg = write_config("transformer", args.work / "prepare.yaml", files, args.work / "data-bin",
                       args.work / "unused", {}, bpe_vocab=vocab)
    pairs = sum(count_lines(files[f"{split}_src"]) for split in ("train", "dev", "test"))
    print(f"prepare: {pairs:,} pairs ...", file=sys.stderr, flush=True)
    wall, rss = run_measured(mtkit("prepare", str(cfg), "--force"), args.work / "logs" / "prepare.log")
    return {"pairs": pairs, "seconds": round(wall, 2), "pairs_per_s": round(pairs / wall, 1),
            "peak_rss_mib": _mib(rss), "bpe_vocab": vocab}


# --------------------------------------------------------------------------------------------- train
def throughput(metrics: Path, warmup: int) -> dict[str, float]:
    """Target tokens/s and updates/s over the logged intervals that start after `warmup` updates.

    Each "train" event carries the rate of its interval (validation pauses excluded) and the elapsed
    time; the interval's tokens are rate × its duration, so the result is a true tokens/seconds ratio."""
    events = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    train = [e for e in events if e.get("event") == "train"]
    tokens = seconds = 0.0
    steps = 0
    for prev, cur in zip(train, train[1:], strict=False):
        if prev["step"] < warmup:
            continue
        dt = cur["elapsed"] - prev["elapsed"]
        tokens += cur["tokens_per_s"] * dt
        seconds += dt
        steps += cur["step"] - prev["step"]
    if seconds <= 0:
        raise BenchError(f"{metrics}: no logged training interval after update {warmup}; raise --steps")
    return {"tgt_tokens_per_s": round(tokens / seconds, 1), "updates_per_s": round(steps / seconds, 3),
            "measured_updates": steps, "measured_seconds": round(seconds, 2)}


def resident_growth(metrics: Path, after: int = 200) -> dict[str, Any]:
    """Resident size at the first logged update from ``after`` on and at the last one (the issue #11
    test of flat memory: the last within 10% of the first), from the train events' rss_mib."""
    events = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    rss = [(e["step"], e["rss_mib"]) for e in events if e.get("event") == "train" and e.get("rss_mib")]
    later = [x for x in rss if x[0] >= after] or rss[-1:]
    if not later:
        return {}
    (first_step, first), (last_step, last) = later[0], rss[-1]
    return {"rss_mib_at": {str(first_step): first, str(last_step): last},
            "rss_last_over_first": round(last / first, 3)}


def bench_train(args: argparse.Namespace, files: dict[str, Path]) -> dict[str, Any]:
    if not (args.work / "data-bin" / "meta.json").is_file():
        raise BenchError(f"no prepared data in {args.work / 'data-bin'}: run the prepare part first")
    results = {}
    total = args.warmup + args.steps
    log_every = max(1, min(args.log_every, args.steps // 5 or 1))
    for arch in args.archs:
        model_dir = args.work / f"model-{arch}"
        shutil.rmtree(model_dir, ignore_errors=True)
        # validations as in the recipe (300 dev sentences), so that memory they leave behind shows
        training = {"max_steps": total, "max_time": 0, "max_epochs": 0, "log_every": log_every,
                    "validate_every": max(50, total // 3), "valid_max_sentences": 300, "device": args.device}
        if args.quick:
            training["max_tokens"] = 1024  # a smoke run: small batches, so each update takes a moment
        cfg = write_config(arch, args.work / f"train-{arch}.yaml", files, args.work / "data-bin", model_dir,
                           training)
        print(f"train {arch}: {total} updates ({args.warmup} warm-up) ...", file=sys.stderr, flush=True)
        log = args.work / "logs" / f"train-{arch}.log"
        wall, rss = run_measured(mtkit("train", str(cfg), "--no-resume"), log)
        entry = throughput(model_dir / "metrics.jsonl", args.warmup)
        params = re.search(r"([\d,]+) parameters", log.read_text(encoding="utf-8", errors="replace"))
        entry.update({"parameters": int(params.group(1).replace(",", "")) if params else None,
                      "max_tokens": training.get("max_tokens", _config_value(arch, "training", "max_tokens")),
                      "command_seconds": round(wall, 2), "peak_rss_mib": _mib(rss)})
        entry.update(resident_growth(model_dir / "metrics.jsonl"))
        results[arch] = entry
    return results


def _config_value(arch: str, section: str, key: str) -> Any:
    cfg = yaml.safe_load((RECIPE / f"{arch}.yaml").read_text(encoding="utf-8"))
    return cfg.get(section, {}).get(key)


# ----------------------------------------------------------------------------------------- translate
NO_MODEL = "no trained model: run the deb-en-de recipe (make -C recipes/deb-en-de) or pass --model DIR"


def _skipped(part: str, reason: str) -> dict[str, str]:
    print(f"{part}: skipped, {reason}", file=sys.stderr)
    return {"skipped": reason}


def translation_models(args: argparse.Namespace) -> dict[str, tuple[Path, bool]]:
    """name → (model dir, undertrained?)."""
    if args.model:
        return {Path(m).name or str(m): (Path(m), False) for m in args.model}
    recipe = {a: RECIPE / "work" / a for a in ARCHS}
    if not args.quick and all((d / "checkpoint_best.pt").is_file() for d in recipe.values()):
        return {a: (d, False) for a, d in recipe.items()}
    own = {a: args.work / f"model-{a}" for a in ARCHS}
    if args.quick and all((d / "checkpoint_last.pt").is_file() for d in own.values()):
        return {a: (d, True) for a, d in own.items()}
    return {}


def bench_translate(args: argparse.Namespace, files: dict[str, Path]) -> dict[str, Any]:
    source = files["test_src"]
    sentences = count_lines(source)
    # an empty line is answered without running the model: the command's fixed cost (start, load)
    empty_line = args.work / "empty-line.txt"
    empty_line.write_text("\n", encoding="utf-8")
    models = translation_models(args)
    if not models:
        # the bench's own few hundred updates make a model that babbles up to the length limit: its speed
        # would say nothing about translating, and take long to measure
        return _skipped("translate", NO_MODEL)
    results: dict[str, Any] = {}
    for name, (model, undertrained) in models.items():
        checkpoint = "best" if (model / "checkpoint_best.pt").is_file() else "last"
        entry: dict[str, Any] = {"model": str(model), "undertrained": undertrained}
        for mode, flags in (("greedy", ["--greedy"]), ("beam5", ["--beam", "5"])):
            base = ["translate", "--model", str(model), "--checkpoint", checkpoint, "--device", args.device,
                    "--precision", args.precision, *flags]
            if args.max_tokens:
                base += ["--max-tokens", str(args.max_tokens)]
            if args.threads:
                base += ["--threads", str(args.threads)]
            if args.quick:  # an undertrained model babbles up to the length limit: keep that short
                base += ["--max-len-a", "0", "--max-len-b", "20"]
            print(f"translate {name} {mode}: {sentences:,} sentences ...", file=sys.stderr, flush=True)
            logs = args.work / "logs"
            startup, _ = run_measured(mtkit(*base, "-i", str(empty_line), "-o", str(args.work / "empty.out")),
                                      logs / f"translate-{name}-{mode}-startup.log")
            hyp = args.work / f"hyp-{name}.{mode}.{TGT}"
            wall, rss = run_measured(mtkit(*base, "-i", str(source), "-o", str(hyp)),
                                     logs / f"translate-{name}-{mode}.log")
            model_seconds = max(wall - startup, 1e-6)
            words = sum(len(line.split()) for line in hyp.read_text(encoding="utf-8").splitlines())
            entry[mode] = {"sentences": sentences, "command_seconds": round(wall, 2),
                           "sentences_per_s": round(sentences / wall, 2),
                           "startup_seconds": round(startup, 2),
                           "model_sentences_per_s": round(sentences / model_seconds, 2),
                           "output_words_per_s": round(words / model_seconds, 1),
                           "bleu": bleu_of(hyp, files["test_tgt"]),
                           "peak_rss_mib": _mib(rss)}
        results[name] = entry
    return results


def bleu_of(hyp: Path, ref: Path) -> float:
    """BLEU of a translation: a speed measured on output that is not a translation means little."""
    with _open_text(ref) as f:
        refs = [line.rstrip("\n") for line in f]
    return bleu(hyp.read_text(encoding="utf-8").splitlines(), refs)


def bleu(hyps: list[str], refs: list[str]) -> float:
    import sacrebleu

    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)


# ---------------------------------------------------------------------------------------- paragraphs
def _head(path: Path, n: int) -> list[str]:
    with _open_text(path) as f:
        return [line.rstrip("\n") for _, line in zip(range(n), f, strict=False)]


def _joined(lines: list[str], k: int) -> list[str]:
    """Consecutive groups of ``k`` lines joined with a space (a last short group is left out)."""
    return [" ".join(lines[i:i + k]) for i in range(0, len(lines) - k + 1, k)]


def _words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


_STOP = re.compile(r"[.!?…。！？][\"'”’»)\]]*$")


def _marked(line: str) -> bool:
    """A line that shows where it ends as a sentence: a final stop, and a capital or digit first."""
    return bool(_STOP.search(line)) and (line[:1].isupper() or line[:1].isdigit())


def _translate_lines(args: argparse.Namespace, base: list[str], name: str, lines: list[str],
                     tag: str) -> tuple[list[str], float]:
    """Translate ``lines`` with one `mtkit translate` command; (translations, wall seconds)."""
    work = args.work / "paragraphs"
    source, hyp = work / f"{tag}.{SRC}", work / f"hyp-{name}-{tag}.{TGT}"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    print(f"paragraphs {name} {tag}: {len(lines):,} lines ...", file=sys.stderr, flush=True)
    wall, _ = run_measured(mtkit(*base, "-i", str(source), "-o", str(hyp)),
                           args.work / "logs" / f"paragraphs-{name}-{tag}.log")
    return hyp.read_text(encoding="utf-8").splitlines(), wall


def bench_paragraphs(args: argparse.Namespace, files: dict[str, Path]) -> dict[str, Any]:
    """A model trained on sentences must translate a paragraph sentence by sentence: the paragraph's
    translation should have about the words, and the BLEU, of its lines translated one by one."""
    models = translation_models(args)
    if not models:
        return _skipped("paragraphs", NO_MODEL)
    src, refs = _head(files["test_src"], 1 << 30), _head(files["test_tgt"], 1 << 30)
    marked = [i for i, line in enumerate(src) if _marked(line)][:PARAGRAPH_LINES]
    sets = {"": (src[:PARAGRAPH_LINES], refs[:PARAGRAPH_LINES]),
            "_marked": ([src[i] for i in marked], [refs[i] for i in marked])}
    (args.work / "paragraphs").mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for name, (model, undertrained) in models.items():
        from mtkit.data.bpe import Bpe

        bpe = Bpe(model / json.loads((model / "meta.json").read_text(encoding="utf-8"))["src_bpe"])
        checkpoint = "best" if (model / "checkpoint_best.pt").is_file() else "last"
        base = ["translate", "--model", str(model), "--checkpoint", checkpoint, "--device", args.device,
                "--precision", args.precision, "--greedy"]
        if args.threads:
            base += ["--threads", str(args.threads)]
        if args.quick:
            base += ["--max-len-a", "0", "--max-len-b", "20"]
        entry: dict[str, Any] = {"model": str(model), "undertrained": undertrained, "search": "greedy",
                                 "precision": args.precision, "threads": args.threads or "mtkit's default"}
        for suffix, (lines, line_refs) in sets.items():
            per_line, line_seconds = _translate_lines(args, base, name, lines, f"lines{suffix}")
            entry[f"lines{suffix}"] = {"lines": len(lines), "seconds": round(line_seconds, 2)}
            for k in (k for k in PARAGRAPH_SIZES if k <= len(lines)):
                paragraphs = _joined(lines, k)
                hyps, seconds = _translate_lines(args, base, name, paragraphs, f"p{k}{suffix}")
                joined_lines, joined_refs = _joined(per_line, k), _joined(line_refs, k)
                subwords = [len(ids) for ids in bpe.encode_ids(paragraphs)]
                joints = [not _marked(lines[i]) for i in range(len(paragraphs) * k) if (i + 1) % k]
                entry[f"p{k}{suffix}"] = {
                    "paragraphs": len(paragraphs), "lines_per_paragraph": k,
                    "mean_subwords": round(sum(subwords) / len(subwords), 1),
                    "unmarked_joints": round(sum(joints) / max(1, len(joints)), 3),
                    "per_line_words": _words(joined_lines), "paragraph_words": _words(hyps),
                    "words_ratio": round(_words(hyps) / max(1, _words(joined_lines)), 3),
                    "per_line_bleu": bleu(joined_lines, joined_refs),
                    "paragraph_bleu": bleu(hyps, joined_refs), "seconds": round(seconds, 2)}
        results[name] = entry
    return results


# ----------------------------------------------------------------------------------------- reporting
def _mib(rss: float | None) -> float | None:
    return None if rss is None else round(rss, 1)


def _fmt(value: Any, spec: str = ",.1f") -> str:
    return "—" if value is None else format(value, spec)


def _run_rows(table: Any, part: str, runs: dict[str, Any], same: str, same_as: str, rss: str) -> None:
    """Rows of a part that runs one test set several ways (engines, processes)."""
    if "skipped" in runs:
        table.add_row(part, "skipped", runs["skipped"], "")
    for key, r in runs.items():
        if isinstance(r, dict):
            table.add_row(part, f"{key}, {runs['sentences']:,} sentences",
                          f"{_fmt(r['sentences_per_s'])} sent/s, BLEU {_fmt(r['bleu'], '.2f')}, "
                          f"{100 * r[same]:.1f}% = {same_as}", _fmt(r[rss]))


def print_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    m = results.get("machine", {})
    title = f"mtkit bench: {m.get('cpu')} ({m.get('cpus_allowed')} cores), torch {m.get('torch')}"
    title += (f", {m['cuda']}" if m.get("cuda") else "") + (" [QUICK]" if results.get("quick") else "")
    table = Table("part", "what", "throughput", "peak RSS (MiB)", title=title, title_justify="left")
    if "prepare" in results:
        p = results["prepare"]
        table.add_row("prepare", f"{p['pairs']:,} pairs, BPE {p['bpe_vocab']}",
                      f"{_fmt(p['pairs_per_s'])} pairs/s", _fmt(p["peak_rss_mib"]))
    for arch, t in results.get("train", {}).items():
        growth = ", RSS " + " → ".join(f"{v:,} @ {k}" for k, v in t["rss_mib_at"].items()) \
            if t.get("rss_mib_at") else ""
        table.add_row("train", f"{arch} ({_fmt(t['parameters'], ',d')} params)",
                      f"{_fmt(t['tgt_tokens_per_s'], ',.0f')} tgt tok/s, {t['updates_per_s']:.2f} upd/s"
                      f"{growth}",
                      _fmt(t["peak_rss_mib"]))
    for name, t in results.get("translate", {}).items():
        if name == "skipped":
            table.add_row("translate", "skipped", t, "")
            continue
        for mode in ("greedy", "beam5"):
            r = t[mode]
            note = " (undertrained model)" if t.get("undertrained") else ""
            table.add_row("translate", f"{name} {mode}, {r['sentences']:,} sentences{note}",
                          f"{_fmt(r['sentences_per_s'])} sent/s "
                          f"({_fmt(r['model_sentences_per_s'])} model only), "
                          f"BLEU {_fmt(r.get('bleu'), '.2f')}",
                          _fmt(r["peak_rss_mib"]))
    for name, t in results.get("paragraphs", {}).items():
        if name == "skipped":
            table.add_row("paragraphs", "skipped", t, "")
            continue
        for key, r in t.items():
            if key.startswith("p") and isinstance(r, dict):
                marked = " with stops" if key.endswith("_marked") else ""
                table.add_row("paragraphs", f"{name} greedy, {r['paragraphs']} × {r['lines_per_paragraph']} "
                              f"lines{marked} (~{r['mean_subwords']:,.0f} subwords)",
                              f"words ×{r['words_ratio']:.3f}, BLEU {r['paragraph_bleu']:.2f} "
                              f"(per line {r['per_line_bleu']:.2f})", "")
    _run_rows(table, "engines", results.get("engines", {}), "same_as_torch_fp32", "torch fp32",
              "peak_rss_mib")
    _run_rows(table, "processes", results.get("processes", {}), "same_as_1_process", "1 process",
              "peak_rss_mib_per_process")
    console = Console(soft_wrap=False)
    if not console.is_terminal:  # a log file or a pipe: wide enough for one line per row
        console = Console(soft_wrap=False, width=120)
    console.print(table)


# ---------------------------------------------------------------------------------------------- main
def default_data() -> Path:
    return Path(os.environ.get("DATA") or REPO.parent / "shared" / "data" / "deb-en-de")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=None, help="deb-en-de corpus dir (default: $DATA or "
                   "../shared/data/deb-en-de beside the repo)")
    p.add_argument("--only", default="", help=f"comma-separated parts to run: {', '.join(PARTS)}")
    p.add_argument("--skip", default="", help="comma-separated parts to skip")
    p.add_argument("--quick", action="store_true", help="smoke run on a slice of the data")
    p.add_argument("--steps", type=int, default=None, help="measured updates (default 100; quick 6)")
    p.add_argument("--warmup", type=int, default=None, help="updates before measuring (default 20; quick 2)")
    p.add_argument("--log-every", type=int, default=10, help="training log interval in updates")
    p.add_argument("--archs", default=",".join(ARCHS), help="train part: comma-separated architectures")
    p.add_argument("--model", action="append", default=[], help="translate with this model dir (repeatable)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    p.add_argument("--precision", default="auto", help="translate --precision: auto, fp32, bf16, fp16")
    p.add_argument("--max-tokens", type=int, default=0,
                   help="translate --max-tokens (0 = mtkit translate's default, 16000)")
    p.add_argument("--threads", type=int, default=0,
                   help="translate --threads for translate and paragraphs (0 = mtkit's default)")
    p.add_argument("--gpu-steps", type=int, default=1600, help="gpu part: updates of the main run")
    p.add_argument("--gpu-eager-steps", type=int, default=600,
                   help="gpu part: updates of the run without buckets and graphs")
    p.add_argument("--gpu-runs", default="", help="gpu part: comma-separated runs (small, small_no_graphs, "
                   "small_eager, small_32k, base; default all)")
    p.add_argument("--work", type=Path, default=REPO / "bench" / "work", help="scratch directory")
    p.add_argument("--out", type=Path, default=None,
                   help="results file (default bench/results.json; --quick: WORK/results-quick.json)")
    args = p.parse_args(argv)
    args.data = args.data or default_data()
    args.steps = args.steps if args.steps is not None else (6 if args.quick else 100)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 20)
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be at least 1 and --warmup at least 0")
    if args.quick:
        args.work = args.work / "quick"
    if args.out is None:
        args.out = args.work / "results-quick.json" if args.quick else REPO / "bench" / "results.json"
    chosen = [x.strip() for x in args.only.split(",") if x.strip()] or list(PARTS)
    skipped = [x.strip() for x in args.skip.split(",") if x.strip()]
    for name in chosen + skipped:
        if name not in PARTS:
            p.error(f"unknown part {name!r}: choose from {', '.join(PARTS)}")
    args.parts = [x for x in PARTS if x in chosen and x not in skipped]
    args.archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    args.gpu_runs = [r.strip() for r in args.gpu_runs.split(",") if r.strip()]
    if not args.archs or set(args.archs) - set(ARCHS):
        p.error(f"--archs: choose from {', '.join(ARCHS)}")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    files = corpus_files(args.data)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.quick:
        files = slice_corpus(files, args.work / "corpus", {"train": 2000, "dev": 20, "test": 20})
    results: dict[str, Any] = {}
    if args.out.is_file() and set(args.parts) != set(PARTS):
        results = json.loads(args.out.read_text(encoding="utf-8"))  # keep the parts not run now
    machine = machine_info()
    results.update({"machine": machine, "data": str(args.data), "quick": args.quick,
                    "date": _dt.datetime.now().isoformat(timespec="seconds")})
    from engines import bench_engines
    from gpu import bench_gpu
    from processes import bench_processes
    from scale import bench_scale
    from serve import bench_serve

    stages = {"prepare": bench_prepare, "train": bench_train, "translate": bench_translate,
              "paragraphs": bench_paragraphs,
              "engines": lambda a, f: bench_engines(a, f, run_measured, mtkit, bleu_of, count_lines),
              "processes": lambda a, f: bench_processes(a, f, run_measured, mtkit, bleu_of, count_lines),
              "scale": lambda a, f: bench_scale(a, f, sys.modules[__name__]),
              "gpu": lambda a, f: bench_gpu(a, f, sys.modules[__name__]),
              "serve": lambda a, f: bench_serve(a, f, sys.modules[__name__])}
    for part in args.parts:
        results[part] = stages[part](args, files)
        # each part says when and from which commit it was measured: an --only run keeps the others
        results.setdefault("measured", {})[part] = {"date": _dt.datetime.now().isoformat(timespec="seconds"),
                                                    "commit": machine.get("commit")}
        if part == "translate":
            results["translate_settings"] = {"precision": args.precision,
                                             "max_tokens": args.max_tokens or 16000}
        if part == "train":
            results["train_settings"] = {"warmup_updates": args.warmup, "measured_updates": args.steps,
                                         "configs": "recipes/deb-en-de/{transformer,rnn}.yaml"}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    print_table(results)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
