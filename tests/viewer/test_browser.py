"""The viewer in a real browser: Playwright driving Debian's chromium.

Skipped where no browser is installed, unless ATTNKIT_REQUIRE_BROWSER=1 (CI sets it,
after `apt-get install chromium`), in which case a missing browser fails."""

import json

import pytest

from attnkit.viewer import write_html
from attnkit.viewer.screenshot import VIEWPORT

pytestmark = pytest.mark.slow  # drives chromium


def _open(browser, path, viewport=None):
    page = browser.new_page(viewport=viewport or {"width": 1400, "height": 900})
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

    assert page.input_value("#kind") == "cross" and page.input_value("#scale") == "abs"  # absolute by default
    assert page.locator("#kind option").count() == 3
    assert page.is_hidden("#live")  # a static file has no input form
    heads = records[0].maps["cross"].shape[1]
    assert page.locator("#head option").count() == heads + 1  # average + each head
    chips = "#head-chips button[data-head].on"
    assert page.locator(chips).count() == heads  # the average of every head
    strokes = "ls => ls.map(l => l.getAttribute('stroke'))"
    assert len(set(page.locator("#lines line").evaluate_all(strokes))) == 1  # the average: one colour
    page.click("#apart")  # the heads apart: one colour per head
    assert len(set(page.locator("#lines line").evaluate_all(strokes))) == heads
    # two heads on the same (query, key) pair are two lines side by side, not one on the other
    ends = "ls => ls.map(l => [l.dataset.q, l.dataset.k, l.dataset.h, +l.getAttribute('y1')])"
    by_pair: dict = {}
    for q, k, h, y in page.locator("#lines line").evaluate_all(ends):
        by_pair.setdefault((q, k), {})[h] = y
    shared = [ys for ys in by_pair.values() if len(ys) > 1]
    assert shared and all(len(set(ys.values())) == len(ys) for ys in shared)
    page.hover("#lines text[data-side='q'][data-i='1']")  # the readout says what each drawn head does
    readout = page.text_content("#readout")
    assert "per head: head 0: " in readout and f"· head {heads - 1}: " in readout, readout
    page.mouse.move(0, 0)
    page.click(f"#head-chips button[data-head='{heads - 1}']")  # a head left out of the comparison
    assert page.locator(chips).count() == heads - 1
    assert str(heads - 1) not in set(page.locator("#lines line").evaluate_all("ls => ls.map(l => l.dataset.h)"))
    page.click("#apart")  # back to the average

    page.select_option("#head", "1")
    assert page.locator(chips).count() == 1
    assert set(page.locator("#lines line").evaluate_all("ls => ls.map(l => l.dataset.h)")) == {"1"}

    page.hover("#lines text[data-side='q'][data-i='1']")
    active = page.locator("#lines line.active")
    assert active.count() > 0
    assert set(active.evaluate_all("ls => ls.map(l => l.dataset.q)")) == {"1"}
    assert "looks at" in page.inner_text("#readout")
    page.mouse.move(5, 5)  # leaving the token clears its readout
    assert page.inner_text("#readout").strip() == ""
    page.click("#lines text[data-side='q'][data-i='1']")  # pinned: stays after the mouse leaves, highlighted
    page.mouse.move(5, 5)
    assert "pinned" in page.inner_text("#readout") and page.locator("#lines line.active").count() > 0
    page.hover("#lines text[data-side='q'][data-i='1']")  # the pointer back on the pinned token: still pinned
    assert "(pinned; click again to release)" in page.inner_text("#readout")
    page.mouse.move(5, 5)
    pin = page.locator("#lines rect.pin[data-side='q'][data-i='1']")
    assert pin.get_attribute("visibility") == "visible"
    assert page.locator("#lines rect.pin[visibility='visible']").count() == 1
    svg = page.locator("#lines").bounding_box()
    assert svg["width"] > 0.6 * (1400 - 300)  # the head view spans the pane beside the controls

    page.click("#tabs [data-tab=model]")
    layers = records[0].maps["cross"].shape[0]
    assert page.locator("#model-grid canvas").count() == layers * heads
    page.hover("#model-grid canvas >> nth=0")  # a thumbnail names the tokens under the pointer
    assert "layer 0, head 0:" in page.inner_text("#readout") and "weight" in page.inner_text("#readout")
    page.locator("#model-grid canvas").nth(heads * layers - 1).click()  # last layer, last head: back to the head view
    assert page.is_visible("#lines") and page.input_value("#head") == str(heads - 1)

    page.click("#tabs [data-tab=matrix]")
    assert page.evaluate("document.getElementById('matrix').width") > 0
    box = page.locator("#matrix").bounding_box()
    assert box["height"] > 250  # a short sentence gets large cells (the largest, 44 px); a long one fills the window
    cross = records[0].maps["cross"]  # above the map, before any cell is pointed at: which map it is, and its size
    overview = f"layer {layers - 1}, head {heads - 1}: {cross.shape[2]} queries × {cross.shape[3]} keys"
    assert overview in page.inner_text("#readout"), page.inner_text("#readout")
    assert "Seq2Seq" not in page.inner_text("header")  # the header says what the model is, not its class
    page.mouse.move(box["x"] + box["width"] - 40, box["y"] + box["height"] - 12)  # a cell near the bottom right
    assert "weight" in page.inner_text("#readout")
    page.click("#tabs [data-tab=neuron]")
    assert "attnkit serve" in page.inner_text("#neuron")  # needs the model: says how to get it
    # a local window's walk-through: the keys outside it fold, and so does a run of three or more inside it
    # whose weights read 0.000; a shorter run, or a weight of 0.0005, keeps its rows
    allowed = [False, True, True, True, True, True, True, True, True, False]
    weights = [0, 1e-4, 2e-4, 1e-5, 0.5, 1e-4, 2e-4, 0.4995, 0.0005, 0]
    shown = page.evaluate(f"window.attnkit.views.neuron.foldKeys({json.dumps(allowed)}, {json.dumps(weights)})")
    assert shown == [False, False, False, False, True, True, True, True, True, False]

    page.click("#tabs [data-tab=head]")
    page.select_option("#kind", "encoder")
    page.select_option("#example", "1")
    assert page.inner_text("#src-text") == records[1].source
    n = len(records[1].src_tokens)
    assert page.locator("#lines text[data-side='q']").count() == n
    page.check("#hide-special")
    assert page.locator("#lines text[data-side='q']").count() == n - 1  # </s> hidden
    png = page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)
    assert len(png) > 10_000
    assert errors == []


