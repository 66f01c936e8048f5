"""Reading and writing a configuration: YAML files, dotted overrides from the command line
(``model.layers=2``), unknown keys rejected with the nearest valid key suggested, and the flat
keys of older configs read into their subsections with one line naming the new key."""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from .rules import check_config
from .schema import Config, ImageConfig, RNNConfig, ScenesConfig, TransformerConfig, is_unread, unread


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check/convert one value to its declared type, naming the key on failure."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ValueError(f"config key {key!r} must be a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, key) for v, a in zip(value, args))
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"config key {key!r} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"config key {key!r} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config key {key!r} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"config key {key!r} must be a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp} for {key}")  # pragma: no cover - programming error


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"config section {prefix.rstrip('.') or '<top>'!r} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            valid = [f"{prefix}{n}" for n in names]
            close = difflib.get_close_matches(full, valid, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f" (valid here: {', '.join(names)})"
            raise ValueError(f"unknown config key {full!r}{hint}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(typing.cast(type, tp), value, f"{full}.")  # a field's hint: a class
        else:
            kwargs[key] = _coerce(value, tp, full)
    return cls(**kwargs)


def _set_dotted(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {dotted!r}: {p!r} is not a section")
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """``["model.layers=2", "train.bf16=true"]`` -> nested dict (values parsed as YAML)."""
    tree: dict[str, Any] = {}
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError:
            value = raw
        _set_dotted(tree, key.strip(), value)
    return tree


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# the keys a section held before it had one subsection per component, and where each is now
MOVED: dict[str, dict[str, str]] = {
    "model": {
        **{k: f"transformer.{k}" for k in (f.name for f in dataclasses.fields(TransformerConfig))},
        **{k: f"rnn.{k}" for k in (f.name for f in dataclasses.fields(RNNConfig))},
        **{"image_encoder": "image.encoder", "region": "image.region"},
    },
    "data": {
        "image_size": "scenes.image_size", "train_scenes": "scenes.train", "dev_scenes": "scenes.dev",
        "digits": "scenes.digits", "noise": "scenes.noise",
    },
}  # fmt: skip
assert set(MOVED["model"].values()) >= {f"image.{f.name}" for f in dataclasses.fields(ImageConfig)}
assert set(MOVED["data"].values()) == {f"scenes.{f.name}" for f in dataclasses.fields(ScenesConfig)}


def nest_moved_keys(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with each flat key of an older config (``model.heads``, ``data.digits``) in its
    subsection (``model.transformer.heads``, ``data.scenes.digits``), and a line naming each key
    so moved (``model.heads is now model.transformer.heads``). A key given both ways is refused."""
    out, moved = dict(data), []
    for top, keys in MOVED.items():
        section = data.get(top)
        if not isinstance(section, dict) or not any(k in keys for k in section):
            continue
        section = dict(section)
        for old in [k for k in section if k in keys]:
            sub, name = keys[old].split(".")
            inner = section.get(sub, {})
            if not isinstance(inner, dict):
                raise ValueError(f"config section '{top}.{sub}' must be a mapping, got {inner!r}")
            if name in inner:
                raise ValueError(f"config gives both {top}.{old} and {top}.{keys[old]}: keep {top}.{keys[old]}")
            section[sub] = {**inner, name: section.pop(old)}
            moved.append(f"{top}.{old} is now {top}.{keys[old]}")
        out[top] = section
    return out, moved


def config_from_dict(data: dict[str, Any], overrides: list[str] | None = None, *, name: str = "config") -> Config:
    """Build and check a config (``check_config``) from a mapping and dotted overrides. The flat
    keys of an older config are read into their sections, with one line on stderr naming the new
    keys (``name``: what to call the config in it)."""
    if not isinstance(data, dict):
        raise ValueError(
            f"a config must be a mapping of sections (data, tokenizer, model, train), got a {type(data).__name__}"
        )
    tree, moved = nest_moved_keys(_merge(data, parse_overrides(overrides or [])))
    if moved:
        print(f"note: {name}: " + ", ".join(moved), file=sys.stderr)
    cfg = _build(Config, tree, "")
    check_config(cfg)
    return cfg


def load_config(path: str | Path, overrides: list[str] | None = None, *, warn: bool = False) -> Config:
    """Read a YAML config, apply dotted overrides, validate every key and type. ``warn``: say on
    stderr which keys the config sets that its architecture or task does not read."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ValueError(f"config file {path} is not valid YAML{where}") from None
    except UnicodeDecodeError:
        raise ValueError(f"config file {path} is not UTF-8 text") from None
    if data is not None and not isinstance(data, dict):
        raise ValueError(
            f"config file {path} must hold a mapping of sections (data, tokenizer, model, train) "
            f"at its top level, not a {type(data).__name__}"
        )
    cfg = config_from_dict(data or {}, overrides, name=str(path))
    if warn:
        given, _ = nest_moved_keys(_merge(data or {}, parse_overrides(overrides or [])))
        ignored = given_but_ignored(given, cfg)
        if ignored:
            what = f"model.arch={cfg.model.arch}" + (", data.task=caption" if cfg.data.task == "caption" else "")
            print(f"warning: {path}: {', '.join(ignored)} do not apply to {what} and are ignored", file=sys.stderr)
    return cfg


def given_but_ignored(data: dict[str, Any], cfg: Config) -> list[str]:
    """The keys a config mapping sets that ``cfg`` does not read (``unread``), in the mapping's order."""
    skipped = unread(cfg)
    return [k for k in flat(data) if is_unread(k, skipped)]


def save_config(config: Config, path: str | Path) -> None:
    """Write ``config`` as YAML with only the sections and keys its architecture and task read."""
    from ..atomic import write_text

    tree = config.to_dict()
    for dotted in unread(config):
        *parents, name = dotted.split(".")
        node = tree
        for p in parents:
            node = node[p]
        node.pop(name, None)
    tree = {k: v for k, v in tree.items() if v != {}}
    write_text(path, yaml.safe_dump(tree, sort_keys=False))


def flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    """A nested mapping's leaves by dotted key."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out
