"""What a training run says and hears: its log (JSON lines, TensorBoard), where it is (saved in
every checkpoint), the figures of the current log window, and the signals that ask it to stop."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from ..atomic import write_text


class RunLog:
    """Machine-readable log (JSON lines, always) plus TensorBoard (optional).

    ``resume_at``: the step a resumed run continues from. Entries past it (logged by the
    killed run after its last checkpoint) and the killed run's "end" entry are dropped,
    so the log reads as one run."""

    def __init__(self, path: Path, tensorboard_dir: Path | None, *, resume_at: int | None = None) -> None:
        if resume_at is not None and path.is_file():
            kept = [
                line
                for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                if _log_entry_before(line, resume_at)
            ]
            write_text(path, "".join(kept))
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (held open for the run, closed in close())
        self.tb = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise ValueError(
                    "train.tensorboard=true needs the tensorboard package: pip install tensorboard"
                ) from None
            self.tb = SummaryWriter(str(tensorboard_dir))

    def write(self, kind: str, step: int, **values: Any) -> None:
        record = {"kind": kind, "step": step, "time": round(time.time(), 3), **values}
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        if self.tb is not None:
            for k, v in values.items():
                if isinstance(v, (int, float)):
                    self.tb.add_scalar(f"{kind}/{k}", v, step)

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()


def _log_entry_before(line: str, step: int) -> bool:
    """Whether a log line belongs to the run up to ``step`` (a torn last line does not)."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return False
    return entry.get("kind") != "end" and entry.get("step", step + 1) <= step


@dataclass
class Progress:
    """Where training is: saved in every full checkpoint."""

    step: int = 0
    epoch: int = 0
    batch: int = 0  # next batch index within the epoch
    best: float | None = None
    bad_evals: int = 0
    train_seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Window:
    """Training figures summed since the last log line."""

    loss: Tensor | float = 0.0
    nll: Tensor | float = 0.0
    tokens: int = 0
    flops: float = 0.0  # model FLOPs of the updates (training.flops), of all ranks
    start: float = field(default_factory=time.perf_counter)

    def add(self, loss: Tensor | float, nll: Tensor | float, tokens: int, flops: float) -> None:
        self.loss, self.nll, self.tokens = self.loss + loss, self.nll + nll, self.tokens + tokens
        self.flops += flops

    def reset(self) -> None:
        self.loss = self.nll = 0.0
        self.tokens = 0
        self.flops = 0.0
        self.start = time.perf_counter()


class StopRequest:
    """SIGINT/SIGTERM ask the loop to stop after the current update and save."""

    def __init__(self) -> None:
        self.requested = False
        self.signal = 0  # the signal that asked (0: none yet)
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:  # a second signal: stop now
            raise KeyboardInterrupt
        self.requested, self.signal = True, signum

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
