"""A small language model trained on attnkit's own docs, so that a long document in the studio
has attention worth looking at (a model with random weights spreads its weight almost evenly).

    python benchmarks/docs_lm.py --minutes 8                 # writes /tmp/attnkit-docs-lm
    attnkit serve /tmp/attnkit-docs-lm                         # then paste a long part of the docs
    python benchmarks/docs_lm.py --screens docs/images       # the studio's long views, as screenshots

A Llama (RoPE, grouped key/value heads) of 4 layers x 4 heads (2 key/value heads), hidden 128,
trained from scratch with AdamW on random 2,048-token windows of the README and docs/*.md
(about 28,000 tokens under the byte-level BPE tokenizer ``capture_scale.py`` trains on the same
text), for a fixed wall-clock budget on the CPU. Saved as a Hugging Face directory that
``attnkit.load`` reads like any other. The log prints the training loss as it goes.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from pathlib import Path

import capture_scale


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--context", type=int, default=2048)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-docs-lm")
    p.add_argument("--tokenizer", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--screens", type=Path, help="write the studio's screenshots of the trained model here instead")
    args = p.parse_args()
    if args.screens:
        screens(args.out, args.screens, args.context)
        return

    import torch
    import transformers as T

    from machine import cpu_name

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    capture_scale.build(args.tokenizer)  # the tokenizer (and the model this script does not use)
    tok = T.AutoTokenizer.from_pretrained(args.tokenizer)
    ids = torch.tensor(tok(capture_scale.docs_text())["input_ids"])
    model = T.LlamaForCausalLM(small_llama(len(tok), positions=4 * args.context, kv_heads=2))
    model.config._attn_implementation = "sdpa"
    params = sum(x.numel() for x in model.parameters())
    print(f"# {cpu_name()}; {args.threads} thread(s); {len(ids):,} tokens of docs; {params / 1e6:.2f} M parameters")
    step, loss = train(model, ids, minutes=args.minutes, context=args.context, batch=args.batch)
    model.eval()
    tmp = args.out.with_name(args.out.name + ".part")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if args.out.exists():
        import shutil

        shutil.rmtree(args.out)
    tmp.rename(args.out)
    print(f"{step} steps in {args.minutes:g} min; last loss {loss:.3f}; saved {args.out}")


def small_llama(vocab: int, *, positions: int, kv_heads: int):
    """The config of a Llama of 4 layers x 4 heads, hidden 128, tied embeddings, token 0 the special one."""
    import transformers as T

    return T.LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=positions,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


def train(
    model, ids, *, minutes: float, context: int, batch: int, lr: float = 3e-3, repeat: float = 0.0
) -> tuple[int, float]:
    """Train ``model`` on random ``context``-token windows of ``ids`` with AdamW for ``minutes`` of
    wall clock (a short warm-up, then a cosine to a tenth of ``lr``); (steps, the last loss).
    ``repeat``: the share of each batch's windows whose first half is repeated as their second
    (copying then pays, as in Olsson et al. 2022's repeated sequences)."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    budget, start, step = 60 * minutes, time.perf_counter(), 0
    gen = torch.Generator().manual_seed(0)
    model.train()
    loss = torch.tensor(float("nan"))
    while (elapsed := time.perf_counter() - start) < budget:
        frac = elapsed / budget
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        starts = torch.randint(0, len(ids) - context - 1, (batch,), generator=gen)
        x = torch.stack([ids[s : s + context] for s in starts.tolist()])
        copies = round(repeat * batch)
        if copies:
            x[:copies, context // 2 :] = x[:copies, : context - context // 2]
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            print(f"step {step} ({elapsed / 60:.1f} min): loss {loss.item():.3f}", flush=True)
    model.eval()
    return step, float(loss.item())


def _studio_text(model: Path, tokens: int) -> str:
    """The longest cut of the docs that is at most ``tokens`` tokens once the studio has trimmed it
    (a cut after a line break loses that token)."""
    import transformers as T

    tok = T.AutoTokenizer.from_pretrained(model)
    for n in range(tokens, 0, -1):
        text = capture_scale.text_of(model, n)[0].strip()
        if len(tok(text)["input_ids"]) <= tokens:
            return text
    raise ValueError(f"no cut of the docs is at most {tokens} tokens")


def screens(model: Path, out: Path, tokens: int) -> None:
    """The studio over the first ``tokens`` tokens of the docs: the head list sorted by each head's
    largest weight (the most focused first), the first head's matrix, and a zoomed block of its
    exact cells at the end of the text."""
    import socket
    import subprocess
    import sys

    from playwright.sync_api import sync_playwright

    from attnkit.viewer.screenshot import SCALE, VIEWPORT, find_browser

    text = _studio_text(model, tokens)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "serve", str(model), "--port", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        server.stdout.readline()  # type: ignore[union-attr]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=find_browser())
            page = browser.new_context(viewport=VIEWPORT, device_scale_factor=SCALE, bypass_csp=True).new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("/generated/.test(document.getElementById('status').textContent)")
            page.fill("#text", text)
            page.fill("#new-tokens", "0")
            page.click("#go")
            page.wait_for_function("document.body.classList.contains('long')", timeout=300_000)
            page.click("#tabs [data-tab=heads]")
            rows = "document.querySelectorAll('table.heads tr[data-layer]').length === 16"
            page.wait_for_function(rows, timeout=300_000)

            def shot(name: str) -> None:  # the whole window, as every screenshot of the docs
                page.evaluate("document.getElementById('text').scrollTop = 0")  # the document's start in view
                page.screenshot(path=str(out / name))

            page.click("table.heads th[data-stat=max_weight]")  # the most focused heads first
            shot("studio_long_heads.png")
            page.locator("table.heads tr[data-layer]").first.click()  # its matrix
            page.select_option("#scale", "log")  # 10⁻⁴ to 1: the weights away from the diagonal show too
            page.click("#hide-side")  # the controls hidden: the window's width for the map
            done = "/computed in/.test(document.getElementById('readout').textContent)"
            page.wait_for_function(done, timeout=120_000)
            shot("studio_long_matrix.png")
            # the tile's 24 x 24 cells, the controls still hidden: as large as the window allows
            page.evaluate(
                "(() => { const t = attnkit.example().remote.decoder[2];"
                " attnkit.state.long = { kind: 'decoder', region: [t - 24, t, t - 24, t] }; attnkit.draw(); })()"
            )
            page.wait_for_function("document.getElementById('matrix').dataset.exact === 'true'", timeout=120_000)
            shot("studio_long_tile.png")
            browser.close()
    finally:
        server.terminate()
    print(f"screenshots: {out}/studio_long_heads.png, studio_long_matrix.png, studio_long_tile.png")


if __name__ == "__main__":
    main()
