import json
import re

import numpy as np
import pytest

from attnkit.inspection import AttentionRecord
from attnkit.viewer import render_html, write_html
from attnkit.viewer.html import packed_size, viewer_data


def _data(page: str) -> dict:
    blob = re.search(r'<script type="application/json" id="attnkit-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(blob)


def unpacked(packed: dict) -> np.ndarray:
    """A page's packed maps of one kind, read back as the page reads them: (held layers, h, q, k)."""
    import base64

    _, h, q, k = packed["shape"]
    layers = [np.frombuffer(base64.b64decode(d), "<u2").reshape(h, q, k) / 65535 for d in packed["data"]]
    return np.stack(layers)


def test_self_contained(toy_records):
    records, info = toy_records["transformer"]
    page = render_html(records, info, title="toy")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    data = _data(page)
    assert len(data["examples"]) == 2 and data["model"]["arch"] == "transformer"
    ex = data["examples"][0]
    assert set(ex["packed"]) == {"encoder", "decoder", "cross"} and ex["maps"] == {}
    cross = ex["packed"]["cross"]
    assert cross["shape"] == list(records[0].maps["cross"].shape) and cross["layers"] == [0]
    np.testing.assert_allclose(unpacked(cross), records[0].maps["cross"], atol=8e-6)  # 16-bit fixed point


def test_a_page_holds_the_layers_asked_and_past_its_budget_every_layer_as_overviews(tmp_path):
    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.ones(300), size=(6, 4, 300)).astype(np.float32)
    rec = AttentionRecord("long", [f"t{i}" for i in range(300)], {"encoder": maps})
    per_layer = packed_size([rec], [0])
    assert viewer_data([rec], budget=10 * per_layer)["holds"] == "every layer, every map in full"
    page = _data(render_html([rec], {}, layers=[1, 5]))["examples"][0]["packed"]["encoder"]
    assert page["layers"] == [1, 5]
    np.testing.assert_allclose(unpacked(page), maps[[1, 5]], atol=8e-6)
    # past the budget: every layer and head as overviews (formed weights: none computed in the page)
    data = viewer_data([rec], budget=int(2.5 * per_layer))
    assert data["holds"].startswith("every layer and head as overviews of at most 243 x 243 pixels")  # what fits
    ex = data["examples"][0]
    assert ex["offline"]["encoder"]["size"] == [243, 243] and len(ex["offline"]["encoder"]["data"]) == 6
    assert ex["remote"] == {"encoder": [6, 4, 300, 300]} and ex["offline"]["encoder"]["exact"] == {}
    with pytest.raises(ValueError, match="`layers` 6 out of range"):
        write_html(tmp_path / "v.html", [rec], {}, layers=[6])
    with pytest.raises(ValueError, match="cannot compute layer 1 exactly: its weights are formed"):
        viewer_data([rec], layers=[1], budget=per_layer // 4)
    with pytest.raises(ValueError, match="cannot hold even 16 x 16 overviews"):
        viewer_data([rec], budget=1000)


def test_tokens_cannot_break_out_of_the_page():
    evil = ["</script><script>alert(1)</script>", "<!--", "a & b", "</s>"]
    rec = AttentionRecord("x </script>", evil, {"encoder": np.full((1, 1, 4, 4), 0.25, np.float32)})
    page = render_html([rec], {}, title="<b>title</b>")
    assert page.count("</script>") == 2  # the data block's and the code's own
    assert "<b>title</b>" not in page and "&lt;b&gt;title&lt;/b&gt;" in page
    assert _data(page)["examples"][0]["src_tokens"] == evil


def test_rnn_local_attention_carries_p_t(toy_records):
    records, info = toy_records["rnn"]
    rec = records[0]
    rec.p_t, rec.window = np.linspace(0, 3, len(rec.tgt_in_tokens)).astype(np.float32), 2
    ex = viewer_data([rec], info)["examples"][0]
    assert set(ex["packed"]) == {"cross"} and ex["window"] == 2 and len(ex["p_t"]) == len(rec.tgt_in_tokens)


def test_write_checks_suffix_and_needs_records(tmp_path, toy_records):
    records, info = toy_records["rnn"]
    data = _data(write_html(tmp_path / "v.html", records, info).read_text(encoding="utf-8"))
    assert [ex["source"] for ex in data["examples"]] == [r.source for r in records]  # the page holds every sentence
    assert [ex["src_tokens"] for ex in data["examples"]] == [r.src_tokens for r in records]
    with pytest.raises(ValueError, match=".html"):
        write_html(tmp_path / "v.png", records, info)
    with pytest.raises(ValueError, match="no sentences"):
        render_html([], {})
