"""Text -> tokenizer -> batches; images (digit scenes) -> batches."""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .batching import (
        Batch,
        BucketBatcher,
        ImageBatcher,
        collate,
        collate_images,
        inference_batches,
    )
    from .text import ParallelText, read_lines, read_parallel
    from .tokenizer import BOS, EOS, PAD, UNK, Tokenizer, readable

exports(
    __name__,
    {
        "batching": ("Batch", "BucketBatcher", "ImageBatcher", "collate", "collate_images", "inference_batches"),
        "text": ("ParallelText", "read_lines", "read_parallel"),
        "tokenizer": ("BOS", "EOS", "PAD", "UNK", "Tokenizer", "readable"),
    },
)

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "UNK",
    "Batch",
    "BucketBatcher",
    "ImageBatcher",
    "ParallelText",
    "Tokenizer",
    "collate",
    "collate_images",
    "inference_batches",
    "read_lines",
    "read_parallel",
    "readable",
]
