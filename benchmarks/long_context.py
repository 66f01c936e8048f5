"""A long document in the studio, as a user moves through it: a model of SmolLM2-135M's shape
(``capture_scale.py`` builds it: Llama, 30 layers x 9 heads, random weights) over the project's
docs at 2,048 / 4,096 / 8,192 tokens.

    python benchmarks/long_context.py                  # 2048 4096 8192 tokens
    python benchmarks/long_context.py --tokens 8192

For each length, in one run:

  sdpa       transformers alone: one forward with attn_implementation="sdpa" (its own process)
  record     attnkit's capture of the same tokens (its own process): the baseline's ratio
  studio     `attnkit serve DIR` (its own process) driven by chromium through Playwright: the
             text typed, "Generate" with 0 new tokens, then in the matrix tab
               first overview   a head never drawn: from choosing it to its overview on screen
               switch           back to a head already drawn (the page keeps its answers)
               tile             zoomed to a 256 x 256 block: every cell exact, from the server
               head list        every head's summaries (entropy, sink, local, distance)
             and the server's peak resident memory (VmHWM), which must grow with T, not T².

Times are wall-clock from the Python side of Playwright (each includes one round trip to the
page); the CPU is named in the first line.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import capture_scale  # noqa: E402  (beside this file)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def studio(folder: Path, n: int, *, head_list: bool = True) -> dict:
    """The studio over ``n`` tokens of the docs, driven as a user would (the head list too unless
    ``head_list`` is false)."""
    from playwright.sync_api import sync_playwright

    text, _ = capture_scale.text_of(folder, n)
    port = _port()
    server = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "serve", str(folder), "--port", str(port), "--max-tokens", "65536"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # as a user starts it: glibc's default allocator, so the peak includes its heap high-water
    out: dict = {}
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        if "attnkit studio:" not in line:
            return {"error": line.strip() or "the server did not start"}
        idle = _peak_mib(server.pid)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("/generated/.test(document.getElementById('status').textContent)", timeout=120_000)
            page.fill("#text", text)
            page.fill("#new-tokens", "0")
            start = time.perf_counter()
            page.click("#go")
            page.wait_for_function("document.body.classList.contains('long')", timeout=600_000)
            out["forward_s"] = time.perf_counter() - start
            out["tokens"] = page.evaluate("attnkit.example().remote.decoder[2]")
            page.click("#tabs [data-tab=matrix]")
            done = "/computed in/.test(document.getElementById('readout').textContent)"
            page.wait_for_function(done, timeout=120_000)  # the mean of the last layer's heads

            def show(head: int) -> float:
                page.evaluate("document.getElementById('readout').textContent = ''")
                t0 = time.perf_counter()
                page.select_option("#head", str(head))
                page.wait_for_function(done, timeout=120_000)
                return time.perf_counter() - t0

            out["first_overview_s"] = max(show(0), show(4))  # two heads never drawn: the slower
            out["switch_s"] = max(show(0), show(4), show(0))  # heads already drawn
            page.evaluate("document.getElementById('readout').textContent = ''")
            t0 = time.perf_counter()
            page.evaluate(
                "(() => { const t = attnkit.example().remote.decoder[2];"
                " attnkit.state.long = { kind: 'decoder', region: [t - 256, t, t - 512, t - 256] }; attnkit.draw(); })()"
            )
            page.wait_for_function(done, timeout=120_000)
            out["tile_s"] = time.perf_counter() - t0
            if page.get_attribute("#matrix", "data-exact") != "true":
                return {"error": "the 256 x 256 block was not drawn cell by cell"}
            if not head_list:
                browser.close()
                out["server_peak_mib"] = _peak_mib(server.pid)
                return out
            t0 = time.perf_counter()
            page.click("#tabs [data-tab=heads]")
            page.wait_for_function(
                "document.querySelectorAll('table.heads tr[data-layer]').length === 270", timeout=1_200_000
            )
            out["head_list_s"] = time.perf_counter() - t0
            browser.close()
        out["server_peak_mib"] = _peak_mib(server.pid)
        out["server_idle_mib"] = idle
    finally:
        server.terminate()
        server.wait(timeout=60)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[2048, 4096, 8192])
    p.add_argument("--model", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    args = p.parse_args()
    import torch

    from machine import cpu_name

    capture_scale.build(args.model)
    print(f"# SmolLM2-135M shape, random weights; {cpu_name()}; {args.threads} thread(s); torch {torch.__version__}")
    print(
        "tokens | sdpa s | record s (x) | studio forward s | first overview s | switch s | tile s | "
        "head list s | server peak MiB (idle)"
    )
    shared = argparse.Namespace(
        model=args.model, device="cpu", threads=args.threads, malloc_default=False, before_src=None
    )
    for n in args.tokens:
        base = capture_scale.measure("sdpa", n, shared)
        rec = capture_scale.measure("record", n, shared)
        s = studio(args.model, n)
        if "error" in s or "error" in base or "error" in rec:
            print(f"{n} | {base.get('error', '')} {rec.get('error', '')} {s.get('error', '')}")
            continue
        print(
            f"{n:,} | {base['forward_s']:.2f} | {rec['forward_s']:.2f} ({rec['forward_s'] / base['forward_s']:.2f}) | "
            f"{s['forward_s']:.2f} | {s['first_overview_s']:.2f} | {1000 * s['switch_s']:.0f} ms | "
            f"{1000 * s['tile_s']:.0f} ms | {s['head_list_s']:.1f} | {s['server_peak_mib']:,.0f} ({s['server_idle_mib']:,.0f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
