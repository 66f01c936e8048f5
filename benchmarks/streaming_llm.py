"""StreamingLLM's result (Xiao et al. 2023, fig. 3 and table 1) on the installed ``stdlib-lm``:
window attention collapses once the input passes the window, and keeping the first few tokens
(the attention sinks) restores it.

    python benchmarks/streaming_llm.py                     # about a minute on 2 cores
    python benchmarks/streaming_llm.py --windows 128 --budgets 16 32 64 128

Every head of every layer attends over a key-value cache of a fixed budget (``attnkit.attention.
intervene.streaming``: the cache applied in the forward pass itself, each head's other rules
kept), on consecutive 256-token windows of the held-out standard-library files
(``stdlib_lm.py``'s split: every 20th file; the model was trained on 256-token windows). For each
budget B: the dense model; window attention alone (the B most recent keys); 1, 2 and 4 sinks
plus the B - sinks most recent keys. The loss (nats per token) is reported over the positions
past the budget, where the caches differ from the dense model (before it every policy is dense),
with the dense loss over the same positions. The positions stay the model's own (RoPE rotates
q and k before the cache); StreamingLLM re-numbers positions inside the cache to go past the
trained length, which this model, trained on 256 tokens, never sees here.

    python benchmarks/streaming_llm.py --translator --data DIR   # multi30k-en-de, its decoder

``--translator`` asks the same of the installed ``multi30k-en-de``, whose decoder heads park
their weight on ``<s>`` (every one at least 0.32, docs/inspection.md): its decoder
self-attention over the cache (the cross-attention reads the whole source, as a cache of the
source would), teacher-forced on the references of Multi30k's test_2016_flickr (``--data``: its
folder, default $ATTNKIT_MULTI30K), the loss over the target positions past the budget.

The paper's numbers for comparison (Llama-2-13B, PG19's first book, perplexity): a
1,024-token window alone 5158, 4 sinks + 1,020 recent keys 5.40, dense 5.43 (table 1, within
the window its dense row is the trained length).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CONTEXT = 256  # the model's training length


def windows(tok, count: int):
    """``count`` consecutive CONTEXT-token windows of the held-out files, (count, CONTEXT) ids."""
    import torch

    import stdlib_lm

    _, held = stdlib_lm.texts()
    ids = stdlib_lm.ids_of(tok, held)
    n = min(count, len(ids) // CONTEXT)
    return torch.as_tensor(ids[: n * CONTEXT]).view(n, CONTEXT)


def losses(hf, ids, gates: dict | None, sinks: int, window: int, batch: int = 16):
    """Per-position next-token loss (CONTEXT - 1,), mean over the windows, every head in ``gates``
    over a cache of ``sinks`` + ``window`` keys (None: dense)."""
    import contextlib

    import torch

    from attnkit.attention.intervene import streaming

    total = torch.zeros(ids.shape[1] - 1, dtype=torch.float64)
    cache = streaming(gates, sinks=sinks, window=window) if gates else contextlib.nullcontext()
    with torch.no_grad(), cache:
        for a in range(0, len(ids), batch):
            x = ids[a : a + batch]
            logits = hf(input_ids=x[:, :-1]).logits.float()
            each = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
            total += each.double().sum(0)
    return total / len(ids)


def translator(args) -> None:
    """The budgets x sinks table for the translator's decoder self-attention."""
    import gzip

    import torch

    import attnkit
    from attnkit.attention.intervene import streaming
    from attnkit.data import multi30k
    from machine import cpu_name

    torch.set_num_threads(2)
    model = attnkit.load("multi30k-en-de")

    def read(lang: str) -> list[str]:
        path = multi30k.locate("test_2016_flickr", lang, root=args.data, variant="raw")
        with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8") as f:
            return [line.strip() for line in f][: args.sentences]

    prepared = model.prepare(read("en"), targets=read("de"))
    scorers = [model.scorer(p) for p in prepared]
    sites = {c.site.name for c in [model.capture(prepared[0]).maps.call("decoder", i) for i in range(4)]}
    gates = {name: torch.zeros(4) for name in sorted(sites)}

    def loss(budget: int, sinks: int | None) -> float:
        total, count = 0.0, 0
        with torch.no_grad():
            for sc in scorers:
                if sinks is None:
                    log_probs, _ = sc.forward(1, maps=False)
                else:
                    with streaming(gates, sinks=sinks, window=budget - sinks):
                        log_probs, _ = sc.forward(1, maps=False)
                past = log_probs[0, budget:]  # query p sees keys 0..p (key 0: <s>): past the cache from p = budget
                total, count = total - float(past.sum()), count + past.numel()
        return total / max(1, count)

    print(f"{cpu_name()}; multi30k-en-de, {len(prepared)} test_2016_flickr sentences, references teacher-forced")
    print("| cache (keys) | tokens scored | dense | " + " | ".join(
        "window alone" if s == 0 else f"{s} sink{'s' if s > 1 else ''} + window" for s in args.sinks
    ) + " |")  # fmt: skip
    print("|---|---|---|" + "---|" * len(args.sinks))
    for budget in args.budgets:
        scored = sum(max(0, len(sc.rows) - budget) for sc in scorers)
        cells = [f"{loss(budget, s):.3f}" if s < budget else "–" for s in args.sinks]
        print(f"| {budget} | {scored:,} | {loss(budget, None):.3f} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=64, help="held-out 256-token windows (default 64)")
    parser.add_argument("--budgets", type=int, nargs="+", default=[16, 32, 64], help="cache sizes in keys")
    parser.add_argument("--sinks", type=int, nargs="+", default=[0, 1, 2, 4], help="sink counts (0: window alone)")
    parser.add_argument("--translator", action="store_true", help="multi30k-en-de's decoder instead")
    parser.add_argument("--data", default=None, help="with --translator: the Multi30k folder")
    parser.add_argument("--sentences", type=int, default=1000, help="with --translator: test sentences (default all)")
    args = parser.parse_args()
    if args.translator:
        translator(args)
        return

    import torch

    import attnkit
    from machine import cpu_name

    torch.set_num_threads(2)
    model = attnkit.load("stdlib-lm")
    hf = model.hf.model
    ids = windows(model.hf.tokenizer, args.windows)
    modules = [m for m in hf.modules() if getattr(m, "attnkit_site", None) is not None]
    gates = {m: torch.zeros(m.attnkit_site.heads) for m in modules if m.attnkit_site.kind == "decoder"}
    t0 = time.perf_counter()
    dense = losses(hf, ids, None, 0, 1)
    print(f"{cpu_name()}; stdlib-lm, {len(ids)} held-out windows of {CONTEXT} tokens, every head over the cache")
    print(f"dense, every position: {float(dense.mean()):.3f}\n")
    print("| cache (keys) | positions scored | dense | " + " | ".join(
        "window alone" if s == 0 else f"{s} sink{'s' if s > 1 else ''} + window" for s in args.sinks
    ) + " |")  # fmt: skip
    print("|---|---|---|" + "---|" * len(args.sinks))
    for budget in args.budgets:
        past = slice(budget, None)  # position p predicts token p + 1 from keys 0..p: past the cache from p = budget
        cells = []
        for s in args.sinks:
            got = losses(hf, ids, gates, s, budget - s) if s < budget else None
            cells.append("–" if got is None else f"{float(got[past].mean()):.3f}")
        print(f"| {budget} | {CONTEXT - 1 - budget} | {float(dense[past].mean()):.3f} | " + " | ".join(cells) + " |",
              flush=True)  # fmt: skip
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
