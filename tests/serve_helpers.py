"""Models and a real server process for the `mtkit serve` tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mtkit.checkpoint import load_checkpoint, save_checkpoint
from mtkit.decode.translator import Translator

sys.path.insert(0, str(Path(__file__).parent))
from test_translator import WORDS, make_model_dir  # noqa: E402, F401


def served_model(root: Path, target: str = "de", seed: int = 0, source: str = "en", **decoding) -> Path:
    """A tiny random ``source``→``target`` model directory (see test_translator.make_model_dir);
    ``decoding`` overrides its decoding settings (beam 3, translations of up to the source's length + 4)."""
    model = make_model_dir(root, seed=seed, **{"beam_size": 3, "max_len_a": 1.0, "max_len_b": 4, **decoding})
    checkpoint = model / "checkpoint_best.pt"
    state = load_checkpoint(checkpoint)
    state["vocab"]["src_lang"] = source
    state["vocab"]["tgt_lang"] = target
    save_checkpoint(state, checkpoint)
    (model / "meta.json").write_text(json.dumps(state["vocab"]), encoding="utf-8")
    return model


def offline(model: Path) -> Translator:
    """What `mtkit translate --precision fp32 --threads 1` does with the model: the reference."""
    return Translator(model, device="cpu", threads=1, precision="fp32")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``mtkit serve`` as a user starts it, in its own process, on a free port."""

    def __init__(self, models: list[Path], *args: str, timeout: float = 60.0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "mtkit", "serve", "--port", str(self.port), "--precision", "fp32",
               "--threads", "1", *args]
        for m in models:
            cmd += ["-m", str(m)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mtkit serve exited: {self.proc.stdout.read()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("mtkit serve did not answer in time")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.stdout.read() if self.proc.stdout else ""

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def multilingual_model(root: Path, seed: int = 3, pairs: tuple[tuple[str, str], ...] = (
        ("en", "de"), ("en", "es"), ("de", "en"), ("es", "en")), **decoding) -> Path:
    """A tiny random multilingual model directory (source tags, `mtkit.data.corpora`) trained, says
    its meta.json, on ``pairs``: as `mtkit prepare` and `mtkit train` would leave it, untrained."""
    from mtkit.data.corpora import tag

    languages = sorted({lang for pair in pairs for lang in pair})
    meta = {"src_lang": pairs[0][0], "tgt_lang": pairs[0][1],
            "languages": {"tag": "source", "src": sorted({s for s, _ in pairs}),
                          "tgt": sorted({t for _, t in pairs}), "pairs": [list(p) for p in pairs]}}
    return make_model_dir(root, seed=seed, symbols=tuple(tag(x) for x in languages), meta=meta,
                          **{"beam_size": 3, "max_len_a": 1.0, "max_len_b": 4, **decoding})
