"""bench/run.py: the numbers it derives (training throughput, per-process peak memory) and its options."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "run.py"
spec = importlib.util.spec_from_file_location("bench_run", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _metrics(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_throughput_skips_warmup_and_weights_intervals_by_duration(tmp_path: Path) -> None:
    events = [
        {"event": "train", "step": 10, "elapsed": 100.0, "tokens_per_s": 1.0},  # slow start: warm-up
        {"event": "train", "step": 20, "elapsed": 110.0, "tokens_per_s": 1000.0},
        {"event": "valid", "step": 20, "elapsed": 150.0},  # validation pauses are not training time
        {"event": "train", "step": 30, "elapsed": 160.0, "tokens_per_s": 2000.0},
        {"event": "train", "step": 40, "elapsed": 190.0, "tokens_per_s": 4000.0},
    ]
    out = bench.throughput(_metrics(tmp_path / "m.jsonl", events), warmup=20)
    # intervals 20→30 (2000 tok/s for 50 s by the clock) and 30→40 (4000 tok/s for 30 s)
    assert out["tgt_tokens_per_s"] == pytest.approx((2000 * 50 + 4000 * 30) / 80, rel=1e-3)
    assert out["measured_updates"] == 20
    assert out["updates_per_s"] == pytest.approx(20 / 80, rel=1e-2)


def test_throughput_without_measured_interval_is_an_error(tmp_path: Path) -> None:
    events = [{"event": "train", "step": 10, "elapsed": 1.0, "tokens_per_s": 5.0}]
    with pytest.raises(bench.BenchError, match="no logged training interval"):
        bench.throughput(_metrics(tmp_path / "m.jsonl", events), warmup=0)


def test_resident_growth_compares_the_last_update_with_update_200(tmp_path: Path) -> None:
    events = [{"event": "train", "step": step, "rss_mib": rss}
              for step, rss in ((100, 900), (190, 1000), (210, 1200), (400, 1300), (600, 1320))]
    events.insert(3, {"event": "valid", "step": 300})
    out = bench.resident_growth(_metrics(tmp_path / "m.jsonl", events))
    assert out == {"rss_mib_at": {"210": 1200, "600": 1320}, "rss_last_over_first": 1.1}


def test_run_measured_reports_the_child_s_own_peak_memory(tmp_path: Path) -> None:
    small = [sys.executable, "-c", "pass"]
    big = [sys.executable, "-c", "x = bytearray(200 * 2**20); x[::4096] = b'1' * len(x[::4096])"]
    _, rss_big = bench.run_measured(big, tmp_path / "big.log")
    _, rss_small = bench.run_measured(small, tmp_path / "small.log")  # measured after the big one
    assert rss_big > 200 > rss_small


def test_run_measured_failure_names_the_log(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import sys; print('boom: bad input'); sys.exit(3)"]
    with pytest.raises(bench.BenchError, match=r"exit 3\): boom: bad input \[log: .*fail.log\]"):
        bench.run_measured(cmd, tmp_path / "fail.log")


def test_parts_selection_and_quick_defaults(tmp_path: Path) -> None:
    args = bench.parse_args(["--only", "train,translate", "--skip", "translate", "--work", str(tmp_path)])
    assert args.parts == ["train"] and args.steps == 100 and args.warmup == 20
    quick = bench.parse_args(["--quick", "--work", str(tmp_path)])
    assert quick.parts == list(bench.PARTS) and quick.steps < 100
    assert quick.out == tmp_path / "quick" / "results-quick.json"  # never overwrites bench/results.json
    with pytest.raises(SystemExit):
        bench.parse_args(["--only", "decode"])


def test_missing_corpus_is_named(tmp_path: Path) -> None:
    with pytest.raises(bench.BenchError, match=r"train\.en\.gz not found; set DATA="):
        bench.corpus_files(tmp_path)


def test_bleu_of_a_translation(tmp_path):
    ref = tmp_path / "ref.de"
    ref.write_text("das ist ein kleines haus .\nwo gehst du hin ?\n", encoding="utf-8")
    same, other = tmp_path / "same.de", tmp_path / "other.de"
    same.write_text(ref.read_text(encoding="utf-8"), encoding="utf-8")
    other.write_text("das ist ein großes haus .\nwohin gehst du ?\n", encoding="utf-8")
    assert bench.bleu_of(same, ref) == 100.0
    assert 0.0 < bench.bleu_of(other, ref) < 100.0


def test_scale_repeats_the_training_files_once_and_reuses_them(tmp_path: Path) -> None:
    import gzip

    sys.path.insert(0, str(SCRIPT.parent))  # bench/ modules import each other by name
    from scale import repeated_corpus

    plain, packed = tmp_path / "train.en", tmp_path / "train.de.gz"
    plain.write_text("a\nb\n", encoding="utf-8")
    packed.write_bytes(gzip.compress(b"x\ny\n"))
    files = {"train_src": plain, "train_tgt": packed, "dev_src": tmp_path / "dev.en"}
    assert repeated_corpus(files, 1, tmp_path / "x1") == files
    made = repeated_corpus(files, 3, tmp_path / "x3")
    assert gzip.decompress(made["train_src"].read_bytes()).decode() == "a\nb\n" * 3
    assert gzip.decompress(made["train_tgt"].read_bytes()).decode() == "x\ny\n" * 3
    assert made["dev_src"] == files["dev_src"]
    stamp = made["train_src"].stat().st_mtime_ns
    repeated_corpus(files, 3, tmp_path / "x3")  # done before: not written again
    assert made["train_src"].stat().st_mtime_ns == stamp



def test_gpu_part_compares_the_first_thousand_updates_with_the_next(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu

    # 10 s at 1,000 tok/s for updates 1-1,000 (two logs), then 10 s at 3,000 tok/s for 1,001-2,000
    events = [{"event": "train", "step": s, "elapsed": e, "tokens_per_s": r, "mfu": m, "rss_mib": rss}
              for s, e, r, m, rss in ((500, 4.0, 500.0, 0.01, 900), (1000, 10.0, 1333.3333, 0.02, 950),
                                      (2000, 20.0, 3000.0, 0.05, 960))]
    rates = gpu.window_rates(_metrics(tmp_path / "metrics.jsonl", events))
    assert rates["tok_per_s_1-1000"] == 1000 and rates["tok_per_s_1001-2000"] == 3000
    assert rates["first_window_over_second"] == pytest.approx(0.333, abs=1e-3)
    assert rates["tok_per_s_all"] == 2000
    assert rates["mfu_1001-2000"] == 0.05 and rates["rss_mib_first_log"] == 900
    skipped = gpu.bench_gpu(type("Args", (), {})(), {}, bench) if not _has_cuda() else None
    assert skipped is None or "skipped" in skipped


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _cpu_training():
    path = SCRIPT.parent / "studies" / "cpu_training.py"
    spec = importlib.util.spec_from_file_location("bench_cpu_training", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))
    spec.loader.exec_module(module)
    return module


def test_cpu_training_variants_are_config_overrides_and_unknown_ones_are_refused(tmp_path, capsys):
    """bench/studies/cpu_training.py: each variant is `--set` overrides of real config keys; an unknown
    variant is a usage error, missing data one line saying how to make it."""
    from mtkit.config.experiment import Config, apply_overrides, from_dict, to_dict

    module = _cpu_training()
    for name, overrides in module.VARIANTS.items():
        cfg = from_dict(apply_overrides(to_dict(Config()), overrides))
        assert cfg.training.precision in ("fp32", "bf16"), name
    assert from_dict(apply_overrides(to_dict(Config()), module.VARIANTS["fp32-compile"])).training.compile
    with pytest.raises(SystemExit):
        module.main(["--variants", "fp32,fp64"])
    assert "fp64" in capsys.readouterr().err
    assert module.main(["--work", str(tmp_path)]) == 1
    assert "bench/run.py --only prepare" in capsys.readouterr().err
