"""A run's saved state: everything a resumed run needs to end where an uninterrupted one would
(the model, optimizer, schedule, progress and random-number generators, with the config), and
the weights of each validated step and of the best one so far."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..loading.model_dir import ModelDir, save_atomic
from .runlog import Progress


def save_state(path: Path, model: nn.Module, optimizer: Any, scheduler: Any, progress: Progress, config: dict) -> None:
    """The whole state of a run, written whole or not at all."""
    rng: dict[str, Tensor | list[Tensor]] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    full = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "progress": vars(progress).copy(),
        "rng": rng,
        "config": config,
    }
    save_atomic(full, path)


def restore_state(saved: dict, model: nn.Module, optimizer: Any, scheduler: Any) -> Progress:
    """``saved`` (``save_state``'s) put back into the model, optimizer, schedule and generators:
    the run's progress."""
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    torch.set_rng_state(saved["rng"]["torch"])
    if torch.cuda.is_available() and saved["rng"].get("cuda"):
        torch.cuda.set_rng_state_all(saved["rng"]["cuda"])
    return Progress(**saved["progress"])


def save_weights(md: ModelDir, model: nn.Module, step: int, *, best: bool, keep_last: int) -> None:
    """The weights at ``step`` (the ``keep_last`` latest steps are kept), and as the best so far
    where ``best`` (or where no best is saved yet)."""
    weights = {"model": model.state_dict(), "step": step}
    save_atomic(weights, md.checkpoints / f"step_{step}.pt")
    for old in md.step_checkpoints()[:-keep_last]:
        old.unlink(missing_ok=True)
    if best or not md.best.is_file():
        save_atomic(weights, md.best)