def test_rnn_viewer(browser, toy_records, tmp_path):
    records, info = toy_records["rnn"]
    path = write_html(tmp_path / "rnn.html", records, info)
    page, errors = _open(browser, path)
    assert (
        page.locator("#kind option").count() == 1 and page.locator("#head option").count() == 1
    )  # one head, no average
    assert page.locator("#head-chips button").count() == 0
    page.click("#tabs [data-tab=model]")
    assert page.locator("#model-grid canvas").count() == 1
    assert "heads" not in page.inner_text("header")  # an RNN header says nothing about heads or positions
    assert errors == []


def test_every_view_draws_100_tokens(browser, tmp_path):
    """A 100-token sentence in every view, every layer and head (the time it takes: benchmarks/viewer_long.py)."""
    import numpy as np

    from attnkit.inspection import AttentionRecord

    rng = np.random.default_rng(0)
    n, layers, heads = 100, 4, 4
    logits = rng.normal(size=(layers, heads, n, n)) * 3
    maps = {
        kind: (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
        for kind in ("encoder", "decoder", "cross")
    }
    tokens = [f"tok{i}" for i in range(n)]
    rec = AttentionRecord("x", tokens, maps, "y", tokens, tokens)
    page, errors = _open(browser, write_html(tmp_path / "big.html", [rec], {"arch": "transformer"}))
    page.select_option("#layer", "2")
    page.select_option("#head", "3")
    assert page.locator("#lines text[data-side='q']").count() == n
    page.click("#tabs [data-tab=model]")
    assert page.locator("#model-grid canvas").count() == layers * heads
    page.click("#tabs [data-tab=matrix]")
    assert page.evaluate("document.getElementById('matrix').width") > n * 6  # a cell of at least 6 px per key
    assert errors == []


@pytest.mark.parametrize("viewport", [{"width": 1400, "height": 900}, VIEWPORT], ids=["1400x900", "screenshots"])
def test_each_view_fills_its_pane(browser, tmp_path, viewport):
    """A 12-token sentence (the docs' screenshots) at 1,400 x 900 and at the screenshots' size: the
    head, model and matrix views take the pane's width or its height, whichever binds,
    instead of a corner of it, and no colour bar runs past the pane's edge."""
    import numpy as np

    from attnkit.inspection import AttentionRecord

    rng = np.random.default_rng(0)
    n, layers, heads = 12, 4, 4
    logits = rng.normal(size=(layers, heads, n, n)) * 3
    maps = {"cross": (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)}
    tokens = [f"word{i}" for i in range(n)]
    page, errors = _open(
        browser,
        write_html(tmp_path / "fit.html", [AttentionRecord("x", tokens, maps, "y", tokens, tokens)], {}),
        viewport,
    )
    pane_w, pane_h = page.evaluate(
        "(() => { const m = document.querySelector('main'); return [m.clientWidth - 32, m.clientHeight - 24]; })()"
    )

    def share(selector):
        box = page.locator(selector).bounding_box()
        return box["width"] / pane_w, box["height"] / pane_h

    w, h = share("#lines")
    assert w > 0.9 and h > 0.7, (w, h)
    for tab, selector, legend in (("model", "#model-grid", "#model-legend"), ("matrix", "#matrix", "#legend")):
        page.click(f"#tabs [data-tab={tab}]")
        w, h = share(selector)
        assert max(w, h) > 0.85 and min(w, h) > 0.6 and w <= 1.01, (tab, w, h)
        assert share(legend)[0] <= 1.01, legend  # its words wrap within the pane
        if tab == "model":  # a 12 x 12 map's thumbnail square: its diagonal at 45 degrees
            thumb = page.locator("#model-grid canvas").first.bounding_box()
            assert abs(thumb["width"] - thumb["height"]) <= 1, thumb
    assert errors == []


def test_hiding_the_controls_gives_the_view_the_window(browser, toy_records, tmp_path):
    records, info = toy_records["transformer"]
    page, errors = _open(browser, write_html(tmp_path / "view.html", records, info))
    page.click("#tabs [data-tab=model]")
    before = page.locator("#model-grid").bounding_box()["width"]
    assert page.is_hidden("#show-side")
    page.click("#hide-side")
    assert page.is_hidden("#side") and page.is_visible("#show-side")
    assert page.input_value("#kind") == "cross"  # the choices kept while hidden
    wider = page.locator("#model-grid").bounding_box()["width"]
    assert wider > before + 100  # redrawn for the sidebar's 300 px
    page.click("#show-side")
    assert page.is_visible("#side") and page.locator("#model-grid").bounding_box()["width"] < wider
    assert errors == []


def test_caption_viewer_lays_the_hovered_words_attention_over_the_image(browser, tmp_path):
    import numpy as np

    from attnkit.data.scenes import Box, Scene
    from attnkit.inference.caption import Caption
    from attnkit.viewer.captions import write_caption_html

    image = np.zeros((16, 16), np.float32)
    attention = np.zeros((2, 4, 4))
    attention[0, 2, 1] = 1.0  # "3" looks at the region at row 2, column 1 (pixels 8..11 x 4..7)
    attention[1, 0, 3] = 1.0  # "5" at row 0, column 3
    cap = Caption(image, ["3", "5"], 0.0, attention, 4)
    scene = Scene(image, ["3", "5"], [Box(8, 4, 4, 4), Box(0, 8, 8, 8)])
    path = write_caption_html(tmp_path / "captions.html", [cap, cap], ["one", "two"], [scene, scene])
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri())
    assert page.is_hidden("#live")  # a static file has no server to ask

    def pixel(x, y):  # image pixel (x, y) of the zoomed canvas, at its centre
        zoom = page.evaluate("document.getElementById('view').width") // image.shape[1]
        return page.evaluate(
            f"Array.from(document.getElementById('view').getContext('2d')"
            f".getImageData({x * zoom + zoom // 2}, {y * zoom + zoom // 2}, 1, 1).data.slice(0, 3))"
        )

    page.hover(".word >> nth=0")
    assert page.evaluate("document.getElementById('view').width") >= 10 * image.shape[1]  # the window's room
    assert pixel(5, 9) != pixel(12, 1)  # inside the attended region: lit; elsewhere: the image
    assert pixel(12, 1) == pixel(0, 15)
    text = page.inner_text("#readout")
    assert "“3”" in text and "row 2, column 1" in text and "100% of its attention is inside" in text
    assert page.inner_text("#grid-note").startswith("The model sees 4 × 4 regions of 4 × 4 pixels (the faint grid)")
    page.keyboard.press("ArrowRight")
    assert "“5”" in page.inner_text("#readout") and "0% of its attention" in page.inner_text("#readout")
    assert pixel(13, 2) != pixel(5, 9)  # the lit region moved with the word
    assert page.locator("#strip figure").all_inner_texts() == ["3", "5"]  # every word's map under the images
    page.hover("#strip figure >> nth=0")
    assert "“3”" in page.inner_text("#readout") and page.locator("#strip figure.on").inner_text() == "3"
    page.keyboard.press("ArrowDown")
    assert page.locator("#pick button.on").inner_text() == "two"
    errors = [e for e in errors if "willReadFrequently" not in e]  # the test's own pixel reads
    assert errors == [], errors


