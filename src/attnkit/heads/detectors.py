"""What each head does, by the published definitions, streamed from one attention record.

Every detector scores every head of one attention call from its weights w_ij (query i, key
j; keys aligned to queries as causal masks align them: query i sits at key position
i' = i + s - t), averaged over the queries it applies to. All of them are computed in one
pass over blocks of rows with every head at once, so memory grows with t, not t x s, at any
length. A detector that needs the tokens compares their labels (the same label is the same
token).

previous_token   Olsson et al. 2022 (and TransformerLens' detector): w[i, i'-1], the weight on
                 the token just before the query; queries with one before them
duplicate_token  Wang et al. 2022 (IOI's duplicate-token heads; TransformerLens): the weight on
                 earlier occurrences of the query's own token, sum over j < i' with tok_j =
                 tok_i; queries whose token occurred before
induction        Olsson et al. 2022: the weight on the token after an earlier occurrence of the
                 query's token (prefix matching), sum over 1 <= j < i' with tok_{j-1} = tok_i;
                 queries whose token occurred at least two positions before. On a random
                 sequence repeated twice this is TransformerLens' induction score: the
                 diagonal i' - (n - 1) of the second half
sink             Xiao et al. 2023, Gu et al. 2024: w[i, 0], the weight on the first token; Gu et
                 al. count a head as a sink head when it exceeds 0.3
positional       Voita et al. 2019: the share of queries whose strongest key is at one offset
                 o = j - i' (|o| <= 8), for the offset where that share is largest; Voita et
                 al. call a head positional when it is at least 0.9
delimiter        Clark et al. 2019: the weight on delimiter tokens ([SEP], [CLS], <s>, </s>,
                 sentence and clause punctuation) after the first token (whose weight is the
                 sink score); their BERT heads put over half of it on [SEP]
broad            Clark et al. 2019: the entropy of a query's weights over log(keys it may
                 see): 1 = uniform (a bag-of-words head), 0 = one key
distance         sum_j w_ij |i' - j|: how far a query looks, in tokens (Vig and Belinkov 2019)

Which detectors apply depends on the attention: a query and key sequence that are the same
(self-attention) for the token detectors, a causal one for induction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..attention.record import AttentionCall, head_block

OFFSETS = 8  # the positional detector's offsets: -OFFSETS..OFFSETS
DELIMITERS = frozenset(
    {"[SEP]", "[CLS]", "<s>", "</s>", "<eos>", "<bos>", "<|endoftext|>", ".", ",", ";", ":", "!", "?"}
)


@dataclass(frozen=True)
class Detector:
    """One kind of head: its name, what it needs of the attention, the paper's threshold (a head
    at or past it is flagged; None: the detector ranks heads, flags none) and what it says."""

    name: str
    self_attention: bool  # queries and keys are one sequence
    causal: bool  # and each query sees only the keys up to itself
    threshold: float | None
    paper: str
    means: str

    def applies(self, *, self_attention: bool, causal: bool) -> bool:
        return (self_attention or not self.self_attention) and (causal or not self.causal)


DETECTORS = {
    d.name: d
    for d in (
        Detector("previous_token", True, False, 0.5, "Olsson et al. 2022", "weight on the token just before"),
        Detector("duplicate_token", True, False, 0.5, "Wang et al. 2022", "weight on earlier copies of its own token"),
        Detector("induction", True, True, 0.4, "Olsson et al. 2022", "weight on the token after an earlier copy"),
        Detector("sink", False, False, 0.3, "Gu et al. 2024", "weight on the first token"),
        Detector(
            "positional", True, False, 0.9, "Voita et al. 2019", "share of queries whose top key is at one offset"
        ),
        Detector("delimiter", False, False, 0.5, "Clark et al. 2019", "weight on delimiters after the first token"),
        Detector("broad", False, False, None, "Clark et al. 2019", "entropy over log(keys): 1 = uniform"),
        Detector("distance", False, False, None, "Vig and Belinkov 2019", "mean distance attended, in tokens"),
    )
}


def applicable(*, self_attention: bool, causal: bool) -> list[str]:
    """The detectors that apply to an attention of this sort."""
    return [n for n, d in DETECTORS.items() if d.applies(self_attention=self_attention, causal=causal)]


def _token_ids(queries: list[str], keys: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    codes: dict[str, int] = {}
    ids = [codes.setdefault(t, len(codes)) for t in list(keys) + list(queries)]
    return torch.tensor(ids[len(keys) :]), torch.tensor(ids[: len(keys)])


@torch.no_grad()
def detect(
    call: AttentionCall, queries: list[str], keys: list[str], names: list[str] | None = None
) -> dict[str, np.ndarray]:
    """Every head's score (h,) under each detector in ``names`` (default: all that apply) for one
    recorded call whose query and key tokens are ``queries`` and ``keys``. For ``positional``
    also ``positional_offset`` (h,), the offset o = j - i' whose share it is, and
    ``positional_shares`` (h, 2 OFFSETS + 1), the share at every offset."""
    h, t, s = call.shape
    if len(queries) != t or len(keys) != s:
        raise ValueError(f"the call has {t} queries and {s} keys; got {len(queries)} and {len(keys)} tokens")
    self_attention = s >= t and list(keys[s - t :]) == list(queries)
    causal = self_attention and call.causal
    fits = applicable(self_attention=self_attention, causal=causal)
    names = fits if names is None else names
    for n in names:
        if n not in DETECTORS:
            raise ValueError(f"unknown detector {n!r}; choose from {', '.join(DETECTORS)}")
        if n not in fits:
            need = "causal self-attention" if DETECTORS[n].causal else "self-attention"
            raise ValueError(f"the {n.replace('_', '-')} detector needs {need}; this attention is not")
    device = call.q.device if call.q is not None else call.weights.device  # type: ignore[union-attr]
    qid, kid = (x.to(device) for x in _token_ids(queries, keys))
    delim = torch.tensor([j > 0 and k in DELIMITERS for j, k in enumerate(keys)], device=device)  # 0: the sink
    offset = s - t
    sums = {n: torch.zeros(h, dtype=torch.float64, device=device) for n in names}
    counts = {n: torch.zeros(h, dtype=torch.float64, device=device) for n in names}
    hist = torch.zeros(h, 2 * OFFSETS + 1, dtype=torch.float64, device=device)
    for rows, w, valid, keys_seen in head_block(call):
        i = torch.arange(rows.start, rows.stop, device=device) + offset  # (r,) aligned to keys
        v = valid.double()
        for name, (score, applies) in _block_scores(w, keys_seen, i, qid[rows], kid, delim, names).items():
            use = v if applies is None else v * applies.double()[None, :]
            sums[name] += (score.double() * use).sum(-1)
            counts[name] += use.sum(-1)
        if "positional" in names:
            off = w.argmax(-1) - i[None, :]  # (h, r)
            near = (off.abs() <= OFFSETS) & valid
            hist.scatter_add_(1, (off.clamp(-OFFSETS, OFFSETS) + OFFSETS), near.double())
            counts["positional"] += v.sum(-1)
    out = {n: (sums[n] / counts[n].clamp_min(1)).cpu().numpy() for n in names if n != "positional"}
    if "positional" in names:
        out.update(positional(hist / counts["positional"].clamp_min(1)[:, None]))
    return {n: out[n] for n in [*names, "positional_offset", "positional_shares"] if n in out}


Score = tuple[torch.Tensor, torch.Tensor | None]  # per head and query (h, r); the queries it applies to (r,)


def _block_scores(
    w: torch.Tensor,
    keys_seen: torch.Tensor,
    i: torch.Tensor,
    qid: torch.Tensor,
    kid: torch.Tensor,
    delim: torch.Tensor,
    names: list[str],
) -> dict[str, Score]:
    """Each detector's score of a block of rows: weights w (h, r, c), the queries' positions among
    the keys i (r,) and token ids qid (r,), every key's id kid (s,) and whether it is a delimiter."""
    h, _, seen = w.shape
    j = torch.arange(seen, device=w.device)
    out: dict[str, Score] = {}
    if "previous_token" in names:
        prev = (i - 1).clamp(0, seen - 1)
        out["previous_token"] = (w.gather(-1, prev[None, :, None].expand(h, -1, 1))[..., 0], (i >= 1) & (i - 1 < seen))
    if "duplicate_token" in names:
        same = (kid[None, :seen] == qid[:, None]) & (j[None, :] < i[:, None])  # (r, c)
        out["duplicate_token"] = ((w * same).sum(-1), same.any(-1))
    if "induction" in names:
        after = torch.zeros(len(i), seen, dtype=torch.bool, device=w.device)  # key j follows a copy of the query
        after[:, 1:] = kid[None, : seen - 1] == qid[:, None]
        after &= (j[None, :] >= 1) & (j[None, :] < i[:, None])
        out["induction"] = ((w * after).sum(-1), after.any(-1))
    if "sink" in names:
        out["sink"] = (w[..., 0], None)
    if "delimiter" in names:
        out["delimiter"] = ((w * delim[None, None, :seen]).sum(-1), None)
    if "broad" in names:
        ent = -torch.where(w > 0, w * torch.log(w.clamp_min(1e-45)), 0.0).sum(-1)
        out["broad"] = (torch.where(keys_seen > 1, ent / keys_seen.clamp_min(2).log(), 0.0), None)
    if "distance" in names:
        out["distance"] = ((w * (i[:, None] - j[None, :]).abs().float()).sum(-1), None)
    return out


def positional(shares: torch.Tensor | np.ndarray) -> dict[str, np.ndarray]:
    """From each head's shares of queries by the offset of their strongest key (..., 2 OFFSETS + 1):
    the largest share (``positional``), its offset, and the shares themselves."""
    shares = torch.as_tensor(shares)
    best = shares.max(-1)
    return {
        "positional": best.values.cpu().numpy(),
        "positional_offset": (best.indices - OFFSETS).cpu().numpy(),
        "positional_shares": shares.cpu().numpy(),
    }
