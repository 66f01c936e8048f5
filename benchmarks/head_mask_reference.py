"""attnkit's head ablation against transformers' own head masking, a second reference.

    python benchmarks/head_mask_reference.py --peers-python /tmp/peers/bin/python

transformers 5 (which attnkit runs) dropped the ``head_mask`` argument; transformers 4.x, in the
peers' environment (``peers_long.py`` says how to build it), still multiplies each head's weights
by it. The same two small random models (``tests/tiny_hf.py``'s GPT-2 and BERT, their matrices
drawn with a standard deviation of 0.3, saved by transformers 5 and read by 4.x) and the same
token ids go to both: attnkit's zero ablation of each head alone (``heads.ablation``: the head's
output gated to 0 before the heads merge) against ``head_mask`` zero on that head, each measured
as attnkit measures it: GPT-2's mean next-token loss, BERT's share of its sentence vector lost
(1 - <v', v> / |v|^2, v the mean of the top layer). Reported: the largest difference over every
head (float32: agreement to about 1e-6 is exact).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import tiny_hf  # noqa: E402  (the tests' model builder)

TEXTS = ["the dog runs on the grass in the park .", "two children are playing in the snow .", "a man is in the city ."]

PEER = r"""
import json, sys, torch, transformers as T
job = json.loads(sys.stdin.read())
out = {}
for name, spec in job.items():
    if spec["family"] == "gpt2":
        model = T.GPT2LMHeadModel.from_pretrained(spec["path"], attn_implementation="eager").eval()
    else:
        model = T.BertModel.from_pretrained(spec["path"], attn_implementation="eager").eval()
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads

    def measure(mask):
        total, n = 0.0, 0
        for ids in spec["ids"]:
            x = torch.tensor([ids])
            with torch.no_grad():
                if spec["family"] == "gpt2":
                    logits = model(x, head_mask=mask).logits[0, :-1].float()
                    lp = logits.log_softmax(-1).gather(-1, x[0, 1:, None])[:, 0]
                    total, n = total - float(lp.sum()), n + lp.numel()
                else:
                    clean = model(x).last_hidden_state[0].float().mean(0)
                    v = model(x, head_mask=mask).last_hidden_state[0].float().mean(0)
                    total, n = total + float(1 - (v @ clean) / (clean @ clean)), n + 1
        return total / n

    base = measure(None)
    effects = []
    for layer in range(L):
        row = []
        for head in range(H):
            mask = torch.ones(L, H)
            mask[layer, head] = 0.0
            row.append(measure(mask) - base)
        effects.append(row)
    out[name] = {"base": base, "effects": effects, "transformers": T.__version__}
print(json.dumps(out))
"""


def _spread(path: Path, family: str) -> Path:
    """The model's matrices drawn anew with a standard deviation of 0.3 (15 times the usual
    initialisation), so that removing one head changes what it computes by a measurable amount."""
    import torch
    import transformers as T

    load = T.GPT2LMHeadModel if family == "gpt2" else T.BertForMaskedLM
    model = load.from_pretrained(path)
    torch.manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0, 0.3)
    model.save_pretrained(path)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--peers-python", required=True, help="a Python with transformers 4.x and torch (peers_long.py)")
    args = p.parse_args()
    import attnkit
    from attnkit.heads.ablation import ablation_effects

    with tempfile.TemporaryDirectory() as tmp:
        job, ours = {}, {}
        for family in ("gpt2", "bert"):
            path = _spread(tiny_hf.build(family, Path(tmp) / family), family)
            model = attnkit.load(str(path))
            writes = model.capabilities.writes is not None
            prepared = model.prepare(TEXTS, max_new_tokens=0) if writes else model.prepare(TEXTS)
            ids = [p.tgt_in_ids if writes else p.src_ids for p in prepared]
            job[family] = {"family": family, "path": str(path), "ids": ids}
            measured, base, effects = ablation_effects(model, prepared, "zero")
            ours[family] = (measured.name, base, next(iter(effects.values())))
        run = subprocess.run([args.peers_python, "-c", PEER], input=json.dumps(job), capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(run.stderr.strip().splitlines()[-1])
        theirs = json.loads(run.stdout)
    for family, (name, base, effects) in ours.items():
        ref = theirs[family]
        diff = float(np.abs(effects - np.array(ref["effects"])).max())
        print(f"{family}: {effects.size} heads; {name}: attnkit {base:.6f}, transformers {ref['transformers']} "
              f"{ref['base']:.6f}; each head zeroed: largest |attnkit - head_mask| {diff:.1e} "
              f"(effects up to {float(np.abs(effects).max()):.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
