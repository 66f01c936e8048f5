"""The family matrix: a tiny random model of every model type in transformers' auto mappings
(``tests/families.py``), each exact against its eager attention or refused in one line, never
wrong; and the docs' table of families (docs/families.md) says what this transformers does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

import families  # noqa: E402

TABLE = Path(__file__).resolve().parents[2] / "docs" / "families.md"
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \|")
SHOWN = {"exact": "exact", "refused": "refused", "skipped": "not built"}


def _documented() -> tuple[str | None, dict[str, str]]:
    text = TABLE.read_text(encoding="utf-8")
    version = re.search(r"with transformers (\S+);", text)
    rows = {m.group(1): m.group(2).strip() for line in text.splitlines() if (m := ROW.match(line))}
    return (version.group(1) if version else None), rows


@pytest.fixture(scope="module")
def documented():
    return _documented()


@pytest.mark.parametrize("model_type", families.model_types())
def test_every_family_is_exact_or_refused(model_type, documented):
    result = families.compare(model_type)
    assert result.status != "wrong", f"{model_type}: {result.reason}"
    if result.status == "exact":
        assert result.map_error <= 1e-5 and result.output_error <= 1e-5 and result.calls > 0
    if result.status == "refused":
        assert result.reason and "\n" not in result.reason
    version, rows = documented
    if version == transformers.__version__:  # the table was made with this transformers
        assert rows.get(model_type) == SHOWN[result.status], f"docs/families.md is stale for {model_type}"


def test_the_table_covers_every_type_and_says_how_many(documented):
    version, rows = documented
    assert version is not None
    if version != transformers.__version__:
        pytest.skip(f"docs/families.md was made with transformers {version}, {transformers.__version__} is here")
    assert set(rows) == set(families.model_types())
    counts = {s: sum(v == s for v in rows.values()) for s in ("exact", "refused")}
    text = TABLE.read_text(encoding="utf-8")
    assert f"**{counts['exact']} exact, {counts['refused']} refused**" in text
    assert counts["exact"] + counts["refused"] >= 250


def _recorded(model_type: str):
    """A tiny model's record through attnkit (``HFModel.forward``) and its eager maps."""
    import torch

    from attnkit.pretrained import hf

    model = families.build(model_type)
    feed = families.inputs(model)
    with torch.no_grad():
        eager = model(**feed, output_attentions=True).attentions
    rec, _ = hf.from_object(model, tokenizer="(ids)").forward(feed["input_ids"][0].tolist())
    return rec, eager


@pytest.mark.parametrize("model_type", ["gpt_oss", "gemma2"])
def test_sinks_and_soft_caps_stay_exact_in_every_view(model_type):
    """A learned sink (GPT-OSS) and a binding soft-cap (Gemma 2): the record's own log-sum-exp
    recomputed from q and k, the blockwise views and the head summaries all equal the eager map."""
    import torch

    from attnkit.attention.record import head_block, lse_of
    from attnkit.attention.record.views import layer_overviews

    rec, eager = _recorded(model_type)
    for call, want in zip(rec.calls, eager):
        want = want[0].float()
        assert (call.sink is not None) == (model_type == "gpt_oss") and (call.cap is not None) == (
            model_type == "gemma2"
        )
        torch.testing.assert_close(lse_of(call), call.lse, atol=1e-5, rtol=0)
        for rows, w, _, _ in head_block(call):
            torch.testing.assert_close(w[..., : want.shape[-1]], want[:, rows, : w.shape[-1]], atol=1e-5, rtol=0)
        pooled = layer_overviews(call, size=64)  # one pixel a cell: the map itself, the mean of the heads last
        torch.testing.assert_close(torch.from_numpy(pooled[:-1]), want, atol=1e-5, rtol=0)
        if model_type == "gpt_oss":  # the sink takes mass: rows sum to less than one
            assert float(want.sum(-1).max()) < 1 - 1e-3


