"""`attnkit view` of a long document against the model's own forward, in one run.

    python benchmarks/page_speed.py [--tokens 2048 8192]

The model is ``capture_scale.py``'s (SmolLM2-135M's shape, random weights); the text is the
project's docs cut to exactly T tokens. For each T: transformers' SDPA forward of the tokens (the
baseline), then `attnkit view DIR --document F --max-new-tokens 0` in its own process (the forward
with its record, every layer and head pooled into overviews with their summaries, the page
written), and the ratio of the two. The target is a page in at most twice the forward's time.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import capture_scale
from machine import cpu_name


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    args = p.parse_args()
    folder = capture_scale.build(args.folder)
    print(f"{cpu_name()}; SmolLM2-135M's shape, random weights")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.tokens:
            forward = capture_scale.run_sdpa(folder, n, "cpu")["forward_s"]
            text, _ = capture_scale.text_of(folder, n)
            doc = Path(tmp) / "doc.txt"
            doc.write_text(text, encoding="utf-8")
            cmd = [sys.executable, "-m", "attnkit", "view", str(folder), "--document", str(doc),
                   "--max-new-tokens", "0", "-o", str(Path(tmp) / "page.html")]  # fmt: skip
            t0 = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True)
            page = time.perf_counter() - t0
            if done.returncode:
                raise SystemExit(f"attnkit view failed at {n} tokens: {done.stderr.strip().splitlines()[-1]}")
            print(f"{n:>6} tokens: forward {forward:.1f} s, page {page:.1f} s ({page / forward:.1f}x)", flush=True)


if __name__ == "__main__":
    main()
