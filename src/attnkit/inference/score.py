"""How probable a model finds given outputs: log P(y | x) of (source, target) pairs by teacher
forcing, in length-sorted batches.

The same number beam search accumulates for an output it found (the sum over the output's tokens
and its </s> of each token's log probability), computed for any target: a reference, another
model's translation, or, with a reverse model (German -> English), the source sentence given
each candidate translation (``rerank``). Several models (one vocabulary) score as an ensemble, as
they decode: each token's probability is the mean of theirs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data import Tokenizer, collate, inference_batches
from ..data.tokenizer import PAD
from ..models.interface import Seq2SeqModel


@dataclass(frozen=True)
class PairScores:
    """Per pair: ``log_prob`` the sum of its target tokens' log probabilities (</s> included),
    ``tokens`` how many that is (the target's subwords + 1)."""

    log_prob: np.ndarray
    tokens: np.ndarray

    @property
    def per_token(self) -> np.ndarray:
        """Mean log probability per target token."""
        return self.log_prob / self.tokens


def score_pairs(
    model: Seq2SeqModel | Sequence[Seq2SeqModel],
    tok: Tokenizer,
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    batch_tokens: int = 4096,
) -> PairScores:
    """log P(targets[i] | sources[i]) under ``model`` (in eval mode), each pair's tokens
    encoded by ``tok``; for several models, each token's log(1/M sum_m p_m). Pairs are batched
    by length (``batch_tokens`` padded tokens of the longer side); the result is in the given
    order and does not depend on the batching."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    if batch_tokens < 1:
        raise ValueError(f"batch_tokens must be >= 1, got {batch_tokens}")
    src_ids, tgt_ids = tok.encode_src(list(sources)), tok.encode_tgt(list(targets))
    log_prob = np.zeros(len(sources), dtype=np.float64)
    tokens = np.array([len(t) + 1 for t in tgt_ids], dtype=np.int64)
    if not len(sources):
        return PairScores(log_prob, tokens)
    longer = [s if len(s) >= len(t) else t for s, t in zip(src_ids, tgt_ids)]
    models = list(model) if isinstance(model, Sequence) else [model]
    device = next(models[0].parameters()).device
    with torch.inference_mode():
        for batch_idx in inference_batches(longer, batch_tokens):
            batch = collate([src_ids[i] for i in batch_idx], [tgt_ids[i] for i in batch_idx], batch_idx).to(device)
            assert batch.tgt_in is not None and batch.tgt_out is not None
            each = []
            for m in models:
                logits = m(batch.src, batch.src_mask, batch.tgt_in).logits
                assert logits is not None
                picked = torch.log_softmax(logits.float(), dim=-1).gather(-1, batch.tgt_out.unsqueeze(-1))
                each.append(picked.squeeze(-1))
            if len(each) > 1:  # log of the models' mean probability
                picked = torch.logsumexp(torch.stack(each, -1), -1) - math.log(len(each))
            else:
                picked = each[0]
            sums = picked.masked_fill(batch.tgt_out == PAD, 0.0).sum(-1, dtype=torch.float64)
            log_prob[batch_idx] = sums.cpu().numpy()
    return PairScores(log_prob, tokens)
