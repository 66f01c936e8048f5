"""Translate sentences with a trained model: tokenize -> batch -> search -> detokenize,
keeping each sentence's cross-attention (alignment) when asked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .data import Tokenizer, collate, inference_batches
from .search import greedy_search

EOS_LABEL = "</s>"


@dataclass
class Translation:
    """One output. ``alignment`` is (layers, heads, t, s) over ``out_pieces`` x ``src_pieces``
    (both ending in </s>); ``p_t`` the local-attention window centres (t,), if any."""

    source: str
    output: str
    src_pieces: list[str]
    out_pieces: list[str]
    alignment: np.ndarray | None = None
    p_t: np.ndarray | None = None


def translate(
    model: nn.Module,
    tok: Tokenizer,
    sentences: list[str],
    *,
    batch_tokens: int = 4096,
    need_weights: bool = False,
    max_len_ratio: float = 1.5,
    max_len_extra: int = 10,
) -> list[Translation]:
    device = next(model.parameters()).device
    src_ids = tok.encode_src(sentences)
    results: list[Translation | None] = [None] * len(sentences)
    for idx in inference_batches(src_ids, batch_tokens):
        batch = collate([src_ids[i] for i in idx], None, idx).to(device)
        hyp = greedy_search(
            model, batch.src, batch.src_mask, need_weights=need_weights,
            max_len_ratio=max_len_ratio, max_len_extra=max_len_extra,
        )
        outputs = tok.decode_tgt(hyp.tokens)
        if need_weights:
            # per layer: (b, h, T, s) over all decoding steps
            cross = [torch.cat([m.cross[layer] for m in hyp.attention], dim=2) for layer in range(len(hyp.attention[0].cross))]
            centres = torch.cat([m.p_t for m in hyp.attention], dim=1) if hyp.attention[0].p_t is not None else None
        for row, i in enumerate(idx):
            out_ids = hyp.tokens[row]
            tr = Translation(
                source=sentences[i],
                output=outputs[row],
                src_pieces=tok.src.encode(sentences[i], out_type=str) + [EOS_LABEL],
                out_pieces=tok.tgt_pieces(out_ids) + [EOS_LABEL],
            )
            if need_weights:
                t, s = len(out_ids) + 1, len(src_ids[i]) + 1
                tr.alignment = torch.stack([c[row, :, :t, :s] for c in cross]).float().cpu().numpy()
                if centres is not None:
                    tr.p_t = centres[row, :t].float().cpu().numpy()
            results[i] = tr
    return results  # type: ignore[return-value]
