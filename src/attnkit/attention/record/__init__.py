"""One record of every attention call, and its maps computed only where someone looks.

While a ``recording()`` is open, every attention site (``attention.sites``) hands each call
to the open ``Recorder``, which keeps it as one ``AttentionCall`` per batch row, with the
site's kind and layer: its queries and keys after positions (RoPE rotates
them first), the scale, the mask as a rule (causal, key padding) or a boolean tensor,
an additive bias (T5's buckets, Shaw's relative keys, ALiBi), and each query's
log-sum-exp of its scores, as FlashAttention keeps it (Dao et al. 2022, sec. 3.1). Any
weight is then exact without the map ever being formed:

    s_ij = scale * q_i . k_j + bias_ij  (-inf where the mask forbids j)
    w_ij = exp(s_ij - lse_i)

A score that does not factor through q . k (Luong's concat, a local window's Gaussian)
keeps its weights densely instead (``weights``); an RNN's maps are small.

``MapView`` answers, for one head (or the mean of heads) of one call: an exact block, the
whole map, an overview pooled to a given size (max or mean of the cells each pixel
covers), each query's strongest keys, and per-query statistics. Each is computed block
by block: at most ``block_size`` scores are in flight, so memory grows with t, not t x s.

Shapes: ``h`` query heads, ``h_kv`` key/value heads (grouped-query attention: query head
i reads key head i // (h / h_kv)), ``t`` queries, ``s`` keys, ``d`` per-head size.

    calls.py     AttentionCall: one call of one input; lse_of
    views.py     MapView and the every-head passes (head_stats, head_block, layer_overviews,
                 overviews_and_stats: both in one pass)
    recorder.py  Recorder (a site listener), recording(), active()
"""

from ..kernels import BLOCK, _lse_blockwise, additive_term, block_size, explicit, fused, fused_with_lse, groups
from ..sites import Tap
from .calls import AttentionCall, lse_of
from .recorder import Recorder, active, recording
from .views import HEAD_STATS, MapView, head_block, head_stats, layer_overviews, overviews_and_stats

__all__ = [
    "BLOCK",
    "HEAD_STATS",
    "AttentionCall",
    "MapView",
    "Recorder",
    "Tap",
    "_lse_blockwise",
    "active",
    "additive_term",
    "block_size",
    "explicit",
    "fused",
    "fused_with_lse",
    "groups",
    "head_block",
    "head_stats",
    "layer_overviews",
    "lse_of",
    "overviews_and_stats",
    "recording",
]