def test_a_long_input_page(browser, tmp_path):
    """1,200 tokens: the page holds the layers asked for, packed; the head view draws each query's
    strongest keys and only the labels near sight; the matrix zooms about the pointer and pans."""
    import numpy as np

    from attnkit.inspection import AttentionRecord

    n, rng = 1200, np.random.default_rng(0)
    logits = rng.normal(size=(3, 2, n, n)) * 4
    maps = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    tokens = [f"t{i}" for i in range(n)]
    record = AttentionRecord("long", [], {"decoder": maps}, "", tokens, tokens[1:] + [""], prompt_length=1000)
    path = write_html(tmp_path / "long.html", [record], {"arch": "llama"}, layers=[1, 2])
    page, errors = _open(browser, path)
    page.evaluate("() => window.attnkit.ahead")
    assert [o.strip() for o in page.locator("#layer option").all_inner_texts()] == ["1", "2 (last)"]  # what it holds
    assert "strongest keys are drawn" in page.inner_text("#head-chips")
    lines = page.locator("#lines line")
    assert 0 < lines.count() <= 4 * n
    labels = page.locator("#lines text").count()
    assert 0 < labels < n  # only those near sight
    page.evaluate("document.querySelector('main').scrollTop = 15000")
    page.wait_for_timeout(100)
    shown = page.locator("#lines text").evaluate_all("ts => ts.map(t => +t.dataset.i)")
    assert min(shown) > 300 and max(shown) >= 1000  # the labels there, generated ones among them
    assert page.locator("#lines text.generated").count() > 0
    page.select_option("#layer", "0")  # held layer 1 (the model's layer 1)
    page.select_option("#head", "1")
    page.click("#tabs [data-tab=matrix]")
    box = page.locator("#matrix").bounding_box()
    assert box["width"] < 1400 and box["height"] < 900  # every cell in sight: a pixel per several cells
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert "largest weight of the cells it covers" in page.inner_text("#readout")
    for _ in range(12):
        page.mouse.wheel(0, -100)
    zoom = page.evaluate("window.attnkit.state.zoom")
    assert zoom is not None and zoom["nr"] < 200 and 300 < zoom["r"] < 900  # about the middle
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 - 60, box["y"] + box["height"] / 2 - 60)
    page.mouse.up()
    moved = page.evaluate("window.attnkit.state.zoom")
    assert moved["r"] > zoom["r"] and moved["c"] > zoom["c"]  # dragged up-left: later rows and columns come in
    page.dblclick("#matrix")
    assert page.evaluate("window.attnkit.state.zoom") is None
    assert errors == []


