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
retrieval        Wu et al. 2024: copy-paste from a needle. Where the tokens end with a copy of an
                 earlier span of at least NEEDLE tokens (the needle probe builds such inputs:
                 a needle in a haystack, then the needle again as the answer; so does a repeated
                 random sequence), each query whose next token is in the answer counts; it
                 copies when its strongest key lies in the needle and holds that next token.
                 The share of those queries that copy; Wu et al. call a head a retrieval head
                 past 0.1
sink             Xiao et al. 2023, Gu et al. 2024: w[i, 0], the weight on the first token; Gu et
                 al. count a head as a sink head when it exceeds 0.3. In causal attention, queries
                 that see at least SINK_KEYS keys: a query that sees three or fewer gives the first
                 token 0.3 or more when it spreads its weight evenly, so its weight there says
                 nothing of a sink (on short inputs those queries flagged every causal head)
positional       Voita et al. 2019: the share of queries whose strongest key is at one offset
                 o = j - i' (|o| <= 8), for the offset where that share is largest; Voita et
                 al. call a head positional when it is at least 0.9
rare_word        Voita et al. 2019: the share of queries whose strongest key is the rarest token
                 they may see, rarity counted over every input scored together (Voita et al.
                 count it over the training data); queries that see at least two keys
delimiter        Clark et al. 2019: the weight on delimiter tokens ([SEP], [CLS], <s>, </s>,
                 sentence and clause punctuation) after the first token (whose weight is the
                 sink score); their BERT heads put over half of it on [SEP]
broad            Clark et al. 2019: the entropy of a query's weights over log(keys it may
                 see): 1 = uniform (a bag-of-words head), 0 = one key
distance         sum_j w_ij |i' - j|: how far a query looks, in tokens (Vig and Belinkov 2019); self-
                 attention only (a target position and a source position are not one scale)

Which detectors apply depends on the attention: a query and key sequence that are the same
(self-attention) for the token detectors, a causal one for induction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..attention.record import AttentionCall, head_block

OFFSETS = 8  # the positional detector's offsets: -OFFSETS..OFFSETS
NEEDLE = 4  # the retrieval detector's shortest needle, in tokens
SINK_KEYS = 4  # causal queries the sink detector counts: those that see this many keys or more
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
    needs: str = ""  # what a query needs to be scored ("": every query is)

    def applies(self, *, self_attention: bool, causal: bool) -> bool:
        return (self_attention or not self.self_attention) and (causal or not self.causal)


DETECTORS = {
    d.name: d
    for d in (
        Detector("previous_token", True, False, 0.5, "Olsson et al. 2022", "weight on the token just before"),
        Detector(
            "duplicate_token",
            True,
            False,
            0.5,
            "Wang et al. 2022",
            "weight on earlier copies of its own token",
            "a token that repeats an earlier one (--probe repeated builds such inputs)",
        ),
        Detector(
            "induction",
            True,
            True,
            0.4,
            "Olsson et al. 2022",
            "weight on the token after an earlier copy",
            "a token whose previous token occurred earlier (--probe repeated builds such inputs)",
        ),
        Detector(
            "retrieval",
            True,
            True,
            0.1,
            "Wu et al. 2024",
            "share of answer tokens copied from the needle",
            f"an end that repeats an earlier span of {NEEDLE} or more tokens (--probe needle builds such inputs)",
        ),
        Detector("sink", False, False, 0.3, "Gu et al. 2024", "weight on the first token"),
        Detector(
            "positional", True, False, 0.9, "Voita et al. 2019", "share of queries whose top key is at one offset"
        ),
        Detector("rare_word", True, False, None, "Voita et al. 2019", "share of queries whose top key is the rarest"),
        Detector("delimiter", False, False, 0.5, "Clark et al. 2019", "weight on delimiters after the first token"),
        Detector("broad", False, False, None, "Clark et al. 2019", "entropy over log(keys): 1 = uniform"),
        Detector("distance", True, False, None, "Vig and Belinkov 2019", "mean distance attended, in tokens"),
    )
}


def applicable(*, self_attention: bool, causal: bool) -> list[str]:
    """The detectors that apply to an attention of this sort."""
    return [n for n, d in DETECTORS.items() if d.applies(self_attention=self_attention, causal=causal)]


