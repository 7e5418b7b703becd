"""Config: every mistake is reported with the key's dotted name (and a suggestion), overrides parse like
YAML, and the resolved config written next to the outputs reads back identically."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from mtkit.config.checks import check_applicable
from mtkit.config.docs import describe_keys
from mtkit.config.experiment import (
    SECTIONS,
    Config,
    from_dict,
    load_config,
    save_config,
    to_dict,
)
from mtkit.errors import ConfigError


def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_defaults_without_a_file() -> None:
    assert load_config(None) == Config()
    assert from_dict({}) == Config()
    assert from_dict({"data": None}) == Config()  # an empty section in YAML is fine


def test_unknown_key_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'training\.lr_rate' \(did you mean 'lr'\?\)"):
        from_dict({"training": {"lr_rate": 0.1}})
    with pytest.raises(ConfigError, match=r"unknown key 'data\.max_lenght' \(did you mean 'max_len'\?\)"):
        from_dict({"data": {"max_lenght": 10}})
    # nothing close: the valid keys are listed instead
    with pytest.raises(ConfigError, match=r"unknown key 'bpe\.zzz' \(valid keys: joint, vocab_size"):
        from_dict({"bpe": {"zzz": 1}})


def test_unknown_section_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"unknown section 'trainig' \(did you mean 'training'\?\)"):
        from_dict({"trainig": {}})
    with pytest.raises(ConfigError, match="must be a mapping"):
        from_dict(["data"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="data: expected a mapping"):
        from_dict({"data": [1, 2]})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"data": {"max_len": "long"}}, r"data\.max_len: expected an integer, got 'long'"),
        ({"data": {"max_len": True}}, r"data\.max_len: expected an integer, got True"),
        ({"data": {"max_len": 2.5}}, r"data\.max_len: expected an integer, got 2\.5"),
        ({"bpe": {"joint": "yes please"}}, r"bpe\.joint: expected true or false"),
        ({"data": {"max_len_ratio": "x"}}, r"data\.max_len_ratio: expected a number"),
        ({"data": {"src_lang": ["en"]}}, r"data\.src_lang: expected a string"),
        ({"model": {"arch": "cnn"}}, r"model\.arch: 'cnn' is not one of transformer, rnn"),
        ({"training": {"betas": 0.9}}, r"training\.betas: expected a list"),
        ({"training": {"betas": [0.9, "b"]}}, r"training\.betas\[1\]: expected a number"),
    ],
)
def test_wrong_types_name_the_key(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"data": {"max_len": 0}}, r"data\.max_len: 0 is below the minimum 1"),
        ({"data": {"max_len_ratio": -1}}, r"data\.max_len_ratio: -1\.0 is below the minimum 0"),
        ({"bpe": {"vocab_size": 8}}, r"bpe\.vocab_size: 8 is below the minimum 16"),
        ({"bpe": {"character_coverage": 1.5}}, r"bpe\.character_coverage: 1\.5 is above the maximum 1\.0"),
        ({"model": {"dropout": 1.1}}, r"model\.dropout: 1\.1 is above the maximum 1"),
    ],
)
def test_out_of_range_values_name_the_key(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(raw)


def test_cross_key_consistency() -> None:
    with pytest.raises(ConfigError, match=r"model\.d_model \(100\) must be divisible by model\.heads \(3\)"):
        from_dict({"model": {"d_model": 100, "heads": 3}})
    with pytest.raises(ConfigError, match="training.betas: expected two numbers"):
        from_dict({"training": {"betas": [0.9]}})


def test_set_overrides_parse_numbers_bools_lists_strings(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "c.yaml", {"data": {"max_len": 100}, "training": {"lr": 0.5}})
    cfg = load_config(path, [
        "training.lr=1e-3",            # YAML 1.1 reads this as a string: still a number here
        "training.eps=2.5E-8",
        "data.max_len=80",             # overrides the file
        "data.max_len_ratio=2",        # int accepted for a float key
        "training.betas=[0.8, 0.99]",
        "bpe.joint=false",
        "training.compile=true",
        "data.src_lang=en",
        "data.dir=some/dir with space",
        "data.train_src=",             # empty value: the empty string
    ])
    assert cfg.training.lr == 0.001 and isinstance(cfg.training.lr, float)
    assert cfg.training.eps == 2.5e-8
    assert cfg.data.max_len == 80
    assert cfg.data.max_len_ratio == 2.0 and isinstance(cfg.data.max_len_ratio, float)
    assert cfg.training.betas == [0.8, 0.99]
    assert cfg.bpe.joint is False and cfg.training.compile is True
    assert cfg.data.src_lang == "en" and cfg.data.dir == "some/dir with space"
    assert cfg.data.train_src == ""


def test_scientific_notation_in_yaml_files(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("training:\n  lr: 5e-4\n  eps: 1e-9\n", encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.training.lr, cfg.training.eps) == (5e-4, 1e-9)
    with pytest.raises(ConfigError, match=r"data\.max_len: expected an integer"):
        load_config(None, ["data.max_len=1e3"])  # not silently truncated into an int


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.lr", r"expected section\.key=value"),
        ("lr=0.1", r"expected section\.key=value"),
        ("a.b.c=1", r"expected section\.key=value"),
        ("trianing.lr=0.1", r"unknown section 'trianing' \(did you mean 'training'\?\)"),
        ("training.lr_rate=0.1", r"unknown key 'training\.lr_rate' \(did you mean 'lr'\?\)"),
        ("training.betas=[0.9", "cannot parse value"),
        ("data.max_len=abc", r"data\.max_len: expected an integer, got 'abc'"),
    ],
)
def test_bad_overrides(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found: .*missing.yaml"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("data:\n  max_len: 5\n   oops: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_config(bad)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"data:\n  dir: \xff\n")
    with pytest.raises(ConfigError, match="bin.yaml: not valid UTF-8"):
        load_config(binary)


def test_resolved_config_round_trip(tmp_path: Path) -> None:
    cfg = load_config(None, ["data.max_len=77", "bpe.joint=false", "training.lr=3e-4", "model.arch=rnn",
                             "training.betas=[0.85, 0.95]", "data.src_lang=de", "decoding.top_p=0.9"])
    path = tmp_path / "out" / "config.yaml"
    save_config(cfg, path)
    again = load_config(path)
    assert again == cfg
    assert to_dict(again) == to_dict(cfg)
    # every key is written, so the file documents the whole experiment
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(written) == set(SECTIONS)
    assert written["data"]["max_len"] == 77 and "filter_dev" in written["data"]


def test_saved_config_is_pyyamls_safe_dump_text(tmp_path: Path) -> None:
    """save_config writes with libyaml's emitter where PyYAML has it: the text must be what the
    pure-Python safe_dump writes, non-ASCII, quoting-prone and long values included."""
    cfg = load_config(None, ["data.src_lang=de", "data.dir='/tmp/données: «x» #1'", "training.lr=3e-4",
                             f"training.model_dir='{'a' * 150} b'", "training.betas=[0.85, 0.95]"])
    path = tmp_path / "config.yaml"
    save_config(cfg, path)
    pure = yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True)
    assert path.read_text(encoding="utf-8") == pure


def test_every_key_is_documented() -> None:
    rows = describe_keys()
    keys = [r[0] for r in rows]
    assert len(keys) == len(set(keys))
    assert {"data.train_src", "data.max_len_ratio", "bpe.vocab_size", "bpe.model"} <= set(keys)
    assert all(doc.strip() for *_, doc in rows)


def test_config_keys_say_where_each_key_applies() -> None:
    applies = {key: where for key, _, _, where, _ in describe_keys()}
    assert applies["model.heads"] == applies["model.norm"] == "transformer"
    assert applies["model.emb_dim"] == applies["model.attention_style"] == "rnn"
    assert applies["model.dropout"] == applies["model.tie_embeddings"] == applies["data.dir"] == "all"
    assert applies["model.max_positions"] == "transformer, positions: learned"
    assert applies["model.input_feeding"] == "rnn, attention_style: luong"
    assert applies["training.plateau_factor"] == "schedule: plateau"
    assert applies["training.init_keep"] == "init_from set"
    assert applies["training.diversity_penalty"] == "model.attention ≠ none (rnn), objective: ce"
    assert not any("[rnn]" in doc or "[transformer]" in doc for *_, doc in describe_keys())  # data now


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"model": {"arch": "rnn", "heads": 8}},
         r"^model\.heads applies only when model\.arch is transformer, and here it is rnn: remove "
         r"model\.heads"),
        ({"model": {"emb_dim": 64}}, r"^model\.emb_dim applies only when model\.arch is rnn"),
        ({"model": {"arch": "rnn", "input_feeding": False}},
         r"^model\.input_feeding applies only when model\.attention_style is luong, and here it is bahdanau"),
        ({"model": {"positions": "relative", "max_positions": 64}},
         r"^model\.max_positions applies only when model\.positions is learned"),
        ({"training": {"schedule": "noam", "plateau_patience": 5}},
         r"^training\.plateau_patience applies only when training\.schedule is plateau"),
        ({"training": {"ss_min": 0.5}},
         r"^training\.ss_min applies only when training\.scheduled_sampling is not none"),
        ({"training": {"init_from_sha256": "ab"}},
         r"^training\.init_from_sha256 is set but training\.init_from is not"),
        ({"model": {"arch": "rnn", "attention": "none"}, "training": {"diversity_penalty": 0.1}},
         r"^training\.diversity_penalty applies only when model\.attention is not none"),
        ({"decoding": {"length_norm": "average", "length_penalty": 0.6}},
         r"^decoding\.length_penalty applies only when decoding\.length_norm is gnmt"),
    ],
)
def test_a_key_that_cannot_apply_is_refused_in_one_line(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        from_dict(raw)
    assert "\n" not in str(refused.value)
    from_dict(raw, stored=True)  # a checkpoint's config written by an earlier version still loads


def test_keys_at_their_defaults_are_accepted_for_either_architecture(tmp_path: Path) -> None:
    """A resolved config.yaml holds every key: an RNN's holds the Transformer's keys at their defaults."""
    rnn = load_config(None, ["model.arch=rnn", "model.attention_style=luong", "model.input_feeding=false"])
    path = tmp_path / "config.yaml"
    save_config(rnn, path)
    assert load_config(path) == rnn
    back = ["model.arch=transformer", "model.attention_style=bahdanau", "model.input_feeding=true"]
    assert load_config(path, back).model.arch == "transformer"
    refused = r"config\.yaml: model\.attention_style applies only when model\.arch is rnn"
    with pytest.raises(ConfigError, match=refused):
        load_config(path, ["model.arch=transformer"])  # the RNN's own settings are not defaults


def test_the_check_can_be_limited_to_some_keys() -> None:
    cfg = from_dict({"model": {"arch": "rnn", "heads": 8}}, stored=True)
    check_applicable(cfg, ["model.dropout", "decoding.beam_size"])  # e.g. the keys a command line set
    with pytest.raises(ConfigError, match=r"^model\.heads"):
        check_applicable(cfg, ["model.heads"])


def test_character_coverage_takes_what_sentencepiece_takes() -> None:
    with pytest.raises(ConfigError, match=r"bpe\.character_coverage: 0\.9 is below the minimum 0\.98"):
        from_dict({"bpe": {"character_coverage": 0.9}})  # sentencepiece refuses below 0.98


def test_nan_and_inf_are_refused_and_the_file_is_named(tmp_path):
    """NaN passes every range check (all comparisons are false): it must be refused by name."""
    for text in (".nan", ".inf", "-.inf"):
        path = tmp_path / "c.yaml"
        path.write_text(f"training:\n  lr: {text}\n", encoding="utf-8")
        expected = rf"^{re.escape(str(path))}: training\.lr: expected a finite number"
        with pytest.raises(ConfigError, match=expected):
            load_config(path)
