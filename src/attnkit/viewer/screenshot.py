"""A PNG of the viewer as a browser draws it (Playwright driving an installed chromium)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..atomic import atomic_path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# every screenshot the docs show is taken at this size: the 880 CSS px of a docs column, so that shown
# there the page's text is its own size, at 1.25 device pixels a CSS pixel (1,100 x 800 PNGs: sharp
# where a reader zooms in)
VIEWPORT = {"width": 880, "height": 640}
SCALE = 1.25


def find_browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def screenshot(
    html: str | Path, png: str | Path, *, width: int = VIEWPORT["width"], height: int = VIEWPORT["height"]
) -> Path:
    """Open ``html`` in headless chromium and save what it shows; console errors are raised."""
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ValueError("`screenshot` needs playwright (pip install playwright) and a chromium") from None
    exe = find_browser()
    if exe is None:
        raise ValueError("`screenshot` needs a chromium browser (e.g. apt-get install chromium)")
    png = Path(png)
    errors: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=SCALE)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(Path(html).resolve().as_uri())
                page.wait_for_selector("#lines line", state="attached", timeout=15_000)
                page.hover("#lines text[data-side='q'][data-i='1']", timeout=5_000)  # show the hover highlight
                with atomic_path(png) as tmp:
                    page.screenshot(path=str(tmp), full_page=True, type="png")
            finally:
                browser.close()
    except PlaywrightError as err:
        raise ValueError(f"screenshot failed in {exe}: {str(err).splitlines()[0]}") from None
    if errors:
        raise ValueError(f"the viewer reported an error in the browser: {errors[0]}")
    return png
