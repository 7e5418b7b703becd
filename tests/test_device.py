"""mtkit/device.py and mtkit/cpus.py: one set of rules for device, precision and threads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from mtkit import cpus, device
from mtkit.device import (
    DECODING_SPIN_COUNT,
    autocast_dtype,
    decode_dtype,
    resolve_device,
    short_openmp_spin,
    thread_count,
    threads,
)
from mtkit.errors import ConfigError

CPU = torch.device("cpu")


def test_precision_choices(monkeypatch):
    assert autocast_dtype("fp32", CPU) is None
    assert autocast_dtype("bf16", CPU) is torch.bfloat16
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: True)
    assert autocast_dtype("auto", CPU) is torch.bfloat16
    assert decode_dtype("auto", CPU) is torch.bfloat16
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
    assert autocast_dtype("auto", CPU) is None
    assert decode_dtype("auto", CPU) is torch.float32
    with pytest.raises(ConfigError, match="fp16 needs a GPU"):
        autocast_dtype("fp16", CPU)
    with pytest.raises(ConfigError, match="use auto, fp32, bf16, fp16 or int8"):
        decode_dtype("half", CPU)
    with pytest.raises(ConfigError, match="does not combine"):
        decode_dtype("bf16", CPU, int8=True)
    assert decode_dtype("auto", CPU, int8=True) is torch.float32


def test_bf16_where_the_cpu_only_emulates_it_is_said_once(monkeypatch, capsys):
    """Emulated bf16 trained 20x slower than fp32 on an AVX2-only CPU: asking for it there says so,
    in one line, once per process; auto stays fp32 and silent, and a CPU with bf16 says nothing."""
    monkeypatch.setattr(device, "_warned_emulated_bf16", False)
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: True)
    assert autocast_dtype("bf16", CPU, "training.precision=") is torch.bfloat16
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
    assert autocast_dtype("auto", CPU) is None and capsys.readouterr().err == ""
    assert autocast_dtype("bf16", CPU, "training.precision=") is torch.bfloat16
    assert decode_dtype("bf16", CPU) is torch.bfloat16
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: training.precision=bf16: this CPU has no native")


def test_a_onednn_cap_below_bf16_counts_as_a_cpu_without_it(monkeypatch):
    """`make test-isa` caps oneDNN at AVX2: auto precision then chooses what an AVX2-only CPU gets
    (fp32), whatever this CPU's flags say; an uncapped CPU is judged by its flags."""
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    assert device.cpu_has_native_bf16() and device.cpu_runs_bf16_lstm()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core")  # AVX-512 without its bf16 instructions
    assert not device.cpu_has_native_bf16() and device.cpu_runs_bf16_lstm()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not device.cpu_has_native_bf16() and not device.cpu_runs_bf16_lstm()
    assert autocast_dtype("auto", CPU, lstm=True) is None
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert device.cpu_has_native_bf16()
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert not device.cpu_has_native_bf16() and not device.cpu_runs_bf16_lstm()
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.setattr(device, "cpu_flags", frozenset)  # no /proc/cpuinfo flags: not x86 Linux
    assert not device.cpu_has_native_bf16() and device.cpu_runs_bf16_lstm()


def test_bf16_lstm_training_without_avx512_is_one_line_not_a_crash(monkeypatch, tmp_path):
    """oneDNN has no bf16 LSTM below AVX-512, where autocast's LSTM failed with a traceback from
    inside the first update: `training.precision bf16` of an LSTM is refused there at once, while a
    GRU and a Transformer still get bf16 (emulated)."""
    from train_helpers import make_data_dir, tiny_config  # tests/ is on sys.path (conftest)

    from mtkit.train.trainer import train

    monkeypatch.setattr(device, "cpu_runs_bf16_lstm", lambda: False)
    with pytest.raises(ConfigError, match=r"^training.precision=bf16: oneDNN has no bf16 LSTM"):
        autocast_dtype("bf16", CPU, "training.precision=", lstm=True)
    assert autocast_dtype("bf16", CPU, lstm=False) is torch.bfloat16
    data = make_data_dir(tmp_path, n_train=20, n_dev=0)
    with pytest.raises(ConfigError, match="bf16 LSTM"):
        train(tiny_config(data, tmp_path / "m", arch="rnn", precision="bf16"))
    assert not (tmp_path / "m" / "checkpoint_last.pt").exists()


