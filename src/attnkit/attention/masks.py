"""Every attention mask in attnkit is built here.

Convention: boolean tensors where ``True`` means "this query may attend to this
key". Masks broadcast against scores of shape ``(b, h, t, s)``; the helpers
return the smallest broadcastable shape so nothing of size ``t * s`` is
materialised unless the mask really depends on both positions.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """Key padding mask from sequence lengths.

    Args:
        lengths: (b,) number of real tokens per sequence.
        max_len: padded length s; defaults to ``lengths.max()``.

    Returns:
        (b, s) bool, True on real tokens.
    """
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (b,), got shape {tuple(lengths.shape)}")
    s = int(lengths.max()) if max_len is None else max_len
    return torch.arange(s, device=lengths.device) < lengths[:, None]


def key_mask(keep: Tensor) -> Tensor:
    """(b, s) key padding mask -> (b, 1, 1, s), broadcastable to (b, h, t, s)."""
    if keep.dim() != 2:
        raise ValueError(f"a key padding mask must be (b, s), got shape {tuple(keep.shape)}")
    return keep[:, None, None, :]


def causal_mask(t: int, s: int | None = None, *, device: torch.device | None = None) -> Tensor:
    """Causal mask aligned to the bottom-right corner.

    Query i of the last ``t`` positions of an ``s``-long sequence may attend to
    keys ``0 .. s - t + i``; with ``s == t`` this is the usual lower triangle,
    with ``s > t`` it is the mask for incremental decoding over a cache.

    Returns:
        (t, s) bool.
    """
    s = t if s is None else s
    if s < t:
        raise ValueError(f"causal mask needs s >= t, got t={t}, s={s}")
    offset = s - t
    q = torch.arange(t, device=device)[:, None] + offset
    k = torch.arange(s, device=device)[None, :]
    return k <= q


def window_mask(centers: Tensor, s: int, half_width: int) -> Tensor:
    """Window mask: query i may attend to keys within ``half_width`` of ``centers[..., i]``.

    Args:
        centers: (..., t) window centres (float or int positions).
        s: number of keys.
        half_width: D, the window is [p - D, p + D] (Luong et al. 2015, sec. 3.2).

    Returns:
        (..., t, s) bool.
    """
    if half_width < 0:
        raise ValueError(f"window half-width must be >= 0, got {half_width}")
    k = torch.arange(s, device=centers.device)
    return (k - centers[..., None]).abs() <= half_width


def as_attention_mask(mask: Tensor | None) -> Tensor | None:
    """Normalise a user mask to 4-D, broadcastable to (b, h, t, s).

    Accepted: (t, s) shared by the batch; (b, t, s) or (b, 1, s) per sequence;
    (b, h|1, t|1, s) as is. Must be boolean.
    """
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise ValueError(f"masks are boolean (True = may attend), got dtype {mask.dtype}")
    if mask.dim() == 2:
        return mask[None, None]
    if mask.dim() == 3:
        return mask[:, None]
    if mask.dim() == 4:
        return mask
    raise ValueError(f"mask must have 2 (t, s), 3 (b, t, s) or 4 (b, h, t, s) dims, got shape {tuple(mask.shape)}")


def combine(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of broadcastable masks; ``None`` entries are ignored."""
    out: Tensor | None = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else out & m
    return out
