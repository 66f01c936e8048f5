"""A model directory holds everything needed to use a trained model later:

    config.yaml              the resolved configuration
    spm.joint.model          sentencepiece model(s) (or spm.src.model + spm.tgt.model)
    checkpoints/last.pt      full training state (model, optimizer, schedule, RNG, data position)
    checkpoints/best.pt      model weights at the best validation score
    checkpoints/step_N.pt    model weights of the last K validations (for averaging)
    log.jsonl                every logged figure, one JSON object per line
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .config import Config, load_config
from .data.tokenizer import PAD, Tokenizer
from .models import build_model
from .training import checkpoint

CHECKPOINT_CHOICES = ("best", "last", "average")


@dataclass
class ModelDir:
    path: Path

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def last(self) -> Path:
        return self.checkpoints / "last.pt"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best.pt"

    @property
    def log(self) -> Path:
        return self.path / "log.jsonl"

    def step_checkpoints(self) -> list[Path]:
        """step_N.pt files, oldest first."""
        found = [(int(m.group(1)), p) for p in self.checkpoints.glob("step_*.pt") if (m := re.fullmatch(r"step_(\d+)\.pt", p.name))]
        return [p for _, p in sorted(found)]

    def has_run(self) -> bool:
        return self.last.is_file()


def load_model(
    path: str | Path, *, checkpoint_name: str = "best", average_last: int = 0, device: str | torch.device = "cpu"
) -> tuple[nn.Module, Tokenizer, Config]:
    """Rebuild a trained model from its directory, in eval mode.

    checkpoint_name: "best", "last", or "average" (of the last ``average_last`` step checkpoints, all if 0).
    """
    md = ModelDir(Path(path))
    if not md.path.is_dir():
        raise FileNotFoundError(f"model directory not found: {md.path}")
    if not md.config_path.is_file():
        raise FileNotFoundError(f"{md.path} is not a model directory (no config.yaml)")
    cfg = load_config(md.config_path)
    tok = Tokenizer.load(md.path)
    model = build_model(
        cfg.model, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=PAD, shared_vocab=tok.joint
    )
    if checkpoint_name == "average":
        steps = md.step_checkpoints()
        if not steps:
            raise FileNotFoundError(f"no step checkpoints to average in {md.checkpoints}")
        state = checkpoint.average(steps[-average_last:] if average_last > 0 else steps)
    elif checkpoint_name in ("best", "last"):
        state = checkpoint.load(md.best if checkpoint_name == "best" else md.last)["model"]
    else:
        raise ValueError(f"unknown checkpoint {checkpoint_name!r} (valid: {', '.join(CHECKPOINT_CHOICES)})")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).splitlines()[1].strip() if len(str(err).splitlines()) > 1 else str(err)
        raise ValueError(f"checkpoint does not fit the model in {md.config_path}: {first[:200]}") from None
    return model.to(device).eval(), tok, cfg