def test_the_bf16_lstm_prediction_agrees_with_onednn_under_an_avx2_cap():
    """In a process whose oneDNN is capped at AVX2 (as `make test-isa` runs), `cpu_runs_bf16_lstm`
    says what an LSTM under bf16 autocast does: both fail (on every CPU, since the cap applies)."""
    code = ("import torch; from mtkit.device import cpu_runs_bf16_lstm\n"
            "lstm = torch.nn.LSTM(8, 8, batch_first=True)\n"
            "try:\n"
            "    with torch.autocast('cpu', dtype=torch.bfloat16):\n"
            "        lstm(torch.randn(2, 3, 8))\n"
            "    runs = True\n"
            "except RuntimeError:\n"
            "    runs = False\n"
            "print(cpu_runs_bf16_lstm(), runs)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_devices_are_checked_the_same_way_for_every_stage():
    assert resolve_device("cpu") == CPU
    with pytest.raises(ConfigError, match="expected auto, cpu, cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="training.device=cuda: CUDA is not available"):
            resolve_device("cuda", setting="training.device=")
        with pytest.raises(ConfigError, match="--device cuda:1: CUDA is not available"):
            resolve_device("cuda:1")
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        with pytest.raises(ConfigError, match="MPS is not available"):
            resolve_device("mps")
        assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_cpu_count_without_affinity(monkeypatch):
    """macOS has no os.sched_getaffinity: counting cores must not crash there."""
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert cpus.allowed_cpus() == max(1, os.cpu_count() or 1)
    assert thread_count(0) == cpus.allowed_cpus()
    assert thread_count(3) == 3
    assert thread_count(0, share=10 * cpus.allowed_cpus()) == 1


def test_threads_are_restored():
    before = torch.get_num_threads()
    with threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), threads(before + 2):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_kernel_caches_are_bounded_by_every_command_unless_the_user_chose(monkeypatch):
    from mtkit.cli import app as cli

    for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "7")
    monkeypatch.setattr("sys.argv", ["mtkit", "--version"])
    with pytest.raises(SystemExit):
        cli.main()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(device.KERNEL_CACHE_CAPACITY)
    assert os.environ["LRU_CACHE_CAPACITY"] == "7"  # the user's value wins


def test_library_import_changes_no_environment():
    """Only the CLI bounds the caches: importing mtkit (a library user's process) leaves them."""
    code = ("import os, mtkit.decode.translator, mtkit.train.trainer; "
            "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'), os.environ.get('LRU_CACHE_CAPACITY'), "
            "os.environ.get('GOMP_SPINCOUNT'))")
    caches = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
    env = {k: v for k, v in os.environ.items() if k not in caches}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split() == ["None", "None", "None"], out.stderr


@pytest.mark.parametrize(("args", "user", "expected"), [
    (["translate", "-m", "M"], {}, str(DECODING_SPIN_COUNT)),
    (["--debug", "serve", "-m", "M"], {}, str(DECODING_SPIN_COUNT)),
    (["train", "c.yaml"], {}, None),  # training alone measured slower with the short spin
    (["translate"], {"GOMP_SPINCOUNT": "77"}, "77"),  # the user's value wins
    (["translate"], {"OMP_WAIT_POLICY": "PASSIVE"}, None),  # and so does the user's policy
])
def test_commands_that_decode_let_idle_openmp_threads_sleep_soon(monkeypatch, args, user, expected):
    """Two decoding commands on the same cores took 16-149 s with OpenMP's default spin against 11-13 s
    with a short one (docs/results.md, "Translation speed"); the CLI sets it before torch loads."""
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in user.items():
        monkeypatch.setenv(name, value)
    short_openmp_spin(args)
    assert os.environ.get("GOMP_SPINCOUNT") == expected


def test_the_cli_sets_the_spin_before_torch_loads():
    """libgomp reads GOMP_SPINCOUNT when PyTorch loads it: `mtkit translate` must set it first."""
    code = ("import atexit, os, sys; sys.argv = ['mtkit', 'translate', '--help']\n"
            "import mtkit.cli.app as app\n"
            "loaded = 'torch' in sys.modules\n"
            "atexit.register(lambda: print('spin', os.getenv('GOMP_SPINCOUNT'), 'torch before', loaded))\n"
            "app.main()")
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert f"spin {DECODING_SPIN_COUNT} torch before False" in out.stdout, out.stdout + out.stderr


def test_a_cuda_device_keeps_attention_off_cudnn(monkeypatch):
    """cuDNN's attention plans every new shape (slow, and each plan stays in host memory): choosing a
    CUDA device turns that backend off (docs/results.md, "Minimum risk training on a GPU")."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    was = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        assert resolve_device("cpu") == CPU and torch.backends.cuda.cudnn_sdp_enabled()
        assert resolve_device("cuda") == torch.device("cuda", 0)
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)
