"""What training writes into a model directory besides checkpoints: the resolved config, meta.json
and the BPE model(s), everything `Translator` needs to rebuild the model from the directory alone.

The BPE model is copied once, when the directory is created. A later `prepare` that retrains it must
not silently change how a finished model segments its input, so a different one is an error.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

from mtkit import checkpoint as files
from mtkit.checkpoint import copy_atomically
from mtkit.config.experiment import CONFIG_FILE, Config, from_dict, save_config
from mtkit.data.meta import DataMeta, write_meta
from mtkit.errors import CheckpointError, DataError


def write_model_files(cfg: Config, meta: DataMeta, model_dir: Path) -> None:
    """config.yaml and meta.json (rewritten: they describe this run) and the BPE model(s) (once)."""
    model_dir.mkdir(parents=True, exist_ok=True)
    data_dir = Path(cfg.data.dir)
    for name in meta.bpe_files():
        for source in (data_dir / name, (data_dir / name).with_suffix(".vocab")):
            target = model_dir / source.name
            if not source.is_file():
                if source.suffix == ".model":
                    raise DataError(f"BPE model {source} not found: re-run `mtkit prepare`")
                continue
            if not target.exists():
                copy_atomically(source, target)
            elif source.resolve() != target.resolve() and not filecmp.cmp(source, target, shallow=False):
                raise CheckpointError(
                    f"{target} differs from {source}: the data was prepared with another BPE model since "
                    f"this model directory was created; train into a new training.model_dir (or restore "
                    f"the data directory's BPE model)")
    save_config(cfg, model_dir / CONFIG_FILE)
    write_meta(model_dir, meta)


def recorded_config(model_dir: Path) -> Config:
    """The config a started run recorded: its config.yaml (written when the run starts), else the one in
    its checkpoint_last.pt."""
    import yaml

    path = model_dir / CONFIG_FILE
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):  # written at the start; else ask the checkpoint
        raw = files.load_checkpoint(model_dir / files.LAST)["config"]
    return from_dict(raw, stored=True)
