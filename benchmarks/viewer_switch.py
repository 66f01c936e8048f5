"""How long the viewer takes to draw another layer or head, per view, in chromium.

    python benchmarks/viewer_switch.py [--tokens 100 200 400] [--repeats 6]

A synthetic sentence of N tokens with 4 layers x 4 heads of random softmax attention in all
three kinds is written with `attnkit view`'s writer; for each view the page switches layer and
head `--repeats` times and the median time per switch is printed.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from playwright.sync_api import sync_playwright

from attnkit.inspection import AttentionRecord
from attnkit.viewer import write_html
from attnkit.viewer.screenshot import find_browser
from machine import cpu_name

SWITCH = """(repeats) => {
    const out = [], layer = document.getElementById('layer'), head = document.getElementById('head');
    for (let i = 0; i < repeats; i++) {
        const t = performance.now();
        layer.value = String(i % 4); layer.dispatchEvent(new Event('change'));
        head.value = String(i % 4); head.dispatchEvent(new Event('change'));
        out.push((performance.now() - t) / 2);
    }
    return out.sort((a, b) => a - b);
}"""


def page_for(n: int, folder: Path) -> Path:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 4, n, n)) * 3
    maps = {
        k: (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
        for k in ("encoder", "decoder", "cross")
    }
    tokens = [f"tok{i}" for i in range(n)]
    return write_html(
        folder / f"view_{n}.html", [AttentionRecord("x", tokens, maps, "y", tokens, tokens)], {"arch": "transformer"}
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=[100, 200])
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    print(f"CPU: {cpu_name()}")
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_browser(), args=["--no-sandbox", "--disable-gpu"])
        for n in args.tokens:
            path = page_for(n, Path(tmp))
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(path.resolve().as_uri())
            page.wait_for_selector("#lines line", state="attached")
            for tab in ("head", "model", "matrix"):
                page.click(f"#tabs [data-tab={tab}]")
                times = page.evaluate(SWITCH, args.repeats)
                print(
                    f"{n:>5} tokens  {tab:<7} median {times[len(times) // 2]:7.1f} ms per switch  (max {times[-1]:.1f})"
                )
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
