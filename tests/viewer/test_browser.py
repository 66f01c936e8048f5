"""The viewer in a real browser: Playwright driving Debian's chromium.

Skipped where no browser is installed, unless ATTNKIT_REQUIRE_BROWSER=1 (CI sets it,
after `apt-get install chromium`), in which case a missing browser fails."""

import os

import pytest

from attnkit.viewer import write_html
from attnkit.viewer.screenshot import find_browser

pytestmark = pytest.mark.slow  # drives chromium

REQUIRED = os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if REQUIRED:
            pytest.fail("playwright is not installed (pip install -e '.[test]')")
        pytest.skip("playwright is not installed")
    exe = find_browser()
    if exe is None:
        if REQUIRED:
            pytest.fail("no chromium found (apt-get install chromium)")
        pytest.skip("no chromium on this machine")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def _open(browser, path):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("#lines line", state="attached")
    return page, errors


def test_transformer_viewer_interactions(browser, toy_records, tmp_path):
    records, info = toy_records["transformer"]
    path = write_html(tmp_path / "view.html", records, info)
    page, errors = _open(browser, path)

    assert page.input_value("#kind") == "cross"
    assert page.locator("#kind option").count() == 3
    heads = records[0].maps["cross"].shape[1]
    assert page.locator("#head option").count() == heads + 1  # average + each head
    assert page.locator("#heads figure").count() == heads + 1
    q, k = len(records[0].tgt_out_tokens), len(records[0].src_tokens)
    assert page.locator("#matrix rect.cell").count() == q * k

    before = page.inner_html("#lines")
    page.select_option("#head", "1")
    assert page.inner_html("#lines") != before  # another head draws other lines
    page.locator("#heads figure").nth(1).click()  # thumbnail of head 0
    assert page.input_value("#head") == "0"

    page.hover("#lines text[data-side='q'][data-i='1']")
    active = page.locator("#lines line.active")
    assert active.count() > 0
    assert set(active.evaluate_all("ls => ls.map(l => l.dataset.q)")) == {"1"}
    assert "looks" in page.inner_text("#readout")

    page.select_option("#kind", "encoder")
    assert page.locator("#matrix rect.cell").count() == k * k
    page.select_option("#example", "1")
    assert page.inner_text("#src-text") == records[1].source
    png = page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)
    assert len(png) > 10_000
    assert errors == []


def test_rnn_viewer(browser, toy_records, tmp_path):
    records, info = toy_records["rnn"]
    path = write_html(tmp_path / "rnn.html", records, info)
    page, errors = _open(browser, path)
    assert page.locator("#kind option").count() == 1 and page.locator("#head option").count() == 2
    assert page.locator("#heads figure").count() == 1  # one head: no separate average
    assert errors == []
