"""Decoding speed and output of two commits, alternating in separate processes: does a change
keep the translations and the speed?

    python benchmarks/decode_commits.py --model-dir runs/bench/transformer_tiny_actdrop0 --base HEAD~3 --rounds 4

Each round decodes the 1,000 test_2016_flickr sentences with beam 5 and greedy search, once with
the working tree's code and once with ``--base`` (checked out into a temporary git worktree), the
order reversed every other round. It prints every pass's seconds, the medians, and an MD5 of the
translations, which must agree. Separate processes drift by 25-30 % on the 2-core machine: read
medians over several rounds, not single passes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs in the child process against one tree's src/ (older trees took beam= instead of SearchOptions).
CHILD = r"""
import hashlib, json, sys, time
import torch
torch.set_num_threads(int(sys.argv[4]))
from attnkit.data import multi30k, read_lines
from attnkit.loading.model_dir import load_model
from attnkit.inference.translate import translate
try:
    from attnkit.search import SearchOptions
    options = lambda beam: {"options": SearchOptions(beam=beam)}
except ImportError:
    options = lambda beam: {"beam": beam}
model, tok, cfg = load_model(sys.argv[1], checkpoint_name=sys.argv[2])
src = read_lines(multi30k.locate("test_2016_flickr", "en", root=sys.argv[3], variant=cfg.data.multi30k_variant))
translate(model, tok, src[:100], **options(5))  # warm-up
result = {}
for beam in (5, 1):
    start = time.perf_counter()
    out = translate(model, tok, src, **options(beam))
    result[beam] = [time.perf_counter() - start, hashlib.md5("\n".join(t.output for t in out).encode()).hexdigest()]
print(json.dumps(result))
"""


def run(tree: Path, args: argparse.Namespace) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(args.model_dir), args.checkpoint, args.data, str(args.threads)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tree / "src"), "PATH": "/usr/bin:/bin"},
    )
    if done.returncode:
        raise SystemExit(f"{tree}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument("--base", required=True, help="the commit to compare the working tree with")
    ap.add_argument("--checkpoint", default="best", help="best, last or average")
    ap.add_argument(
        "--data",
        default=os.environ.get("ATTNKIT_MULTI30K"),
        help="Multi30k folder (default: $ATTNKIT_MULTI30K, else downloaded)",
    )
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    args.model_dir = args.model_dir.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base],
            check=True,
            capture_output=True,
        )
        try:
            trees = {"base": base, "current": ROOT}
            seconds: dict[tuple[str, str], list[float]] = {}
            hashes: dict[str, set[str]] = {}
            for r in range(args.rounds):
                for name in ("base", "current") if r % 2 == 0 else ("current", "base"):
                    for beam, (s, digest) in run(trees[name], args).items():
                        seconds.setdefault((name, beam), []).append(s)
                        hashes.setdefault(beam, set()).add(digest)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
    print(f"{args.model_dir} ({args.checkpoint}), base {args.base}, {args.rounds} rounds, {args.threads} threads")
    print("| code | beam | seconds per pass | median s |")
    print("|---|---|---|---|")
    for (name, beam), runs in sorted(seconds.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"| {name} | {beam} | {', '.join(f'{s:.2f}' for s in runs)} | {statistics.median(runs):.2f} |")
    same = all(len(h) == 1 for h in hashes.values())
    print("translations identical in every pass" if same else f"TRANSLATIONS DIFFER: {hashes}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
