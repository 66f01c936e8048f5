"""Batched beam search with length penalty and n-best output.

Every sentence keeps ``beam`` live hypotheses. Each step scores all
continuations, keeps the best ``2 * beam`` candidates, finishes those that end
in EOS (ranked by log P / lp(|Y|), a length penalty: fairseq's |Y|^alpha by
default, or GNMT's ((5 + |Y|) / 6)^alpha) and continues the best ``beam``
others. A sentence is done when it has ``beam`` finished hypotheses or
reaches its length limit; done sentences leave the batch, so later steps only
compute what is still needed.

A sentence also stops as soon as it provably cannot change its n-best list:
extending a hypothesis only lowers its log-probability, and lp grows with the
length (alpha >= 0), so no live hypothesis can ever score above
best_live_log_prob / lp(length limit). Once the n-th best finished score beats
that bound, the remaining steps would only add hypotheses ranked below it: the
output is the same, without computing them.

Only the model interface is used (``models.Seq2SeqModel``: encode, init_state,
decode_step, output_projection, and the state's ``expand`` and ``reorder``), so the
RNN and the Transformer share this code. With ``use_cache=True`` each step feeds
one token and the Transformer's key/value caches hold the prefix;
``use_cache=False`` recomputes the whole prefix every step (the baseline the cache
is measured against).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from ..data.tokenizer import BOS, EOS
from ..models.interface import Seq2SeqModel
from .hypotheses import Hypothesis, SearchResult, length_penalty, max_lengths, stack_cross
from .options import SearchOptions
from .scoring import best_tokens


@torch.inference_mode()
def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    src_mask: Tensor,
    options: SearchOptions | None = None,
    *,
    need_weights: bool = False,
    use_cache: bool = True,
) -> SearchResult:
    """Decode a batch; src (b, s), src_mask (b, s). Returns ``options.n_best`` hypotheses per
    sentence, best first (``SearchOptions()``: beam 5, fairseq's length penalty)."""
    options = options or SearchOptions()
    alpha, penalty, k, n_best = options.length_alpha, options.penalty, options.beam, options.n_best
    device = src.device
    b = src.shape[0]
    limits = max_lengths(src_mask, options.max_len_ratio, options.max_len_extra).tolist()

    state = model.init_state(model.encode(src, src_mask))
    state.expand(k)  # (b * k) rows: k beams per sentence
    base = copy.deepcopy(state) if not use_cache else None  # a clean state to replay prefixes from

    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # the first step expands one beam per sentence
    tokens = torch.full((b * k, 1), BOS, dtype=torch.long, device=device)
    attn_hist: Tensor | None = None  # (n * k, layers, heads, t, s)
    pt_hist: Tensor | None = None  # (n * k, t)
    active = list(range(b))  # sentence ids still decoding, in batch order
    pending: list[list[Hypothesis]] = [[] for _ in range(b)]  # finished hypotheses per sentence

    def finish(sid: int, row: int, raw: float, seq: Tensor, ended: bool, lp: float) -> None:
        pending[sid].append(Hypothesis(
            tokens=seq.tolist(), score=raw / lp, log_prob=raw, finished=ended,
            attention=None if attn_hist is None else attn_hist[row].float().cpu().numpy(),
            p_t=None if pt_hist is None else pt_hist[row].float().cpu().numpy(),
        ))

    output = model.output_projection
    logits_buffer = torch.empty(b * k, output.weight.shape[0], device=device)  # reused by every step (scoring.py)
    step = 0
    while active:
        n = len(active)
        if use_cache:
            out = model.decode_step(state, tokens[:, -1:], need_weights=need_weights, project=False)
        else:
            replay = copy.deepcopy(base)
            out = model.decode_step(replay, tokens, need_weights=need_weights, project=False)
        if need_weights:
            cross, p_t = stack_cross(out.attention)
            cross = cross[..., None, :]  # (n * k, L, h, 1, s)
            attn_hist = cross if attn_hist is None else torch.cat([attn_hist, cross], dim=3)
            if p_t is not None:
                pt_hist = p_t[:, None] if pt_hist is None else torch.cat([pt_hist, p_t[:, None]], dim=1)

        # The sentence's best 2k continuations are among each beam's best 2k words, so
        # rank those (n * k, 2k) instead of adding the score to all (n, k * V) log-probs.
        best_logits, best_words, lse = best_tokens(output, out.hidden[:, -1], 2 * k, logits_buffer)  # (n * k, 2k)
        width = best_logits.shape[1]
        cand = (scores.view(n * k, 1) + (best_logits - lse)).view(n, k * width)
        top_scores, top_idx = cand.topk(2 * k, dim=1)  # (n, 2k)
        origin = top_idx // width  # which live beam each candidate extends
        word = best_words.view(n, k * width).gather(1, top_idx)
        rows = torch.arange(n, device=device)[:, None] * k + origin  # (n, 2k) flat beam rows
        length = step + 1

        # finish EOS candidates that rank within the top k
        eos = (word == EOS) & (torch.arange(2 * k, device=device) < k)
        if bool(eos.any()):
            lp = length_penalty(length, alpha, penalty)
            for i, j in eos.nonzero().tolist():
                r = int(rows[i, j])
                finish(active[i], r, float(top_scores[i, j]), tokens[r, 1:], True, lp)

        # continue the best k non-EOS candidates
        keep = word != EOS
        rank = keep.cumsum(1)
        chosen = keep & (rank <= k)  # exactly k per sentence: at most k candidates are EOS
        sel = chosen.nonzero()[:, 1].view(n, k)
        new_scores = top_scores.gather(1, sel)
        new_rows = rows.gather(1, sel).view(-1)
        new_words = word.gather(1, sel).view(-1, 1)

        # sentences that are done: enough finished hypotheses, out of length, or settled
        done = []
        best_live = new_scores[:, 0].tolist()  # candidates are ranked, so column 0 is each sentence's best
        for i, sid in enumerate(active):
            if len(pending[sid]) >= k or _settled(pending[sid], n_best, best_live[i], limits[sid], alpha, penalty):
                done.append(i)
            elif length >= limits[sid]:  # out of length: the live hypotheses end here, unfinished
                lp = length_penalty(length, alpha, penalty)
                for j in range(k):
                    r = int(new_rows[i * k + j])
                    seq = torch.cat([tokens[r, 1:], new_words[i * k + j]])
                    finish(sid, r, float(new_scores[i, j]), seq, False, lp)
                done.append(i)

        tokens = torch.cat([tokens.index_select(0, new_rows), new_words], dim=1)
        reorder = new_rows
        scores = new_scores
        if done:
            finished_now = set(done)
            still = [i for i in range(n) if i not in finished_now]
            active = [active[i] for i in still]
            if not active:
                break
            keep_rows = (torch.tensor(still, device=device)[:, None] * k + torch.arange(k, device=device)).view(-1)
            reorder = new_rows.index_select(0, keep_rows)
            tokens = tokens.index_select(0, keep_rows)
            scores = scores.index_select(0, torch.tensor(still, device=device))
        # beams move only within their sentence unless sentences left: then the
        # encoder side (memory, cross-attention caches) needs no copy
        (state if use_cache else base).reorder(reorder, same_sources=not done)
        if attn_hist is not None:
            attn_hist = attn_hist.index_select(0, reorder)
        if pt_hist is not None:
            pt_hist = pt_hist.index_select(0, reorder)
        step += 1

    return SearchResult([sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best] for hyps in pending])


def _settled(finished: list[Hypothesis], n_best: int, best_live: float, limit: int, alpha: float, penalty: str) -> bool:
    """True when no live hypothesis (log-probability ``best_live`` at best) can finish above
    the ``n_best``-th finished one, at any length up to ``limit`` (see the module docstring)."""
    if len(finished) < n_best:
        return False
    nth = sorted((h.score for h in finished), reverse=True)[n_best - 1]
    return nth > best_live / length_penalty(limit, alpha, penalty)
