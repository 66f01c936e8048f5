"""Loss, optimizer and schedule, checkpoints, and the training loop."""

from . import checkpoint
from .loss import LossSums, label_smoothed_loss
from .schedule import build_optimizer, build_scheduler, lr_multiplier

__all__ = ["LossSums", "build_optimizer", "build_scheduler", "checkpoint", "label_smoothed_loss", "lr_multiplier"]
