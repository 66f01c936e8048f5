"""Greedy decoding: at every step take the most probable token. Batched; uses
only the model interface (encode, init_state, decode_step), so it serves the
RNN and the Transformer alike; the Transformer's key/value caches mean the
prefix is never recomputed."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..data.tokenizer import BOS, EOS
from .hypotheses import Hypothesis, SearchResult, max_lengths, stack_cross


@torch.inference_mode()
def greedy_search(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    *,
    max_len_ratio: float = 1.5,
    max_len_extra: int = 10,
    need_weights: bool = False,
) -> SearchResult:
    """Decode a batch; src (b, s), src_mask (b, s). Scores are summed log-probabilities."""
    b = src.shape[0]
    state = model.init_state(model.encode(src, src_mask))
    limits = max_lengths(src_mask, max_len_ratio, max_len_extra)
    prev = torch.full((b, 1), BOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(b, dtype=torch.bool, device=src.device)
    log_prob = torch.zeros(b, device=src.device)
    steps: list[Tensor] = []
    cross: list[Tensor] = []
    centres: list[Tensor] = []
    for step in range(int(limits.max())):
        out = model.decode_step(state, prev, need_weights=need_weights)
        logits = out.logits[:, -1].float()
        best, nxt = logits.max(-1)
        best_lp = best - torch.logsumexp(logits, dim=-1)  # the log-probability without a log-softmax pass
        nxt = nxt.masked_fill(finished, EOS)
        log_prob += best_lp.masked_fill(finished, 0.0)
        if need_weights:
            c, p = stack_cross(out.attention)
            cross.append(c)
            if p is not None:
                centres.append(p)
        steps.append(nxt)
        finished |= (nxt == EOS) | (step + 1 >= limits)
        if bool(finished.all()):
            break
        prev = nxt[:, None]
    ids = torch.stack(steps, 1).tolist()  # (b, T)
    nbest = []
    for i, row in enumerate(ids):
        ended = EOS in row
        tokens = row[: row.index(EOS)] if ended else row
        hyp = Hypothesis(tokens, float(log_prob[i]), float(log_prob[i]), finished=ended)
        if need_weights:
            t = len(tokens) + 1 if ended else len(tokens)
            hyp.attention = torch.stack([c[i] for c in cross[:t]], dim=2).float().cpu().numpy()  # (L, h, t, s)
            if centres:
                hyp.p_t = torch.stack([p[i] for p in centres[:t]]).float().cpu().numpy()
        nbest.append([hyp])
    return SearchResult(nbest)
