"""`attnkit serve` as a user runs it: a real uvicorn process on a free loopback port, driven
by chromium through Playwright; and stopped with Ctrl-C."""

import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager

import pytest

pytestmark = pytest.mark.slow  # starts servers, drives chromium


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(*args: str):
    """`attnkit serve ARGS` on a free port: yields (url, process) once it listens."""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "serve", *args, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        assert "attnkit studio: http://127.0.0.1:" in line, line + proc.stdout.read()
        yield f"http://127.0.0.1:{port}/", proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(trained_toys):
    with running(str(trained_toys["transformer"]), str(trained_toys["rnn"])) as (url, _):
        yield url


def test_type_translate_and_explore(browser, server, trained_toys):
    # the page's policy forbids eval; Playwright's wait_for_function needs it in the test only
    page = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True).new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server)
    page.wait_for_selector("#lines line", state="attached")  # the page translates its example on load

    page.fill("#text", "a b c d")
    page.press("#text", "Enter")
    page.wait_for_function("document.getElementById('out-text').textContent === '→ d c b a'")
    assert page.locator("#nbest-list li").count() == 3  # n-best 3 by default, with scores
    assert "score" in page.inner_text("#nbest-list li >> nth=0")

    page.click("#lines text[data-side='q'][data-i='1']")  # the output token "c"
    assert "“c” (query 1) looks at" in page.inner_text("#readout")

    page.click("#tabs [data-tab=model]")
    assert page.locator("#model-grid canvas").count() == 2  # 1 layer x 2 heads of cross-attention
    page.click("#tabs [data-tab=neuron]")
    page.wait_for_selector("#neuron table")
    text = page.inner_text("#neuron")
    assert "query 1: the decoder state that predicts 'c'" in text and "q ⊙ k" in text
    assert page.locator("#neuron table tr").count() == 1 + 1 + 5 + 1  # header, q, a b c d </s>, z

    page.click("#tabs [data-tab=attribution]")  # gradient-weighted attention over the output by default
    page.wait_for_selector("#attr-matrix")
    page.hover("#attr-matrix")
    assert "gradient-weighted attention (Chefer et al. 2021): output token" in page.inner_text("#readout")
    page.select_option("#attr-side", "encoder")  # the encoder's positions, then value-norm
    page.select_option("#attr-method", "value-norm")
    page.wait_for_timeout(300)  # the server computes it
    page.wait_for_selector("#attr-matrix")
    page.hover("#attr-matrix", position={"x": 60, "y": 30})
    page.hover("#attr-matrix")
    assert "value-norm (Kobayashi et al. 2020), last layer: position" in page.inner_text("#readout")
    page.select_option("#attr-method", "grad-attention")  # not on the encoder side: the one line shows
    page.wait_for_selector("#attribution .error")
    assert "explains an output (a token" in page.inner_text("#attribution")
    page.select_option("#attr-side", "output")

    page.click("#tabs [data-tab=atlas]")  # every head by each detector; then each head ablated
    page.wait_for_function("document.getElementById('atlas-by').options.length > 0")
    choices = page.eval_on_selector_all("#atlas-by option", "os => os.map(o => o.value)")
    assert choices == ["sink", "delimiter", "broad"]  # what applies to cross-attention
    assert "1 layer(s) × 2 head(s)" in page.inner_text("#readout")
    page.select_option("#atlas-ablate", "zero")
    page.wait_for_function("[...document.getElementById('atlas-by').options].some(o => o.value === 'ablation')")
    page.select_option("#atlas-by", "ablation")
    page.hover("#atlas-grid", position={"x": 64 + 10, "y": 36 + 10})  # layer 0, head 0
    text = page.inner_text("#readout")
    assert text.startswith("layer 0, head 0: sink ") and "zero-ablated alone " in text and "importance " in text
    page.click("#atlas-grid", position={"x": 64 + 10, "y": 36 + 10})
    assert page.is_visible("#tab-head") and page.input_value("#head") == "0"

    page.click("#tabs [data-tab=positions]")
    page.wait_for_function(
        "document.querySelector('#positions img') && document.querySelector('#positions img').naturalWidth > 0"
    )

    page.select_option("#model", index=1)  # the RNN: Luong attention in the neuron view
    page.wait_for_function("document.getElementById('out-text').textContent === '→ d c b a'")
    assert page.is_hidden("#tabs [data-tab=positions]") or page.inner_text("#positions") != ""
    page.click("#tabs [data-tab=head]")
    page.click("#lines text[data-side='q'][data-i='2']")
    page.click("#tabs [data-tab=neuron]")
    page.wait_for_selector("#neuron table")
    # the formula's subscripts typeset (no underscores), the token in the query's name left as it is
    formula = page.inner_html("#neuron .formula")
    assert "Score e<sub>s</sub> = (W<sub>a</sub>ᵀ h<sub>t</sub>) · h̄<sub>s</sub>" in formula and "_" not in formula
    assert "Each row of “(W<sub>a</sub>ᵀ h<sub>t</sub>) ⊙ h̄<sub>s</sub>” sums" in page.inner_html("#neuron .hint")

    page.fill("#text", "")
    page.click("#go")
    page.wait_for_function("document.getElementById('status').classList.contains('error')")
    assert "'text' is empty" in page.inner_text("#status")
    page.context.close()
    assert errors == [] or all("status of 422" in e for e in errors), errors


