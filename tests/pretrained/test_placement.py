"""Big models as people load them: in bfloat16 or float16, placed by accelerate across devices or
offloaded to the CPU and the disk (``device_map``), and with int8 weights.
Each is read through ``attnkit.load(model, tokenizer)`` the same way, its maps against the same
model's eager attention, its outputs against its own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import transformers

import attnkit
from tiny_hf import build

TEXT = "the dog runs in the park"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return build("llama", tmp_path_factory.mktemp("placed") / "llama")


def _eager(path, **kwargs):
    return transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", **kwargs).eval()


def _compare(model, eager) -> tuple[float, float, float]:
    """(largest map difference, largest logit difference, largest logit) of ``model`` read by
    attnkit against ``eager`` on TEXT and three generated tokens."""
    tok = transformers.AutoTokenizer.from_pretrained(model.name_or_path)
    loaded = attnkit.load(model, tok)
    prepared = loaded.prepare([TEXT], max_new_tokens=3)[0]
    record = loaded.capture(prepared)
    with torch.no_grad():
        out = eager(torch.tensor([prepared.tgt_in_ids]), output_attentions=True)
        mine = loaded.hf.outputs(prepared.tgt_in_ids)
    maps = max(
        float(np.abs(record.get("decoder")[layer] - want[0].float().numpy()).max())
        for layer, want in enumerate(out.attentions)
    )
    logits = float((mine.logits.float() - out.logits.float()).abs().max())
    return maps, logits, float(out.logits.float().abs().max())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_model_records_as_a_float32_one(llama, dtype):
    """The record holds the model's own half-precision q and k; each weight is their float32
    softmax, which eager rounds to the model's dtype: they agree to that rounding (bfloat16 keeps
    8 bits, float16 11), and so do the outputs."""
    model = transformers.AutoModelForCausalLM.from_pretrained(llama, dtype=dtype).eval()
    maps, logits, scale = _compare(model, _eager(llama, dtype=dtype))
    ulp = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    assert maps <= ulp and logits <= 4 * ulp * max(1.0, scale), (maps, logits)


def test_a_model_offloaded_to_the_cpu_and_the_disk_is_exact(llama, tmp_path):
    pytest.importorskip("accelerate")
    placed = {"model.embed_tokens": "disk", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
              "model.rotary_emb": "cpu", "lm_head": "disk"}  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_pretrained(
        llama, device_map=placed, offload_folder=str(tmp_path / "offload")
    ).eval()
    assert any(p.device.type == "meta" for p in model.parameters())  # its weights are read from disk when used
    maps, logits, scale = _compare(model, _eager(llama))
    assert maps <= 1e-6 and logits <= 1e-6 * scale


def test_a_model_of_int8_weights_is_exact_against_itself(llama):
    """Its linear layers' weights int8 (PyTorch's dynamic quantisation, which torch ships): the
    attention's inputs are ordinary tensors, recorded as a float model's."""
    import warnings

    from torch.ao.quantization import quantize_dynamic

    def int8(model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated for torchao
            return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)

    model = int8(transformers.AutoModelForCausalLM.from_pretrained(llama).eval())
    assert "quantized" in type(model.model.layers[0].self_attn.q_proj).__module__  # int8, not float
    maps, logits, scale = _compare(model, int8(_eager(llama)))
    assert maps <= 1e-5 and logits <= 1e-5 * scale


def test_a_directory_loads_in_half_precision_by_name(llama, tmp_path):
    """``attnkit.load(DIR, dtype=...)`` and ``--dtype``: the weights in bfloat16, the maps as the
    bfloat16 model's own eager attention gives them, to its rounding; an attnkit model refuses."""
    import subprocess
    import sys

    loaded = attnkit.load(str(llama), dtype="bfloat16")
    assert loaded.hf.model.dtype == torch.bfloat16
    prepared = loaded.prepare([TEXT], max_new_tokens=0)[0]
    record = loaded.capture(prepared)
    eager = _eager(llama, dtype=torch.bfloat16)
    with torch.no_grad():
        out = eager(torch.tensor([prepared.tgt_in_ids]), output_attentions=True)
    for layer, want in enumerate(out.attentions):
        np.testing.assert_allclose(record.get("decoder")[layer], want[0].float().numpy(), atol=2.0**-8)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnkit",
            "capture",
            str(llama),
            TEXT,
            "--dtype",
            "float16",
            "-o",
            str(tmp_path / "r.npz"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and (tmp_path / "r.npz").is_file(), r.stderr
    with pytest.raises(ValueError, match="attnkit model"):
        attnkit.load("multi30k-en-de", dtype="bfloat16")
