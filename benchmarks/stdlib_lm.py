"""A small decoder-only language model of Python's own standard library, installed with attnkit as
``stdlib-lm``: a real decoder, trained on real text every machine with Python has, whose heads
have jobs worth finding (code repeats its names, so induction heads form).

    python benchmarks/stdlib_lm.py                         # trains (24 min), evaluates and installs it

The text is every ``.py`` file of the standard library this Python runs on (its tests, idlelib,
lib2to3, turtledemo and site-packages left out), in sorted order, each file followed by
``<|endoftext|>``; every 20th file is held out. A byte-level BPE tokenizer of 4,096 tokens is
trained on the training files alone. The model is a Llama (RoPE, SiLU MLP, RMSNorm, tied
embeddings) of 4 layers x 4 heads, hidden 128, trained from scratch with AdamW on random
256-token windows for a fixed wall-clock budget on the CPU (``docs_lm.train``), half of them
with their first half repeated as their second (copying then pays, so induction heads form
within the budget, as on Olsson et al. 2022's repeated sequences), stored in float16. The card reports the held-out loss beside a unigram model's and the float32 loss, the
installed files a manifest as every installed model has.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docs_lm

NAME = "stdlib-lm"
LEFT_OUT = ("test", "tests", "idlelib", "lib2to3", "turtledemo", "site-packages", "__pycache__")
HELD_OUT = 20  # every 20th file
END = "<|endoftext|>"


def files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [p for p in sorted(root.rglob("*.py")) if not set(p.relative_to(root).parts) & set(LEFT_OUT)]


def texts() -> tuple[list[str], list[str]]:
    """The training files' texts and the held-out files' texts."""
    train, held = [], []
    for i, p in enumerate(files()):
        text = p.read_text(encoding="utf-8", errors="replace")
        (held if i % HELD_OUT == HELD_OUT - 1 else train).append(text)
    return train, held


def tokenizer(train: list[str], out: Path):
    import transformers as T
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(train, trainers.BpeTrainer(vocab_size=4096, special_tokens=[END], show_progress=False))
    fast = T.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=END, eos_token=END)
    fast.save_pretrained(out)
    return fast


def ids_of(tok, parts: list[str]):
    import torch

    end = tok.convert_tokens_to_ids(END)
    out: list[int] = []
    for text in parts:
        out += tok(text)["input_ids"] + [end]
    return torch.tensor(out)


def held_out_loss(model, ids, context: int) -> float:
    """Mean next-token loss (nats) over the held-out tokens, in consecutive windows."""
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, context):
            x = ids[start : start + context + 1]
            if len(x) < 2:
                break
            logits = model(input_ids=x[None, :-1]).logits[0].float()
            total += float(torch.nn.functional.cross_entropy(logits, x[1:], reduction="sum"))
            count += len(x) - 1
    return total / count


def unigram_loss(train_ids, held_ids, vocab: int) -> float:
    import torch

    counts = torch.bincount(train_ids, minlength=vocab).double() + 1  # add-one
    logp = torch.log(counts / counts.sum())
    return float(-logp[held_ids].mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=24.0)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--repeat", type=float, default=0.5, help="the share of windows whose first half repeats")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-stdlib-lm")
    p.add_argument("--install", type=Path, default=Path(__file__).resolve().parents[1] / "src/attnkit/shipped")
    args = p.parse_args()

    import torch
    import transformers as T

    from attnkit.loading import packaged
    from machine import cpu_name

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    train, held = texts()
    args.work.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(train, args.work / "tokenizer")
    cached = args.work / "ids.pt"  # tokenizing takes minutes: kept for a rerun of the same text
    key = hashlib.sha256("\0".join(train + ["\0"] + held).encode()).hexdigest()
    saved = torch.load(cached) if cached.is_file() else {}
    if saved.get("key") != key or saved.get("vocab") != tok.get_vocab():
        saved = {"key": key, "vocab": tok.get_vocab(), "train": ids_of(tok, train), "held": ids_of(tok, held)}
        torch.save(saved, cached)
    train_ids, held_ids = saved["train"], saved["held"]
    model = T.LlamaForCausalLM(docs_lm.small_llama(len(tok), positions=8192, kv_heads=4))
    model.config._attn_implementation = "sdpa"
    params = sum(x.numel() for x in model.parameters())
    cpu = cpu_name()
    print(
        f"# {cpu}; {args.threads} thread(s); {len(train)} training files, {len(train_ids):,} tokens; "
        f"{len(held)} held out, {len(held_ids):,} tokens; {params / 1e6:.2f} M parameters",
        flush=True,
    )
    steps, last = docs_lm.train(
        model, train_ids, minutes=args.minutes, context=args.context, batch=args.batch, repeat=args.repeat
    )
    full = held_out_loss(model, held_ids, args.context)
    model = model.half()
    half = held_out_loss(model.float(), held_ids, args.context)  # the float16 weights, computed in float32
    unigram = unigram_loss(train_ids, held_ids, len(tok))
    print(f"held-out loss: float32 {full:.4f}, float16 {half:.4f}; unigram {unigram:.4f} nats", flush=True)

    out = args.install / NAME
    tmp = out.with_name(NAME + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    model.half().save_pretrained(tmp)
    tok.save_pretrained(tmp)
    version = ".".join(map(str, sys.version_info[:3]))
    (tmp / "card.md").write_text(
        CARD.format(
            params=params,
            version=version,
            train=len(train),
            held=len(held),
            train_tokens=len(train_ids),
            held_tokens=len(held_ids),
            minutes=args.minutes,
            steps=steps,
            context=args.context,
            batch=args.batch,
            repeat=args.repeat,
            cpu=cpu,
            threads=args.threads,
            last=last,
            full=full,
            half=half,
            unigram=unigram,
            ppl=math.exp(half),
        ),
        encoding="utf-8",
    )
    info = {
        "architecture": "Llama decoder (4 layers x 4 heads, hidden 128)",
        "parameters": params,
        "data": f"the Python {version} standard library's source",
        "scores": [{"metric": "held-out loss (nats/token)", "test_set": "every 20th file", "score": half}],
        "dtype": "float16",
    }
    packaged.write_manifest(tmp, info)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    total = sum(f.stat().st_size for f in args.install.rglob("*") if f.is_file()) / 1e6
    print(
        f"installed {out} ({sum(f.stat().st_size for f in out.iterdir()) / 1e6:.1f} MB); all installed: {total:.1f} MB"
    )


CARD = """# stdlib-lm

