"""The interactive attention viewer: one self-contained HTML file (no network)."""

from .html import render_html, write_html

__all__ = ["render_html", "write_html"]
