"""Greedy decoding: at every step take the most probable token. Batched; uses
only the model interface (``models.Seq2SeqModel``), so it serves the RNN and the
Transformer alike; the Transformer's key/value caches mean the prefix is never
recomputed."""

from __future__ import annotations

import torch
from torch import Tensor

from ..attention import sites
from ..data.tokenizer import BOS, EOS
from ..models.interface import Seq2SeqModel
from .hypotheses import Hypothesis, SearchResult, alignments, max_lengths, stack_cross
from .options import SearchOptions
from .scoring import best_tokens


@torch.inference_mode()
def greedy_search(
    model: Seq2SeqModel,
    src: Tensor,
    src_mask: Tensor,
    options: SearchOptions | None = None,
    *,
    need_weights: bool = False,
) -> SearchResult:
    """Decode a batch; src (b, s), src_mask (b, s). Scores are summed log-probabilities.
    Of ``options`` only the length limit applies (beam and length penalty do not).
    ``need_weights``: each hypothesis keeps its cross-attention, heard at the model's sites."""
    options = options or SearchOptions(beam=1)
    b = src.shape[0]
    device = src.device
    state = model.init_state(model.encode(src, src_mask))
    limits = max_lengths(src_mask, options.max_len_ratio, options.max_len_extra)
    prev = torch.full((b, 1), BOS, dtype=torch.long, device=device)
    finished = torch.zeros(b, dtype=torch.bool, device=device)
    ended = torch.zeros(b, dtype=torch.bool, device=device)  # produced EOS (not cut by the length limit)
    log_prob = torch.zeros(b, device=device)
    rows = torch.arange(b, device=device)  # the sentence each row of the state decodes
    out_ids = torch.full((b, int(limits.max())), EOS, dtype=torch.long, device=device)
    cross: list[tuple[Tensor, Tensor]] = []  # (rows, weights) per step
    centres: list[tuple[Tensor, Tensor]] = []
    output = model.output_projection
    logits_buffer = torch.empty(b, output.weight.shape[0], device=device)  # reused by every step
    heard = alignments(model, need_weights)
    for step in range(int(limits.max())):
        with sites.listening(*heard):
            out = model.decode_step(state, prev, project=False)
        assert out.hidden is not None  # every model returns its features
        best, nxt, lse = best_tokens(output, out.hidden[:, -1], 1, logits_buffer)
        best_lp = (best - lse).squeeze(1)  # log-probability, no log-softmax pass
        done = finished[rows]  # finished, not yet dropped from the batch
        nxt = nxt.squeeze(1).masked_fill(done, EOS)
        log_prob[rows] += best_lp.masked_fill(done, 0.0)
        ended[rows] |= nxt == EOS
        out_ids[rows, step] = nxt
        if heard:
            c, p = stack_cross(heard)
            cross.append((rows, c))
            if p is not None:
                centres.append((rows, p))
        finished[rows] = (nxt == EOS) | (step + 1 >= limits[rows])
        alive = ~finished[rows]
        n_alive = int(alive.sum())
        if n_alive == 0:
            break
        if n_alive <= 0.75 * len(rows):  # drop finished sentences from the batch (copies the caches once)
            keep = alive.nonzero().squeeze(1)
            state.reorder(keep)
            rows, nxt = rows[keep], nxt[keep]
        prev = nxt[:, None]
    ids = out_ids[:, : step + 1].tolist()  # (b, T): EOS after each sentence's end
    nbest = []
    for i, (row, eos, limit) in enumerate(zip(ids, ended.tolist(), limits.tolist())):
        tokens = row[: row.index(EOS)] if eos else row[:limit]
        hyp = Hypothesis(tokens, float(log_prob[i]), float(log_prob[i]), finished=eos)
        if need_weights:
            t = len(tokens) + 1 if eos else len(tokens)
            hyp.attention = _row_history(cross, i, t).float().cpu().numpy()  # (L, h, t, s)
            if centres:
                hyp.p_t = _row_history(centres, i, t, dim=0).float().cpu().numpy()
        nbest.append([hyp])
    return SearchResult(nbest)


def _row_history(history: list[tuple[Tensor, Tensor]], sentence: int, t: int, dim: int = 2) -> Tensor:
    """Stack sentence ``sentence``'s slices of the first ``t`` steps (rows shrink as sentences finish)."""
    parts = []
    for rows, values in history[:t]:
        (where,) = (rows == sentence).nonzero(as_tuple=True)
        parts.append(values[int(where[0])])
    return torch.stack(parts, dim=dim)
