"""The long-context path on today's families: Gemma 3 (sliding and global layers alternating, a
window of 512), Qwen3 (grouped key/value heads, q and k normed) and GPT-OSS (learned sinks, a
window of 128 on every other layer) at their real widths, with a few layers and random weights.

    python benchmarks/families_long.py                       # 1,024 2,048 8,192 tokens
    python benchmarks/families_long.py --tokens 1024 --shapes qwen3

For each shape and length, one forward through attnkit's recording attention (every call kept
as q, k, the rules and each row's log-sum-exp) against transformers' SDPA forward of the same
model (the baseline; GPT-OSS has none and runs eager), and:

  exact      up to 2,048 tokens, every recorded map against the family's eager
             ``output_attentions`` (max abs difference); past it, every layer's log-sum-exp
             recomputed from the record's q and k under its rules (window, sink) against the
             kernel's, and the last 64 rows formed from the record against the textbook
             softmax of the same q and k with the family's mask built in full
  record MB  what the record holds (q, k, log-sum-exp, any mask tensor): a window kept as a rule
             grows with T, a window kept as a mask would add t x s bytes a layer (given beside)
  stats s    the head list's summaries of every layer (``head_stats``)
"""

from __future__ import annotations

import argparse
import time

import torch

SHAPES = {
    "gemma3": (
        "Gemma3TextConfig",
        dict(
            vocab_size=4096,
            hidden_size=1152,
            intermediate_size=6912,
            num_hidden_layers=6,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            sliding_window=512,
            query_pre_attn_scalar=256,
            max_position_embeddings=32768,
        ),
    ),
    "qwen3": (
        "Qwen3Config",
        dict(
            vocab_size=4096,
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=4,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            max_position_embeddings=32768,
        ),
    ),
    "gpt_oss": (
        "GptOssConfig",
        dict(
            vocab_size=4096,
            hidden_size=2880,
            intermediate_size=2880,
            num_hidden_layers=2,
            num_attention_heads=64,
            num_key_value_heads=8,
            head_dim=64,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=128,
            max_position_embeddings=32768,
        ),
    ),
}
EAGER_UP_TO = 2048


def build(name: str):
    import transformers

    cls_name, sizes = SHAPES[name]
    config = getattr(transformers, cls_name)(**sizes)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("sinks"):
                p.normal_(0.0, 1.0)
    return model


def dense_rows(call, rows: int) -> torch.Tensor:
    """The last ``rows`` rows of every head, by the textbook softmax of the record's q and k under the
    call's rules built as a full mask (window, causal) and its sink as one more logit."""
    from attnkit.attention.kernels import explicit, groups

    h, t, s = call.shape
    q = call.q[None, :, t - rows :].float()
    k = groups(call.k[None].float(), h)
    i = torch.arange(t - rows, t)[:, None] + (s - t)
    j = torch.arange(s)[None, :]
    allowed = (j <= i) if call.causal else torch.ones(rows, s, dtype=torch.bool)
    if call.window is not None:
        allowed = allowed & (j > i - call.window)
    if call.mask is not None:
        allowed = allowed & call.mask[..., t - rows :, :]
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
    sink = (
        None
        if call.sink is None
        else call.sink[None].float()[..., -rows:]
        if call.sink.shape[-1] > 1
        else call.sink[None].float()
    )
    _, w = explicit(q, k, k, scale=call.scale, additive=additive, cap=call.cap, sink=sink)
    return w[0]


def run(name: str, tokens: int) -> dict:
    import transformers

    from attnkit.attention.record import head_stats, lse_of
    from attnkit.pretrained import hf

    transformers.utils.logging.set_verbosity_error()
    model = build(name)
    ids = torch.randint(10, 4000, (1, tokens), generator=torch.Generator().manual_seed(1))
    out: dict = {"shape": name, "tokens": tokens}
    baseline = "eager" if name == "gpt_oss" else "sdpa"
    if tokens <= EAGER_UP_TO or baseline == "sdpa":
        model.set_attn_implementation(baseline)
        with torch.no_grad():
            start = time.perf_counter()
            ref = model(ids, use_cache=False, output_attentions=tokens <= EAGER_UP_TO and baseline == "eager")
            out[f"{baseline} s"] = time.perf_counter() - start
        if tokens <= EAGER_UP_TO and baseline == "sdpa":
            model.set_attn_implementation("eager")
            with torch.no_grad():
                ref = model(ids, use_cache=False, output_attentions=True)
        eager = ref.attentions if tokens <= EAGER_UP_TO else None
    else:
        eager = None
    loaded = hf.from_object(model, tokenizer="(ids)")
    with torch.no_grad():
        start = time.perf_counter()
        rec, _ = loaded.forward(ids[0].tolist())
        out["record s"] = time.perf_counter() - start
    calls = rec.calls
    parts = ("q", "k", "lse", "mask", "bias", "sink")
    out["record MB"] = sum(getattr(c, p).nbytes for c in calls for p in parts if getattr(c, p) is not None) / 2**20
    out["windows"] = sum(c.window is not None for c in calls)
    out["as masks MB"] = out["windows"] * tokens * tokens / 2**20
    if eager is not None:
        err = 0.0
        for call, want in zip(calls, eager):
            h, t, s = call.shape
            got = torch.stack([call.block(i, slice(0, t), slice(0, s)) for i in range(h)])
            err = max(err, float((got - want[0].float()).abs().max()))
        out["vs eager"] = err
    else:
        lse_err = max(float((lse_of(c) - c.lse).abs().max()) for c in calls)
        rows_err = 0.0
        for c in calls:
            h, t, s = c.shape
            got = torch.stack([c.block(i, slice(t - 64, t), slice(0, s)) for i in range(h)])
            rows_err = max(rows_err, float((got - dense_rows(c, 64)).abs().max()))
        out["lse vs kernel"], out["rows vs dense"] = lse_err, rows_err
    start = time.perf_counter()
    for c in calls:
        head_stats(c)
    out["stats s"] = time.perf_counter() - start
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 2048, 8192])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    for name in args.shapes:
        for tokens in args.tokens:
            row = run(name, tokens)
            print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
