"""Transformer layers against PyTorch's own with copied weights."""

import pytest
import torch
from torch import nn

from attnkit.models import DecoderLayer, EncoderLayer

D, H, F = 16, 4, 32


def copy_mha(ours, ref):
    with torch.no_grad():
        ours.in_proj_weight.copy_(ref.in_proj_weight)
        ours.in_proj_bias.copy_(ref.in_proj_bias)
        ours.out_proj.weight.copy_(ref.out_proj.weight)
        ours.out_proj.bias.copy_(ref.out_proj.bias)


def copy_common(ours, ref, norms):
    with torch.no_grad():
        ours.feed_forward.w_1.load_state_dict(ref.linear1.state_dict())
        ours.feed_forward.w_2.load_state_dict(ref.linear2.state_dict())
        for i, name in enumerate(norms):
            ours.norms[i].load_state_dict(getattr(ref, name).state_dict())


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch(norm_first):
    ref = nn.TransformerEncoderLayer(D, H, F, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = EncoderLayer(D, H, F, dropout=0.0, norm_first=norm_first).eval()
    copy_mha(ours.self_attn, ref.self_attn)
    copy_common(ours, ref, ["norm1", "norm2"])
    x = torch.randn(3, 7, D)
    keep = torch.ones(3, 7, dtype=torch.bool)
    keep[1, 5:] = False
    expected = ref(x, src_key_padding_mask=~keep)
    got = ours(x, keep[:, None, None, :])
    torch.testing.assert_close(got[keep], expected[keep], rtol=0, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    ref = nn.TransformerDecoderLayer(D, H, F, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    ours = DecoderLayer(D, H, F, dropout=0.0, norm_first=norm_first).eval()
    copy_mha(ours.self_attn, ref.self_attn)
    copy_mha(ours.cross_attn, ref.multihead_attn)
    copy_common(ours, ref, ["norm1", "norm2", "norm3"])
    x, memory = torch.randn(2, 5, D), torch.randn(2, 6, D)
    keep = torch.ones(2, 6, dtype=torch.bool)
    keep[0, 4:] = False
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    expected = ref(x, memory, tgt_mask=causal, memory_key_padding_mask=~keep)
    got = ours(x, memory, keep[:, None, None, :])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_activation_dropout_only_where_asked():
    """The paper and fairseq drop sublayer outputs, not the FFN's hidden units: off unless configured."""
    from attnkit.config import ModelConfig, TransformerConfig
    from attnkit.models.factory import build_model

    def ffn_rates(dropout, activation_dropout=0.0):
        model = build_model(
            ModelConfig(
                d_model=D,
                layers=2,
                dropout=dropout,
                transformer=TransformerConfig(heads=H, ffn=F, activation_dropout=activation_dropout),
            ),
            src_vocab=20,
            tgt_vocab=20,
            pad_id=0,
            shared_vocab=True,
        )
        layers = list(model.encoder.layers) + list(model.decoder_layers)
        return {layer.feed_forward.dropout.p for layer in layers}, {layer.dropout.p for layer in layers}

    assert ffn_rates(dropout=0.3) == ({0.0}, {0.3})
    assert ffn_rates(dropout=0.3, activation_dropout=0.1) == ({0.1}, {0.3})

    # with residual dropout 0 and no activation dropout, a layer in training mode is deterministic
    layer = EncoderLayer(D, H, F, dropout=0.0).train()
    x, keep = torch.randn(2, 5, D), torch.ones(2, 1, 1, 5, dtype=torch.bool)
    torch.testing.assert_close(layer(x, keep)[0], layer(x, keep)[0], rtol=0, atol=0)