def test_ctrl_c_stops_cleanly(trained_toys):
    with running(str(trained_toys["rnn"])) as (url, proc):
        import urllib.request

        with urllib.request.urlopen(url + "api/models", timeout=30) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "attnkit studio: stopped" in out and "Traceback" not in out


def test_a_taken_port_is_one_line(trained_toys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "attnkit", "serve", str(trained_toys["rnn"]), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in r.stderr


def test_no_model_to_serve_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "attnkit", "serve", str(tmp_path / "missing"), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not found" in r.stderr


def test_caption_a_scene_and_an_uploaded_image_in_the_browser(browser, tiny_captioner, tmp_path):
    import numpy as np
    from PIL import Image

    Image.fromarray(np.zeros((32, 32), np.uint8)).save(tmp_path / "blank.png")
    with running(str(tiny_captioner)) as (url, _):
        page = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True).new_page()
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "captions")  # the held-out scenes' page
        assert page.is_visible("#live") and page.is_hidden("#text-models")
        page.click("#scene")
        page.wait_for_selector("#pick button")
        assert page.inner_text("#pick button.on") == "held-out scene 0"
        assert page.inner_text("#ref").startswith("reference: ")
        page.set_input_files("#upload", str(tmp_path / "blank.png"))
        page.wait_for_function("document.querySelectorAll('#pick button').length === 2")
        assert page.inner_text("#pick button.on") == "your image" and page.inner_text("#ref") == ""
        page.context.close()
        # the same captioner in the studio: its words' attention over the image's regions
        page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        assert page.inner_text("#go") == "Caption" and page.is_visible("#image-file") and page.is_hidden("#text")
        page.set_input_files("#image-file", str(tmp_path / "blank.png"))
        page.click("#go")
        page.wait_for_function("/caption found/.test(document.getElementById('status').textContent)")
        page.click("#tabs [data-tab=image]")
        page.wait_for_selector("#patch-heat")
        words = page.evaluate("attnkit.state.kind === 'cross' && document.querySelectorAll('#image-view .chip').length")
        assert words >= 1  # the caption's words and </s>, each a query to choose
        page.context.close()
        assert errors == [], errors


