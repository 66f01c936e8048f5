"""The viewer inline in Jupyter: the same page `attnkit view` writes, in a sandboxed iframe.

from attnkit.loaded import attention_records
from attnkit.viewer import show
records, info = attention_records("multi30k-en-de", ["Two dogs are playing in the snow."])
show(records, info)
"""

from __future__ import annotations

import html

from ..inspection.capture import AttentionRecord
from .html import render_html


class NotebookView:
    """Displays as the viewer in a notebook cell (Jupyter calls ``_repr_html_``)."""

    def __init__(self, page: str, height: int) -> None:
        self.page = page
        self.height = height

    def _repr_html_(self) -> str:
        # srcdoc keeps the page's ids and script apart from the notebook's; allow-scripts without
        # allow-same-origin: the page runs, but cannot reach the notebook or the kernel
        return (
            f'<iframe sandbox="allow-scripts" srcdoc="{html.escape(self.page, quote=True)}" '
            f'style="width: 100%; height: {self.height}px; border: 1px solid #e4e7ec;"></iframe>'
        )


def show(
    records: list[AttentionRecord],
    model: dict | None = None,
    *,
    title: str = "attnkit attention",
    height: int = 760,
    page_mb: int = 100,
) -> NotebookView:
    """The viewer for ``records`` (from ``capture`` or ``attention_records``), to display in a
    notebook: the page `attnkit view` writes, within ``page_mb`` (past it, every layer and head as
    overviews and the last layer exact, as `attnkit view` does)."""
    if height < 100:
        raise ValueError(f"height must be at least 100 pixels, got {height}")
    return NotebookView(render_html(records, model, title=title, budget=page_mb * 2**20), height)
