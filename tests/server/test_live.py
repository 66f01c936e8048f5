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
    assert "gradient-weighted attention (Chefer et al.): output token" in page.inner_text("#readout")
    page.select_option("#attr-side", "encoder")  # the encoder's positions, then value-norm
    page.select_option("#attr-method", "value-norm")
    page.wait_for_timeout(300)  # the server computes it
    page.wait_for_selector("#attr-matrix")
    page.hover("#attr-matrix", position={"x": 60, "y": 30})
    page.hover("#attr-matrix")
    assert "value-norm ‖Σ_h a f(x)‖, last layer: position" in page.inner_text("#readout")
    page.select_option("#attr-method", "grad-attention")  # not on the encoder side: the one line shows
    page.wait_for_selector("#attribution .error")
    assert "explains an output (a token" in page.inner_text("#attribution")
    page.select_option("#attr-side", "output")

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
    assert "Score e_s = (W_aᵀ h_t) · h̄_s" in page.inner_text("#neuron")

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
