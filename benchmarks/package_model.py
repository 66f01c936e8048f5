"""Turn a trained Multi30k model directory into a model installed with attnkit
(`src/attnkit/shipped/NAME/`, see `attnkit/packaged.py`), with its card and manifest.

    python benchmarks/package_model.py --model-dir runs/bench/transformer_tiny_raw90 --name multi30k-en-de \\
        --recipe "attnkit train configs/multi30k_en_de_transformer_tiny.yaml out_dir=runs/bench/transformer_tiny_raw90 ..."

1. The chosen weights (default: the average of the last 10 checkpoints) are decoded on the
   val set with beam 5, in float32 and rounded to float16; float16 is kept when val BLEU moves by
   at most 0.1 (the choice never looks at the test set). A model exported by
   `multi30k_recipes.py export` brings both val scores in its val.json.
2. The packaged model is evaluated on test_2016_flickr under both conventions with
   `benchmarks/multi30k.py`'s `run` (tok-lc BLEU, detokenized BLEU, chrF, all with signatures).
3. `card.md` records the data and its citation, the recipe, the figures and the val comparison;
   `manifest.json` the SHA-256 of every file and what `attnkit models` lists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from attnkit.data import multi30k, read_lines
from attnkit.evaluation import evaluate
from attnkit.loading import packaged
from attnkit.loading.model_dir import load_model
from attnkit.search import SearchOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multi30k import run

MAX_TOTAL_MB = 25  # all installed models together

DATA_NOTE = """Multi30k task 1 (English-German), 29,000 training pairs of Flickr30k image captions with
professional translations (Elliott, Frank, Sima'an, Specia. "Multi30K: Multilingual English-German
Image Descriptions." VL 2016), from the dataset's public repository (github.com/multi30k/dataset),
which asks users to cite that paper; the captions come from Flickr30k (Young et al. 2014). Check the
dataset's own terms before using this model beyond research and teaching."""


def val_pairs(data: str | None, variant: str) -> tuple[list[str], list[str]]:
    """Multi30k val: the English sources and the German references."""
    src, ref = (read_lines(multi30k.locate("val", lang, root=data, variant=variant)) for lang in ("en", "de"))
    return src, ref


def val_evaluation(model, tok, data: str | None, variant: str):
    """``model``'s val translations (beam 5) and their BLEU."""
    src, ref = val_pairs(data, variant)
    return evaluate(model, tok, src, ref, SearchOptions(beam=5), tokenize="13a" if variant == "raw" else "none")


def val_bleu(model, tok, data: str | None, variant: str) -> float:
    return val_evaluation(model, tok, data, variant).bleu.score


def card(name: str, info: dict, recipe: str, row: dict, val: dict, note: str = "") -> str:
    scores = "\n".join(
        f"| {s['metric']} | {s['test_set']} | **{s['score']:.2f}** | `{s['signature']}` |" for s in info["scores"]
    )
    return f"""# {name}

{info["architecture"]}, {info["parameters"] / 1e6:.2f}M parameters, trained on Multi30k En→De
({info["data"]}). Weights in {info["dtype"]}.

## Use

```bash
echo "Two dogs are playing in the snow." | attnkit translate {name}
attnkit plot {name} "Two dogs are playing in the snow." -o attention.png
```

## Figures (beam 5, fairseq length penalty 1, test_2016_flickr, 1,000 sentences)

| metric | test set | score | sacreBLEU signature |
|---|---|---|---|
{scores}

Val BLEU with float32 weights {val["float32"]:.2f}, rounded to float16 {val["float16"]:.2f}: {info["dtype"]} is shipped
(float16 when it moves BLEU by at most 0.1). Decoding the test set on 2 CPU cores: beam 5 in {row["beam5_s"]:.1f} s,
greedy in {row["greedy_s"]:.1f} s.

## Reproduce
{note}
```bash
{recipe}
python benchmarks/package_model.py --model-dir {info["source"]} --name {name} --recipe "..."
```

## Data

{DATA_NOTE}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument("--name", required=True, help="the installed model's name, e.g. multi30k-en-de")
    ap.add_argument("--recipe", required=True, help="the exact command that trained --model-dir")
    ap.add_argument("--note", default="", help="how the model was trained, for the card (a paragraph)")
    ap.add_argument("--checkpoint", default="average", choices=["best", "last", "average"])
    ap.add_argument(
        "--data",
        default=os.environ.get("ATTNKIT_MULTI30K"),
        help="Multi30k folder (default: $ATTNKIT_MULTI30K, else downloaded)",
    )
    ap.add_argument("--root", type=Path, default=packaged.SHIPPED, help="where installed models live")
    args = ap.parse_args()

    one_set = (args.model_dir / "manifest.json").is_file()  # a packaged model: its weights load as "best"
    model, tok, cfg = load_model(
        args.model_dir, checkpoint_name="best" if one_set else args.checkpoint, average_last=0 if one_set else 10
    )
    variant = cfg.data.multi30k_variant
    arch = {"transformer": "Transformer", "rnn": f"RNN encoder-decoder with Luong {cfg.model.attention} attention"}
    info = {
        "architecture": arch.get(cfg.model.arch, cfg.model.arch)
        + f" ({cfg.model.encoder_layers}+{cfg.model.decoder_layers} layers, "
        f"d_model {cfg.model.d_model})",
        "parameters": sum(p.numel() for p in model.parameters()),
        "data": "Multi30k task 1, " + ("cased raw text" if variant == "raw" else "lowercased tokenized text"),
        "source": str(args.model_dir),
        "scores": [],
    }
    target = args.root / args.name
    exported = args.model_dir / "val.json"  # `multi30k_recipes.py export`: float16 weights, both val scores
    if exported.is_file():
        scores = json.loads(exported.read_text(encoding="utf-8"))
        val = {"float32": scores["val_bleu"], "float16": scores["val_bleu_fp16"]}
        if abs(val["float16"] - val["float32"]) > 0.1:
            raise SystemExit(f"{args.model_dir} holds float16 weights, but float16 moves val BLEU by more than 0.1")
    else:
        val = {"float32": val_bleu(model, tok, args.data, variant)}
        packaged.package_directory(args.model_dir, model, target, dtype=torch.float16, info=info)
        val["float16"] = val_bleu(*load_model(target)[:2], args.data, variant)
    dtype = torch.float16 if abs(val["float16"] - val["float32"]) <= 0.1 else torch.float32
    print(f"val BLEU float32 {val['float32']:.2f}, float16 {val['float16']:.2f}: shipping {dtype}", flush=True)
    packaged.package_directory(args.model_dir, model, target, dtype=dtype, info=info)
    row = run(target, args.data, 1000, "best")
    detok = "cased" if variant == "raw" else "lowercased"
    info["scores"] = [
        {
            "metric": "BLEU (tokenized, lowercased)",
            "test_set": "test_2016_flickr",
            "score": row["bleu_tok"],
            "signature": row["bleu_tok_sig"],
        },
        {
            "metric": f"BLEU (detokenized, {detok})",
            "test_set": "test_2016_flickr",
            "score": row["bleu_detok"],
            "signature": row["bleu_detok_sig"],
        },
        {"metric": "chrF", "test_set": "test_2016_flickr", "score": row["chrf"], "signature": row["chrf_sig"]},
    ]
    info["dtype"] = str(dtype).removeprefix("torch.")
    packaged.package_directory(
        args.model_dir,
        model,
        target,
        dtype=dtype,
        info=info,
        card=card(args.name, info, args.recipe, row, val, f"\n{args.note}\n" if args.note else ""),
    )
    total = sum(m.size_bytes for m in packaged.installed_models(args.root)) / 2**20
    print(packaged.models_report(args.root))
    print(f"all installed models: {total:.1f} MB (limit {MAX_TOTAL_MB} MB)")
    if total > MAX_TOTAL_MB:
        raise SystemExit(f"the installed models take {total:.1f} MB, over the {MAX_TOTAL_MB} MB limit")


if __name__ == "__main__":
    main()
