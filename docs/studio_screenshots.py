"""The README's pictures of `attnkit serve`: start the studio with both installed models,
drive it in chromium, save one screenshot per view to docs/images/studio_*.png.

    python docs/studio_screenshots.py
"""

import signal
import socket
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from attnkit.viewer.screenshot import find_browser

OUT = Path(__file__).resolve().parent / "images"
SENTENCE = "A man in a blue shirt is playing the guitar."


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "serve", "multi30k-en-de", "multi30k-en-de-rnn", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "attnkit studio" in server.stdout.readline()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_browser(), args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True).new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#lines line", state="attached")
            page.fill("#text", SENTENCE)
            page.press("#text", "Enter")
            page.wait_for_function("document.getElementById('out-text').textContent.includes('Gitarre')")

            def shot(name: str) -> None:
                page.wait_for_timeout(400)
                page.screenshot(path=str(OUT / f"studio_{name}.png"), full_page=True)

            page.click("#lines text[data-side='q'][data-i='4']")  # "blauen"
            shot("head")
            page.click("#tabs [data-tab=model]")
            shot("model")
            page.click("#tabs [data-tab=matrix]")
            shot("matrix")
            page.select_option("#head", "1")
            page.click("#tabs [data-tab=neuron]")
            page.wait_for_selector("#neuron table")
            shot("neuron")
            page.click("#tabs [data-tab=positions]")
            page.wait_for_function("document.querySelector('#positions img')?.naturalWidth > 0")
            shot("positions")
            page.select_option("#model", "multi30k-en-de-rnn")
            page.wait_for_function("document.getElementById('out-text').textContent.includes('Gitarre')")
            page.click("#tabs [data-tab=matrix]")
            shot("matrix_local_p")
            page.click("#tabs [data-tab=head]")
            page.click("#lines text[data-side='q'][data-i='4']")
            page.click("#tabs [data-tab=neuron]")
            page.wait_for_selector("#neuron table")
            shot("neuron_local_p")
            browser.close()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
