"""Compare two training runs by the weights of their last checkpoints."""

from __future__ import annotations

from pathlib import Path

import torch

from attnkit.loading.model_dir import load_checkpoint


def last_weights(run: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run / "checkpoints" / "last.pt")["model"]


def assert_same_weights(run: Path, reference: Path, *, atol: float = 0.0, key_bias_atol: float | None = None) -> None:
    """Every weight of ``run``'s last checkpoint equals ``reference``'s: bit for bit with ``atol`` 0,
    else within ``atol``. ``key_bias_atol``: the attention key biases' own bound. A key bias adds the
    same q.b_k to every score of a query, so softmax cancels it and its true gradient is 0: what it
    gets is rounding noise, which Adam divides by its own size into full steps."""
    ours, ref = last_weights(run), last_weights(reference)
    assert ours.keys() == ref.keys()
    for k in ref:
        a, b = ours[k], ref[k]
        if key_bias_atol is not None and k.endswith("attn.in_proj_bias"):
            d = b.shape[0] // 3
            torch.testing.assert_close(a[d : 2 * d], b[d : 2 * d], rtol=0, atol=key_bias_atol, msg=k)
            a, b = torch.cat([a[:d], a[2 * d :]]), torch.cat([b[:d], b[2 * d :]])
        if atol == 0.0:
            assert torch.equal(a, b), k
        else:
            torch.testing.assert_close(a, b, rtol=0, atol=atol, msg=k)
