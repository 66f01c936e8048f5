"""Multi30k En->De recipes on the cased raw text, side by side: train several at once, export each
(average of the last 10 checkpoints, scored on val), and distil a teacher into new targets.

    python benchmarks/multi30k_recipes.py train tiny-cosine rnn-global rnn-local-p --minutes 90
    python benchmarks/multi30k_recipes.py export runs/recipes/tiny-cosine --to exported/
    python benchmarks/multi30k_recipes.py export runs/recipes/tiny-kd --to exported/ --against multi30k-en-de
    python benchmarks/multi30k_recipes.py distill exported/tiny-cosine --out runs/recipes/kd.de.gz
    python benchmarks/multi30k_recipes.py train tiny-kd rnn-kd --kd runs/recipes/kd.de.gz --minutes 90
    python benchmarks/multi30k_recipes.py train tiny-kd rnn-kd --kd runs/recipes/kd.de.gz --minutes 90 --resume

Every recipe is a config plus overrides (``RECIPES``); the ``-kd`` recipes train on the training
sources paired with a teacher's beam-5 translations of them (sequence-level knowledge distillation,
Kim & Rush 2016), the ``-mix`` ones on those pairs and the original pairs together (several ``--kd``
files: every teacher's pairs); the ``-tune`` ones go on from a trained model (``--set
train.init_from=MODEL``). Runs started together share the machine (on a GPU, its one device);
``--minutes`` is each run's budget, and the cosine schedules end when it does; a run stopped or
killed before its budget's end goes on from its last checkpoint when the same command is given
again with ``--resume``. The val set alone chooses between recipes: ``export`` prints
val BLEU (beam 5, fairseq length penalty 1) and writes it to ``val.json`` beside the exported model;
with ``--against MODEL`` also the paired bootstrap against that model, and whether the run clears the
adoption rule (higher val with p < 0.05).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # package_model's val_bleu
TINY = "configs/multi30k_en_de_transformer_tiny.yaml"
RNN = "configs/multi30k_en_de_rnn_luong.yaml"
RAW = ["data.multi30k_variant=raw", "train.bleu_tokenize=13a"]
TIME = ["train.schedule=cosine", "train.time_schedule=true", "train.max_steps=1000000"]
TINY_COSINE = ["train.accumulate=1", "train.lr=0.004", "train.warmup=1000", "train.eval_every=200", *TIME]
RNN_COSINE = ["train.eval_every=500", *TIME]
TUNE = ["train.accumulate=1", "train.warmup=300", "train.eval_every=200", *TIME]
BASE = [  # a wider, deeper teacher: 6+6 layers, d_model 256, FFN 1024
    "model.d_model=256",
    "model.transformer.ffn=1024",
    "model.encoder_layers=6",
    "model.decoder_layers=6",
    "train.accumulate=2",
    "train.lr=0.002",
    "train.warmup=2000",
    "train.eval_every=200",
    *TIME,
]

ENSEMBLE = "multi30k-en-de,multi30k-en-de-rnn"  # the installed models, decoded together

RECIPES: dict[str, tuple[str, list[str]]] = {
    # the published schedule: 2 x 4,096 tokens an update, inverse-sqrt, 8,000 updates
    "tiny-published": (TINY, []),
    # attnkit's time-budgeted schedule: one 4,096-token batch an update, cosine to the budget's end
    "tiny-cosine": (TINY, TINY_COSINE),
    "base-cosine": (TINY, BASE),
    "rnn-global": (RNN, [*RNN_COSINE, "model.rnn.attention=global"]),
    "rnn-local-p": (RNN, [*RNN_COSINE, "model.rnn.attention=local-p"]),
    # students on a teacher's translations (--kd)
    "tiny-kd": (TINY, TINY_COSINE),
    "tiny-kd-mix": (TINY, TINY_COSINE),
    # the same with BPE-dropout (Provilkov et al. 2020): each epoch's pairs segmented afresh, p = 0.1
    "tiny-bpedrop-kd-mix": (TINY, [*TINY_COSINE, "tokenizer.sampling=0.1"]),
    # the widest student that keeps the installed models within 25 MB together: d_model 160, FFN 320
    # (6.7 MB in float16)
    "small-kd-mix": (TINY, [*TINY_COSINE, "model.d_model=160", "model.transformer.ffn=320"]),
    # 4,096-token batches: on a GPU an RNN update takes about as long at 4,096 tokens as at 1,024
    "rnn-global-kd": (RNN, [*RNN_COSINE, "model.rnn.attention=global", "train.batch_tokens=4096"]),
    "rnn-local-p-kd": (RNN, [*RNN_COSINE, "model.rnn.attention=local-p", "train.batch_tokens=4096"]),
    "rnn-global-kd-mix": (RNN, [*RNN_COSINE, "model.rnn.attention=global", "train.batch_tokens=4096"]),
    # a trained student's second stage (--set train.init_from=MODEL): a short warm-up to a lower
    # peak than the first stage's 0.004, then cosine to the budget's end
    "tiny-tune1-kd-mix": (TINY, [*TUNE, "train.lr=0.001"]),
    "tiny-tune2-kd-mix": (TINY, [*TUNE, "train.lr=0.002"]),
    # a fresh student (random weights, the teachers' vocabulary) that also learns the two installed models'
    # next-word distributions (word-level distillation: their averaged probabilities, the 8 most likely
    # words a position, half the loss) besides their translations and the references
    "tiny-taught-kd-mix": (TINY, [*TINY_COSINE, f"train.teacher={ENSEMBLE}", "train.teacher_weight=0.5"]),
    # R-Drop (Liang et al. 2021, alpha 5 as published for translation): every batch twice, two dropout
    # masks, their distributions pulled together; 2,048-token batches keep an update's compute the recipe's
    "tiny-rdrop-kd-mix": (TINY, [*TINY_COSINE, "train.rdrop=5", "train.batch_tokens=2048"]),
    # the reverse direction (German -> English), on the same pairs read the other way: the references
    # and the teachers' German translations as sources, the English training sources as targets (the
    # channel model that `--rerank` scores a beam with)
    "tiny-de-en-kd-mix": (TINY, [*TINY_COSINE, "data.src_lang=de", "data.tgt_lang=en"]),
    # English -> German written from the end of the sentence back (Sennrich et al. 2016): a second
    # opinion on a beam's outputs that reads each one in the other order
    "tiny-r2l-kd-mix": (TINY, [*TINY_COSINE, "tokenizer.right_to_left=true"]),
    # the same as a second stage of the installed model
    "tiny-taught-tune2-kd-mix": (
        TINY,
        [*TUNE, "train.lr=0.002", f"train.teacher={ENSEMBLE}", "train.teacher_weight=0.5"],
    ),
}


def multi30k_file(split: str, lang: str) -> Path:
    from attnkit.data import multi30k

    return Path(multi30k.locate(split, lang, root=os.environ.get("ATTNKIT_MULTI30K"), variant="raw"))


def distilled_data(name: str, kd: list[Path], runs: Path) -> list[str]:
    """Overrides that train ``name`` on the teachers' targets ``kd`` (and the originals for -mix);
    a ``-de-en`` recipe reads those pairs from German to English."""
    from attnkit.data import read_lines

    src, tgt = multi30k_file("train", "en"), multi30k_file("train", "de")
    if len(kd) > 1 or name.endswith("-mix"):
        sources, targets = read_lines(src), [line for path in kd for line in read_lines(path)]
        if name.endswith("-mix"):
            targets = read_lines(tgt) + targets
        folder = runs / "data" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "train.en").write_text("\n".join(sources * (len(targets) // len(sources))) + "\n", encoding="utf-8")
        (folder / "train.de").write_text("\n".join(targets) + "\n", encoding="utf-8")
        src, kd = folder / "train.en", [folder / "train.de"]
    pairs = {
        "train_src": src,
        "train_tgt": kd[0],
        "dev_src": multi30k_file("val", "en"),
        "dev_tgt": multi30k_file("val", "de"),
    }
    if "-de-en" in name:
        pairs = {
            f"{split}_{a}": pairs[f"{split}_{b}"]
            for split in ("train", "dev")
            for a, b in (("src", "tgt"), ("tgt", "src"))
        }
    return [f"data.{key}={path}" for key, path in pairs.items()]


def train(
    names: list[str], runs: Path, minutes: float, kd: list[Path], threads: int, extra: list[str], resume: bool = False
) -> None:
    """Start every recipe in its own process, wait for all; a failed one fails the command. With
    ``resume`` each run goes on from its last checkpoint (the same arguments as its start)."""
    runs.mkdir(parents=True, exist_ok=True)
    procs = {}
    for name in names:
        config, overrides = RECIPES[name]
        data = distilled_data(name, kd, runs) if "-kd" in name and kd else []
        if "-kd" in name and not kd:
            raise SystemExit(f"recipe {name} needs --kd (a teacher's translations of the training sources)")
        command = [sys.executable, "-m", "attnkit", "train", str(ROOT / config), f"out_dir={runs / name}"]
        command += [*RAW, *overrides, *data, f"train.max_minutes={minutes}", *extra, *(["--resume"] if resume else [])]
        print(" ".join(command[2:]), flush=True)
        log = open(runs / f"{name}.out", "a" if resume else "w")  # noqa: SIM115 (closed after the wait)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        procs[name] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env), log)
    failed = []
    for name, (proc, log) in procs.items():
        if proc.wait() != 0:
            failed.append(name)
        log.close()
        print(f"{name}: exit {proc.returncode}; " + (runs / f"{name}.out").read_text()[-300:].strip(), flush=True)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


def export(run: Path, to: Path, against: tuple[str, Any] | None = None) -> dict:
    """The average of the last 10 checkpoints, scored on val in float32 and rounded to float16,
    packaged in float16 under ``to/NAME``. With ``against`` (a model's name and its val
    evaluation, ``baseline``), the float16 weights' val translations are also compared with that
    model's: a paired bootstrap p-value of the difference, and whether it clears the adoption rule
    (higher val, p < 0.05)."""
    import torch

    from attnkit.loading import packaged
    from attnkit.loading.model_dir import load_model
    from mbr import paired_p
    from package_model import val_bleu, val_evaluation, val_pairs

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok, cfg = load_model(run, checkpoint_name="average", average_last=10, device=device)
    data = os.environ.get("ATTNKIT_MULTI30K")
    langs = (cfg.data.src_lang, cfg.data.tgt_lang)
    rounded = val_evaluation(copy.deepcopy(model).half().float(), tok, data, "raw", langs)  # as float16 weights
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    end = [r for r in records if r["kind"] == "end"][-1]
    info = {
        "recipe": run.name,
        "val_bleu": val_bleu(model, tok, data, "raw", langs),
        "val_bleu_fp16": rounded.bleu.score,
        "updates": end["step"],
        "train_minutes": end["train_seconds"] / 60,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if against:
        name, old = against
        p = paired_p(old.hypotheses, rounded.hypotheses, val_pairs(data, "raw", langs)[1])
        adopt = rounded.bleu.score > old.bleu.score and p < 0.05
        info |= {"against": name, "against_val_bleu": old.bleu.score, "paired_p": p, "adopt": adopt}
    packaged.package_directory(run, model.cpu(), to / run.name, dtype=torch.float16, info=info)
    (to / run.name / "val.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps(info), flush=True)
    return info


def baseline(name: str) -> tuple[str, Any]:
    """An installed model (by name) or a model directory, and its val evaluation (beam 5); a
    one-line error when there is no such model."""
    from attnkit.loading.model_dir import load_translators
    from attnkit.loading.packaged import resolve_model
    from package_model import val_evaluation

    try:
        path = resolve_model(Path(name) if Path(name).is_dir() else name)
    except FileNotFoundError as error:
        raise SystemExit(f"error: {error}") from None
    models, tok, _ = load_translators([path])
    return name, val_evaluation(models[0], tok, os.environ.get("ATTNKIT_MULTI30K"), "raw")


def distill(teachers: list[Path], out: Path, limit: int = 0, beam: int = 5, mbr: bool = False) -> None:
    """The teacher's translations of the training sources (the first ``limit``; 0: all), one line
    each, to ``out`` (.gz): beam search's best, or with ``mbr`` the beam's consensus (MBR
    distillation). Several teachers (one vocabulary) translate as an ensemble."""
    from attnkit.atomic import atomic_path
    from attnkit.data import read_lines

    with atomic_path(out) as tmp:
        source, plain = tmp.with_suffix(".en"), tmp.with_suffix(".txt")
        lines = read_lines(multi30k_file("train", "en"))
        source.write_text("\n".join(lines[:limit] if limit else lines) + "\n", encoding="utf-8")
        command = [sys.executable, "-m", "attnkit", "translate", str(teachers[0]), "-i", str(source)]
        if len(teachers) > 1:
            command += ["--ensemble", *map(str, teachers[1:])]
        command += ["--beam", str(beam), *(["--mbr"] if mbr else [])]
        subprocess.run([*command, "-o", str(plain)], check=True)
        lines = plain.read_text(encoding="utf-8").splitlines()
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        plain.unlink()
        source.unlink()
    print(f"{out}: {len(lines)} lines", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("recipes", nargs="+", choices=sorted(RECIPES))
    t.add_argument("--runs", type=Path, default=Path("runs/recipes"))
    t.add_argument("--minutes", type=float, required=True, help="each run's training budget")
    t.add_argument(
        "--kd", type=Path, nargs="*", default=[], help="teachers' translations of the training sources (distill)"
    )
    t.add_argument("--threads", type=int, default=2, help="PyTorch CPU threads per run")
    t.add_argument("--set", nargs="*", default=[], help="more config overrides, e.g. train.max_steps=13656")
    t.add_argument("--resume", action="store_true", help="continue each run from its last checkpoint")
    e = sub.add_parser("export")
    e.add_argument("runs", nargs="+", type=Path)
    e.add_argument("--to", type=Path, required=True)
    e.add_argument("--against", default="", help="an installed model to compare with on val (paired bootstrap)")
    d = sub.add_parser("distill")
    d.add_argument("teachers", nargs="+", type=Path, help="one model, or several decoded as an ensemble")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--limit", type=int, default=0, help="only the first N training sources (a check)")
    d.add_argument("--beam", type=int, default=5)
    d.add_argument("--mbr", action="store_true", help="the beam's consensus output (minimum Bayes risk)")
    args = ap.parse_args()
    if args.command == "train":
        train(args.recipes, args.runs, args.minutes, args.kd, args.threads, args.set, args.resume)
    elif args.command == "export":
        against = baseline(args.against) if args.against else None  # decoded once, before any export
        for run in args.runs:
            export(run, args.to, against)
    else:
        distill(args.teachers, args.out, args.limit, args.beam, args.mbr)


if __name__ == "__main__":
    main()
