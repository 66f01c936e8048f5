"""Loss, optimizer and schedule, and the training loop."""

from .loss import LossSums, label_smoothed_loss
from .schedule import build_optimizer, build_scheduler, lr_multiplier

__all__ = ["LossSums", "build_optimizer", "build_scheduler", "label_smoothed_loss", "lr_multiplier"]
