"""Image captioners: region features and masks, 2-D positions, and the model interface the
search and training use (step-by-step decoding equals teacher forcing, as for text)."""

import numpy as np
import pytest
import torch

from attnkit.config import ImageConfig, ModelConfig, RNNConfig, TransformerConfig
from attnkit.models import DecodingState, ImageCaptioner, Seq2SeqModel
from attnkit.models.factory import build_captioner
from attnkit.models.image import ConvRegions, PatchRegions, region_maps
from attnkit.positions.grid import (
    FourierGrid,
    LearnedGrid,
    SinusoidalGrid,
    build_grid_positions,
    grid_coords,
)
from attnkit.positions.sinusoidal import sinusoid_table
from attnkit.search import SearchOptions, beam_search, greedy_search
from formed import formed

V = 14
SIZE = 16
VARIANTS = {
    "cnn-rnn-sinusoidal": dict(arch="rnn", positions="sinusoidal", image={"encoder": "cnn"}),
    "cnn-rnn-gru-fourier": dict(arch="rnn", positions="fourier", image={"encoder": "cnn"}, rnn={"cell": "gru"}),
    "cnn-rnn-none-no-feeding": dict(
        arch="rnn", positions="none", image={"encoder": "cnn"}, rnn={"input_feeding": False}
    ),
    "vit-transformer-learned": dict(arch="transformer", positions="learned", image={"encoder": "vit"}),
    "vit-transformer-fourier": dict(arch="transformer", positions="fourier", image={"encoder": "vit"}),
    "cnn-transformer-sinusoidal": dict(arch="transformer", positions="sinusoidal", image={"encoder": "cnn"}),
}


def make(name):
    v = VARIANTS[name]
    shared = {k: x for k, x in v.items() if k not in ("rnn", "transformer", "image")}
    cfg = ModelConfig(
        d_model=32,
        layers=1,
        dropout=0.0,
        **shared,
        rnn=RNNConfig(hidden=32, **v.get("rnn", {})),
        transformer=TransformerConfig(heads=4, ffn=64),
        image=ImageConfig(region=4, **v.get("image", {})),
    )
    torch.manual_seed(0)
    return build_captioner(cfg, vocab=V, pad_id=0, image_size=SIZE).eval()


def images(b=3):
    torch.manual_seed(1)
    return torch.rand(b, SIZE, SIZE), torch.ones(b, SIZE, SIZE, dtype=torch.bool)


@pytest.mark.parametrize("name", VARIANTS)
def test_captioner_satisfies_the_interface_and_steps_equal_teacher_forcing(name):
    model = make(name)
    assert isinstance(model, Seq2SeqModel) and isinstance(model, ImageCaptioner)
    src, mask = images()
    enc = model.encode(src, mask)
    assert enc.memory.shape == (3, 16, model.output_projection.in_features) and enc.mask.shape == (3, 16)
    assert bool(enc.mask.all())
    assert model.region_grid(SIZE, SIZE) == (4, 4)
    tgt = torch.randint(4, V, (3, 5))
    full, maps, _ = formed(lambda: model(src, mask, tgt))
    assert full.logits.shape == (3, 5, V)
    state = model.init_state(model.encode(src, mask))
    assert isinstance(state, DecodingState)
    steps = [model.decode_step(state, tgt[:, i : i + 1]) for i in range(5)]
    torch.testing.assert_close(torch.cat([s.logits for s in steps], 1), full.logits, rtol=0, atol=1e-5)
    cross = maps["cross"][-1]  # (b, h, t, regions)
    assert cross.shape[-1] == 16
    torch.testing.assert_close(cross.sum(-1), torch.ones_like(cross.sum(-1)), rtol=0, atol=1e-5)
    sites = {s.kind for s in model.attention_sites()}
    assert "cross" in sites
    # the search serves captioners as it serves translators: beam 1 == greedy
    opts = SearchOptions(beam=1, max_len_ratio=0.0, max_len_extra=6)
    assert beam_search(model, src, mask, opts).best == greedy_search(model, src, mask, opts).best


