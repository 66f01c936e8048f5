"""OV circuits against references written from each family's own weights: the full vocabulary x
vocabulary circuit W_E W_V W_O W_U formed by hand (GPT-2's c_attn and c_proj slices with its
LayerNorms' weights and centring; Llama's grouped v_proj and o_proj with its RMSNorms' weights;
OLMo 2's norm after the attention folded into W_O), its eigenvalues by torch.linalg.eigvals and
its rows ranked by hand; the copying score and each source token's rank equal attnkit's."""

from __future__ import annotations

import pytest
import torch

import attnkit
import families
from attnkit import circuits
from tiny_hf import build

TEXT = "the dog runs in the park and the dog"


def _copying(full: torch.Tensor) -> float:
    eig = torch.linalg.eigvals(full.double())
    return float(eig.sum().real / eig.abs().sum())


def _ranks(full: torch.Tensor, ids: list[int]) -> list[int]:
    distinct = list(dict.fromkeys(ids))
    rows = full[distinct]
    own = rows[torch.arange(len(distinct)), distinct]
    return (rows > own[:, None]).sum(1).tolist()


def _centred(m: torch.Tensor, dim: int) -> torch.Tensor:
    return m - m.mean(dim, keepdim=True)


def _gpt2_circuits(net, layer: int):
    """Each head's full OV circuit of GPT-2 layer ``layer`` from its modules' weights."""
    t, block = net.transformer, net.transformer.h[layer]
    d, heads = t.wte.weight.shape[1], net.config.n_head
    e = d // heads
    embed = _centred(t.wte.weight, 1)  # ln_1 centres what it reads
    unembed = _centred(_centred(torch.eye(d), 0) @ torch.diag(t.ln_f.weight) @ net.lm_head.weight.T, 1)
    out = []
    for h in range(heads):
        w_v = torch.diag(block.ln_1.weight) @ block.attn.c_attn.weight[:, 2 * d + h * e : 2 * d + (h + 1) * e]
        w_o = block.attn.c_proj.weight[h * e : (h + 1) * e]
        out.append(embed @ w_v @ w_o @ unembed)
    return out


def _rms_circuits(net, layer: int, post: bool = False):
    """Each head's full OV circuit of a Llama-style layer (grouped values; OLMo 2's norm after the
    attention with ``post``)."""
    m, block = net.model, net.model.layers[layer]
    attn, cfg = block.self_attn, net.config
    e = cfg.hidden_size // cfg.num_attention_heads
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    unembed = _centred(torch.diag(m.norm.weight) @ net.lm_head.weight.T, 1)
    out = []
    for h in range(cfg.num_attention_heads):
        kv = h // group
        w_v = torch.diag(block.input_layernorm.weight if not post else torch.ones(cfg.hidden_size))
        w_v = w_v @ attn.v_proj.weight.T[:, kv * e : (kv + 1) * e]
        w_o = attn.o_proj.weight.T[h * e : (h + 1) * e]
        if post:
            w_o = w_o @ torch.diag(block.post_attention_layernorm.weight)
        out.append(m.embed_tokens.weight @ w_v @ w_o @ unembed)
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {f: attnkit.load(build(f, root / f), device="cpu") for f in ("gpt2", "llama", "bart")}


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_copying_scores_and_ranks_are_the_full_circuit_by_hand(models, family):
    model = models[family]
    net = model.hf.model
    ids = model.hf.encode_text(TEXT)
    found = circuits.ov_circuits(model, TEXT)
    assert found.sources == model.output_tokens(list(dict.fromkeys(ids)))
    with torch.no_grad():
        for layer in range(net.config.num_hidden_layers):
            hand = _gpt2_circuits(net, layer) if family == "gpt2" else _rms_circuits(net, layer)
            for h, full in enumerate(hand):
                i = found.names.index(f"blocks.{layer}.attn.h{h}")
                assert found.copying[i] == pytest.approx(_copying(full), abs=1e-5)
                assert found.ranks[i].tolist() == _ranks(full, ids)
                top = torch.topk(full[ids[1]], 3).indices.tolist()  # the second source token's row
                assert [t for t, _ in found.raised[i][1][:3]] == model.output_tokens(top)
    assert sorted(r["copying"] for r in found.table())[::-1] == [r["copying"] for r in found.table()]


def test_a_norm_after_the_attention_is_folded_into_what_a_head_writes(tmp_path):
    model = attnkit.load(families.saved("olmo2", tmp_path / "olmo2"), device="cpu")
    net = model.hf.model
    ids = model.hf.encode_text(TEXT)
    found = circuits.ov_circuits(model, TEXT)
    with torch.no_grad():
        hand = _rms_circuits(net, 1, post=True)  # OLMo 2 has no norm before its attention
    for h, full in enumerate(hand):
        i = found.names.index(f"blocks.1.attn.h{h}")
        assert found.copying[i] == pytest.approx(_copying(full), abs=1e-5)
        assert found.ranks[i].tolist() == _ranks(full, ids)


def test_what_has_no_token_basis_is_refused_in_one_line(models):
    with pytest.raises(ValueError, match="no token basis") as err:  # BART's embeddings pass a LayerNorm
        circuits.ov_circuits(models["bart"], TEXT, target="the dog")
    assert "\n" not in str(err.value)
    unit = circuits.Unit("blocks.9.attn.z", 9, 0)
    with pytest.raises(ValueError, match="blocks.9"):
        circuits.ov_circuits(models["gpt2"], TEXT, heads=[unit])
