"""Training on a CUDA GPU: graphed updates equal eager ones, never wait for the host in steady state,
capture one graph per batch shape, and resume exactly. These need a GPU; elsewhere they skip (the
parts that run anywhere — buckets, the loss without host reads, prefetching — are tested on CPU in
test_batching.py, test_loss.py, test_prefetch.py and test_trainer.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from mtkit.config.experiment import from_dict, to_dict
from mtkit.device import DistInfo
from mtkit.train.trainer import Trainer, train

sys.path.insert(0, str(Path(__file__).parent))
from train_helpers import make_data_dir, straight_and_resumed, tiny_config  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("cuda"), n_train=400, n_dev=12, random_ids=(3, 30),
                         vocab_size=40)


def _config(data: Path, model_dir: Path, dropout: float = 0.1, **training):
    settings = {"device": "cuda", "precision": "fp32", "max_tokens": 256, "validate_every": 1000,
                "log_every": 10, "threads": 2, **training}
    raw = to_dict(tiny_config(data, model_dir, **settings))
    raw["model"]["dropout"] = dropout
    return from_dict(raw)


def _trainer(cfg) -> Trainer:
    return Trainer(cfg, DistInfo(), torch.device("cuda", 0), resume=False)


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().float().cpu().clone() for k, v in trainer.model.state_dict().items()}


def _run_updates(trainer: Trainer, n: int) -> None:
    work = trainer._work(trainer.state.epoch, trainer.state.batch)
    for _ in range(n):
        todo = next(work)
        trainer._update(todo.batches)
        trainer.state.batch += len(todo.batches)
        if trainer.state.batch >= todo.epoch_batches:
            trainer.state.epoch, trainer.state.batch = trainer.state.epoch + 1, 0
            work = trainer._work(trainer.state.epoch, 0)


def test_graphed_updates_equal_eager_updates(data, tmp_path):
    """Same seed, same batches, dropout on: graphs replay what eager mode computes (fp32; the few
    atomics-based kernels leave differences at rounding level)."""
    graphed = _trainer(_config(data, tmp_path / "g", cuda_graphs="on"))
    eager = _trainer(_config(data, tmp_path / "e", cuda_graphs="off"))
    assert graphed.updater.graphs is not None and eager.updater.graphs is None
    _run_updates(graphed, 60)
    _run_updates(eager, 60)
    assert graphed.updater.graphs.captured >= 2, "nothing was replayed as a graph"
    for (name, a), b in zip(_weights(graphed).items(), _weights(eager).values(), strict=True):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-4), name
    assert torch.allclose(graphed.updater.log_sums().cpu(), eager.updater.log_sums().cpu(), rtol=1e-4)


def test_steady_state_updates_never_wait_for_the_host(data, tmp_path):
    """Once every shape is captured, an update is copies and replays: any read back (a loss .item(),
    a nonzero(), a bool of a tensor) makes this fail."""
    trainer = _trainer(_config(data, tmp_path / "s", cuda_graphs="on"))
    per_epoch = len(trainer.sampler)
    _run_updates(trainer, 3 * per_epoch)  # every shape seen at least twice: captured
    work = trainer._work(trainer.state.epoch, trainer.state.batch)
    batches = [next(work).batches for _ in range(per_epoch)]
    captured = trainer.updater.graphs.captured
    _update_without_sync(trainer, batches)
    assert trainer.updater.graphs.captured == captured
    assert captured <= len(trainer.sampler.shapes(0)) + len(trainer.sampler.shapes(1)) + 1


def test_eager_gpu_updates_do_not_read_back_either(data, tmp_path):
    """Without graphs (cuda_graphs off) the GPU path still makes no host reads per update."""
    trainer = _trainer(_config(data, tmp_path / "n", cuda_graphs="off"))
    _run_updates(trainer, 3)
    work = trainer._work(trainer.state.epoch, trainer.state.batch)
    _update_without_sync(trainer, [next(work).batches for _ in range(10)])


def _update_without_sync(trainer: Trainer, batches: list) -> None:
    """Run these updates with every host-device synchronisation an error."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for group in batches:
            trainer._update(group)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_graphed_resume_equals_an_uninterrupted_run(data, tmp_path):
    a, b = straight_and_resumed(lambda d, n: _config(data, d, max_steps=n, cuda_graphs="on", save_every=40),
                                tmp_path, 80)
    for key in a:
        assert torch.allclose(a[key].float(), b[key].float(), rtol=1e-3, atol=1e-4), key


def test_bf16_graphed_training_learns(data, tmp_path):
    cfg = _config(data, tmp_path / "bf16", dropout=0.0, precision="bf16", max_steps=150, lr=3e-3)
    train(cfg)
    from mtkit.metrics_log import read_metrics

    events = [e for e in read_metrics(tmp_path / "bf16" / "metrics.jsonl") if e.get("event") == "train"]
    # random ids copied, lengths 3-30: 150 updates bring the loss down by a sixth, not more. Measured
    # 2026-11-25: 3.93 → 3.30 on an H100 (the 0.6 asked before then was never met there), 3.97 → 3.26
    # with this config on a CPU in bf16 and 3.97 → 3.27 in fp32 (eager): so bf16 learns as fp32 does
    assert events[-1]["loss"] < 0.9 * events[0]["loss"]