def test_a_vision_language_model_reads_an_image_beside_its_text_in_the_browser(browser, tmp_path):
    import numpy as np
    from PIL import Image

    from tiny_hf import build_vision_language

    model = build_vision_language(tmp_path / "llava")
    rng = np.random.default_rng(0)
    Image.fromarray((rng.random((48, 64, 3)) * 255).astype(np.uint8)).save(tmp_path / "photo.png")
    with running(str(model)) as (url, _):
        page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        assert page.is_visible("#text") and page.is_visible("#image-file")  # its text, and an image beside it
        page.fill("#text", "a dog runs")
        page.fill("#new-tokens", "2")
        page.click("#go")  # no image yet: its text alone
        page.wait_for_function("/2 generated/.test(document.getElementById('status').textContent)")
        assert page.evaluate("attnkit.example().image_tokens") is None and page.is_hidden("#tabs [data-tab=image]")
        page.set_input_files("#image-file", str(tmp_path / "photo.png"))
        page.click("#go")
        page.wait_for_function("attnkit.example().image_tokens !== null")
        assert page.evaluate("attnkit.example().image_tokens") == [1, 4, 4]
        page.select_option("#kind", "decoder")
        page.click("#tabs [data-tab=image]")
        page.wait_for_selector("#patch-heat")
        chips = page.locator("#image-view .chip").all_inner_texts()
        assert chips[:3] == ["a", "dog", "runs"] and len(chips) == 5  # the words after the image, two written
        box = _box(page, "#patch-heat")
        page.mouse.move(box[0] + box[2] / 8, box[1] + box[3] / 8)  # image token 0,0
        assert "→ image token 0,0: weight" in page.inner_text("#readout")
        page.context.close()
        assert errors == [], errors


def test_a_speech_model_hears_an_uploaded_sound_in_the_browser(browser, tmp_path):
    from attnkit.data.audio import encode_wav
    from tiny_hf import build_speech, tone

    model = build_speech(tmp_path / "whisper")
    (tmp_path / "tone.wav").write_bytes(encode_wav(tone(0.6, silence=0.3), 16000))
    with running(str(model)) as (url, _):
        page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        assert page.inner_text("#go") == "Transcribe" and page.is_hidden("#text") and page.is_visible("#audio-file")
        page.click("#go")  # no sound yet: one line, no request
        assert page.inner_text("#status") == "choose a sound file (WAV)"
        page.set_input_files("#audio-file", str(tmp_path / "tone.wav"))
        page.fill("#target", "a dog runs .")
        page.click("#go")
        page.wait_for_function("/forced transcript scored/.test(document.getElementById('status').textContent)")
        assert page.evaluate("attnkit.example().frame_seconds") == 0.02
        page.click("#tabs [data-tab=audio]")
        page.wait_for_selector("#audio-heat")
        chips = page.locator("#audio-view .chip").all_inner_texts()
        assert chips[1:3] == ["a", "dog"] and chips[-1] == "<|endoftext|>"
        box = _box(page, "#audio-heat")
        page.mouse.move(box[0] + 170 + 5, box[1] + 110 + 4 + 70 + 4 + 9)  # the first row, the first position
        assert "<|notimestamps|> → 0.00–0.02 s: weight" in page.inner_text("#readout")
        page.context.close()
        assert errors == [], errors


def _box(page, selector: str) -> list[float]:
    return page.eval_on_selector(
        selector, "c => { const b = c.getBoundingClientRect(); return [b.left, b.top, b.width, b.height]; }"
    )


