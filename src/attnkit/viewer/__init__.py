"""The interactive attention viewer: one self-contained HTML file (no network), the same page
the live studio serves, and inline in Jupyter (``show``)."""

from .html import render_html, write_html
from .notebook import show

__all__ = ["render_html", "show", "write_html"]
