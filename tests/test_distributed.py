"""`torchrun --nproc_per_node=2 -m mtkit train` on CPU (gloo): one set of checkpoints, same math."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import load_checkpoint
from mtkit.config.experiment import from_dict, save_config, to_dict
from mtkit.device import DistInfo, dist_info_from_env
from mtkit.metrics_log import read_metrics
from mtkit.train.trainer import train

sys.path.insert(0, str(Path(__file__).parent))
from train_helpers import make_data_dir, tiny_config  # noqa: E402


@pytest.mark.slow
def test_two_process_gloo_run_equals_update_freq_two(tmp_path):
    data = make_data_dir(tmp_path, n_train=300, n_dev=10, random_ids=(3, 9), vocab_size=24)
    # 11 batches an epoch: 5 updates of 2 stay within the first epoch
    settings = {"max_steps": 5, "validate_every": 3, "log_every": 2, "max_tokens": 200, "keep_last": 1,
                "keep_best": 1}
    ddp_cfg = to_dict(tiny_config(data, tmp_path / "ddp", **settings))
    config = tmp_path / "ddp.yaml"
    save_config(from_dict(ddp_cfg), config)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "mtkit", "train", str(config)],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "x2" in result.stderr  # the banner names the world size

    model_dir = tmp_path / "ddp"
    names = sorted(p.name for p in model_dir.iterdir())
    assert names == [".lock", "bpe.model", "bpe.vocab", "checkpoint_best.pt", "checkpoint_last.pt",
                     *sorted(p.name for p in model_dir.glob("checkpoint_step*.pt")), "config.yaml",
                     "meta.json", "metrics.jsonl"]
    assert 1 <= len(list(model_dir.glob("checkpoint_step*.pt"))) <= 2
    events = read_metrics(model_dir / "metrics.jsonl")
    # one writer: each event appears once
    assert [(e["event"], e["step"]) for e in events] == [
        ("train", 2), ("valid", 3), ("train", 4), ("valid", 5)]
    assert events[2]["loss"] < events[0]["loss"]

    # rank r takes batches r, r+2, ...: an update of the 2 ranks sees the same batches as one process
    # with update_freq 2, and the gradient is normalised by all their tokens, so the weights agree
    from mtkit.data.batching import sampler_for
    from mtkit.data.shards import ParallelData

    assert len(sampler_for(ParallelData(data, "train"), 200)) >= 2 * settings["max_steps"]
    single = tiny_config(data, tmp_path / "single", update_freq=2, **settings)
    train(single)
    ddp_weights = load_checkpoint(model_dir / "checkpoint_last.pt")["model"]
    single_weights = load_checkpoint(tmp_path / "single" / "checkpoint_last.pt")["model"]
    for key, value in single_weights.items():
        assert torch.allclose(ddp_weights[key], value, atol=1e-5, rtol=1e-4), key


def test_env_parsing_and_device_resolution(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert dist_info_from_env() == DistInfo(0, 1, 0, 1)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    info = dist_info_from_env()
    assert (info.rank, info.world_size, info.local_rank, info.local_world_size) == (3, 4, 1, 2)
    assert info.enabled and not info.is_main

