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
RNN and the Transformer share this code. Several models over one vocabulary decode
as an ensemble: each step's next-word distribution is the average of theirs,
log(1/M sum_m p_m), each model keeping its own state (fairseq's ensemble). With ``use_cache=True`` each step feeds
one token and the Transformer's key/value caches hold the prefix;
``use_cache=False`` recomputes the whole prefix every step (the baseline the cache
is measured against).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..attention import sites
from ..data.tokenizer import BOS, EOS
from ..models.interface import Seq2SeqModel
from .hypotheses import Hypothesis, SearchResult, alignments, length_penalty, max_lengths, stack_cross
from .options import SearchOptions
from .scoring import best_tokens, ensemble_best_tokens


@dataclass
class _Beams:
    """The live hypotheses of the sentences still decoding: ``k`` rows per sentence, in
    the order of ``active``, and each sentence's finished hypotheses in ``pending``."""

    k: int
    tokens: Tensor  # (n * k, 1 + t): BOS and the tokens so far
    scores: Tensor  # (n, k) log-probabilities
    active: list[int]  # sentence ids still decoding, in batch order
    pending: list[list[Hypothesis]]
    attn_hist: Tensor | None = None  # (n * k, layers, heads, t, s) cross-attention, when asked
    pt_hist: Tensor | None = None  # (n * k, t) local attention's p_t

    def record(self, heard: tuple[sites.Listener, ...]) -> None:
        """Append one step's cross-attention (and p_t), as its sites handed it over, to every row's history."""
        cross, p_t = stack_cross(heard)
        cross = cross[..., None, :]  # (n * k, L, h, 1, s)
        self.attn_hist = cross if self.attn_hist is None else torch.cat([self.attn_hist, cross], dim=3)
        if p_t is not None:
            self.pt_hist = p_t[:, None] if self.pt_hist is None else torch.cat([self.pt_hist, p_t[:, None]], dim=1)

    def finish(self, sid: int, row: int, raw: float, seq: Tensor, ended: bool, lp: float) -> None:
        """Sentence ``sid`` gains a finished hypothesis: row ``row``'s history, tokens ``seq``."""
        self.pending[sid].append(
            Hypothesis(
                tokens=seq.tolist(),
                score=raw / lp,
                log_prob=raw,
                finished=ended,
                attention=None if self.attn_hist is None else self.attn_hist[row].float().cpu().numpy(),
                p_t=None if self.pt_hist is None else self.pt_hist[row].float().cpu().numpy(),
            )
        )

    def keep(self, rows: Tensor) -> None:
        """Keep the attention history of rows ``rows`` (the state was reordered the same way)."""
        if self.attn_hist is not None:
            self.attn_hist = self.attn_hist.index_select(0, rows)
        if self.pt_hist is not None:
            self.pt_hist = self.pt_hist.index_select(0, rows)


@torch.inference_mode()
def beam_search(
    model: Seq2SeqModel | Sequence[Seq2SeqModel],
    src: Tensor,
    src_mask: Tensor,
    options: SearchOptions | None = None,
    *,
    need_weights: bool = False,
    use_cache: bool = True,
) -> SearchResult:
    """Decode a batch; src (b, s), src_mask (b, s). Returns ``options.searched`` hypotheses per
    sentence (``n_best``, or the whole beam for MBR to choose from), best first
    (``SearchOptions()``: beam 5, fairseq's length penalty). ``model``: one model, or several
    with one output vocabulary, decoded as an ensemble (no attention maps then: each member
    attends in its own way)."""
    options = options or SearchOptions()
    members = ensemble_members(model)
    if need_weights and len(members) > 1:
        raise ValueError("an ensemble has no single attention map: ask one of its models for attention")
    k, device, b = options.beam, src.device, src.shape[0]
    limits = max_lengths(src_mask, options.max_len_ratio, options.max_len_extra).tolist()

    states = [m.init_state(m.encode(src, src_mask)) for m in members]
    for state in states:
        state.expand(k)  # (b * k) rows: k beams per sentence
    bases = None if use_cache else [copy.deepcopy(state) for state in states]  # clean states to replay from
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # the first step expands one beam per sentence
    beams = _Beams(
        k, torch.full((b * k, 1), BOS, dtype=torch.long, device=device), scores, list(range(b)), [[] for _ in range(b)]
    )
    outputs = [m.output_projection for m in members]
    # the logits of every step are computed in the same memory (scoring.py); an ensemble needs two
    buffers = [torch.empty(b * k, outputs[0].weight.shape[0], device=device) for _ in range(min(len(members), 2))]
    step = 0
    heard = alignments(members[0], need_weights)
    while beams.active:
        hidden = []
        for m, state, base in zip(members, states, bases or [None] * len(members)):
            with sites.listening(*heard):
                if base is None:
                    out = m.decode_step(state, beams.tokens[:, -1:], project=False)
                else:
                    out = m.decode_step(copy.deepcopy(base), beams.tokens, project=False)
            if heard:
                beams.record(heard)
            assert out.hidden is not None  # every model returns its features
            hidden.append(out.hidden[:, -1])
        if len(members) == 1:
            best = best_tokens(outputs[0], hidden[0], 2 * k, buffers[0])
        else:
            best = ensemble_best_tokens(outputs, hidden, 2 * k, (buffers[0], buffers[1]))
        reorder, done = _advance(beams, best, step + 1, limits, options)
        if not beams.active:
            break
        # beams move only within their sentence unless sentences left: then the
        # encoder side (memory, cross-attention caches) needs no copy
        for state in bases or states:
            state.reorder(reorder, same_sources=not done)
        beams.keep(reorder)
        step += 1
    return SearchResult(
        [sorted(hyps, key=lambda h: h.score, reverse=True)[: options.searched] for hyps in beams.pending]
    )


def ensemble_members(model: Seq2SeqModel | Sequence[Seq2SeqModel]) -> list[Seq2SeqModel]:
    """The models to decode with: ``model`` itself, or the members of an ensemble, checked to
    share one output vocabulary."""
    members = list(model) if isinstance(model, Sequence) else [model]
    if not members:
        raise ValueError("an ensemble needs at least one model")
    sizes = [m.output_projection.weight.shape[0] for m in members]
    if len(set(sizes)) > 1:
        raise ValueError(
            f"the ensemble's models have different output vocabularies ({', '.join(map(str, sizes))} words)"
        )
    return members


def _advance(
    beams: _Beams,
    best: tuple[Tensor, Tensor, Tensor],
    length: int,
    limits: list[int],
    options: SearchOptions,
) -> tuple[Tensor, list[int]]:
    """One step for every live sentence: rank the continuations, finish the EOS ones, keep the
    best k others, and retire the sentences that are done. Returns the rows of the decoding
    state to keep (in their new order) and the batch indices of the sentences that left.
    ``best``: each row's 2k best words (``scoring.best_tokens``): their logits, ids and the
    row's log-normaliser."""
    k, n = beams.k, len(beams.active)
    alpha, penalty = options.length_alpha, options.penalty
    # The sentence's best 2k continuations are among each beam's best 2k words, so
    # rank those (n * k, 2k) instead of adding the score to all (n, k * V) log-probs.
    best_logits, best_words, lse = best  # (n * k, 2k), (n * k, 2k), (n * k, 1)
    device = best_logits.device
    width = best_logits.shape[1]
    cand = (beams.scores.view(n * k, 1) + (best_logits - lse)).view(n, k * width)
    top_scores, top_idx = cand.topk(2 * k, dim=1)  # (n, 2k)
    origin = top_idx // width  # which live beam each candidate extends
    word = best_words.view(n, k * width).gather(1, top_idx)
    rows = torch.arange(n, device=device)[:, None] * k + origin  # (n, 2k) flat beam rows

    # finish EOS candidates that rank within the top k
    eos = (word == EOS) & (torch.arange(2 * k, device=device) < k)
    if bool(eos.any()):
        lp = length_penalty(length, alpha, penalty)
        for i, j in eos.nonzero().tolist():
            r = int(rows[i, j])
            beams.finish(beams.active[i], r, float(top_scores[i, j]), beams.tokens[r, 1:], True, lp)

    # continue the best k non-EOS candidates
    keep = word != EOS
    chosen = keep & (keep.cumsum(1) <= k)  # exactly k per sentence: at most k candidates are EOS
    sel = chosen.nonzero()[:, 1].view(n, k)
    new_scores = top_scores.gather(1, sel)
    new_rows = rows.gather(1, sel).view(-1)
    new_words = word.gather(1, sel).view(-1, 1)

    # sentences that are done: enough finished hypotheses, out of length, or settled
    done = []
    best_live = new_scores[:, 0].tolist()  # candidates are ranked, so column 0 is each sentence's best
    for i, sid in enumerate(beams.active):
        if len(beams.pending[sid]) >= k or _settled(
            beams.pending[sid], options.searched, best_live[i], limits[sid], alpha, penalty
        ):
            done.append(i)
        elif length >= limits[sid]:  # out of length: the live hypotheses end here, unfinished
            lp = length_penalty(length, alpha, penalty)
            for j in range(k):
                r = int(new_rows[i * k + j])
                seq = torch.cat([beams.tokens[r, 1:], new_words[i * k + j]])
                beams.finish(sid, r, float(new_scores[i, j]), seq, False, lp)
            done.append(i)

    beams.tokens = torch.cat([beams.tokens.index_select(0, new_rows), new_words], dim=1)
    beams.scores = new_scores
    if not done:
        return new_rows, done
    finished_now = set(done)
    still = [i for i in range(n) if i not in finished_now]
    beams.active = [beams.active[i] for i in still]
    if not beams.active:
        return new_rows, done
    keep_rows = (torch.tensor(still, device=device)[:, None] * k + torch.arange(k, device=device)).view(-1)
    beams.tokens = beams.tokens.index_select(0, keep_rows)
    beams.scores = new_scores.index_select(0, torch.tensor(still, device=device))
    return new_rows.index_select(0, keep_rows), done


def _settled(finished: list[Hypothesis], n_best: int, best_live: float, limit: int, alpha: float, penalty: str) -> bool:
    """True when no live hypothesis (log-probability ``best_live`` at best) can finish above
    the ``n_best``-th finished one, at any length up to ``limit`` (see the module docstring)."""
    if len(finished) < n_best:
        return False
    nth = sorted((h.score for h in finished), reverse=True)[n_best - 1]
    return nth > best_live / length_penalty(limit, alpha, penalty)
