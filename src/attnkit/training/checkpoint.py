"""Checkpoints: written atomically (temporary file, fsync, rename), read with
``weights_only=True``; averaging of the last N (Vaswani et al. 2017, sec. 6.1)."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch


def save_atomic(obj: Any, path: str | Path) -> None:
    """torch.save to a temporary file in the same directory, then rename over ``path``:
    a crash leaves either the old file or the new one, never a torn one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def load(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint safely; a missing or corrupt file is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError, OSError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"{path} is not a readable checkpoint ({reason[:120]})") from None
    if not isinstance(obj, dict) or "model" not in obj:
        raise ValueError(f"{path} is not an attnkit checkpoint (no model state)")
    return obj


def average(paths: list[str | Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model parameters of several checkpoints."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] | None = None
    dtypes: dict[str, torch.dtype] = {}
    for p in paths:
        state = load(p)["model"]
        if total is None:
            dtypes = {k: v.dtype for k, v in state.items()}
            total = {k: v.detach().clone().double() if v.is_floating_point() else v.clone() for k, v in state.items()}
            continue
        if state.keys() != total.keys():
            raise ValueError(f"{p} has different parameters from {paths[0]}; cannot average")
        for k, v in state.items():
            if v.is_floating_point():
                total[k] += v.double()
    n = len(paths)
    return {k: (v / n).to(dtypes[k]) if v.is_floating_point() else v for k, v in total.items()}