def fitting(call: AttentionCall, queries: list[str], keys: list[str]) -> list[str]:
    """The detectors that apply to ``call``, an attention whose query and key tokens are
    ``queries`` and ``keys``: self-attention when the queries are the last keys, causal when its
    mask is."""
    t, s = len(queries), len(keys)
    own = s >= t and list(keys[s - t :]) == list(queries)
    return applicable(self_attention=own, causal=own and call.causal)


def _token_ids(queries: list[str], keys: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    codes: dict[str, int] = {}
    ids = [codes.setdefault(t, len(codes)) for t in list(keys) + list(queries)]
    return torch.tensor(ids[len(keys) :]), torch.tensor(ids[: len(keys)])


def copied_span(tokens: list[str], least: int = NEEDLE) -> tuple[int, int, int] | None:
    """Where ``tokens`` end with a copy of an earlier span: (the earlier copy's first position, the
    copy at the end's first position, its length), the longest such copy of at least ``least``
    tokens and its nearest earlier occurrence; None without one."""
    codes: dict[str, int] = {}
    text = "".join(chr(codes.setdefault(t, len(codes))) for t in tokens)  # one character per token
    n = len(text)

    def earlier(length: int) -> int:
        return text.rfind(text[n - length :], 0, n - length)  # the earlier copy ends before the copy at the end

    lo, hi = 0, n // 2  # the longest suffix found earlier: if length L is, so is L - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if earlier(mid) >= 0 else (lo, mid - 1)
    return (earlier(lo), n - lo, lo) if lo >= least else None


def frequencies(token_lists: list[list[str]]) -> dict[str, int]:
    """How often each token occurs over ``token_lists`` (the rare-word detector's rarity)."""
    counts: dict[str, int] = {}
    for tokens in token_lists:
        for t in tokens:
            counts[t] = counts.get(t, 0) + 1
    return counts


@dataclass
class Sums:
    """One call's detector scores before averaging: per detector the sum over the queries it
    applies to (h,) and how many those are (h,); the positional detector's counts of queries by
    the offset of their strongest key (h, 2 OFFSETS + 1) and of its queries (h,)."""

    sums: dict[str, torch.Tensor]
    counts: dict[str, torch.Tensor]
    hist: torch.Tensor

    def means(self) -> dict[str, np.ndarray]:
        out = {n: (self.sums[n] / self.counts[n].clamp_min(1)).cpu().numpy() for n in self.sums if n != "positional"}
        if "positional" in self.counts:
            out.update(positional(self.hist / self.counts["positional"].clamp_min(1)[:, None]))
        return out


@torch.no_grad()
def detect(
    call: AttentionCall,
    queries: list[str],
    keys: list[str],
    names: list[str] | None = None,
    frequency: dict[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """Every head's score (h,) under each detector in ``names`` (default: all that apply) for one
    recorded call whose query and key tokens are ``queries`` and ``keys``. For ``positional``
    also ``positional_offset`` (h,), the offset o = j - i' whose share it is, and
    ``positional_shares`` (h, 2 OFFSETS + 1), the share at every offset. ``frequency``: each
    token's count for the rare-word detector (default: counted over ``keys``)."""
    got = detect_sums(call, queries, keys, names, frequency)
    out = got.means()
    return {n: out[n] for n in [*got.sums, *got.counts, "positional_offset", "positional_shares"] if n in out}


@torch.no_grad()
def detect_sums(
    call: AttentionCall,
    queries: list[str],
    keys: list[str],
    names: list[str] | None = None,
    frequency: dict[str, int] | None = None,
) -> Sums:
    """``detect``'s scores as sums and counts over queries (``Sums``), to pool over inputs."""
    h, t, s = call.shape
    if len(queries) != t or len(keys) != s:
        raise ValueError(f"the call has {t} queries and {s} keys; got {len(queries)} and {len(keys)} tokens")
    fits = fitting(call, queries, keys)
    names = fits if names is None else names
    for n in names:
        if n not in DETECTORS:
            raise ValueError(f"unknown detector {n!r}; choose from {', '.join(DETECTORS)}")
        if n not in fits:
            need = "causal self-attention" if DETECTORS[n].causal else "self-attention"
            raise ValueError(f"the {n.replace('_', '-')} detector needs {need}; this attention is not")
    device = call.q.device if call.q is not None else call.weights.device  # type: ignore[union-attr]
    qid, kid = (x.to(device) for x in _token_ids(queries, keys))
    ctx = _Context(
        kid=kid,
        delim=torch.tensor([j > 0 and k in DELIMITERS for j, k in enumerate(keys)], device=device),  # 0: the sink
        nxt=torch.cat([kid[1:], kid.new_full((1,), -1)]),  # the token after each key position (-1: none)
        needle=copied_span(list(keys)) if "retrieval" in names else None,
        freq=_frequency(keys, frequency, device) if "rare_word" in names else None,
        causal=call.causal,
    )
    offset = s - t
    sums = {n: torch.zeros(h, dtype=torch.float64, device=device) for n in names if n != "positional"}
    counts = {n: torch.zeros(h, dtype=torch.float64, device=device) for n in names}
    hist = torch.zeros(h, 2 * OFFSETS + 1, dtype=torch.float64, device=device)
    for rows, w, valid, keys_seen in head_block(call):
        i = torch.arange(rows.start, rows.stop, device=device) + offset  # (r,) aligned to keys
        v = valid.double()
        for name, (score, applies) in _block_scores(w, keys_seen, i, qid[rows], ctx, names).items():
            use = v if applies is None else v * applies.double()[None, :]
            sums[name] += (score.double() * use).sum(-1)
            counts[name] += use.sum(-1)
        if "positional" in names:
            off = w.argmax(-1) - i[None, :]  # (h, r)
            near = (off.abs() <= OFFSETS) & valid
            hist.scatter_add_(1, (off.clamp(-OFFSETS, OFFSETS) + OFFSETS), near.double())
            counts["positional"] += v.sum(-1)
    return Sums(sums, counts, hist)


@dataclass
class _Context:
    """What the detectors need of the tokens: every key's id (s,), whether it is a delimiter, the
    token after each key position (s,), the needle (``copied_span``) and every key's count."""

    kid: torch.Tensor
    delim: torch.Tensor
    nxt: torch.Tensor
    needle: tuple[int, int, int] | None
    freq: torch.Tensor | None
    causal: bool


def _frequency(keys: list[str], frequency: dict[str, int] | None, device: torch.device) -> torch.Tensor:
    counts = frequency if frequency is not None else frequencies([list(keys)])
    return torch.tensor([float(counts.get(k, 0)) for k in keys], device=device)


Score = tuple[torch.Tensor, torch.Tensor | None]  # per head and query (h, r); the queries it applies to (r,)


def _block_scores(
    w: torch.Tensor, keys_seen: torch.Tensor, i: torch.Tensor, qid: torch.Tensor, ctx: _Context, names: list[str]
) -> dict[str, Score]:
    """Each detector's score of a block of rows: weights w (h, r, c), the queries' positions among
    the keys i (r,) and token ids qid (r,), and what the detectors need of the tokens (``ctx``)."""
    h, _, seen = w.shape
    j = torch.arange(seen, device=w.device)
    kid = ctx.kid
    out: dict[str, Score] = {}
    if "previous_token" in names:
        prev = (i - 1).clamp(0, seen - 1)
        out["previous_token"] = (w.gather(-1, prev[None, :, None].expand(h, -1, 1))[..., 0], (i >= 1) & (i - 1 < seen))
    if "duplicate_token" in names:
        same = _copies(kid[:seen], qid, i, j)  # (r, c)
        out["duplicate_token"] = ((w * same).sum(-1), same.any(-1))
    if "induction" in names:
        after = _after_copies(kid[:seen], qid, i, j)
        out["induction"] = ((w * after).sum(-1), after.any(-1))
    if "retrieval" in names:
        out["retrieval"] = _retrieval(w, i, ctx)
    if "sink" in names:
        out["sink"] = (w[..., 0], i + 1 >= SINK_KEYS if ctx.causal else None)
    if "rare_word" in names:
        out["rare_word"] = _rare_word(w, i, ctx)
    if "delimiter" in names:
        out["delimiter"] = ((w * ctx.delim[None, None, :seen]).sum(-1), None)
    if "broad" in names:
        ent = -torch.where(w > 0, w * torch.log(w.clamp_min(1e-45)), 0.0).sum(-1)
        out["broad"] = (torch.where(keys_seen > 1, ent / keys_seen.clamp_min(2).log(), 0.0), None)
    if "distance" in names:
        out["distance"] = ((w * (i[:, None] - j[None, :]).abs().float()).sum(-1), None)
    return out


def _copies(kid: torch.Tensor, qid: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """(queries, keys): key j is an earlier copy of the query's token (keys' ids ``kid`` at
    positions ``j``, queries' ids ``qid`` at positions ``i`` among the keys)."""
    return (kid[None, :] == qid[:, None]) & (j[None, :] < i[:, None])


def _after_copies(kid: torch.Tensor, qid: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """(queries, keys): key j follows an earlier copy of the query's token (the induction target)."""
    after = torch.zeros(len(qid), len(kid), dtype=torch.bool, device=kid.device)
    after[:, 1:] = kid[None, :-1] == qid[:, None]
    return after & (j[None, :] >= 1) & (j[None, :] < i[:, None])


def _retrieval(w: torch.Tensor, i: torch.Tensor, ctx: _Context) -> Score:
    """Wu et al.'s copy-paste: the query's next token is in the answer, and its strongest key lies
    in the needle and holds that token."""
    if ctx.needle is None:
        return torch.zeros(w.shape[:2], device=w.device), torch.zeros(len(i), dtype=torch.bool, device=w.device)
    first, answer, length = ctx.needle
    top = w.argmax(-1)  # (h, r)
    nxt = ctx.nxt[i]
    copies = (top >= first) & (top < first + length) & (ctx.kid[top] == nxt[None, :])
    return copies.float(), (i + 1 >= answer) & (nxt >= 0)


def _rare_word(w: torch.Tensor, i: torch.Tensor, ctx: _Context) -> Score:
    """Voita et al.'s rare-word head: the query's strongest key is the rarest token it may see."""
    freq = ctx.freq
    assert freq is not None
    seen = w.shape[-1]
    if ctx.causal:
        rarest = torch.cummin(freq[:seen], 0).values[i.clamp(max=seen - 1)]  # over the keys up to the query
    else:
        rarest = freq[:seen].min().expand(len(i))
    top = w.argmax(-1)
    sees = (i + 1 if ctx.causal else torch.full_like(i, seen)) >= 2
    return (freq[top] == rarest[None, :]).float(), sees


PATTERNS = ("previous_token", "duplicate_token", "induction", "sink", "delimiter")  # detectors that sum cells


def counted_cells(name: str, queries: list[str], keys: list[str], causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """The cells (queries, keys) whose weight a detector of ``PATTERNS`` sums for each query, and the
    queries it scores (queries,), on these tokens: the pattern a head of that role draws. Its score
    on a map is the mean over the scored queries of the weight in their cells."""
    if name not in PATTERNS:
        raise ValueError(f"the {name.replace('_', '-')} detector sums no cells; of {', '.join(PATTERNS)}")
    t, s = len(queries), len(keys)
    qid, kid = _token_ids(queries, keys)
    i = torch.arange(t) + (s - t)  # each query's position among the keys
    j = torch.arange(s)
    seen = j[None, :] <= i[:, None] if causal else torch.ones(t, s, dtype=torch.bool)
    if name == "previous_token":
        cells = j[None, :] == i[:, None] - 1
        rows = i >= 1
    elif name in ("duplicate_token", "induction"):
        cells = (_copies if name == "duplicate_token" else _after_copies)(kid, qid, i, j)
        rows = cells.any(-1)
    elif name == "sink":
        cells = (j == 0)[None, :].expand(t, s).clone()
        rows = i + 1 >= SINK_KEYS if causal else torch.ones(t, dtype=torch.bool)
    else:
        delim = torch.tensor([b > 0 and k in DELIMITERS for b, k in enumerate(keys)])
        cells = delim[None, :].expand(t, s).clone()
        rows = torch.ones(t, dtype=torch.bool)
    return (cells & seen & rows[:, None]).numpy(), rows.numpy()


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
