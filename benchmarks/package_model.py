"""Turn a trained Multi30k model directory into a model installed with attnkit
(`src/attnkit/shipped/NAME/`, see `attnkit/packaged.py`), with its card and manifest.

    python benchmarks/package_model.py --model-dir runs/bench/transformer_tiny_raw90 --name multi30k-en-de \\
        --recipe "attnkit train configs/multi30k_en_de_transformer_tiny.yaml out_dir=runs/bench/transformer_tiny_raw90 ..."

1. The chosen weights (default: the average of the last 10 checkpoints) are decoded on the
   val set with beam 5 as they are and as stored in float16 (with --int8 first as 8-bit
   matrices with a scale per row). The smallest storage whose val BLEU moves by at most 0.1 is
   kept, float32 when none does (the choice never looks at the test set). A model exported by
   `multi30k_recipes.py export` (float16) brings its float32 val score in its val.json.
   The model's direction (En->De, De->En) is its config's.
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

MAX_TOTAL_MB = 28  # all installed models together (the five translators and stdlib-lm)

DATA_NOTE = """Multi30k task 1 (English-German), 29,000 training pairs of Flickr30k image captions with
professional translations (Elliott, Frank, Sima'an, Specia. "Multi30K: Multilingual English-German
Image Descriptions." VL 2016), from the dataset's public repository (github.com/multi30k/dataset),
which asks users to cite that paper; the captions come from Flickr30k (Young et al. 2014). Check the
dataset's own terms before using this model beyond research and teaching."""


LANGS = ("en", "de")  # the installed models' direction unless a config says otherwise
EXAMPLES = {"en": "Two dogs are playing in the snow.", "de": "Zwei Hunde spielen im Schnee."}
STORAGE = {  # what each stored dtype means, for the card
    "int8": "8-bit matrices with a float32 scale per row, other tensors float16",
    "float16": "float16",
    "float32": "float32",
}


def val_pairs(data: str | None, variant: str, langs: tuple[str, str] = LANGS) -> tuple[list[str], list[str]]:
    """Multi30k val: the sources and the references (by default English into German)."""
    src, ref = (read_lines(multi30k.locate("val", lang, root=data, variant=variant)) for lang in langs)
    return src, ref


def val_evaluation(model, tok, data: str | None, variant: str, langs: tuple[str, str] = LANGS):
    """``model``'s val translations (beam 5) and their BLEU."""
    src, ref = val_pairs(data, variant, langs)
    return evaluate(model, tok, src, ref, SearchOptions(beam=5), tokenize="13a" if variant == "raw" else "none")


def val_bleu(model, tok, data: str | None, variant: str, langs: tuple[str, str] = LANGS) -> float:
    return val_evaluation(model, tok, data, variant, langs).bleu.score


def card(
    name: str, info: dict, recipe: str, row: dict, val: dict, langs: tuple[str, str], note: str = "", flags: str = ""
) -> str:
    scores = "\n".join(
        f"| {s['metric']} | {s['test_set']} | **{s['score']:.2f}** | `{s['signature']}` |" for s in info["scores"]
    )
    example = EXAMPLES.get(langs[0], EXAMPLES["en"])
    stored = [k for k in ("int8", "float16") if k in val]
    measured = ", ".join(f"stored as {k} {val[k]:.2f}" for k in stored)
    return f"""# {name}

{info["architecture"]}, {info["parameters"] / 1e6:.2f}M parameters, trained on Multi30k
{langs[0].title()}→{langs[1].title()} ({info["data"]}). Weights: {STORAGE[info["dtype"]]}.

## Use

```bash
echo "{example}" | attnkit translate {name}
attnkit plot {name} "{example}" -o attention.png
```

## Figures (beam 5, fairseq length penalty 1, test_2016_flickr, 1,000 sentences)

| metric | test set | score | sacreBLEU signature |
|---|---|---|---|
{scores}

Val BLEU (beam 5) with the weights {val["from"]} {val["float32"]:.2f}, {measured}: {info["dtype"]} is shipped
(the smallest storage tried that moves val BLEU by at most 0.1). Decoding the test set on 2 CPU cores: beam 5 in {row["beam5_s"]:.1f} s,
greedy in {row["greedy_s"]:.1f} s.

## Reproduce
{note}
```bash
{recipe}
python benchmarks/package_model.py --model-dir {info["source"]} --name {name}{flags} --recipe "..."
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
    ap.add_argument("--int8", action="store_true", help="try 8-bit matrices (a scale per row) before float16")
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
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    arch = {"transformer": "Transformer", "rnn": f"RNN encoder-decoder with Luong {cfg.model.rnn.attention} attention"}
    info = {
        "architecture": arch.get(cfg.model.arch, cfg.model.arch)
        + f" ({cfg.model.encoder_layers}+{cfg.model.decoder_layers} layers, "
        f"d_model {cfg.model.d_model})" + (", writing its output right to left" if cfg.tokenizer.right_to_left else ""),
        "parameters": sum(p.numel() for p in model.parameters()),
        "data": "Multi30k task 1, " + ("cased raw text" if variant == "raw" else "lowercased tokenized text"),
        "direction": "-".join(langs),
        "source": str(args.model_dir),
        "scores": [],
    }
    target = args.root / args.name
    exported = args.model_dir / "val.json"  # `multi30k_recipes.py export`: the float32 weights' val score
    if exported.is_file():
        val = {"float32": json.loads(exported.read_text(encoding="utf-8"))["val_bleu"], "from": "as trained (float32)"}
    else:
        val = {"float32": val_bleu(model, tok, args.data, variant, langs), "from": "as trained (float32)"}
        if one_set:  # an installed model, packaged again: its stored weights are the reference
            stored = json.loads((args.model_dir / "manifest.json").read_text(encoding="utf-8"))["info"].get("dtype")
            val["from"] = f"of the {stored} package it was made from"
    dtype = torch.float32
    for candidate in (torch.int8, torch.float16) if args.int8 else (torch.float16,):  # smallest first
        packaged.package_directory(args.model_dir, model, target, dtype=candidate, info=info)
        name = str(candidate).removeprefix("torch.")
        val[name] = val_bleu(*load_model(target)[:2], args.data, variant, langs)
        if abs(val[name] - val["float32"]) <= 0.1:
            dtype = candidate
            break
    stored = ", ".join(f"{k} {val[k]:.2f}" for k in ("int8", "float16") if k in val)
    print(f"val BLEU {val['from']} {val['float32']:.2f}, {stored}: shipping {dtype}", flush=True)
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
        card=card(
            args.name,
            info,
            args.recipe,
            row,
            val,
            langs,
            f"\n{args.note}\n" if args.note else "",
            " --int8" * args.int8,
        ),
    )
    total = sum(m.size_bytes for m in packaged.installed_models(args.root)) / 2**20
    print(packaged.models_report(args.root))
    print(f"all installed models: {total:.1f} MB (limit {MAX_TOTAL_MB} MB)")
    if total > MAX_TOTAL_MB:
        raise SystemExit(f"the installed models take {total:.1f} MB, over the {MAX_TOTAL_MB} MB limit")


if __name__ == "__main__":
    main()
