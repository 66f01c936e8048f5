"""Capturing a language model's attention at long contexts: the record against transformers'
own fused forward, and against forming every map (attnkit before the record).

    python benchmarks/capture_scale.py                         # 512 2048 4096 8192 tokens
    python benchmarks/capture_scale.py --tokens 2048 --before  # also the formed-maps path
    python benchmarks/capture_scale.py --device cuda --tokens 8192 16384 32768

The model has SmolLM2-135M's shape (Llama: 30 layers, 9 query heads sharing 3 key/value
heads, hidden 576, FFN 1536, RoPE, vocabulary 49,152) with random weights, saved once as a
Hugging Face directory with a byte-level BPE tokenizer trained on attnkit's own docs; the
text is those docs, repeated as far as needed. Each measurement runs in its own process:

  sdpa      transformers alone: AutoModelForCausalLM with attn_implementation="sdpa", one
            forward over the tokens (no cache, the last position's logits only)
  record    ``attnkit.load`` on the directory, ``capture`` of the same tokens (every attention
            call recorded: q, k and each row's log-sum-exp), then the record saved as .npz;
            (--float16) also with q and k kept in float16 and the log-sum-exp of the rounded
            q and k (one more fused pass)
  before    (--before) the same capture forming every map (layers x heads x t x t); with
            --before-src DIR, attnkit's own capture from that checkout (``git worktree add DIR
            e995841``: eager attention, every map kept); refused with one line where the maps
            would not fit

glibc keeps freed blocks below its mmap threshold in the heap, so a process's peak resident
memory depends on how allocations interleave; each process runs with MALLOC_MMAP_THRESHOLD_=
131072 (large blocks returned when freed) so the peak is live memory (--malloc-default: not).

Reported: wall time of the forward (and of saving), peak resident memory over the process's
footprint after loading the model, the record's size; and the record's exactness: every
layer's last 64 rows (a block) formed from the record against eager softmax(q k^T) of the
same q and k.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 65536,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


class PeakRSS:
    """The highest resident memory seen while inside (sampled every 2 ms), over the memory at entry."""

    def __enter__(self) -> PeakRSS:
        import threading

        self.start = self.peak = _rss_mib()
        self._stop = threading.Event()

        def sample() -> None:
            while not self._stop.wait(0.002):
                self.peak = max(self.peak, _rss_mib())

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mib())

    @property
    def growth(self) -> float:
        return self.peak - self.start


def docs_text() -> str:
    parts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n\n".join(p.read_text(encoding="utf-8") for p in parts)


def build(folder: Path) -> Path:
    """The SmolLM2-135M-shaped model with random weights and a BPE tokenizer, once."""
    if (folder / "model.safetensors").is_file():
        return folder
    import torch
    import transformers as T
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        [docs_text()], trainers.BpeTrainer(vocab_size=4096, special_tokens=["<|endoftext|>"], show_progress=False)
    )
    fast = T.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    torch.manual_seed(0)
    config = T.LlamaConfig(**SHAPE, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = T.LlamaForCausalLM(config).eval()
    tmp = folder.with_name(folder.name + ".part")
    model.save_pretrained(tmp)
    fast.save_pretrained(tmp)
    tmp.rename(folder)
    return folder


def text_of(folder: Path, n: int) -> tuple[str, list[int]]:
    """Docs text of exactly ``n`` tokens under the model's tokenizer (the docs repeated as needed)."""
    import transformers as T

    tok = T.AutoTokenizer.from_pretrained(folder)
    base = tok(docs_text())["input_ids"]
    ids = (base * (n // len(base) + 1))[:n]
    return tok.decode(ids), ids


def run_sdpa(folder: Path, n: int, device: str) -> dict:
    import torch
    import transformers as T

    model = T.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="sdpa", dtype=torch.float32)
    model = model.to(device).eval()
    _, ids = text_of(folder, n)
    src = torch.tensor([ids], device=device)
    with torch.no_grad():
        model(src[:, :16], use_cache=False, logits_to_keep=1)  # warm up
    _sync(device)
    start = _device_peak_reset(device)
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        with torch.no_grad():
            model(src, use_cache=False, logits_to_keep=1)
        _sync(device)
        forward_s = time.perf_counter() - t0
    return {"forward_s": forward_s, **_memory(rss, start, device)}


def run_record(folder: Path, n: int, device: str, *, dense: bool, dtype: str) -> dict:

    import attnkit
    from attnkit.inspection import save_records
    from attnkit.loaded import hf_models as loaded

    if dtype == "float32":
        loaded.COMPACT_FROM = 1 << 30
    elif dtype == "float16":
        loaded.COMPACT_FROM = 0
    model = attnkit.load(str(folder), device=device)
    text, _ = text_of(folder, n)
    (small,) = model.prepare([text[:200]], max_new_tokens=0)
    model.capture(small)  # warm up
    (prepared,) = model.prepare([text], max_new_tokens=0)
    assert len(prepared.tgt_in_ids) == n, (len(prepared.tgt_in_ids), n)
    _sync(device)
    start = _device_peak_reset(device)
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        record = model.capture(prepared)
        if dense:
            record.maps["decoder"]  # every map formed, as attnkit did before the record
        _sync(device)
        forward_s = time.perf_counter() - t0
    calls = record.maps.calls["decoder"] if hasattr(record.maps, "calls") else []  # not in attnkit before the record
    kept = sum(x.nbytes for c in calls for x in (c.q, c.k, c.lse) if x is not None)
    out = {"forward_s": forward_s, "record_mib": kept / 2**20, **_memory(rss, start, device)}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = save_records(Path(tmp) / "record.npz", [record], model.info)
        out["save_s"] = time.perf_counter() - t0
        out["file_mb"] = path.stat().st_size / 1e6
    if calls and not dense:
        out.update(_exactness(record))
    return out


def _exactness(record) -> dict:
    """The last 64 rows of every layer's head 0 from the record against eager softmax of the same q, k."""
    import torch

    worst = 0.0
    worst_lse = 0.0
    for call in record.maps.calls["decoder"]:
        t = call.q.shape[1]
        rows = slice(t - 64, t)
        q, k = call.q[0, rows].float().cpu(), call.k[0].float().cpu()
        s = (q @ k.T) * call.scale
        causal = torch.arange(k.shape[0])[None, :] > torch.arange(t - 64, t)[:, None]
        s = s.masked_fill(causal, float("-inf"))
        eager = torch.softmax(s, -1)
        mine = torch.from_numpy(record.view("decoder", call.layer, 0).block(rows))
        worst = max(worst, float((mine - eager).abs().max()))
        worst_lse = max(worst_lse, float((call.lse[0, rows].cpu() - torch.logsumexp(s, -1)).abs().max()))
    return {"max_abs_err": worst, "lse_err": worst_lse}


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _device_peak_reset(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated() / 2**20
    return 0.0


def _memory(rss: PeakRSS, start: float, device: str) -> dict:
    import torch

    if device.startswith("cuda"):
        return {"peak_mib": torch.cuda.max_memory_allocated() / 2**20 - start}
    return {"peak_mib": rss.growth}  # resident memory over the process's footprint with the model loaded


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    folder = Path(args.model)
    if args.path == "sdpa":
        out = run_sdpa(folder, args.n, args.device)
    else:
        out = run_record(
            folder, args.n, args.device, dense=args.path == "before" and not args.before_src, dtype=args.dtype
        )
    print("RESULT " + json.dumps(out))


def measure(path: str, n: int, args: argparse.Namespace, dtype: str = "auto") -> dict:
    cmd = [sys.executable, __file__, "--child", path, "--n", str(n), "--model", str(args.model)]
    cmd += ["--device", args.device, "--threads", str(args.threads), "--dtype", dtype]
    env = dict(os.environ)
    if path == "before" and args.before_src:  # attnkit as it was: its own package first on the path
        env["PYTHONPATH"] = str(Path(args.before_src) / "src") + os.pathsep + env.get("PYTHONPATH", "")
        cmd += ["--before-src", str(args.before_src)]
    if not args.malloc_default:  # large blocks go back to the system when freed: live memory, not heap high-water
        env.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": last[:200]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[512, 2048, 4096, 8192])
    p.add_argument("--before", action="store_true", help="also capture with every map formed")
    p.add_argument(
        "--before-src", type=Path, help="a checkout of attnkit before the record (git worktree): its capture"
    )
    p.add_argument("--float16", action="store_true", help="also a record of q and k in float16")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--malloc-default",
        action="store_true",
        help="glibc's default allocator thresholds (peaks then include heap fragmentation)",
    )
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--model", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    p.add_argument("--child", choices=["sdpa", "record", "before"])
    p.add_argument("--n", type=int)
    p.add_argument("--dtype", default="auto")
    args = p.parse_args()
    if args.child:
        args.path = args.child
        child(args)
        return
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from attnkit.memory import available_bytes
    from machine import cpu_name

    build(args.model)
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else cpu_name()
    print(f"# SmolLM2-135M shape, random weights; {where}; {args.threads} thread(s); torch {torch.__version__}")
    print(
        "tokens | path | forward s | x sdpa | peak MiB | x sdpa | record MiB | save s | file MB | max |err| | lse err"
    )
    for n in args.tokens:
        base = measure("sdpa", n, args)
        rows = [("sdpa", base), ("record", measure("record", n, args))]
        if args.float16:
            rows.append(("record f16", measure("record", n, args, "float16")))
        if args.before:
            dense_gb = 30 * 9 * n * n * (2 if n > 1024 else 4) / 1e9
            need_gb = 2.5 * dense_gb  # measured: the formed-maps path peaks at about twice its maps (2.0x at 4,096)
            free_gb = available_bytes() / 1e9
            if need_gb > 0.8 * free_gb:
                rows.append(
                    (
                        "before",
                        {"error": f"refused: forming every map needs about {need_gb:.0f} GB, {free_gb:.0f} GB is free"},
                    )
                )
            else:
                rows.append(("before", measure("before", n, args)))
        for name, r in rows:
            if "error" in r:
                print(f"{n} | {name} | {r['error']}")
                continue
            ratio = r["forward_s"] / base["forward_s"] if "forward_s" in base else float("nan")
            mem = r["peak_mib"] / base["peak_mib"] if base.get("peak_mib") else float("nan")
            extra = (
                f"{r.get('record_mib', 0):.0f} | {r.get('save_s', 0):.2f} | {r.get('file_mb', 0):.0f} | {r.get('max_abs_err', float('nan')):.1e}"
                f" | {r.get('lse_err', float('nan')):.1e}"
            )
            print(f"{n} | {name} | {r['forward_s']:.2f} | {ratio:.2f} | {r['peak_mib']:.0f} | {mem:.2f} | {extra}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
