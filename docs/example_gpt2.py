"""A small GPT-2 trained on the English side of Multi30k with transformers, saved in the
Hugging Face layout: the decoder-only model the docs' "your own model" screenshots show.

    python docs/example_gpt2.py MULTI30K_DIR OUT_DIR [--minutes 12]

MULTI30K_DIR holds raw/train.en.gz; OUT_DIR gets config.json, model.safetensors and the
tokenizer (a byte-level BPE of 4,000 pieces trained on the same captions). It is a
teaching model (4 layers, 4 heads, d_model 256): it continues caption prompts in the
captions' style, nothing more.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import time
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--minutes", type=float, default=12.0)
    args = ap.parse_args()
    import transformers as T
    from tokenizers import ByteLevelBPETokenizer

    with gzip.open(args.data / "raw" / "train.en.gz", "rt", encoding="utf-8") as f:
        lines = [s.strip() for s in f if s.strip()]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        lines, vocab_size=4000, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False
    )
    args.out.mkdir(parents=True, exist_ok=True)
    trained = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in trained["merges"]]
    end = "<|endoftext|>"
    tok = T.GPT2Tokenizer(vocab=trained["vocab"], merges=merges, bos_token=end, eos_token=end, unk_token=end)
    assert len(tok("Two dogs are playing.")["input_ids"]) > 1, "the tokenizer lost its vocabulary"
    eos = tok.eos_token_id
    config = T.GPT2Config(
        vocab_size=len(tok), n_positions=128, n_embd=256, n_layer=4, n_head=4, bos_token_id=eos, eos_token_id=eos
    )
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(config)
    data = [ids[:127] + [eos] for ids in tok(lines)["input_ids"]]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    rng = random.Random(0)
    start, step, batch = time.time(), 0, 64
    budget = args.minutes * 60
    model.train()
    while time.time() - start < budget:
        rows = rng.sample(data, batch)
        width = max(map(len, rows))
        ids = torch.full((batch, width), eos)
        mask = torch.zeros(batch, width, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        labels = ids.masked_fill(mask == 0, -100)
        frac = (time.time() - start) / budget
        for g in opt.param_groups:  # warm up, then cosine to zero over the time budget
            g["lr"] = 1e-3 * min(1.0, (step + 1) / 200) * 0.5 * (1 + math.cos(math.pi * frac))
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        step += 1
        if step % 100 == 0:
            print(f"step {step}  loss {loss.item():.3f}  {time.time() - start:.0f} s", flush=True)
    model.eval()
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)
    print(f"saved to {args.out} after {step} updates")


if __name__ == "__main__":
    main()