A decoder-only language model of Python source: a Llama (RoPE, SiLU MLP, RMSNorm, tied
embeddings) of 4 layers x 4 heads, hidden 128, {params:,} parameters, trained from scratch on the
Python {version} standard library's own source. Weights in float16.

## Use

```bash
attnkit heads stdlib-lm --probe repeated --detect all
attnkit logits stdlib-lm "value = items[index" --answer "]" --foil ")"
attnkit serve stdlib-lm
```

## Data

Every `.py` file of the standard library (its tests, idlelib, lib2to3, turtledemo and
site-packages left out), in sorted order, each followed by `<|endoftext|>`: {train} files,
{train_tokens:,} tokens, for training; every 20th file ({held} files, {held_tokens:,} tokens)
held out. The tokenizer is a byte-level BPE of 4,096 tokens trained on the training files.

## Training

`python benchmarks/stdlib_lm.py --minutes {minutes:g}`: AdamW (lr 3e-3, betas 0.9/0.95,
weight decay 0.1, a 50-step warm-up then a cosine to a tenth) on random {context}-token windows,
batch {batch}, {repeat:.0%} of them with their first half repeated as their second; {steps} steps
in {minutes:g} minutes on {cpu} ({threads} threads), the last batch's loss {last:.3f}.

## Figures (held-out files, {context}-token windows)

| model | loss (nats/token) | perplexity |
|---|---|---|
| stdlib-lm, float16 weights | **{half:.3f}** | {ppl:.1f} |
| stdlib-lm, float32 weights | {full:.3f} | |
| unigram (add-one counts of the training tokens) | {unigram:.3f} | |

It has seen {context} tokens at most: past that its positions are ones it never trained on.
"""


if __name__ == "__main__":
    main()
