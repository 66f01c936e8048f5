"""Text -> tokenizer -> batches."""

from .batching import Batch, BucketBatcher, collate, inference_batches
from .text import ParallelText, read_lines, read_parallel
from .tokenizer import BOS, EOS, PAD, UNK, Tokenizer, readable

__all__ = [
    "BOS",
    "Batch",
    "BucketBatcher",
    "EOS",
    "PAD",
    "ParallelText",
    "Tokenizer",
    "UNK",
    "collate",
    "inference_batches",
    "read_lines",
    "read_parallel",
    "readable",
]
