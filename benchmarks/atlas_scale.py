"""The head atlas at long contexts: every detector, each head's ablation and importance, on a model
of SmolLM2-135M's shape (``capture_scale.py`` builds it: Llama, 30 layers x 9 query heads over 3
key/value heads, random weights), scored on Wu et al.'s needle probe (``attnkit heads --probe
needle``) at each length.

    python benchmarks/atlas_scale.py                                  # 1024 4096 tokens, CPU
    python benchmarks/atlas_scale.py --device cuda --tokens 8192 32768 65536 --ablate-heads 270
    python benchmarks/atlas_scale.py --device cuda --parity           # cuda against the CPU

Each length runs in its own process, over ``--probes`` inputs of that many tokens:

  capture     the baseline: one recorded forward per input (what ``attnkit capture`` does)
  atlas       every detector that applies (10 for a causal decoder), streamed from the record
              block by block (``heads.atlas.head_atlas``): never a whole map
  ablation    the loss of the next tokens with one head zeroed, for the first ``--ablate-heads``
              heads (``heads.ablation.ablation_effects``); per head (the loss with every head, taken
              once, left out), and the whole model's 270 heads at that rate
  importance  Michel et al.'s gradient on every head's gate, one backward per input

with the peak memory of each phase (CUDA: allocated on the device; CPU: resident over the
process's footprint with the model loaded). ``--parity``: at the first length, the atlas's scores
and the ablation effects on cuda against the same run on the CPU (float32 both).
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

HEADS = 30 * 9


def _timed(device: str, fn, what: str = ""):
    """(fn(), seconds, peak MiB over the memory at the start); ``what`` is logged to stderr."""
    cs._sync(device)
    start = cs._device_peak_reset(device)
    with cs.PeakRSS() as rss:
        t0 = time.perf_counter()
        out = fn()
        cs._sync(device)
        seconds = time.perf_counter() - t0
    if what:
        print(f"  {what}: {seconds:.2f} s", file=sys.stderr, flush=True)
    return out, seconds, cs._memory(rss, start, device)["peak_mib"]


def run(folder: Path, n: int, device: str, probes: int, ablate: int) -> dict:
    import numpy as np

    import attnkit
    from attnkit.heads.ablation import ablation_effects, head_importance
    from attnkit.heads.atlas import head_atlas
    from attnkit.heads.detectors import fitting
    from attnkit.heads.probes import probe_inputs

    model = attnkit.load(str(folder), device=device)
    (small,) = model.prepare(["a short warm-up text for the kernels"], max_new_tokens=0)
    model.capture(small)
    texts = probe_inputs(model, "needle", tokens=n, inputs=probes)
    prepared = model.prepare(texts, max_new_tokens=0)
    out: dict = {"tokens": [len(p.tgt_in_ids) for p in prepared]}
    records, out["capture_s"], out["capture_mib"] = _timed(
        device, lambda: [model.capture(p) for p in prepared], "capture"
    )
    r = records[0]
    kind = r.kinds[0]
    names = fitting(r.maps.call(kind, 0), r.queries(kind), r.keys(kind))
    atlas, out["atlas_s"], out["atlas_mib"] = _timed(device, lambda: head_atlas(records, kind, names), "atlas")
    out["detectors"] = len(atlas.scores)
    out["scores"] = {k: np.asarray(v).tolist() for k, v in atlas.scores.items()}
    records.clear()  # the ablation runs without them
    if ablate:
        heads = [(kind, i // 9, i % 9) for i in range(min(ablate, HEADS))]
        _, setup, _ = _timed(device, lambda: ablation_effects(model, prepared, "zero", []))  # the unablated loss
        got, seconds, out["ablation_mib"] = _timed(
            device, lambda: ablation_effects(model, prepared, "zero", heads), "ablation"
        )
        out["ablation_per_head_s"] = (seconds - setup) / len(heads)
        out["ablated"] = len(heads)
        out["effects"] = np.nan_to_num(got[2][kind], nan=0.0).tolist()
        try:
            _, seconds, out["importance_mib"] = _timed(device, lambda: head_importance(model, prepared), "importance")
            out["importance_per_input_s"] = seconds / len(prepared)
        except ValueError as e:  # refused before it starts: more memory than is free
            out["importance_refused"] = str(e)
            print(f"  importance: {e}", file=sys.stderr, flush=True)
    return out


def measure(n: int, args: argparse.Namespace, device: str, ablate: int) -> dict:
    cmd = [sys.executable, __file__, "--child", "--n", str(n), "--model", str(args.model), "--device", device]
    cmd += ["--threads", str(args.threads), "--probes", str(args.probes), "--ablate-heads", str(ablate)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}  # live memory, not the heap's high-water mark
    with tempfile.TemporaryFile("w+") as result:  # the result (large) apart from the live log
        proc = subprocess.Popen(cmd, stdout=result, stderr=subprocess.PIPE, text=True, env=env)
        said = []
        for line in proc.stderr or []:  # each phase as it ends, so a run cut short says where it was
            said.append(line)
            if line.startswith("  "):
                sys.stderr.write(line)
        proc.wait()
        result.seek(0)
        for line in result:
            if line.startswith("RESULT "):
                return json.loads(line[7:])
    last = ([x.strip() for x in said if x.strip()] or ["no output"])[-1]
    return {"error": last[:300]}


def _mib(x: float) -> str:
    return f"{x:,.0f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--device", default="cpu")
    p.add_argument("--probes", type=int, default=2, help="needle inputs per length (default 2)")
    p.add_argument("--ablate-heads", type=int, default=9, help="heads ablated one by one (0: none; 270: all)")
    p.add_argument("--parity", action="store_true", help="also the first length on the CPU, against cuda")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--model", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    p.add_argument("--child", action="store_true")
    p.add_argument("--n", type=int)
    args = p.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        print("RESULT " + json.dumps(run(args.model, args.n, args.device, args.probes, args.ablate_heads)))
        return
    import numpy as np
    import torch

    from machine import cpu_name

    cs.build(args.model)
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else cpu_name()
    print(f"# SmolLM2-135M shape, random weights; {where}; {args.threads} CPU thread(s); torch {torch.__version__}")
    print(f"# {args.probes} needle input(s) per length; ablation of {args.ablate_heads} head(s) one by one")
    print(
        "| tokens | capture s | atlas s (detectors) | atlas / capture | capture / atlas peak MiB "
        "| ablation s per head (all 270) | importance s per input | ablation / importance peak MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    first = None
    for n in args.tokens:
        got = measure(n, args, args.device, args.ablate_heads)
        if "error" in got:
            print(f"| {n:,} | {got['error']} |")
            continue
        first = first or (n, got)
        row = [f"{got['tokens'][0]:,}", f"{got['capture_s']:.2f}", f"{got['atlas_s']:.2f} ({got['detectors']})"]
        row += [f"{got['atlas_s'] / got['capture_s']:.2f}", f"{_mib(got['capture_mib'])} / {_mib(got['atlas_mib'])}"]
        if "ablated" in got:
            per = got["ablation_per_head_s"]
            if "importance_refused" in got:
                need = got["importance_refused"].split(" needs ")[-1].split(" and ")[0]
                importance, peak = f"refused (needs {need})", "-"
            else:
                importance, peak = f"{got['importance_per_input_s']:.2f}", _mib(got["importance_mib"])
            row += [f"{per:.3f} ({per * HEADS:,.0f} s)", importance, f"{_mib(got['ablation_mib'])} / {peak}"]
        print("| " + " | ".join(row) + " |", flush=True)
    if args.parity and first is not None and args.device != "cpu":
        n, dev = first
        cpu = measure(n, args, "cpu", args.ablate_heads)
        if "error" in cpu:
            print(f"parity: the CPU run failed: {cpu['error']}")
            return
        score = max(float(np.abs(np.array(dev["scores"][k]) - np.array(cpu["scores"][k])).max()) for k in cpu["scores"])
        print(f"parity at {dev['tokens'][0]:,} tokens, cuda against CPU: detector scores within {score:.1e}", end="")
        if "effects" in cpu:
            effect = float(np.abs(np.array(dev["effects"]) - np.array(cpu["effects"])).max())
            print(f", ablation effects within {effect:.1e} nats (largest effect {np.abs(cpu['effects']).max():.3f})")
        else:
            print()


if __name__ == "__main__":
    main()
