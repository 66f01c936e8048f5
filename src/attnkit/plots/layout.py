"""The size figures are drawn for (a docs column), and token labels that read right on both axes."""

from __future__ import annotations

from ..data.tokenizer import SPACE

WIDTH = 8.5  # inches: 1,105 pixels at the 130 dpi figures are saved at


def upright_spaces(ax) -> None:
    """Draw a bare word boundary (▁) upright among turned key labels: turned, it reads as a bar."""
    for label in ax.get_xticklabels():
        if label.get_text() == SPACE:
            label.set(rotation=0, ha="center", va="top", rotation_mode="default")
