"""Typed config: example configs document every key; errors name the key."""

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from attnkit.config import Config, config_from_dict, load_config, parse_overrides, unread

CONFIGS = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))
SHIPPED = Path(__file__).parents[1] / "src" / "attnkit" / "shipped"


def all_keys(cls, prefix=""):
    """Every dotted leaf key of a config dataclass, its sections' keys included."""
    hints = typing.get_type_hints(cls)
    keys = set()
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        keys |= all_keys(tp, f"{prefix}{f.name}.") if dataclasses.is_dataclass(tp) else {prefix + f.name}
    return keys


def read_keys(cfg):
    """The keys a config's architecture and task read: every key outside ``unread``'s sections."""
    skipped = unread(cfg)
    return {k for k in all_keys(Config) if not any(k == s or k.startswith(f"{s}.") for s in skipped)}


def flat(d, prefix=""):
    out = set()
    for k, v in d.items():
        out |= flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k}
    return out


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_configs_list_exactly_the_keys_their_architecture_reads(path, capsys):
    cfg = load_config(path, warn=True)
    assert capsys.readouterr().err == ""
    assert flat(yaml.safe_load(path.read_text())) == read_keys(cfg)


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
        ("model.transformer.ffn=0", r"model.transformer.ffn=0 is out of range: it must be >= 1"),
        ("model.transformer.heads=0", r"model.transformer.heads=0 is out of range: it must be >= 1"),
        ("model.d_model=-32", r"model.d_model=-32 is out of range: it must be >= 1"),
        ("model.transformer.heads=3", r"model.d_model=128 is not divisible by model.transformer.heads=3"),
        ("model.dropout=1.0", r"model.dropout=1.0 is out of range: it must be >= 0 and < 1"),
        ("train.max_minutes=-1", r"train.max_minutes=-1.0 is out of range: it must be >= 0"),
        ("train.lr=0", r"train.lr=0.0 is out of range: it must be > 0"),
        ("train.betas=[0.9, 1.5]", r"train.betas=\[0.9, 1.5\] are out of range"),
        ("train.bleu_tokenize=bogus", r"unknown train.bleu_tokenize 'bogus'"),
        ("train.device=gpu", r"unknown train.device 'gpu'"),
        ("model.arch=rnn;model.rnn.hidden=255", r"model.rnn.hidden=255 must be even"),
        (
            "model.positions=rope;model.d_model=24;model.transformer.heads=8",
            r"head size d_model / heads = 3 must be even",
        ),
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
        value = Config()
        for name in key.split("."):
            value = getattr(value, name)
        rule.check(key, value)
    with pytest.raises(ValueError, match="model.arch=encoder has no decoder"):
        check_config(config_from_dict({}, ["model.arch=encoder"]), training=True)


def test_keys_of_another_architecture_are_warned_about_and_never_saved(tmp_path, capsys):
    from attnkit.config import load_config, save_config

    path = tmp_path / "rnn.yaml"
    path.write_text(
        "model:\n  arch: rnn\n  transformer:\n    heads: 8\n  rnn:\n    hidden: 64\ndata:\n  scenes:\n    train: 10\n"
    )
    cfg = load_config(path, ["model.transformer.ffn=512"], warn=True)
    err = capsys.readouterr().err.strip()
    assert (
        err.count("\n") == 0
        and "model.transformer.heads, model.transformer.ffn, data.scenes.train do not apply to model.arch=rnn" in err
    )
    assert "model.rnn.hidden" not in err  # an RNN key in an RNN config is read
    load_config(path, warn=False)
    assert capsys.readouterr().err == ""  # a model directory's config is read quietly
    save_config(cfg, tmp_path / "saved.yaml")
    saved = yaml.safe_load((tmp_path / "saved.yaml").read_text())
    assert saved["model"]["rnn"]["hidden"] == 64 and "transformer" not in saved["model"]
    assert "image" not in saved["model"] and "scenes" not in saved["data"]
    assert set(unread(cfg)) >= {"model.transformer", "model.positions", "model.image", "data.scenes"}
    again = load_config(tmp_path / "saved.yaml", warn=True)
    assert capsys.readouterr().err == "" and again.model.rnn.hidden == 64  # a saved config says only what it uses
    caption = load_config(tmp_path / "saved.yaml", ["data.task=caption", "model.rnn.attention=global"])
    assert "tokenizer" in unread(caption) and "model.positions" not in unread(caption)
    assert "model.image" not in unread(caption)


def test_a_flat_model_key_of_an_older_config_is_read_into_its_section(tmp_path, capsys):
    """Configs and model directories written before the model section had one section per
    component still read: one line names each key's new place, and the config is the same."""
    old = tmp_path / "old.yaml"
    old.write_text("model:\n  arch: rnn\n  hidden: 64\n  attention: local-p\n  window: 3\n")
    cfg = load_config(old)
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "model.hidden is now model.rnn.hidden, model.attention is now model.rnn.attention" in err
    nested = config_from_dict({"model": {"arch": "rnn", "rnn": {"hidden": 64, "attention": "local-p", "window": 3}}})
    assert cfg == nested and capsys.readouterr().err == ""
    assert config_from_dict({}, ["model.image_encoder=vit"]).model.image.encoder == "vit"
    with pytest.raises(ValueError, match=r"both model.heads and model.transformer.heads"):
        config_from_dict({"model": {"heads": 2, "transformer": {"heads": 4}}})


def test_a_flat_scenes_key_of_an_older_captioner_is_read_into_data_scenes(tmp_path, capsys):
    """A captioner's config written before ``data.scenes`` (a model directory's, say) still reads,
    with one line naming each key's new place; given both ways, a key is refused."""
    old = tmp_path / "old.yaml"
    old.write_text("data:\n  task: caption\n  image_size: 40\n  train_scenes: 12\n  digits: [1, 2]\n")
    cfg = load_config(old)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"note: {old}: ")
    assert "data.image_size is now data.scenes.image_size, data.train_scenes is now data.scenes.train" in err
    new = {"task": "caption", "scenes": {"image_size": 40, "train": 12, "digits": [1, 2]}}
    assert cfg == config_from_dict({"data": new}) and capsys.readouterr().err == ""
    assert (cfg.data.scenes.image_size, cfg.data.scenes.train, cfg.data.scenes.digits) == (40, 12, (1, 2))
    assert config_from_dict({}, ["data.task=caption", "data.noise=0.1"]).data.scenes.noise == 0.1  # an override too
    with pytest.raises(ValueError, match=r"both data.dev_scenes and data.scenes.dev: keep data.scenes.dev"):
        config_from_dict({"data": {"dev_scenes": 2, "scenes": {"dev": 4}}})
    with pytest.raises(ValueError, match=r"config section 'data.scenes' must be a mapping"):
        config_from_dict({"data": {"digits": [1, 2], "scenes": 3}})


@pytest.mark.parametrize("name", sorted(p.name for p in SHIPPED.iterdir() if (p / "config.yaml").is_file()))
def test_installed_models_configs_read_quietly(name, capsys):
    load_config(SHIPPED / name / "config.yaml", warn=True)
    assert capsys.readouterr().err == ""
