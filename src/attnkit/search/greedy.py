"""Greedy decoding: at every step take the most probable token. Batched; uses
only the model interface (encode, init_state, decode_step), so it serves the
RNN and the Transformer alike, and the Transformer's key/value caches mean the
prefix is never recomputed."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..data.tokenizer import BOS, EOS
from ..models.outputs import AttentionMaps


@dataclass
class Hypotheses:
    """tokens: one id list per sentence (no BOS/EOS); attention: per-step maps when asked."""

    tokens: list[list[int]]
    attention: list[AttentionMaps] | None = None


def max_output_length(src_mask: Tensor, ratio: float, extra: int) -> int:
    return int(src_mask.sum(1).max()) * ratio + extra if ratio > 0 else extra


@torch.inference_mode()
def greedy_search(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    *,
    max_len_ratio: float = 1.5,
    max_len_extra: int = 10,
    need_weights: bool = False,
) -> Hypotheses:
    """Decode a batch; src (b, s), src_mask (b, s)."""
    b = src.shape[0]
    state = model.init_state(model.encode(src, src_mask))
    max_len = int(max_output_length(src_mask, max_len_ratio, max_len_extra))
    prev = torch.full((b, 1), BOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(b, dtype=torch.bool, device=src.device)
    steps: list[Tensor] = []
    maps: list[AttentionMaps] = []
    for _ in range(max_len):
        out = model.decode_step(state, prev, need_weights=need_weights)
        nxt = out.logits[:, -1].argmax(-1)  # (b,)
        nxt = nxt.masked_fill(finished, EOS)
        steps.append(nxt)
        if need_weights:
            maps.append(out.attention)
        finished |= nxt == EOS
        if bool(finished.all()):
            break
        prev = nxt[:, None]
    ids = torch.stack(steps, 1).tolist()  # (b, T)
    tokens = [row[: row.index(EOS)] if EOS in row else row for row in ids]
    return Hypotheses(tokens, maps if need_weights else None)