def test_position_schemes_are_the_grid_scheme_and_positions_matter():
    model = make("cnn-rnn-sinusoidal")
    assert [type(p) for p in model.position_schemes()] == [SinusoidalGrid]
    assert make("cnn-rnn-none-no-feeding").position_schemes() == []
    src, mask = images()
    with_pos = model.encoder.embed(src, mask)[0]
    without = model.encoder.embed(src, mask, use_positions=False)[0]
    torch.testing.assert_close(with_pos - without, SinusoidalGrid(32)(4, 4).expand(3, -1, -1))


def test_region_i_is_the_block_at_row_i_div_gw_and_column_i_mod_gw():
    # a patch embedding sees only its own block: lighting one block changes exactly one region
    torch.manual_seed(0)
    patches = PatchRegions(8, region=4)
    blank = torch.zeros(1, 16, 12)
    lit = blank.clone()
    lit[0, 8:12, 4:8] = 1.0  # block row 2, column 1 of a 4 x 3 grid
    diff = (patches(lit) - patches(blank)).flatten(2).transpose(1, 2).abs().sum(-1)[0]  # (12,)
    assert diff.nonzero().flatten().tolist() == [2 * 3 + 1]
    assert region_maps(torch.arange(12.0), (4, 3))[2, 1] == 7


def test_cnn_halves_resolution_per_stage_and_masks_pool_to_regions():
    torch.manual_seed(0)
    assert ConvRegions(16, region=8)(torch.rand(2, 32, 24)).shape == (2, 16, 4, 3)
    with pytest.raises(ValueError, match="power of 2"):
        ConvRegions(16, region=6)
    model = make("vit-transformer-learned")
    src, mask = images(1)
    mask[0, :, 8:] = False  # the right half is padding
    _, regions = model.src_embed(src, mask)
    assert regions.view(4, 4)[:, :2].all() and not regions.view(4, 4)[:, 2:].any()
    assert (model.encode(src, mask).memory.shape[1]) == 16
    with pytest.raises(ValueError, match="does not tile"):
        model.encode(torch.rand(1, 15, 16), torch.ones(1, 15, 16, dtype=torch.bool))


def test_2d_sinusoids_are_row_then_column_sinusoids():
    pe = SinusoidalGrid(16)(3, 5)
    coords = grid_coords(3, 5).long()
    assert pe.shape == (15, 16)
    torch.testing.assert_close(pe[:, :8], sinusoid_table(coords[:, 0], 8))
    torch.testing.assert_close(pe[:, 8:], sinusoid_table(coords[:, 1], 8))
    # regions in one row share the row half; in one column the column half
    assert torch.equal(pe[5, :8], pe[9, :8]) and torch.equal(pe[1, 8:], pe[11, 8:])
    with pytest.raises(ValueError, match="multiple of 4"):
        SinusoidalGrid(18)


def test_learned_and_fourier_grids():
    torch.manual_seed(0)
    learned = LearnedGrid(8, max_grid=4)
    assert torch.equal(learned(2, 3)[4], learned.table[1, 1])  # row-major: index 4 of a 2 x 3 grid is (1, 1)
    with pytest.raises(ValueError, match="larger than the learned table"):
        learned(5, 2)
    fourier = FourierGrid(8)
    out = fourier(2, 3)
    assert out.shape == (6, 8)
    torch.testing.assert_close(out, fourier.fourier.encode(grid_coords(2, 3)))
    out.sum().backward()
    assert fourier.fourier.frequencies.grad is not None  # the frequencies learn
    assert build_grid_positions("none", d_model=8, max_grid=4) is None
    with pytest.raises(ValueError, match="did you mean 'learned'"):
        build_grid_positions("learnt", d_model=8, max_grid=4)


def test_grid_coords_row_major():
    assert grid_coords(2, 3).tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    assert np.allclose(region_maps(np.arange(6), (2, 3)), [[0, 1, 2], [3, 4, 5]])
