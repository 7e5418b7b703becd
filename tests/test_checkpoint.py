"""mtkit/checkpoint.py: safe loading, the model-directory lock, best-k ranking."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import (
    load_checkpoint,
    locked,
    rank_best_first,
    save_checkpoint,
    step_checkpoints,
    step_path,
    steps_to_keep,
)
from mtkit.errors import CheckpointError


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {_Evil.marker}",))


def test_files_that_are_not_checkpoints_are_one_clear_error(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    noise = tmp_path / "noise.bin"
    noise.write_bytes(os.urandom(4096))
    for path in (text, noise):
        with pytest.raises(CheckpointError, match="not an mtkit checkpoint"):
            load_checkpoint(path)
    good = tmp_path / "good.pt"
    save_checkpoint({"model": {"w": torch.ones(3)}, "config": {}}, good)
    assert torch.equal(load_checkpoint(good)["model"]["w"], torch.ones(3))
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[:300])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(cut)


def test_a_malicious_pickle_is_refused_and_never_run(tmp_path: Path) -> None:
    _Evil.marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"model": _Evil(), "config": {}}, evil)
    with pytest.raises(CheckpointError, match="refused") as err:
        load_checkpoint(evil)
    assert "weights_only" not in str(err.value)  # never advise a user to switch the protection off
    assert not _Evil.marker.exists()


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "m" / "checkpoint_last.pt"
    save_checkpoint({"model": {}, "config": {}}, path)
    save_checkpoint({"model": {"x": torch.zeros(1)}, "config": {}}, path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint_last.pt"]


def test_best_k_ranking_follows_the_metric_direction(tmp_path: Path) -> None:
    scored = [(10, 20.0), (20, 25.0), (30, 25.0), (40, 18.0)]
    assert rank_best_first(scored, "bleu") == [30, 20, 10, 40]  # ties: the later step first
    assert rank_best_first(scored, "loss") == [40, 10, 30, 20]
    history = [{"step": s, "score": v} for s, v in scored]
    assert steps_to_keep(history, "bleu", keep_best=1, keep_last=1) == {30, 40}
    assert steps_to_keep([{"step": 5, "score": None}, {"step": 6, "score": None}], "bleu", 1, 0) == {6}
    for step in (3, 12, 7):
        step_path(tmp_path, step).write_bytes(b"")
    assert [p.name for p in step_checkpoints(tmp_path)] == [f"checkpoint_step{s}.pt" for s in (3, 7, 12)]


_HOLDER = """
import sys, time
from mtkit.checkpoint import locked
with locked(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(60)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="advisory locks are POSIX")
def test_a_model_directory_in_use_is_locked_and_a_killed_holder_frees_it(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(CheckpointError, match=rf"in use by training \(pid {holder.pid} on "), \
                locked(tmp_path):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    deadline = time.monotonic() + 10
    while True:  # the kernel drops the lock with the process: nothing to clean up
        try:
            with locked(tmp_path):
                break
        except CheckpointError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_full_disk_keeps_the_previous_checkpoint_and_says_so(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "checkpoint_last.pt"
    save_checkpoint({"model": {"w": torch.ones(2)}, "config": {}}, path)

    def full_disk(obj, f, *args, **kwargs):
        f.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 768 vs 662")

    monkeypatch.setattr(torch, "save", full_disk)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9, 0))
    with pytest.raises(CheckpointError, match=r"cannot write .*checkpoint_last.pt: no space left on device"):
        save_checkpoint({"model": {"w": torch.zeros(2)}, "config": {}}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_last.pt"]
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(2))
