"""Data-parallel training over several processes, started by torchrun.

    torchrun --nproc_per_node=2 -m attnkit train config.yaml            # one machine
    torchrun --nnodes=2 --node_rank=R --rdzv_endpoint=HOST:PORT \\
             --nproc_per_node=8 -m attnkit train config.yaml            # several

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK; without them (or with
WORLD_SIZE=1) training is the ordinary single process and nothing here is used.
Dataset-level inspection (`attnkit attribute --input`, `attnkit heads`) shares its sentences
out the same way (``map_sharded``).
The backend is gloo on CPU and nccl on CUDA (one GPU per local rank).

How the work is split (``Trainer.train``): every rank builds the same epoch of
batches from the same seed; an update takes the next ``accumulate x world``
batches and rank r trains on every world-th of them. The loss is divided by the
target tokens of the whole update (known to every rank from the batch lengths,
no communication), then DistributedDataParallel averages the gradients, so an
update equals one process training on the union of the batches. Rank 0 alone
validates, logs and writes checkpoints; its decisions to stop (time budget,
SIGTERM, early stopping) are broadcast so every rank leaves the loop together.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np
import torch
import torch.distributed as dist

from ..data import BucketBatcher

if TYPE_CHECKING:
    from ..data import ImageBatcher

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """The rank that logs, validates and writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def flags_from_main(self, *flags: bool) -> tuple[bool, ...]:
        """Rank 0's booleans, on every rank (so all ranks take the same branch)."""
        if not self.distributed:
            return flags
        t = torch.tensor([int(f) for f in flags], dtype=torch.int32, device=_comm_device())
        dist.broadcast(t, src=0)
        return tuple(bool(v) for v in t.tolist())

    def sum(self, *values: float | torch.Tensor) -> list[float]:
        """Sums over ranks of a few scalars (for logging)."""
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_comm_device())
        if self.distributed:
            dist.all_reduce(t)
        return t.tolist()

    def close(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()


def _comm_device() -> torch.device:
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def setup(device: torch.device) -> tuple[World, torch.device]:
    """Join the process group torchrun describes (if any); returns the world and this rank's device."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World(), device
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ValueError(f"local rank {local_rank} has no GPU: this machine has {torch.cuda.device_count()}")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return World(rank, size, local_rank), device


def map_sharded(
    items: Sequence[T],
    fn: Callable[[T], R],
    *,
    device: torch.device | None = None,
    everywhere: bool = False,
    keep: bool = False,
) -> list[R] | None:
    """``fn`` over ``items`` shared out over the processes torchrun started (rank r takes items
    r, r + world, ...; gloo on CPU, nccl on CUDA): every result in the order of ``items`` on rank 0
    (``everywhere``: on every rank), None on the others. Without torchrun, a plain map. Errors are
    raised on every rank. The process group is left for the next call when ``keep``; the last
    call closes it."""
    world, _ = setup(device or torch.device("cpu"))
    if not world.distributed:
        return [fn(x) for x in items]
    try:
        mine: list[R] | str = [fn(x) for x in items[world.rank :: world.size]]
    except ValueError as err:  # one line, on rank 0 too, not a hang
        mine = str(err)
    parts: list[list[R] | str | None] = [None] * world.size
    dist.all_gather_object(parts, mine)
    failed = [p for p in parts if isinstance(p, str)]
    if not keep or failed:
        world.close()
    if failed:
        raise ValueError(failed[0])
    if not world.main and not everywhere:
        return None
    out: list[R | None] = [None] * len(items)
    for rank, part in enumerate(parts):
        out[rank :: world.size] = cast(list, part)
    return cast(list[R], out)


def wrap(model: torch.nn.Module, world: World, device: torch.device) -> torch.nn.Module:
    """DistributedDataParallel around the model when there is more than one rank."""
    if not world.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, output_device=ids[0] if ids else None)


def sampling(batcher: BucketBatcher | ImageBatcher) -> BucketBatcher | None:
    """``batcher`` when it segments each epoch afresh (subword sampling), else None."""
    return batcher if isinstance(batcher, BucketBatcher) and batcher.samples else None


def epoch_batches(batcher: BucketBatcher | ImageBatcher, world: World, epoch: int) -> list[np.ndarray]:
    """The batches of ``epoch`` on this rank. With subword sampling rank 0 draws the epoch's
    segmentation and the other ranks read its draw back: every rank must cut the same batches."""
    if sampling(batcher) is None or not world.distributed:
        return batcher.epoch(epoch)
    batches = batcher.epoch(epoch) if world.main else []
    world.barrier()
    return batches if world.main else batcher.epoch(epoch)
