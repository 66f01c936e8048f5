"""Every layer and head of a long input, side by side: attnkit against bertviz, TransformerLens
and inseq on the same model and the same tokens.

    python benchmarks/peers_long.py --peers-python /tmp/peers/bin/python
    python benchmarks/peers_long.py --peers-python PY --tokens 512 2048

The model is ``capture_scale.py``'s (SmolLM2-135M's shape: Llama, 30 layers x 9 heads sharing
3 key/value heads, random weights, a Hugging Face directory); the text is the project's docs,
cut to exactly T tokens. The peers come from PyPI into their own environment (PY), built with
torch pinned so pip never resolves another:

    python -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0
    /tmp/peers/bin/pip install -c <(echo torch==2.13.0) transformer-lens inseq bertviz \\
        "transformers<5" "datasets<4"      # transformer-lens 2.9 imports names transformers 5 removed

Each tool does what a user does to see every layer and head, in its own process:

  attnkit view     `attnkit view DIR --document F --max-new-tokens 0`: the record, then a page with
                   every layer and head (overviews pooled to 512 px past the page budget); the
                   page opened in chromium until its first view is drawn
  attnkit serve    `attnkit serve DIR`, the text typed in chromium: the forward, then the first
                   overview of one head (``long_context.py`` times the rest)
  bertviz          transformers' eager forward with output_attentions, ``head_view`` (every layer
                   and head) written as a page, opened in chromium (its CDN scripts from npm, as
                   ``viewer_long.py`` serves them) until a line is drawn
  TransformerLens  ``HookedTransformer`` of the same config and weights (``n_ctx`` = T: it keeps a
                   T x T mask per layer), ``run_with_cache`` keeping every layer's ``hook_pattern``
  inseq            ``inseq.load_model(model, "attention")``, ``attribute`` of the text's last token (its
                   row of every layer and head: inseq keeps the attributed tokens' rows)

Reported: wall time, peak resident memory of the tool's process (the model included), and
whether it finished. Before each run its memory is estimated from how the tool holds the maps
(below); a run whose estimate exceeds the memory available is refused with its estimate, and
each peer process also runs under an address-space limit of what is available, so a tool that
needs more fails with its own out-of-memory error instead of meeting the kernel's OOM killer.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import capture_scale  # noqa: E402  (beside this file)

TIMEOUT_S = 300  # a page not drawn by then is reported as such
V8_STRING = 2**29 - 24  # V8's longest string (64-bit): a page's script longer than this cannot be read
LAYERS, HEADS = capture_scale.SHAPE["num_hidden_layers"], capture_scale.SHAPE["num_attention_heads"]


def weights(n: int) -> int:
    """Attention weights of every layer and head over ``n`` tokens."""
    return LAYERS * HEADS * n * n


# Bytes each tool holds per attention weight at its peak (the model's ~0.6 GB aside), from how it
# keeps them: eager attention's float32 maps; bertviz adds them as Python floats in lists (32 B)
# and twice as JSON text (about 22 B each); TransformerLens keeps each layer's float32 pattern and
# forms scores, masked scores and pattern of one layer at a time; inseq keeps the forward's maps
# and its own stacked copies of them.
ESTIMATE = {"bertviz": 4 + 32 + 2 * 22, "transformer_lens": 4, "inseq": 3 * 4}


def estimate_bytes(tool: str, n: int) -> int:
    per_layer = 4 * HEADS * n * n * 4 if tool == "transformer_lens" else 0  # one layer's scores, mask, pattern
    mask = LAYERS * n * n if tool == "transformer_lens" else 0  # its causal mask buffers (bool)
    return weights(n) * ESTIMATE[tool] + per_layer + mask + 2**30


def available_bytes() -> int:
    text = Path("/proc/meminfo").read_text()
    return int(re.search(r"MemAvailable:\s+(\d+) kB", text).group(1)) * 1024  # type: ignore[union-attr]


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- the peers (run in the peers' environment) ------------------------------------------------
def _hf_model(folder: Path, impl: str):
    import torch
    import transformers as T

    torch.set_num_threads(2)
    return T.AutoModelForCausalLM.from_pretrained(folder, attn_implementation=impl).eval()


def _tokenizer(folder: Path):
    import transformers as T  # the directory's tokenizer_config names a class of transformers 5: its file alone

    return T.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), bos_token="<|endoftext|>",
                                     eos_token="<|endoftext|>")  # fmt: skip


def run_bertviz(folder: Path, ids: list[int], out: Path) -> dict:
    import torch
    from bertviz import head_view

    model = _hf_model(folder, "eager")
    tokens = _tokenizer(folder).convert_ids_to_tokens(ids)
    t0 = time.perf_counter()
    with torch.no_grad():
        attentions = model(torch.tensor([ids]), output_attentions=True).attentions
    html = head_view(attentions, tokens, html_action="return").data
    out.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{html}</body></html>", "utf-8")
    return {"s": time.perf_counter() - t0, "page_mb": round(out.stat().st_size / 2**20, 1)}


def run_transformer_lens(folder: Path, ids: list[int], out: Path) -> dict:
    import torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_llama_weights

    hf = _hf_model(folder, "eager")
    c = hf.config
    cfg = HookedTransformerConfig(
        n_layers=c.num_hidden_layers, d_model=c.hidden_size, n_heads=c.num_attention_heads,
        d_head=c.hidden_size // c.num_attention_heads, n_key_value_heads=c.num_key_value_heads,
        d_mlp=c.intermediate_size, d_vocab=c.vocab_size, n_ctx=len(ids), act_fn="silu", normalization_type="RMS",
        eps=c.rms_norm_eps, positional_embedding_type="rotary", rotary_base=c.rope_theta,
        rotary_dim=c.hidden_size // c.num_attention_heads, final_rms=True, gated_mlp=True,
        original_architecture="LlamaForCausalLM", device="cpu",
    )  # fmt: skip
    model = HookedTransformer(cfg)
    model.load_state_dict(convert_llama_weights(hf, cfg), strict=False)
    del hf
    t0 = time.perf_counter()
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor([ids]), names_filter=lambda name: name.endswith("hook_pattern"))
    shape = tuple(cache["pattern", 0].shape)
    return {"s": time.perf_counter() - t0, "layers": len(cache), "shape": shape}


def run_inseq(folder: Path, ids: list[int], out: Path) -> dict:
    import inseq

    model = _hf_model(folder, "eager")
    tok = _tokenizer(folder)
    wrapped = inseq.load_model(model, "attention", tokenizer=tok)
    t0 = time.perf_counter()  # the last token attributed, forced (a random model's greedy token may end the text)
    result = wrapped.attribute(tok.decode(ids[:-1]), tok.decode(ids), show_progress=False)
    shape = tuple(result.sequence_attributions[0].target_attributions.shape)  # keys x 1 x layers x heads
    return {"s": time.perf_counter() - t0, "shape": shape}


def child(args: argparse.Namespace) -> None:
    """One tool over the tokens in ``args.ids``, its answer as JSON on the last line."""
    ids = json.loads(Path(args.ids).read_text())
    resource.setrlimit(resource.RLIMIT_AS, (args.limit, resource.RLIM_INFINITY))  # its own MemoryError, no OOM kill
    run = {"bertviz": run_bertviz, "transformer_lens": run_transformer_lens, "inseq": run_inseq}[args.child]
    try:
        got = run(Path(args.folder), ids, Path(args.out))
    except (MemoryError, RuntimeError) as err:
        got = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"}
    got["peak_mib"] = _peak_mib()
    print(json.dumps(got))


def peer(tool: str, folder: Path, ids_file: Path, n: int, out: Path, python: str) -> dict:
    need, have = estimate_bytes(tool, n), available_bytes()
    if need > have - 2**30:
        return {"refused": f"needs about {need / 2**30:.0f} GB, {have / 2**30:.0f} GB available"}
    cmd = [python, __file__, "--child", tool, "--folder", str(folder), "--ids", str(ids_file), "--out", str(out),
           "--limit", str(have - 2**30)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:200]}"}
    return json.loads(lines[-1])


# ---- attnkit and the browser (run in attnkit's environment) -----------------------------------
def run_attnkit_view(folder: Path, text: str, out: Path) -> dict:
    doc = out.with_suffix(".txt")
    doc.write_text(text, encoding="utf-8")
    cmd = [sys.executable, "-c", "import resource, sys; from attnkit.cli.main import main; rc = main(sys.argv[1:]); "
           "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024); sys.exit(rc)",
           "view", str(folder), "--document", str(doc), "--max-new-tokens", "0", "-o", str(out)]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    s = time.perf_counter() - t0
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    peak = float(re.search(r"PEAK ([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    return {"s": s, "peak_mib": peak, "page_mb": round(out.stat().st_size / 2**20, 1)}


def open_page(path: Path, ready: str, files: dict[str, bytes] | None = None) -> dict:
    """Time from navigation to ``ready`` (a JavaScript condition) in chromium at 1400 x 900."""
    from playwright.sync_api import sync_playwright

    if path.stat().st_size > V8_STRING:
        return {"error": f"a {path.stat().st_size / 2**20:.0f} MB page: past V8's longest string, it cannot be read"}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        try:
            return _drawn(browser, path, ready, files)
        finally:
            browser.close()


def _drawn(browser, path: Path, ready: str, files: dict[str, bytes] | None) -> dict:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
    if files:  # bertviz's CDN scripts, from their npm packages

        def cdn(route):
            url = route.request.url
            name = "d3" if "/d3/" in url else "jquery" if "jquery" in url else "require" if "require" in url else None
            if name:
                route.fulfill(status=200, body=files[name], headers={"Content-Type": "application/javascript"})
            else:
                route.abort()

        page.route(re.compile(r"https?://.*"), cdn)
    t0 = time.perf_counter()
    try:
        page.goto(path.resolve().as_uri(), timeout=TIMEOUT_S * 1000)
        page.wait_for_function(ready, timeout=TIMEOUT_S * 1000)
        return {"draw_s": round(time.perf_counter() - t0, 1)}
    except PlaywrightTimeout:
        return {"error": f"nothing drawn within {TIMEOUT_S} s"}
    finally:
        page.context.close()


ATTNKIT_DRAWN = (
    "document.querySelector('#lines line') !== null || "
    "(document.body.classList.contains('long') && document.getElementById('matrix').width > 0)"
)
BERTVIZ_DRAWN = "document.querySelector('#vis svg line') !== null"


def row(name: str, n: int, got: dict) -> str:
    if "refused" in got:
        return f"| {n:,} | {name} | – | – | refused: {got['refused']} |"
    if "error" in got:
        peak = f"{got['peak_mib']:,.0f}" if "peak_mib" in got else "–"
        s = f"{got['s']:.1f}" if "s" in got else "–"
        return f"| {n:,} | {name} | {s} | {peak} | no: {got['error']} |"
    extra = "; ".join(f"{k} {v}" for k, v in got.items() if k not in ("s", "peak_mib"))
    return f"| {n:,} | {name} | {got['s']:.1f} | {got['peak_mib']:,.0f} | yes ({extra}) |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[512, 2048, 8192])
    parser.add_argument("--peers-python", default="/tmp/peers/bin/python", help="the peers' environment's python")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    parser.add_argument("--npm", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-npm")
    parser.add_argument("--tools", nargs="+", default=["attnkit", "serve", "bertviz", "transformer_lens", "inseq"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    import long_context
    import viewer_long
    from machine import cpu_name

    folder = capture_scale.build(args.folder)
    print(f"{cpu_name()}, {available_bytes() / 2**30:.1f} GB available; model {folder}")
    print("| tokens | tool | s | peak MiB | finished |\n|---|---|---|---|---|")
    files = viewer_long.npm_files(args.npm) if "bertviz" in args.tools else None
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.tokens:
            text, ids = capture_scale.text_of(folder, n)
            ids_file = Path(tmp) / f"ids_{n}.json"
            ids_file.write_text(json.dumps(ids))
            if "attnkit" in args.tools:
                page = Path(tmp) / f"attnkit_{n}.html"
                got = run_attnkit_view(folder, text, page)
                if "error" not in got:
                    got.update(open_page(page, ATTNKIT_DRAWN))
                print(row("attnkit view", n, got), flush=True)
            if "serve" in args.tools:
                got = long_context.studio(folder, n, head_list=False)
                if "error" not in got:
                    got = {"s": got["forward_s"] + got["first_overview_s"], "peak_mib": got["server_peak_mib"],
                           "first overview s": round(got["first_overview_s"], 2)}  # fmt: skip
                print(row("attnkit serve", n, got), flush=True)
            for tool in ("bertviz", "transformer_lens", "inseq"):
                if tool not in args.tools:
                    continue
                out = Path(tmp) / f"{tool}_{n}.html"
                got = peer(tool, folder, ids_file, n, out, args.peers_python)
                if tool == "bertviz" and "error" not in got and "refused" not in got:
                    got.update(open_page(out, BERTVIZ_DRAWN, files))
                print(row(tool, n, got), flush=True)
                out.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
