"""Image captioning: an image encoder turns an image into a grid of region features, and
the decoders that exist (Luong's RNN, the Transformer's) attend over the regions as they
would over source tokens (Xu et al. 2015, "Show, Attend and Tell"; Dosovitskiy et al. 2021
for the ViT patches).

    image (b, H, W) -> regions: a small CNN, or ViT patches (one Linear per p x p patch)
                    -> + 2-D positions (``positions.grid``) -> memory (b, r, d), r = gh * gw
    RNN:         h_0, c_0 = tanh(W [mean of the regions])       (Show, Attend and Tell, sec. 3.1.2)
                 then Luong attention over the regions at every step
    Transformer: memory -> N x EncoderLayer (ViT) -> decoder cross-attention over the regions

Regions are numbered row-major: region i is at row i // gw, column i % gw of the grid, and
covers the ``region`` x ``region`` pixels there. ``src_mask`` (b, H, W) is True on real
pixels; a region is real when any of its pixels is.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..positions.grid import GridPositions
from .dropout import Dropout
from .outputs import EncoderOutput
from .rnn import CELLS, RNNSeq2Seq
from .transformer import TransformerSeq2Seq, unique_modules

IMAGE_ENCODERS = ("cnn", "vit")  # config.IMAGE_ENCODERS


class ConvRegions(nn.Module):
    """A small CNN: 3 x 3 convolutions with batch normalisation and ReLU, halving the
    resolution log2(region) times, so each output cell is the feature of one region x region
    block of pixels (its receptive field reaches past the block: a region sees its neighbours)."""

    def __init__(self, d_model: int, *, region: int, channels: int = 16) -> None:
        super().__init__()
        halvings = int(math.log2(region))
        if region < 1 or 2**halvings != region:
            raise ValueError(
                f"the CNN halves the resolution per stage: model.image.region must be a power of 2, got {region}"
            )
        stages, width = [], 1
        for i in range(halvings):
            out = channels * 2**i
            stages += [nn.Conv2d(width, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(), nn.MaxPool2d(2)]
            width = out
        stages += [nn.Conv2d(width, d_model, 3, padding=1, bias=False), nn.BatchNorm2d(d_model), nn.ReLU()]
        self.net = nn.Sequential(*stages)
        self.region = region

    def forward(self, images: Tensor) -> Tensor:
        """images (b, H, W) -> (b, d, gh, gw)."""
        return self.net(images[:, None])


class PatchRegions(nn.Module):
    """ViT's patch embedding: each region x region patch, flattened, through one Linear
    (a convolution with stride = kernel = region), then LayerNorm over the features, so
    patches enter at the scale of the positions added to them (CLIP's ``ln_pre``)."""

    def __init__(self, d_model: int, *, region: int) -> None:
        super().__init__()
        if region < 1:
            raise ValueError(f"model.image.region must be >= 1, got {region}")
        self.proj = nn.Conv2d(1, d_model, region, stride=region)
        self.norm = nn.LayerNorm(d_model)
        self.region = region

    def forward(self, images: Tensor) -> Tensor:
        x = self.proj(images[:, None])  # (b, d, gh, gw)
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class RegionEmbedding(nn.Module):
    """Image -> region features + 2-D positions -> dropout: the image counterpart of
    ``TokenEmbedding``. Also pools the pixel mask to the region mask."""

    def __init__(self, regions: ConvRegions | PatchRegions, *, positions: GridPositions | None, dropout: float) -> None:
        super().__init__()
        self.regions = regions
        self.positions = positions
        self.dropout = Dropout(dropout)

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """(gh, gw) of an image of height x width pixels."""
        r = self.regions.region
        if height % r or width % r:
            raise ValueError(f"a {height} x {width} image does not tile into {r} x {r} regions")
        return height // r, width // r

    def input_module(self) -> nn.Module:
        """What makes the input vectors before positions: the region features, (b, d, rows, columns)."""
        return self.regions

    def forward(self, images: Tensor, pixel_mask: Tensor, use_positions: bool = True) -> tuple[Tensor, Tensor]:
        """images (b, H, W), pixel_mask (b, H, W) -> regions (b, r, d), region mask (b, r)."""
        if images.dim() != 3:
            raise ValueError(f"images must be (batch, height, width), got shape {tuple(images.shape)}")
        gh, gw = self.grid(*images.shape[1:])
        x = self.regions(images).flatten(2).transpose(1, 2)  # (b, r, d), row-major
        if self.positions is not None and use_positions:
            x = x + self.positions(gh, gw).to(x.dtype)
        r = self.regions.region
        mask = F.max_pool2d(pixel_mask[:, None].float(), r).flatten(1) > 0  # (b, r)
        return self.dropout(x), mask


class ImageRNNEncoder(nn.Module):
    """Region features (width = the RNN's hidden size) and the decoder's start state:
    tanh(W_init mean(regions)) for every layer (and for an LSTM's cell too)."""

    def __init__(self, embed: RegionEmbedding, *, cell: str, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = embed
        self.layers, self.hidden = layers, hidden
        self.init_h = nn.Linear(hidden, layers * hidden)
        self.init_c = nn.Linear(hidden, layers * hidden) if CELLS[cell] is nn.LSTM else None

    def input_module(self) -> nn.Module:
        return self.embed.input_module()

    def forward(self, images: Tensor, pixel_mask: Tensor) -> tuple[Tensor, Tensor, Tensor | tuple[Tensor, Tensor]]:
        """-> memory (b, r, H), region mask (b, r), start state (layers, b, H) (a pair for an LSTM)."""
        memory, mask = self.embed(images, pixel_mask)
        m = mask[..., None].to(memory.dtype)
        mean = (memory * m).sum(1) / m.sum(1).clamp(min=1)  # (b, H)

        def start(linear: nn.Linear) -> Tensor:
            return torch.tanh(linear(mean)).view(-1, self.layers, self.hidden).transpose(0, 1).contiguous()

        final = start(self.init_h) if self.init_c is None else (start(self.init_h), start(self.init_c))
        return memory, mask, final


class RNNCaptioner(RNNSeq2Seq):
    """Luong's RNN decoder attending over image regions (Show, Attend and Tell)."""

    encoder: ImageRNNEncoder

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOutput:
        """src (b, H, W) images in [0, 1], src_mask (b, H, W) True on real pixels."""
        memory, mask, final = self.encoder(src, src_mask)
        return EncoderOutput(memory, mask, final)

    def position_schemes(self) -> list[nn.Module]:
        return unique_modules([self.encoder.embed.positions])

    def region_grid(self, height: int, width: int) -> tuple[int, int]:
        return self.encoder.embed.grid(height, width)


class TransformerCaptioner(TransformerSeq2Seq):
    """The Transformer decoder attending over a ViT encoder's (or a CNN's) regions."""

    src_embed: RegionEmbedding

    def encode(self, src: Tensor, src_mask: Tensor) -> EncoderOutput:
        """src (b, H, W) images in [0, 1], src_mask (b, H, W) True on real pixels."""
        x, mask = self.src_embed(src, src_mask)
        return EncoderOutput(self.encoder(x, mask), mask)

    def region_grid(self, height: int, width: int) -> tuple[int, int]:
        return self.src_embed.grid(height, width)


MapsT = TypeVar("MapsT", Tensor, np.ndarray)


def region_maps(weights: MapsT, grid: tuple[int, int]) -> MapsT:
    """Attention over regions (…, r) -> over the grid (…, gh, gw) (a tensor or an array)."""
    return weights.reshape(*weights.shape[:-1], *grid)


__all__ = [
    "IMAGE_ENCODERS",
    "ConvRegions",
    "ImageRNNEncoder",
    "PatchRegions",
    "RNNCaptioner",
    "RegionEmbedding",
    "TransformerCaptioner",
    "region_maps",
]
