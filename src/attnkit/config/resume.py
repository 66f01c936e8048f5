"""Resuming a run: which keys a resumed run may change, and the check that refuses the others."""

from __future__ import annotations

from typing import Any

from .files import config_from_dict, flat
from .schema import Config

# Keys a resumed run may change: how long and how it is watched, and the optimisation
# settings that do not touch the model, the data order or the saved optimizer's shape.
RESUMABLE = {
    "data.multi30k",
    "data.max_dev_sentences",
    "train.device",
    "train.max_steps",
    "train.max_minutes",
    "train.lr",
    "train.weight_decay",
    "train.schedule",
    "train.time_schedule",
    "train.warmup",
    "train.label_smoothing",
    "train.clip_norm",
    "train.bf16",
    "train.compile",
    "train.eval_every",
    "train.bleu_every",
    "train.bleu_tokenize",
    "train.patience",
    "train.keep_last",
    "train.log_every",
    "train.tensorboard",
    "train.attention_snapshots",
}


def resume_changes(saved: dict[str, Any], requested: Config) -> list[tuple[str, Any, Any]]:
    """(key, saved value, requested value) for each key a resumed run changes, checked: a key
    outside ``RESUMABLE`` (the model's shape, the tokenizer, the data, the seed, the batches)
    does not fit the checkpoint and is refused with its name."""
    before, after = flat(config_from_dict(saved, name="the saved run's config").to_dict()), flat(requested.to_dict())
    changes = [(k, before[k], after[k]) for k in after if k != "out_dir" and before.get(k) != after[k]]
    refused = [c for c in changes if c[0] not in RESUMABLE]
    if refused:
        key, old, new = refused[0]
        more = f" (and {', '.join(c[0] for c in refused[1:])})" if len(refused) > 1 else ""
        raise ValueError(
            f"cannot change {key} when resuming ({old!r} in the checkpoint, {new!r} now){more}: "
            "it does not fit the saved run; train into a new out_dir instead"
        )
    return changes
