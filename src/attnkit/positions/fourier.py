"""Li et al. 2021, "Learnable Fourier Features for Multi-Dimensional Spatial Positional
Encoding": a position x in R^M (M = 1 for text, 2 for image regions) becomes

    r_x = 1/sqrt(F) [cos(x W_r^T) || sin(x W_r^T)]          W_r in R^(F/2 x M), trainable
    PE_x = GELU(r_x W_1 + b_1) W_2 + b_2                     an MLP to d_model

W_r starts from N(0, gamma^-2) (eq. 2): gamma sets the typical wavelength, 2 pi gamma
position units. Unlike the sinusoids' fixed geometric frequencies, the frequencies are
learned, and the MLP can mix dimensions (for M = 2: rows with columns). Since the
features are a function of x, any position has an encoding: no table and no maximum length.
The paper's G groups (one MLP per group of dimensions) are G = 1 here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import AbsolutePositions, as_positions


class FourierPositions(AbsolutePositions):
    """Learnable Fourier features of ``dims``-dimensional positions, mapped to ``d_model``."""

    def __init__(
        self,
        d_model: int,
        *,
        dims: int = 1,
        features: int | None = None,
        hidden: int | None = None,
        gamma: float = 10.0,
    ) -> None:
        super().__init__(d_model)
        features = features or d_model
        if dims < 1:
            raise ValueError(f"positions need at least one dimension, got {dims}")
        if features < 2 or features % 2:
            raise ValueError(f"the number of Fourier features must be even and at least 2, got {features}")
        if gamma <= 0:
            raise ValueError(f"gamma must be positive, got {gamma}")
        self.dims, self.features, self.gamma = dims, features, gamma
        self.frequencies = nn.Parameter(torch.randn(features // 2, dims) / gamma)  # W_r
        self.mlp_in = nn.Linear(features, hidden or d_model)
        self.mlp_out = nn.Linear(hidden or d_model, d_model)

    def features_of(self, coords: Tensor) -> Tensor:
        """coords (n, dims) -> r_x (n, features): the cosines then the sines."""
        angles = coords.to(self.frequencies.dtype) @ self.frequencies.t()
        return torch.cat([angles.cos(), angles.sin()], dim=-1) / math.sqrt(self.features)

    def encode(self, coords: Tensor) -> Tensor:
        """coords (n, dims), any real values -> (n, d_model)."""
        if coords.dim() != 2 or coords.shape[1] != self.dims:
            raise ValueError(f"coordinates must have shape (n, {self.dims}), got {tuple(coords.shape)}")
        return self.mlp_out(F.gelu(self.mlp_in(self.features_of(coords))))

    def forward(self, positions: int | Tensor) -> Tensor:
        """Token positions (``t`` or a 1-D index tensor) -> (t, d_model); a 1-D scheme only."""
        if self.dims != 1:
            raise ValueError(f"a {self.dims}-D Fourier encoding takes coordinates: use encode(coords)")
        pos = as_positions(positions, self.frequencies.device)
        return self.encode(pos[:, None].float())

    def extra_repr(self) -> str:
        return f"dims={self.dims}, features={self.features}, d_model={self.d_model}, gamma={self.gamma}"