def test_circuits_and_why_a_cell_is_bright_in_the_browser(browser):
    """The shipped decoder: its heads patched on a line of code whose repeat names the answer, the
    induction head the strongest, its map opened, and its bright cell explained."""
    clean = "width = max(len(name) for name in names) + 2; width = max(len(name) for name"
    with running("stdlib-lm") as (url, _):
        page = browser.new_context(viewport={"width": 1100, "height": 780}, bypass_csp=True).new_page()
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_selector("#lines line", state="attached")
        page.fill("#new-tokens", "0")
        page.fill("#text", clean)
        page.press("#text", "Enter")
        page.wait_for_function("document.getElementById('status').textContent.includes('none generated')")
        page.click("#tabs [data-tab=circuits]")
        page.fill("#circ-corrupt", clean.replace("(name) for name in", "(item) for item in"))
        page.fill("#circ-answer", " in")
        page.fill("#circ-foil", " item")
        page.click("#circ-go")
        page.wait_for_function("document.getElementById('readout').textContent.includes('agrees')", timeout=120_000)
        options = page.eval_on_selector_all("#circ-by option", "os => os.map(o => o.value)")
        assert options == ["activation", "attribution", "logit", "copying"]
        x, y, w, h = _box(page, "#circ-grid")  # 4 layers x 4 heads from (74, 40)
        cw, ch = (w - 74 - 8) / 4, (h - 40 - 4) / 4
        page.mouse.move(x + 74 + 1.5 * cw, y + 40 + 3.5 * ch)
        page.wait_for_function(
            "document.getElementById('readout').textContent.startsWith('blocks.3.attn.h1: activation')"
        )
        assert "paths: blocks.2.attn.h1 → blocks.3.attn.h1.k" in page.inner_text("#readout")
        page.mouse.click(x + 74 + 1.5 * cw, y + 40 + 3.5 * ch)  # the induction head's map
        page.wait_for_function("document.querySelector('#tabs .selected').dataset.tab === 'matrix'")
        x, y, w, h = _box(page, "#matrix")
        row = next(
            yy
            for yy in range(int(y) + 4, int(y + h), 4)
            if page.mouse.move(x + w / 2, yy) or page.inner_text("#readout").startswith("name (25)")
        )
        col = next(
            xx
            for xx in range(int(x) + 4, int(x + w), 3)
            if page.mouse.move(xx, row) or "→ in (10)" in page.inner_text("#readout")
        )
        page.mouse.click(col, row)
        page.wait_for_function(
            "document.getElementById('qk-why').textContent.includes('the sum over every writer')", timeout=60_000
        )
        why = page.inner_text("#qk-why")
        assert "Layer 3, head 1: name (25) → in (10)" in why
        terms = [line for line in why.splitlines() if "×" in line][1:]  # under the table's header
        assert terms[0].startswith("blocks.0.mlp × blocks.2.attn.h1")  # the largest: the previous-token head at the key
        # each head alone over a cache of 4 sinks + 8 recent keys: the induction head needs more, and its
        # map's legend says so
        page.click("#tabs [data-tab=atlas]")
        page.select_option("#atlas-stream", "4,8")
        page.wait_for_function(
            "[...document.getElementById('atlas-by').options].some(o => o.value === 'stream_needle')", timeout=120_000
        )
        page.click("#tabs [data-tab=matrix]")
        legend = page.get_attribute("#legend", "aria-label")
        assert "the head atlas: a retrieval head over 4 sinks + 8 recent keys, alone (loss +0.2" in legend, legend
        assert "the copy 0.444 predicted (0.333 with every head exact)" in legend, legend
        page.context.close()
        assert errors == [], errors


