"""The family matrix: a tiny random model of every model type in transformers' auto mappings
(``tests/families.py``), each exact against its eager attention or refused in one line, never
wrong; and the docs' table of families (docs/families.md) says what this transformers does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

import families  # noqa: E402

TABLE = Path(__file__).resolve().parents[2] / "docs" / "families.md"
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \|")
SHOWN = {"exact": "exact", "refused": "refused", "skipped": "not built"}


def _documented() -> tuple[str | None, dict[str, str]]:
    text = TABLE.read_text(encoding="utf-8")
    version = re.search(r"with transformers (\S+);", text)
    rows = {m.group(1): m.group(2).strip() for line in text.splitlines() if (m := ROW.match(line))}
    return (version.group(1) if version else None), rows


@pytest.fixture(scope="module")
def documented():
    return _documented()


@pytest.mark.parametrize("model_type", families.model_types())
def test_every_family_is_exact_or_refused(model_type, documented):
    result = families.compare(model_type)
    assert result.status != "wrong", f"{model_type}: {result.reason}"
    if result.status == "exact":
        assert result.map_error <= 1e-5 and result.output_error <= 1e-5 and result.calls > 0
    if result.status == "refused":
        assert result.reason and "\n" not in result.reason
    version, rows = documented
    if version == transformers.__version__:  # the table was made with this transformers
        assert rows.get(model_type) == SHOWN[result.status], f"docs/families.md is stale for {model_type}"


def test_the_table_covers_every_type_and_says_how_many(documented):
    version, rows = documented
    assert version is not None
    if version != transformers.__version__:
        pytest.skip(f"docs/families.md was made with transformers {version}, {transformers.__version__} is here")
    assert set(rows) == set(families.model_types())
    counts = {s: sum(v == s for v in rows.values()) for s in ("exact", "refused")}
    text = TABLE.read_text(encoding="utf-8")
    assert f"**{counts['exact']} exact, {counts['refused']} refused**" in text
    assert counts["exact"] + counts["refused"] >= 250
