"""Optimizers and learning-rate schedules (multipliers of train.lr by update step)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn

from ..config import OPTIMIZERS, SCHEDULES, TrainConfig
from ..errors import unknown_choice


def lr_multiplier(
    step: int, *, schedule: str, warmup: int, max_steps: int, time_fraction: float | None = None
) -> float:
    """Linear warm-up to 1 over ``warmup`` steps, then:
    inverse_sqrt: sqrt(warmup / step) (Vaswani et al. 2017, eq. 3, rescaled to peak at 1);
    constant: 1; linear: down to 0 at max_steps; cosine: half a cosine to 0 at max_steps.

    time_fraction (share of a time budget used, 0..1): linear and cosine decay by
    whichever is further along, the steps or the clock, so a run limited by
    train.max_minutes still ends its schedule at 0 (budgeted training, Li et al. 2020)."""
    step = max(step, 1)
    if warmup > 0 and step < warmup:
        return step / warmup
    if schedule == "inverse_sqrt":
        return math.sqrt(max(warmup, 1) / step)
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    if time_fraction is not None:
        progress = min(1.0, max(progress, time_fraction))
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


def build_scheduler(
    cfg: TrainConfig, optimizer: torch.optim.Optimizer, clock: Callable[[], float] | None = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """clock: seconds of training so far; needed when ``cfg.time_schedule`` is on."""
    if cfg.schedule not in SCHEDULES:
        raise unknown_choice("train.schedule", cfg.schedule, SCHEDULES)
    budget = cfg.max_minutes * 60.0
    if cfg.time_schedule and (budget <= 0 or clock is None):
        raise ValueError("train.time_schedule needs train.max_minutes > 0 (the budget the schedule decays over)")

    def multiplier(step: int) -> float:
        frac = clock() / budget if cfg.time_schedule and clock is not None else None  # a clock: checked above
        return lr_multiplier(
            step, schedule=cfg.schedule, warmup=cfg.warmup, max_steps=cfg.max_steps, time_fraction=frac
        )

    return torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
