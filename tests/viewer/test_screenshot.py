"""`attnkit view --screenshot` (a separate module: one Playwright session at a time)."""

import os

import pytest

from attnkit.cli import main
from attnkit.viewer.screenshot import find_browser

pytestmark = pytest.mark.slow  # drives chromium


def test_view_with_screenshot(capsys, trained_toys, tmp_path):
    try:
        import playwright
    except ImportError:
        playwright = None
    if playwright is None or find_browser() is None:
        if os.environ.get("ATTNKIT_REQUIRE_BROWSER") == "1":
            pytest.fail("playwright and chromium are required here")
        pytest.skip("no playwright/chromium")
    png = tmp_path / "view.png"
    assert (
        main(["view", str(trained_toys["rnn"]), "a b c d", "-o", str(tmp_path / "v.html"), "--screenshot", str(png)])
        == 0
    )
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
    assert "screenshot:" in capsys.readouterr().out
