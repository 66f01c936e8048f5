"""Model FLOP utilisation: what a training update computes, as a share of what the machine can.

``update_flops`` counts the matrix-multiply FLOPs of one update from the layer sizes and the
lengths of the sentences in its batches (forward + backward = 3 x forward, 2 FLOPs per
multiply-add), the way nanoGPT's ``estimate_mfu`` does for a decoder: useful work only, so
padding, masks, softmax and the optimizer count for nothing and any time they take lowers the
figure. ``matmul_peak`` measures the ceiling on the same device: the FLOP/s of a large square
float32 matrix product (not a data-sheet number). MFU = update FLOPs / update time / peak.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

import numpy as np
import torch

from ..config import ModelConfig


def transformer_flops(m: ModelConfig, src_lens: Sequence[int], tgt_lens: Sequence[int], vocab: int) -> float:
    """One forward + backward of the encoder-decoder Transformer on sentences of these lengths
    (in positions, EOS/BOS included): Q, K, V, O and the FFN per token, the score and mixing
    matmuls per pair of positions (causal self-attention counted whole, as computed), the
    cross-attention's K, V on the source, and the output layer on every target token."""
    s, t = np.asarray(src_lens, dtype=np.float64), np.asarray(tgt_lens, dtype=np.float64)
    d, f = m.d_model, m.transformer.ffn
    enc = m.encoder_layers * (s.sum() * (4 * d * d + 2 * d * f) + 2 * (s * s).sum() * d)
    dec = m.decoder_layers * (
        t.sum() * (4 * d * d + 2 * d * d + 2 * d * f)  # self Q, K, V, O; cross Q, O; FFN
        + s.sum() * 2 * d * d  # cross K, V
        + 2 * (t * t).sum() * d
        + 2 * (t * s).sum() * d
    )
    return 3 * 2 * float(enc + dec + t.sum() * d * vocab)


def rnn_flops(m: ModelConfig, src_lens: Sequence[int], tgt_lens: Sequence[int], vocab: int) -> float:
    """The same count for the RNN encoder-decoder: the gates of the bidirectional encoder (hidden/2
    per direction) and of the decoder (input feeding widens the first layer's input by hidden),
    the score's projections, scores and context over the source (the
    window's 2D+1 positions for local attention), the attentional layer W_c and the output layer."""
    s, t = np.asarray(src_lens, dtype=np.float64), np.asarray(tgt_lens, dtype=np.float64)
    e, h = m.d_model, m.rnn.hidden
    gates = 4 if m.rnn.cell == "lstm" else 3
    enc = sum(2 * gates * (h // 2) * ((e if i == 0 else h) + h // 2) for i in range(m.encoder_layers)) * s.sum()
    first = e + h if m.rnn.input_feeding else e
    dec = sum(gates * h * ((first if i == 0 else h) + h) for i in range(m.decoder_layers)) * t.sum()
    # "general" projects each query (W_a^T h_t), concat and additive project queries and keys
    projections = {"general": t.sum(), "concat": t.sum() + s.sum(), "additive": t.sum() + s.sum()}
    span = s if m.rnn.attention == "global" else np.minimum(s, 2 * m.rnn.window + 1)
    predict = t.sum() * h * h if m.rnn.attention == "local-p" else 0.0  # p_t = S sigmoid(v_p^T tanh(W_p h_t))
    att = projections.get(m.rnn.score, 0.0) * h * h + predict + 2 * (t * span).sum() * h + t.sum() * 2 * h * h
    return 3 * 2 * float(enc + dec + att + t.sum() * h * vocab)


def update_flops(m: ModelConfig, src_lens: Sequence[int], tgt_lens: Sequence[int], vocab: int) -> float | None:
    """Model FLOPs of one update over sentences of these lengths; None for an architecture without
    a formula here (captioners)."""
    formula = FORMULAS.get(m.arch)
    return None if formula is None else formula(m, src_lens, tgt_lens, vocab)


FORMULAS = {"transformer": transformer_flops, "rnn": rnn_flops}  # an encoder-decoder's architecture, counted


@functools.cache
def matmul_peak(device: str = "cpu", n: int = 1024, reps: int = 5, threads: int = 0) -> float:
    """Measured float32 FLOP/s of an n x n matrix product on ``device``, best of ``reps``: the
    ceiling MFU is taken against (n = 1024 reaches the large-matrix rate on CPUs in milliseconds;
    take n = 8192 on a GPU). Cached per device, size and CPU thread count."""
    dev = torch.device(device)
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.mm(a, b)
    sync()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def device_peak(device: torch.device) -> float:
    """``matmul_peak`` at the size that reaches the device's rate: 1024 on a CPU, 8192 on a GPU."""
    if device.type == "cuda":
        return matmul_peak(str(device), n=8192, reps=5)
    return matmul_peak("cpu", n=1024, reps=10, threads=torch.get_num_threads())  # about 0.1 s
