"""Memory known before it is spent: what the system can still give, and one line when a step
would need more (a run is never ended by the operating system's out-of-memory killer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HEADROOM = 0.8  # of the memory available, what one step may plan to take


def available_bytes() -> int:
    """Memory the system can give without swapping (Linux's MemAvailable); elsewhere unbounded."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 62


def device_bytes(device: Any) -> int:
    """Memory free on an accelerator (CUDA's own count, and what PyTorch holds cached for reuse);
    the system's for the CPU."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(torch.cuda.mem_get_info(device)[0]) + cached
    return available_bytes()


def check_fits(need: int, what: str, hint: str, device: Any = None) -> None:
    """A ValueError saying how much ``what`` needs and what reduces it, when that exceeds what is
    free: on ``device`` when it is an accelerator, else in the system's memory."""
    free = available_bytes() if device is None else device_bytes(device)
    if need > HEADROOM * free:
        raise ValueError(f"{what} needs {need / 1e9:.1f} GB and {free / 1e9:.1f} GB is free: {hint}")
