"""Key-value cache policies against their budget, replayed on the installed ``stdlib-lm``: the loss
of the last tokens of held-out standard-library code with every head over each policy's cache
(``attnkit.attention.caches``, applied in the forward pass itself), as StreamingLLM, H2O and SnapKV
plot quality against cache size.

    python benchmarks/cache_policies.py                    # a few minutes on 2 cores

Inputs: consecutive 256-token windows of the held-out files (``stdlib_lm.py``'s split; the model
was trained on 256-token windows); each scored on its last 64 tokens, which every policy reaches
with a full cache (SnapKV's prompt is the first 192 tokens). Policies at each budget B (keys a
head holds):

  StreamingLLM   4 sinks + B - 4 recent keys (Xiao et al. 2023)
  H2O            B/2 heavy hitters + B/2 recent keys (Zhang et al. 2023's equal split)
  SnapKV         the prompt's last B/4 keys as the observation window and the B - B/4 earlier ones
                 it votes for, pooled over 5 keys (Li et al. 2024's kernel), then every later key
  mixed          DuoAttention's question answered by ``heads.context``: the heads whose streaming
                 cost (one forward a head, on 8 other windows) is at most 0.01 nats keep 4 sinks +
                 B - 4 keys, the others every key; its mean budget per head is printed beside it

with the dense loss over the same tokens as the baseline.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CONTEXT, LAST = 256, 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=32, help="held-out windows scored (default 32)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[16, 32, 64, 128])
    args = parser.parse_args()

    import numpy as np
    import torch

    import attnkit
    from attnkit.attention import caches
    from attnkit.attention.intervene import streaming
    from attnkit.heads import context
    from machine import cpu_name
    from streaming_llm import windows

    torch.set_num_threads(2)
    model = attnkit.load("stdlib-lm")
    tok = model.hf.tokenizer
    ids = windows(tok, args.windows + 8)
    texts = [tok.decode(row) for row in ids.tolist()]
    prepared = [p for p in model.prepare(texts, max_new_tokens=0) if len(p.tgt_in_ids or p.src_ids) > CONTEXT // 2]
    scored, probe = prepared[: args.windows], prepared[args.windows :]
    t0 = time.perf_counter()
    dense = context.cache_losses(model, scored, None, last=LAST)
    print(f"{cpu_name()}; stdlib-lm, {len(scored)} held-out windows of about {CONTEXT} tokens, the last {LAST} scored")
    print(f"dense: {dense:.3f}\n")
    print("| budget B | StreamingLLM | H2O | SnapKV | mixed (mean keys a head) |\n|---|---|---|---|---|")
    modules = context._decoder_modules(model, probe[0])
    for budget in args.budgets:
        row = [
            context.cache_losses(model, scored, caches.SinkWindow(4, budget - 4), last=LAST),
            context.cache_losses(model, scored, caches.HeavyHitters(budget // 2, budget - budget // 2), last=LAST),
            context.cache_losses(
                model, scored, caches.SnapKV(prompt=CONTEXT - LAST, keep=budget, observe=max(1, budget // 4)), last=LAST
            ),
        ]
        got = context.streaming_costs(model, probe, sinks=4, window=budget - 4)
        assert got is not None
        streaming_heads = got[1] <= context.THRESHOLD  # (layers, heads)
        gates = {
            m: torch.tensor((~streaming_heads[layer]).astype(np.float32)) for (_, layer), (m, _) in modules.items()
        }
        total, count = 0.0, 0
        with torch.no_grad(), streaming(gates, sinks=4, window=budget - 4):
            for p in scored:
                log_probs, _ = model.scorer(p).forward(1, maps=False)
                total, count = total - float(log_probs[0, -LAST:].sum()), count + LAST
        share = float(streaming_heads.mean())
        mean_keys = share * budget + (1 - share) * CONTEXT
        cells = " | ".join(f"{x:.3f}" for x in row)
        print(f"| {budget} | {cells} | {total / count:.3f} ({mean_keys:.0f}; {streaming_heads.sum()} of "
              f"{streaming_heads.size} streaming) |", flush=True)  # fmt: skip
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
