"""Positions on a 2-D grid of image regions: a vector per (row, column), added to the
region features the way absolute positions are added to token embeddings.

    sinusoidal   half the channels are the sinusoids of the row, half those of the column
                 (the 2-D extension of Vaswani et al. sec. 3.5 used by DETR and MAE)
    learned      one trained vector per region of the grid (ViT, Dosovitskiy et al. 2021)
    fourier      learnable Fourier features of the region's (row, column) centre, mapped
                 by an MLP (Li et al. 2021), so rows and columns can mix

``forward(gh, gw) -> (gh * gw, d_model)``, row-major (the order regions are flattened in).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import unknown_choice
from .fourier import FourierPositions
from .sinusoidal import sinusoid_table

GRID_SCHEMES = ("sinusoidal", "learned", "fourier", "none")


def grid_coords(gh: int, gw: int, device: torch.device | None = None) -> Tensor:
    """(row, column) of every region, row-major: (gh * gw, 2) float32."""
    rows, cols = torch.meshgrid(torch.arange(gh, device=device), torch.arange(gw, device=device), indexing="ij")
    return torch.stack([rows.reshape(-1), cols.reshape(-1)], dim=1).float()


class GridPositions(nn.Module):
    """A vector per region of a gh x gw grid."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        if d_model <= 0:
            raise ValueError(f"d_model must be positive, got {d_model}")
        self.d_model = d_model


class SinusoidalGrid(GridPositions):
    """PE(r, c) = [PE_{d/2}(r) || PE_{d/2}(c)]: no parameters, bounded in [-1, 1]."""

    def __init__(self, d_model: int, *, base: float = 10000.0) -> None:
        super().__init__(d_model)
        if d_model % 4:
            raise ValueError(
                f"2-D sinusoids split d_model into sin/cos pairs of rows and columns: "
                f"d_model must be a multiple of 4, got {d_model}"
            )
        self.base = base

    def forward(self, gh: int, gw: int) -> Tensor:
        coords = grid_coords(gh, gw).long()
        half = self.d_model // 2
        return torch.cat(
            [sinusoid_table(coords[:, 0], half, self.base), sinusoid_table(coords[:, 1], half, self.base)], dim=1
        )


class LearnedGrid(GridPositions):
    """One trained vector per region of a grid of at most ``max_grid`` x ``max_grid`` regions."""

    def __init__(self, d_model: int, *, max_grid: int) -> None:
        super().__init__(d_model)
        if max_grid <= 0:
            raise ValueError(f"max_grid must be positive, got {max_grid}")
        self.max_grid = max_grid
        self.table = nn.Parameter(torch.randn(max_grid, max_grid, d_model) * d_model**-0.5)

    def forward(self, gh: int, gw: int) -> Tensor:
        if gh > self.max_grid or gw > self.max_grid:
            raise ValueError(f"a {gh} x {gw} grid is larger than the learned table ({self.max_grid} x {self.max_grid})")
        return self.table[:gh, :gw].reshape(gh * gw, self.d_model)


class FourierGrid(GridPositions):
    """Learnable Fourier features of (row, column), in region units. ``gamma`` sets the typical
    wavelength at 2 pi gamma regions (Li et al.'s W_r ~ N(0, gamma^-2))."""

    def __init__(self, d_model: int, *, gamma: float = 1.0) -> None:
        super().__init__(d_model)
        self.fourier = FourierPositions(d_model, dims=2, gamma=gamma)

    def forward(self, gh: int, gw: int) -> Tensor:
        return self.fourier.encode(grid_coords(gh, gw, self.fourier.frequencies.device))


def build_grid_positions(name: str, *, d_model: int, max_grid: int) -> GridPositions | None:
    """The 2-D scheme ``name`` ("none": None, no position information)."""
    if name == "sinusoidal":
        return SinusoidalGrid(d_model)
    if name == "learned":
        return LearnedGrid(d_model, max_grid=max_grid)
    if name == "fourier":
        return FourierGrid(d_model)
    if name == "none":
        return None
    raise unknown_choice("2-D positional scheme (model.positions for images)", name, GRID_SCHEMES)