@pytest.mark.parametrize("model_type", ["gemma3_text", "mistral"])
def test_a_sliding_window_is_kept_as_a_rule_and_stays_exact(model_type, tmp_path):
    """A sliding-window layer's boolean mask becomes the rule it is (a window of 4 keys, shorter than
    the input), so its record grows with T; the maps equal eager, also read back from a file."""
    import torch

    from attnkit.attention.record import lse_of
    from attnkit.inspection.capture import _load_calls, _save_calls

    rec, eager = _recorded(model_type)
    windowed = [c for c in rec.calls if c.window is not None]
    assert windowed and all(c.window == 4 and c.mask is None and c.causal for c in windowed)
    for call, want in zip(rec.calls, eager):
        h, t, s = call.shape
        got = torch.stack([call.block(i, slice(0, t), slice(0, s)) for i in range(h)])
        torch.testing.assert_close(got, want[0].float(), atol=1e-5, rtol=0)
        torch.testing.assert_close(lse_of(call), call.lse, atol=1e-5, rtol=0)
    arrays: dict = {}
    rules = _save_calls(arrays, "decoder", rec.calls)  # as a .npz keeps them
    for before, after in zip(rec.calls, _load_calls(arrays, "decoder", "decoder", rules)):
        assert (after.window, after.cap, after.mask) == (before.window, before.cap, None)
        h, t, s = before.shape
        for i in range(h):
            torch.testing.assert_close(
                after.block(i, slice(0, t), slice(0, s)), before.block(i, slice(0, t), slice(0, s))
            )


@pytest.mark.parametrize("model_type", ["qwen3", "gpt_oss", "gemma2", "gemma3_text", "olmo2", "phi3"])
def test_a_family_no_list_named_loads_from_disk_and_captures_exactly(model_type, tmp_path):
    """The real loading path, for families no list ever named: a tiny model saved to disk with a
    tokenizer, opened by ``attnkit.load`` (its layout from config.json and its class) and captured
    over a prompt and 4 generated tokens; the maps equal the family's eager attention."""
    import numpy as np
    import torch

    import attnkit

    path = families.saved(model_type, tmp_path / model_type)
    model = attnkit.load(path, device="cpu")
    (prepared,) = model.prepare(["two dogs are playing in the snow ."], max_new_tokens=4)
    record = model.capture(prepared)
    reference = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        torch.manual_seed(0)
        eager = reference(torch.tensor([prepared.tgt_in_ids]), output_attentions=True).attentions
    assert record.maps["decoder"].shape[0] == len(eager)
    np.testing.assert_allclose(record.maps["decoder"], np.stack([a[0].numpy() for a in eager]), atol=1e-5)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_half_precision_model_records_as_it_runs(dtype):
    """A model in bfloat16 or float16 (as big models are loaded) runs attnkit's attention in its own
    dtype: its outputs equal its own eager attention's within that dtype's rounding, and the maps
    formed from the record equal eager's maps of the same model."""
    import torch

    from attnkit.pretrained import hf

    half = getattr(torch, dtype)
    model = families.build("qwen3").to(half)
    feed = families.inputs(model)
    with torch.no_grad():
        eager = model(**feed, output_attentions=True)
    loaded = hf.from_object(model, tokenizer="(ids)")
    with torch.no_grad():
        plain = model(**feed).logits
        rec, _ = loaded.forward(feed["input_ids"][0].tolist())
    tolerance = 2e-2 if dtype == "bfloat16" else 2e-3
    scale = float(eager.logits.float().abs().max())
    assert float((plain.float() - eager.logits.float()).abs().max()) <= tolerance * scale
    assert all(c.q.dtype == torch.float32 for c in rec.calls)  # kept in the recording's dtype
    for call, want in zip(rec.calls, eager.attentions):
        h, t, s = call.shape
        got = torch.stack([call.block(i, slice(0, t), slice(0, s)) for i in range(h)])
        assert float((got - want[0].float()).abs().max()) <= tolerance


def test_a_static_cache_prefill_attends_to_the_prompt_alone():
    """A static cache's prefill hands the attention no mask and keys past the prompt (the cache's
    empty slots): they are cut, as transformers' SDPA cuts them, so outputs and greedy generation
    equal eager attention's."""
    import torch
    from transformers import StaticCache

    from attnkit.pretrained import hf

    model = families.build("llama")
    ids = families.inputs(model)["input_ids"]

    def logits(impl: str) -> torch.Tensor:
        model.set_attn_implementation(impl)
        cache = StaticCache(config=model.config, max_cache_len=3 * ids.shape[1])
        with torch.no_grad():
            return model(input_ids=ids, attention_mask=torch.ones_like(ids), cache=cache).logits

    eager = logits("eager")
    loaded = hf.from_object(model, tokenizer="(ids)")
    torch.testing.assert_close(logits(hf.ATTN), eager, atol=1e-5, rtol=0)
    generated = {}
    for impl in ("eager", hf.ATTN):
        model.set_attn_implementation(impl)
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False, cache_implementation="static"
        )
        generated[impl] = out[0].tolist()
    assert generated["eager"] == generated[hf.ATTN]
    assert loaded.named  # the model is still named after its implementation changed back