def test_a_long_input_in_the_studio_at_8192_tokens(browser, tmp_path):
    """A Llama-style model (tiny, random) over 8,001 tokens: the maps stay on the server; the
    matrix is an overview, zoomed to exact cells that equal the record's own block; the head list
    sorts and opens a head; the model view draws every head; the head view lists a query's keys."""
    import base64
    import json
    import random
    import urllib.request

    import numpy as np

    from tiny_hf import WORDS, build

    build("llama", tmp_path / "llama", positions=8192)
    random.seed(0)
    text = " ".join(random.choice(WORDS) for _ in range(8000))
    with running(str(tmp_path / "llama"), "--page-mb", "1") as (url, _):
        page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_function("/generated/.test(document.getElementById('status').textContent)")
        page.fill("#text", text)
        page.fill("#new-tokens", "0")
        page.click("#go")
        page.wait_for_function("document.body.classList.contains('long')", timeout=120_000)
        assert page.is_hidden("[data-tab=neuron]") and page.is_visible("[data-tab=heads]")
        record = page.evaluate("attnkit.example().record")
        assert page.evaluate("attnkit.example().remote.decoder") == [2, 4, 8001, 8001]

        page.click("#tabs [data-tab=matrix]")
        page.wait_for_function("/computed in/.test(document.getElementById('readout').textContent)")
        assert "8,001 × 8,001 tokens" in page.inner_text("#readout")
        box = page.locator("#matrix").bounding_box()
        at = (box["x"] + 64 + 120, box["y"] + 22 + 200)  # inside the map, below its diagonal
        page.mouse.move(*at)
        for _ in range(12):  # zoom in at the pointer until every cell has its pixels
            page.mouse.wheel(0, -100)
            page.wait_for_timeout(100)
        # the server's exact cells drawn (a busy machine may take seconds)
        page.wait_for_function("document.getElementById('matrix').dataset.exact === 'true'", timeout=120_000)
        page.mouse.move(at[0] + 3, at[1] + 3)
        readout = page.inner_text("#readout")
        assert "(exact)" in readout, readout
        i, j = (int(x) for x in (readout.split("query ")[1].split(" ")[0], readout.split("key ")[1].split(" ")[0]))
        request = urllib.request.Request(
            url + "api/tile",
            data=json.dumps(
                {
                    "record": record,
                    "kind": "decoder",
                    "layer": 1,
                    "head": "mean",
                    "row": i,
                    "col": j,
                    "rows": 1,
                    "cols": 1,
                }
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        tile = json.loads(urllib.request.urlopen(request).read())
        exact = float(np.frombuffer(base64.b64decode(tile["data"]), dtype="<f4")[0])
        shown = float(readout.split("weight ")[1].split(" ")[0])
        assert abs(shown - exact) < 1e-6 and exact > 0, (readout, exact)

        page.click("#tabs [data-tab=heads]")
        page.wait_for_function("document.querySelectorAll('table.heads tr[data-layer]').length === 8")
        page.click("table.heads th[data-stat=distance]")
        distances = [
            float(x)
            for x in page.eval_on_selector_all("table.heads tr[data-layer] td.sorted", "c => c.map(x => x.textContent)")
        ]
        assert distances == sorted(distances, reverse=True) and distances[0] > 1000  # a random model looks everywhere
        first = page.locator("table.heads tr[data-layer]").first
        layer, head = first.get_attribute("data-layer"), first.get_attribute("data-head")
        first.click()
        assert page.evaluate("attnkit.state.tab") == "matrix"
        assert page.evaluate("[attnkit.state.layer, attnkit.state.head]") == [int(layer), int(head)]

        page.click("#tabs [data-tab=model]")
        page.wait_for_function("/8 of 8 heads drawn/.test(document.getElementById('readout').textContent)")
        assert page.locator("#model-grid canvas").count() == 8
        page.click("#tabs [data-tab=head]")
        page.wait_for_selector("table.long-top tr td")
        assert page.locator("table.long-top tr").count() == 13  # a header and the query's 12 strongest keys
        page.context.close()
        assert errors == [], errors


def test_a_studio_beyond_loopback_asks_for_its_token(trained_toys):
    """`--host 0.0.0.0`: the URL printed carries a token; a request without it is refused (401), one
    with it answered; a foreign Host is refused (403) even with the token; a cross-site simple
    request (text/plain) too (415), over real HTTP."""
    import json
    import urllib.error
    import urllib.request

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "serve", str(trained_toys["transformer"]), "--host", "0.0.0.0",
         "--port", str(port), "--allow-host", "studio.lan"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert f"http://0.0.0.0:{port}/?token=" in line, line
        token = line.split("?token=")[1].split()[0]
        base = f"http://127.0.0.1:{port}"

        def status(path: str, headers: dict, data: bytes | None = None) -> int:
            try:
                with urllib.request.urlopen(urllib.request.Request(base + path, data=data, headers=headers)) as r:
                    return r.status
            except urllib.error.HTTPError as err:
                return err.code

        assert status("/api/models", {}) == 401
        assert status(f"/api/models?token={token}", {}) == 200
        assert status("/api/models", {"Authorization": f"token {token}"}) == 200
        assert status("/api/models", {"Authorization": f"token {token}", "Host": "studio.lan"}) == 200
        assert status("/api/models", {"Authorization": f"token {token}", "Host": "evil.example"}) == 403
        body = json.dumps({"text": "a b c", "beam": 1}).encode()
        plain = {"Authorization": f"token {token}", "Content-Type": "text/plain", "Origin": "http://evil.example"}
        assert status("/api/translate", plain, body) == 415
        assert (
            status("/api/translate", {"Authorization": f"token {token}", "Content-Type": "application/json"}, body)
            == 200
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
