"""Typed config: example configs document every key; errors name the key."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from attnkit.config import Config, config_from_dict, load_config, parse_overrides

CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))


def all_keys(cls, prefix=""):
    keys = set()
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(f.type) or (isinstance(f.type, str) and f.type.endswith("Config")):
            sub = {"data": "DataConfig", "tokenizer": "TokenizerConfig", "model": "ModelConfig", "train": "TrainConfig"}
            import attnkit.config as c

            keys |= all_keys(getattr(c, sub[f.name]), f"{prefix}{f.name}.")
        else:
            keys.add(prefix + f.name)
    return keys


def flat(d, prefix=""):
    out = set()
    for k, v in d.items():
        out |= flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k}
    return out


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_configs_load_and_document_every_key(path):
    load_config(path)
    assert flat(yaml.safe_load(path.read_text())) == all_keys(Config)


def test_unknown_key_suggests_the_nearest():
    with pytest.raises(ValueError, match=r"unknown config key 'model.d_modle'; did you mean 'model.d_model'\?"):
        config_from_dict({"model": {"d_modle": 3}})
    with pytest.raises(ValueError, match=r"unknown config key 'trian'"):
        config_from_dict({"trian": {}})


def test_types_are_checked_with_the_key_named():
    with pytest.raises(ValueError, match=r"config key 'model.d_model' must be an integer, got 'big'"):
        config_from_dict({"model": {"d_model": "big"}})
    with pytest.raises(ValueError, match=r"config key 'train.bf16' must be true or false"):
        config_from_dict({}, ["train.bf16=maybe"])
    with pytest.raises(ValueError, match=r"config key 'train.betas' must be a list of 2 values"):
        config_from_dict({"train": {"betas": [0.9]}})


def test_dotted_overrides():
    cfg = config_from_dict({"model": {"d_model": 64}}, ["model.layers=2", "train.bf16=true", "train.lr=1e-3"])
    assert (cfg.model.encoder_layers, cfg.model.decoder_layers, cfg.model.d_model) == (2, 2, 64)
    assert cfg.train.bf16 is True and cfg.train.lr == 1e-3
    assert parse_overrides(["a.b=[1, 2]"]) == {"a": {"b": [1, 2]}}
    with pytest.raises(ValueError, match="must look like section.key=value"):
        parse_overrides(["model.layers"])


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  d_model: [1,\n")
    with pytest.raises(ValueError, match=r"not valid YAML at line \d"):
        load_config(bad)
