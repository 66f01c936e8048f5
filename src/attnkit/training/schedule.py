"""Optimizers and learning-rate schedules (multipliers of train.lr by update step)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..config import TrainConfig
from ..errors import unknown_choice

SCHEDULES = ("inverse_sqrt", "constant", "linear", "cosine")
OPTIMIZERS = ("adam", "adamw")


def lr_multiplier(step: int, *, schedule: str, warmup: int, max_steps: int) -> float:
    """Linear warm-up to 1 over ``warmup`` steps, then:
    inverse_sqrt: sqrt(warmup / step) (Vaswani et al. 2017, eq. 3, rescaled to peak at 1);
    constant: 1; linear: down to 0 at max_steps; cosine: half a cosine to 0 at max_steps."""
    step = max(step, 1)
    if warmup > 0 and step < warmup:
        return step / warmup
    if schedule == "inverse_sqrt":
        return math.sqrt(max(warmup, 1) / step)
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise unknown_choice("train.schedule", schedule, SCHEDULES)


def build_optimizer(cfg: TrainConfig, params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    if cfg.optimizer not in OPTIMIZERS:
        raise unknown_choice("train.optimizer", cfg.optimizer, OPTIMIZERS)
    cls = torch.optim.Adam if cfg.optimizer == "adam" else torch.optim.AdamW
    # foreach: one fused multi-tensor update instead of a Python loop over parameters
    return cls(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, foreach=True)


def build_scheduler(cfg: TrainConfig, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    if cfg.schedule not in SCHEDULES:
        raise unknown_choice("train.schedule", cfg.schedule, SCHEDULES)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: lr_multiplier(step, schedule=cfg.schedule, warmup=cfg.warmup, max_steps=cfg.max_steps),
    )