def test_a_page_past_its_budget_holds_every_layer_as_overviews(browser, tmp_path):
    """A causal record of 3,000 tokens, 3 layers x 2 heads, in a 6 MB page: every head's overview,
    the head list, and the last layer exact: its cells and a query's strongest keys computed in the
    page from q, k and the log-sum-exp equal the record's own."""
    import torch

    from attnkit.attention.record import AttentionCall, lse_of
    from attnkit.inspection import AttentionRecord
    from attnkit.inspection.maps import Maps

    n, g = 3000, torch.Generator().manual_seed(0)
    calls = []
    for layer in range(3):
        call = AttentionCall(
            "decoder",
            layer,
            q=torch.randn(2, n, 8, generator=g) * 2,
            k=torch.randn(1, n, 8, generator=g),
            scale=0.35,
            causal=True,
        )
        call.lse = lse_of(call)
        calls.append(call)
    tokens = [f"t{i}" for i in range(n)]
    record = AttentionRecord("long", [], Maps({"decoder": calls}), "", tokens, tokens[1:] + [""])
    path = write_html(tmp_path / "long.html", [record], {"arch": "llama"}, budget=6 * 2**20)
    assert path.stat().st_size < 6 * 2**20
    page = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri())
    page.wait_for_function("document.body.classList.contains('long')")
    page.click("#tabs [data-tab=matrix]")
    page.wait_for_function("/computed in .* in the page/.test(document.getElementById('readout').textContent)")
    # the whole map square (its diagonal at 45°); its legend and help under it, or beside it where that
    # makes the map larger (a pane much wider than tall)
    for width, beside in ((1400, False), (1900, True)):
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate("attnkit.draw()")
        page.wait_for_function("/computed in .* in the page/.test(document.getElementById('readout').textContent)")
        matrix, legend = page.locator("#matrix").bounding_box(), page.locator("#legend").bounding_box()
        assert 0.9 < matrix["width"] / matrix["height"] < 1.15, matrix
        assert (legend["x"] >= matrix["x"] + matrix["width"]) == beside, (width, matrix, legend)
        assert (legend["y"] < matrix["y"] + 100) == beside, (width, matrix, legend)
    page.set_viewport_size({"width": 1400, "height": 900})
    # the last layer, exact: a 40 x 40 block of cells
    page.evaluate("attnkit.state.long = { kind: 'decoder', region: [2000, 2040, 1990, 2030] }; attnkit.draw()")
    page.wait_for_function("document.getElementById('matrix').dataset.exact === 'true'")
    box = page.locator("#matrix").bounding_box()
    page.mouse.move(box["x"] + 64 + 5, box["y"] + 22 + 5)
    readout = page.inner_text("#readout")
    i, j = int(readout.split("query ")[1].split(" ")[0]), int(readout.split("key ")[1].split(" ")[0])
    expected = record.view("decoder", 2, "mean").block((i, i + 1), (j, j + 1))[0, 0]
    assert abs(float(readout.split("weight ")[1].split(" ")[0]) - expected) < 1e-6, readout
    # another layer: the page's own overview, said to be coarse
    page.select_option("#layer", "0")
    page.wait_for_function("document.getElementById('matrix').dataset.exact === 'false'")
    from attnkit.attention.record import head_stats

    # past 1,024 tokens: the StreamingLLM cache outlined, the head's weight outside it in the legend
    page.wait_for_function("document.getElementById('matrix').dataset.outside !== ''")
    head = page.evaluate("attnkit.state.head")  # the mean of the heads, or one
    outside = head_stats(calls[0])["outside"]
    want = outside.mean() if head == "mean" else outside[int(head)]
    assert float(page.evaluate("document.getElementById('matrix').dataset.outside")) == pytest.approx(want, abs=6e-4)
    page.click("#tabs [data-tab=heads]")
    page.wait_for_function("document.querySelectorAll('table.heads tr[data-layer]').length === 6")
    columns = page.eval_on_selector_all("table.heads th", "c => c.map(x => x.dataset.stat)")
    assert columns[-1] == "outside"  # the head list sorts by it too
    page.click("table.heads th[data-stat=outside]")
    shown = page.eval_on_selector_all("table.heads tr[data-layer] td.sorted", "c => c.map(x => +x.textContent)")
    want = sorted((float(x) for c in calls for x in head_stats(c)["outside"]), reverse=True)
    assert shown == pytest.approx(want, abs=6e-4)
    page.click("#tabs [data-tab=model]")
    page.wait_for_function("/6 of 6 heads drawn/.test(document.getElementById('readout').textContent)")
    page.locator("#model-grid canvas").nth(5).click()  # layer 2, head 1
    assert page.evaluate("[attnkit.state.layer, attnkit.state.head]") == [2, 1]
    page.click("#tabs [data-tab=head]")
    page.fill("#long-head input[type=number]", "2500")
    page.press("#long-head input[type=number]", "Enter")
    page.wait_for_function("/query 2500/.test(document.getElementById('readout').textContent)")
    keys = [
        int(x) for x in page.eval_on_selector_all("table.long-top tr td:first-child", "c => c.map(x => x.textContent)")
    ]
    idx, _ = record.view("decoder", 2, 1).top_keys(12, rows=2500)
    assert keys == idx[0].tolist()
    assert errors == [], errors
