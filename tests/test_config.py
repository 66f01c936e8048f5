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
def test_example_configs_list_exactly_the_keys_their_architecture_reads(path, capsys):
    from attnkit.config import ignored_keys

    cfg = load_config(path, warn=True)
    assert capsys.readouterr().err == ""
    assert flat(yaml.safe_load(path.read_text())) == all_keys(Config) - set(ignored_keys(cfg))


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
    listed = tmp_path / "list.yaml"
    listed.write_text("- model\n- train\n")
    with pytest.raises(ValueError, match="must hold a mapping of sections .* at its top level, not a list"):
        load_config(listed)


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.layers=-2", r"model.layers=-2 is out of range: it must be >= 1"),
        ("model.ffn=0", r"model.ffn=0 is out of range: it must be >= 1"),
        ("model.heads=0", r"model.heads=0 is out of range: it must be >= 1"),
        ("model.d_model=-32", r"model.d_model=-32 is out of range: it must be >= 1"),
        ("model.heads=3", r"model.d_model=128 is not divisible by model.heads=3"),
        ("model.dropout=1.0", r"model.dropout=1.0 is out of range: it must be >= 0 and < 1"),
        ("train.max_minutes=-1", r"train.max_minutes=-1.0 is out of range: it must be >= 0"),
        ("train.lr=0", r"train.lr=0.0 is out of range: it must be > 0"),
        ("train.betas=[0.9, 1.5]", r"train.betas=\[0.9, 1.5\] are out of range"),
        ("train.bleu_tokenize=bogus", r"unknown train.bleu_tokenize 'bogus'"),
        ("train.device=gpu", r"unknown train.device 'gpu'"),
        ("model.arch=rnn;model.hidden=255", r"model.hidden=255 must be even"),
        ("model.positions=rope;model.d_model=24;model.heads=8", r"head size d_model / heads = 3 must be even"),
        ("tokenizer.vocab_size=4", r"tokenizer.vocab_size=4 is out of range: it must be >= 8"),
        ("tokenizer.sampling=1", r"tokenizer.sampling=1.0 is out of range: it must be >= 0 and < 1"),
        ("train.time_schedule=true", r"train.time_schedule needs train.max_minutes > 0"),
    ],
)
def test_ranges_and_choices_are_checked_with_the_key_named(override, message):
    with pytest.raises(ValueError, match=message):
        config_from_dict({}, override.split(";"))


def test_every_rule_names_a_real_key_and_the_choices_match_the_code():
    from attnkit.config import RNN_CELLS, RULES, check_config
    from attnkit.models.rnn import CELLS

    assert set(RULES) <= all_keys(Config)
    assert tuple(CELLS) == RNN_CELLS
    for key, rule in RULES.items():  # the defaults pass their own rules
        section, name = key.split(".")
        rule.check(key, getattr(getattr(Config(), section), name))
    with pytest.raises(ValueError, match="model.arch=encoder has no decoder"):
        check_config(config_from_dict({}, ["model.arch=encoder"]), training=True)


def test_keys_of_another_architecture_are_warned_about_and_never_saved(tmp_path, capsys):
    import yaml

    from attnkit.config import ignored_keys, load_config, save_config

    path = tmp_path / "rnn.yaml"
    path.write_text("model:\n  arch: rnn\n  heads: 8\n  hidden: 64\ndata:\n  train_scenes: 10\n")
    cfg = load_config(path, ["model.ffn=512"], warn=True)
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "model.heads, model.ffn, data.train_scenes do not apply to model.arch=rnn" in err
    assert "model.hidden" not in err  # an RNN key in an RNN config is read
    load_config(path, warn=False)
    assert capsys.readouterr().err == ""  # a model directory's config is read quietly
    save_config(cfg, tmp_path / "saved.yaml")
    saved = yaml.safe_load((tmp_path / "saved.yaml").read_text())
    assert saved["model"]["hidden"] == 64 and "heads" not in saved["model"] and "train_scenes" not in saved["data"]
    assert set(ignored_keys(cfg)) >= {"model.heads", "model.positions", "model.region", "data.digits"}
    again = load_config(tmp_path / "saved.yaml", warn=True)
    assert capsys.readouterr().err == "" and again.model.hidden == 64  # a saved config says only what it uses
    caption = load_config(tmp_path / "saved.yaml", ["data.task=caption", "model.attention=global"])
    assert "tokenizer.vocab_size" in ignored_keys(caption) and "model.positions" not in ignored_keys(caption)
