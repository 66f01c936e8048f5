"""The viewer inline in Jupyter, checked by executing a real notebook with nbclient."""

import ast
import html
import re

import pytest

from attnkit.viewer import show

pytestmark = pytest.mark.slow  # starts a Jupyter kernel


def test_show_renders_the_viewer_in_a_sandboxed_iframe(toy_records):
    records, info = toy_records["rnn"]
    out = show(records, info, height=500)._repr_html_()
    assert out.startswith('<iframe sandbox="allow-scripts" srcdoc="') and "height: 500px" in out
    page = html.unescape(re.search(r'srcdoc="(.*?)" style', out, re.S).group(1))
    assert 'id="attnkit-data"' in page and records[0].source in page
    with pytest.raises(ValueError, match="height"):
        show(records, info, height=10)


def test_show_of_a_long_record_carries_every_layers_overview():
    import torch

    from attnkit.attention.record import AttentionCall, lse_of
    from attnkit.inspection import AttentionRecord
    from attnkit.inspection.maps import Maps

    g = torch.Generator().manual_seed(0)
    calls = [
        AttentionCall(
            "decoder", i, q=torch.randn(2, 900, 8, generator=g), k=torch.randn(1, 900, 8, generator=g), causal=True
        )
        for i in range(2)
    ]
    for call in calls:
        call.lse = lse_of(call)
    tokens = [f"t{i}" for i in range(900)]
    record = AttentionRecord("long", [], Maps({"decoder": calls}), "", tokens, tokens)
    page = show([record], {}, page_mb=2).page
    assert '"offline":{"decoder":{"causal":true,"size":[' in page and '"exact":{"1":{' in page  # the last exact
    assert len(page) < 2 * 2**20


def test_a_notebook_displays_the_viewer(trained_toys):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("from attnkit.loaded import attention_records\nfrom attnkit.viewer import show"),
        nbformat.v4.new_code_cell(
            f"records, info = attention_records({str(trained_toys['transformer'])!r}, ['a b c d'])\nshow(records, info)"
        ),
    ]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    [output] = nb.cells[1].outputs
    page = html.unescape(output["data"]["text/html"])
    assert output["output_type"] == "execute_result" and "<iframe" in page
    assert '"source":"a b c d"' in page and '"output":"d c b a"' in page


def test_the_docs_notebook_runs():
    """docs/attnkit.ipynb, executed as a user would run it: attnkit.load, translate, attention, show."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from pathlib import Path

    nb = nbformat.read(Path(__file__).resolve().parents[2] / "docs" / "attnkit.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = lambda cell: next(o for o in cell.outputs if "data" in o)["data"]["text/plain"]  # past any warning
    assert "encoder-decoder multi30k-en-de" in text(code[0])
    assert "Mann" in text(code[1])
    assert "'cross': (4, 4," in text(code[2])
    assert "<iframe" in html.unescape(code[4].outputs[0]["data"]["text/html"])
    # named sites: activation patching's identity (the last layer's output patched in: the clean logits)
    assert "'encoder.0.resid_pre'" in text(code[5])
    restored = ast.literal_eval(text(code[7]))
    assert restored["decoder.3.resid_post"] == 1.0 and abs(restored["decoder.0.attn.z"]) < 0.05
    assert len(ast.literal_eval(text(code[8]))) == 4  # each cross-attention head ablated in turn
    assert "'blocks.1.attn'" in text(code[9]) and "'final_norm'" in text(code[9])
    assert "(1, 4, 8, 16)" in text(code[10]) and float(text(code[11])) > 0
