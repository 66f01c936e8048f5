"""Which heads need the whole context, at long contexts: every head of a model of SmolLM2-135M's
shape (``capture_scale.py`` builds it: Llama, 30 layers x 9 query heads over 3 key/value heads,
random weights) over a StreamingLLM cache (4 sinks + 1,020 recent keys), on one of Wu et al.'s
needle probes (``attnkit heads --probe needle``) at each length.

    python benchmarks/context_scale.py                              # 2048 8192 tokens, CPU

Each length runs in its own process:

  forward    the baseline: the model's loss over the input, nothing listening
  replay     every head's weight outside the cache and its output change, exact from q, k, v and
             the log-sum-exp (``heads.context.replayed``): one forward, t x (sinks + window) extra
             scores a head
  estimate   every head's first-order cost, one backward with each layer recomputed
             (``heads.context.streaming_estimates``)
  cost       one head of every layer alone over the cache (``heads.context.streaming_costs``: a
             forward from the head's layer on); all 270 heads' time from those 30 (9 heads a layer
             cost what their layer's one does), and the estimate's Pearson r against the 30 costs

with the peak memory of each phase over the process's footprint with the model loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import capture_scale as cs  # noqa: E402  (beside this file: the model, memory and timing helpers)


def _timed(fn, what: str):
    with cs.PeakRSS() as rss:
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
    print(f"  {what}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return out, seconds, cs._memory(rss, 0, "cpu")["peak_mib"]


def run(folder: Path, n: int, cost_heads: int) -> dict:
    import numpy as np
    import torch

    import attnkit
    from attnkit.heads import context
    from attnkit.heads.ablation import measure
    from attnkit.heads.probes import probe_inputs

    model = attnkit.load(str(folder))
    (small,) = model.prepare(["a short warm-up text for the kernels"], max_new_tokens=0)
    model.capture(small)
    prepared = model.prepare(probe_inputs(model, "needle", tokens=n, inputs=1), max_new_tokens=0)
    out: dict = {"tokens": len(prepared[0].tgt_in_ids)}
    measured = measure(model, prepared)
    with torch.no_grad():
        _, out["forward_s"], out["forward_mib"] = _timed(measured.mean, "forward")
    (outside, _, _), out["replay_s"], out["replay_mib"] = _timed(lambda: context.replayed(model, prepared), "replay")
    out["outside_mean"] = float(np.nanmean(outside))
    estimate, out["estimate_s"], out["estimate_mib"] = _timed(
        lambda: context.streaming_estimates(model, prepared), "estimate"
    )
    if not cost_heads:
        return out
    heads = [("decoder", layer, 0) for layer in range(30)]
    got, seconds, out["cost_mib"] = _timed(lambda: context.streaming_costs(model, prepared, heads=heads), "cost")
    assert got is not None and estimate is not None
    costs = got[1][:, 0]
    out["cost_s_30"] = seconds
    out["cost_s_270"] = 9 * seconds  # each layer's 9 heads cost what its one does
    out["r"] = float(np.corrcoef(costs, estimate[:, 0])[0, 1])
    out["streaming_30"] = int((costs <= context.THRESHOLD).sum())
    return out


def measure(n: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", "--n", str(n), "--model", str(args.model)]
    cmd += ["--cost-heads", str(args.cost_heads)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}  # live memory, not the heap's high-water mark
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": f"exit {proc.returncode}"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--model", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    p.add_argument("--cost-heads", type=int, default=30, help="heads whose cost is measured (0: none; 30: one a layer)")
    p.add_argument("--child", action="store_true")
    p.add_argument("--n", type=int)
    args = p.parse_args()
    import torch

    torch.set_num_threads(2)
    if args.child:
        print("RESULT " + json.dumps(run(args.model, args.n, args.cost_heads)))
        return
    from machine import cpu_name

    cs.build(args.model)
    print(f"# SmolLM2-135M shape, random weights; {cpu_name()}; 2 threads; a cache of 4 sinks + 1,020 keys")
    print(
        "| tokens | forward s | replay s (MiB) | estimate s (MiB) | cost: 30 heads s (MiB) | all 270, s "
        "| r (estimate, cost) |\n|---|---|---|---|---|---|---|"
    )
    for n in args.tokens:
        g = measure(n, args)
        if "error" in g:
            print(f"| {n:,} | {g['error']} | | | | | |", flush=True)
            continue
        if "cost_s_30" not in g:
            g.update(cost_s_30=float("nan"), cost_mib=float("nan"), cost_s_270=float("nan"), r=float("nan"))
        print(
            f"| {g['tokens']:,} | {g['forward_s']:.1f} | {g['replay_s']:.1f} ({g['replay_mib']:,.0f}) | "
            f"{g['estimate_s']:.1f} ({g['estimate_mib']:,.0f}) | {g['cost_s_30']:.0f} ({g['cost_mib']:,.0f}) | "
            f"{g['cost_s_270']:,.0f} | {g['r']:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
