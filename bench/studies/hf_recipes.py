"""Every Transformer recipe config, trained briefly, through `mtkit export --format hf` and back: does
`transformers` compute and search what mtkit does, on real data, at the recipes' own model sizes?

    python bench/studies/hf_recipes.py                      # every recipe below
    python bench/studies/hf_recipes.py deb-en-de/transformer adapt/scratch --steps 40 --lines 200

For each recipe config (its model section as it is; the training cut to ``--steps`` updates with a
short warm-up and at most 2048 tokens a batch, so a model of any size trains in a minute or two on a
CPU): a slice of /work/shared/data (``--train-lines`` training pairs, 100 dev pairs) at the paths the
config names, `mtkit prepare` and `mtkit train` in bench/work/hf_recipes/<recipe>/, then
`mtkit export --format hf`, and on ``--lines`` single-sentence test lines (mtkit's own splitter leaves
them whole):

- tokens: the exported tokenizer's ids (AutoTokenizer) against mtkit's sentencepiece ids;
- logits: max |difference| of the logits, teacher-forced on the reference translation (fp32, one
  sentence at a time, every target position and every vocabulary entry);
- greedy: `mtkit translate --greedy --precision fp32 --engine torch` against
  `AutoModelForSeq2SeqLM.generate(num_beams=1)`, lines equal;
- beam 5 under the exported generation_config.json (length_penalty, min_length, forced EOS at the
  limit): against `mtkit translate --beam 5` with the search settings generate has (`length_norm:
  average`, `eos_at_limit: free`, `beam_stop: so_far`), and, for the record, against the recipe's own
  settings (GNMT α, which generate lacks);
- the length limit: mtkit's grows with the source (``max_len_a · source_len + max_len_b``), generate's
  ``max_length`` is one number, so each sentence is generated alone with its own ``max_length``;
- round trip: `mtkit import-hf` of the export, weights bit for bit and the model config.

Fine-tune-only configs (deb-en-de anneal*, mrt*: no model section, their parent's model) are the
deb-en-de transformer's model and are not run again. Writes bench/results/hf_recipes.json (one entry
per recipe) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mtkit.checkpoint import resolve_checkpoint  # noqa: E402
from mtkit.data.bpe import Bpe  # noqa: E402
from mtkit.decode.loader import load_model  # noqa: E402
from mtkit.decode.segment import clean_line, split_sentences  # noqa: E402
from mtkit.errors import MtkitError  # noqa: E402
from mtkit.interop.hf import export_hf, import_hf  # noqa: E402

DATA = Path("/work/shared/data")
WORK = ROOT / "bench" / "work" / "hf_recipes"
RESULTS = ROOT / "bench" / "results" / "hf_recipes.json"
PATH_KEYS = ("train_src", "train_tgt", "dev_src", "dev_tgt", "test_src", "test_tgt")
#: recipe config → (source, target) of its test set here; "parent": a config that starts from
#: deb-en-de/transformer's model (its vocabulary, or its weights)
RECIPES: dict[str, dict[str, Any]] = {
    "deb-en-de/transformer": {"pair": ("en", "de")},
    "deb-en-de/transformer-base": {"pair": ("en", "de")},
    "deb-en-de/student-base": {"pair": ("en", "de")},
    "deb-en-de/student-tiny": {"pair": ("en", "de")},
    "deb-en-de/student-micro": {"pair": ("en", "de")},
    "deb-en-es/transformer": {"pair": ("en", "es")},
    "demo/transformer": {"pair": ("en", "de")},
    "adapt/scratch": {"pair": ("en", "de"), "parent": "bpe"},
    "adapt/finetune": {"pair": ("en", "de"), "parent": "init"},
    "deb-multi/de-en": {"pair": ("de", "en")},
    "deb-multi/es-en": {"pair": ("es", "en")},
    "deb-multi/en-de": {"pair": ("en", "de")},
    "deb-multi/en-es": {"pair": ("en", "es")},
    "deb-multi/multi": {"pair": ("en", "de")},
    "deb-multi/multi-decoder": {"pair": ("en", "de")},
}
GENERATE_SEARCH = ("decoding.length_norm=average", "decoding.eos_at_limit=free", "decoding.beam_stop=so_far")


def mtkit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "mtkit", *args], cwd=cwd, env=env, text=True,
                          capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"mtkit {' '.join(args[:3])}: {done.stderr.strip().splitlines()[-1:]}")
    return done


# ------------------------------------------------------------------------------------------- data
def corpus_file(src: str, tgt: str, split: str, lang: str) -> Path:
    """The shared file of ``lang`` in the en-xx corpus of the pair."""
    other = tgt if src == "en" else src
    name = f"{split}.{lang}" + (".gz" if split == "train" else "")
    return DATA / f"deb-en-{other}" / name


def read_lines(path: Path, limit: int) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            out.append(line.rstrip("\n"))
            if len(out) == limit:
                break
    return out


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(x + "\n" for x in lines)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    else:
        path.write_text(text, encoding="utf-8")


def single_sentence_test(src: str, tgt: str, n: int) -> tuple[list[str], list[str]]:
    """The first ``n`` test pairs whose source line mtkit translates as one sentence, unchanged."""
    sources = read_lines(corpus_file(src, tgt, "test", src), 100000)
    refs = read_lines(corpus_file(src, tgt, "test", tgt), 100000)
    out: list[tuple[str, str]] = []
    for s, r in zip(sources, refs, strict=True):
        if s and clean_line(s) == s and split_sentences(s) == [s] and r:
            out.append((s, r))
        if len(out) == n:
            break
    return [s for s, _ in out], [r for _, r in out]


def place_data(cfg: dict[str, Any], work: Path, train_lines: int, sets: list[str]) -> None:
    """Write the slices at the paths the config names (relative to ``work``); a config without paths
    (the demo's: its Makefile sets them) gets them through ``sets``."""
    data = cfg.setdefault("data", {})
    corpora = data.get("corpora") or [data]
    if not any(k in c for c in corpora for k in PATH_KEYS):
        src, tgt = data["src_lang"], data["tgt_lang"]
        for key in PATH_KEYS:
            split, side = key.split("_")
            path = f"work/data/{split}.{src if side == 'src' else tgt}" + (".gz" if split == "train" else "")
            data[key] = path
            sets.append(f"data.{key}={path}")
        sets += ["data.dir=work/data-bin", "training.model_dir=work/model"]
    for corpus in corpora:
        src, tgt = corpus["src_lang"], corpus["tgt_lang"]
        for key in PATH_KEYS:
            split, side = key.split("_")
            lang = src if side == "src" else tgt
            limit = train_lines if split == "train" else 20
            target = work / corpus[key]
            if not target.exists():
                write_lines(target, read_lines(corpus_file(src, tgt, split, lang), limit))


# ------------------------------------------------------------------------------------------- train
def train(name: str, spec: dict[str, Any], args: argparse.Namespace, parent: Path | None) -> dict[str, Any]:
    work = WORK / name
    config_file = ROOT / "recipes" / f"{name}.yaml"
    cfg = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    sets: list[str] = []
    place_data(cfg, work, args.train_lines, sets)
    t = cfg.get("training", {})
    sets += ["training.warmup_steps=10", f"training.max_tokens={min(int(t.get('max_tokens', 4096)), 2048)}",
             "training.validate_every=100000", "training.valid_metric=loss",
             "training.valid_max_sentences=1"]
    if spec.get("parent"):
        sets.append(f"bpe.model_from={parent}")
        if spec["parent"] == "init":
            sets.append(f"training.init_from={parent}")
    model_dir = work / (t.get("model_dir") or "work/model")
    if any(s.startswith("training.model_dir=") for s in sets):
        model_dir = work / "work/model"
    done = model_dir / "checkpoint_last.pt"
    seconds = 0.0
    if not done.is_file():
        flags = [a for s in sets for a in ("--set", s)]
        start = time.perf_counter()
        mtkit("prepare", str(config_file), *flags, cwd=work)
        mtkit("train", str(config_file), *flags, "--max-steps", str(args.steps), "--max-time",
              str(args.max_minutes), "--device", "cpu", cwd=work)
        seconds = time.perf_counter() - start
    return {"model_dir": model_dir, "prepare_train_seconds": round(seconds, 1)}


# --------------------------------------------------------------------------------------- compare
def translate(model_dir: Path, checkpoint: str, source: Path, out: Path, *flags: str) -> list[str]:
    mtkit("translate", "-m", str(model_dir), "--checkpoint", checkpoint, "--precision", "fp32",
          "--engine", "torch", "--threads", "2", "-i", str(source), "-o", str(out), *flags, cwd=model_dir)
    return out.read_text(encoding="utf-8").splitlines()


def same_length(rows: list[list[int]]) -> dict[int, list[int]]:
    """Line numbers by token count: a batch of one length has no padding, so it computes what each
    sentence alone computes, and its sentences share mtkit's length limit."""
    groups: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(len(row), []).append(i)
    return groups


def generate(model: Any, rows: list[list[int]], limits: list[int], beam: int, tok: Any,
             **extra: Any) -> list[str]:
    """`generate` under the exported generation config, with each sentence's own length limit (mtkit's
    tokens before EOS, + the start token and EOS), batched by source length (no padding)."""
    out = [""] * len(rows)
    with torch.inference_mode():
        for idx in same_length(rows).values():
            ids = model.generate(input_ids=torch.tensor([rows[i] for i in idx]), num_beams=beam,
                                 max_length=limits[idx[0]] + 2, **extra)
            for i, text in zip(idx, tok.batch_decode(ids, skip_special_tokens=True), strict=True):
                out[i] = text
    return out


def compare(name: str, model_dir: Path, hf_dir: Path, sources: list[str], refs: list[str],
            work: Path, tgt_lang: str) -> dict[str, Any]:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    file, _ = resolve_checkpoint(model_dir, "best")
    checkpoint = file.name
    loaded = load_model(model_dir, checkpoint)
    model = AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval()
    tok = AutoTokenizer.from_pretrained(hf_dir)
    m, dec = loaded.config.model, loaded.config.decoding
    src_bpe, tgt_bpe = Bpe(model_dir / loaded.meta.src_bpe), Bpe(model_dir / loaded.meta.tgt_bpe)
    eos = [3] if m.source_eos else []
    # a multilingual model: the target language's tag before the source (as text: the tokenizer knows
    # it), or as the decoder's first input (generate's decoder_start_token_id)
    side = loaded.meta.languages.get("tag")
    tag = f"<2{tgt_lang}>"
    src_tag = [src_bpe.piece_ids([tag], "")[tag]] if side == "source" else []
    start = tgt_bpe.piece_ids([tag], "")[tag] if side == "decoder" else 2
    prefix = f"{tag} " if side == "source" else ""
    extra = {"decoder_start_token_id": start} if side == "decoder" else {}
    lang_flags = ["--tgt-lang", tgt_lang] if side else []
    mine_ids = [src_tag + x for x in src_bpe.encode_ids(sources)]
    hf_ids = [tok(prefix + x).input_ids for x in sources]
    tokens_equal = sum(a + eos == b for a, b in zip(mine_ids, hf_ids, strict=True))
    vocab = loaded.model.output_proj.weight.size(0)
    worst = 0.0
    targets = [tgt_bpe.encode_ids([ref])[0][:100] for ref in refs]
    with torch.inference_mode():  # batches of one source length; a target's padding comes after it, so
        for idx in same_length(mine_ids).values():  # (causal) changes none of its positions
            width = max(len(targets[i]) for i in idx) + 1
            tgt = torch.tensor([[start] + targets[i] + [0] * (width - 1 - len(targets[i])) for i in idx])
            mine, _ = loaded.model(torch.tensor([mine_ids[i] for i in idx]), tgt)
            theirs = model(input_ids=torch.tensor([mine_ids[i] + eos for i in idx]),
                           decoder_input_ids=tgt).logits
            for row, i in enumerate(idx):
                n = len(targets[i]) + 1
                diff = (mine[row, :n].float() - theirs[row, :n, :vocab]).abs().max().item()
                worst = max(worst, diff)
    limits = [max(math.floor(len(ids) * dec.max_len_a + dec.max_len_b), 1) for ids in mine_ids]
    source = work / "test.single.src"
    source.write_text("".join(x + "\n" for x in sources), encoding="utf-8")
    out: dict[str, Any] = {"lines": len(sources), "tokenization_equal": tokens_equal,
                           "max_abs_logit_diff": worst,
                           "generation_config": json.loads((hf_dir / "generation_config.json").read_text())}
    torch.set_num_threads(2)
    runs = {"greedy": (1, ["--greedy"]),
            "beam5": (5, ["--beam", "5"] + [a for s in GENERATE_SEARCH for a in ("--set", s)]),
            "beam5_recipe_search": (5, ["--beam", "5"])}
    hf_out: dict[int, list[str]] = {}
    for label, (beam, flags) in runs.items():
        start = time.perf_counter()
        ours = translate(model_dir, checkpoint, source, work / f"mtkit.{label}", *flags, *lang_flags)
        mtkit_s = time.perf_counter() - start
        if beam not in hf_out:
            start = time.perf_counter()
            hf_out[beam] = generate(model, hf_ids, limits, beam, tok, **extra)
            out[f"generate_beam{beam}_seconds"] = round(time.perf_counter() - start, 1)
        theirs = hf_out[beam]
        (work / f"hf.{label}").write_text("".join(x + "\n" for x in theirs), encoding="utf-8")
        out[label] = {"equal": sum(a == b for a, b in zip(ours, theirs, strict=True)),
                      "mtkit_seconds": round(mtkit_s, 1),
                      "differ": [[i, a, b] for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
                                 if a != b][:3]}
    out["round_trip"] = round_trip(model_dir, checkpoint, hf_dir, work / "back")
    return out


def round_trip(model_dir: Path, checkpoint: str, hf_dir: Path, back: Path) -> dict[str, Any]:
    """import-hf of the export: the same weights bit for bit, the same model config."""
    if not back.exists():
        import_hf(hf_dir, back)
    a, b = load_model(model_dir, checkpoint), load_model(back)
    sa, sb = a.model.state_dict(), b.model.state_dict()
    same = set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    return {"weights_equal": same, "model_config_equal": a.config.model == b.config.model,
            "tensors": len(sa)}


# ------------------------------------------------------------------------------------------- main
def run_recipe(name: str, args: argparse.Namespace, done: dict[str, Any]) -> dict[str, Any]:
    spec = RECIPES[name]
    parent = done.get("deb-en-de/transformer", {}).get("model_dir")
    trained = train(name, spec, args, Path(parent) if parent else None)
    model_dir = trained["model_dir"]
    loaded = load_model(model_dir)
    m = loaded.config.model
    entry: dict[str, Any] = {
        "recipe": f"recipes/{name}.yaml", "model_dir": str(model_dir.relative_to(ROOT)),
        "model": {"d_model": m.d_model, "heads": m.heads, "d_ff": m.d_ff, "encoder_layers": m.encoder_layers,
                  "decoder_layers": m.decoder_layers, "norm": m.norm, "activation": m.activation,
                  "vocab": [loaded.meta.src_vocab_size, loaded.meta.tgt_vocab_size],
                  "parameters": sum(p.numel() for p in loaded.model.parameters())},
        "updates": args.steps, **{k: v for k, v in trained.items() if k != "model_dir"}}
    hf_dir = WORK / name / "hf"
    try:
        if not hf_dir.exists():
            export_hf(model_dir, hf_dir)
    except MtkitError as exc:
        entry["refused"] = str(exc)
        return entry
    entry["exported_as"] = json.loads((hf_dir / "config.json").read_text())["architectures"][0]
    sources, refs = single_sentence_test(*spec["pair"], args.lines)
    entry.update(compare(name, model_dir, hf_dir, sources, refs, WORK / name, spec["pair"][1]))
    return entry


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipes", nargs="*", help=f"default: all of {', '.join(RECIPES)}")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--max-minutes", type=float, default=2.0)
    p.add_argument("--train-lines", type=int, default=20000)
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--results", type=Path, default=RESULTS, help="the JSON file to add the recipes to")
    args = p.parse_args()
    names = args.recipes or list(RECIPES)
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        sys.exit(f"unknown recipe {unknown[0]}: one of {', '.join(RECIPES)}")
    results = json.loads(args.results.read_text()) if args.results.is_file() else {}
    entries = results.get("recipes", {})
    if any(RECIPES[n].get("parent") for n in names) and "deb-en-de/transformer" not in names:
        names.insert(0, "deb-en-de/transformer")
    done: dict[str, Any] = {}
    for name in names:
        start = time.perf_counter()
        entry = run_recipe(name, args, done)
        entry["seconds"] = round(time.perf_counter() - start, 1)
        done[name] = {"model_dir": ROOT / entry["model_dir"]}
        entries[name] = entry
        results.update({"command": "python bench/studies/hf_recipes.py " + " ".join(sys.argv[1:]),
                        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                        "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                        "recipes": entries})
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(json.dumps({k: v for k, v in entry.items() if k not in ("generation_config",)},
                         ensure_ascii=False), flush=True)
    print(table(entries))


def table(entries: dict[str, Any]) -> str:
    rows = ["| recipe | model | exported as | tokens equal | greedy equal | beam 5 equal | beam 5, recipe's "
            "GNMT | max logit diff | round trip |", "|---|---|---|---|---|---|---|---|---|"]
    for name, e in entries.items():
        m = e["model"]
        shape = f"{m['d_model']}d {m['encoder_layers']}+{m['decoder_layers']}L"
        if "refused" in e:
            rows.append(f"| {name} | {shape} | refused: {e['refused'][:80]} | | | | | | |")
            continue
        n = e["lines"]
        rt = e["round_trip"]
        rows.append(f"| {name} | {shape} | {e['exported_as']} | {e['tokenization_equal']}/{n} | "
                    f"{e['greedy']['equal']}/{n} | {e['beam5']['equal']}/{n} | "
                    f"{e['beam5_recipe_search']['equal']}/{n} | {e['max_abs_logit_diff']:.1e} | "
                    f"{'same' if rt['weights_equal'] and rt['model_config_equal'] else 'DIFFERS'} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
