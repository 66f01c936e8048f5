"""The Multi30k loader against a local copy named by $ATTNKIT_MULTI30K (no network in tests)."""

import os
from pathlib import Path

import pytest

from attnkit.data import multi30k, read_parallel

SHARED = Path(os.environ.get("ATTNKIT_MULTI30K") or "/nonexistent")
needs_data = pytest.mark.skipif(not SHARED.is_dir(), reason="needs a local Multi30k copy named by $ATTNKIT_MULTI30K")


@needs_data
@pytest.mark.parametrize("variant", ["tok", "raw"])
def test_local_copy_matches_the_official_checksums(variant):
    for split in multi30k.SPLITS:
        for lang in ("en", "de"):
            path = multi30k.locate(split, lang, root=str(SHARED), variant=variant)
            assert multi30k.text_sha256(path) == multi30k.CHECKSUMS[multi30k.relative_name(split, lang, variant)]


@needs_data
def test_environment_variable_and_sizes(monkeypatch):
    monkeypatch.setenv(multi30k.ENV, str(SHARED))
    p = read_parallel(multi30k.locate("val", "en"), multi30k.locate("val", "de"))
    assert len(p) == 1014


def test_missing_and_unknown(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Multi30k file tok/train.lc.norm.tok.en\(.gz\) not found"):
        multi30k.locate("train", "en", root=str(tmp_path))
    with pytest.raises(ValueError, match="unknown Multi30k split 'test'"):
        multi30k.locate("test", "en", root=str(tmp_path))


@needs_data
def test_moses_tokenize_lc_reproduces_the_tok_references():
    """Outputs of a raw-text model can be scored under the published tok-lc convention."""
    from attnkit.data import read_lines
    from attnkit.evaluation import moses_tokenize_lc

    raw = read_lines(multi30k.locate("test_2016_flickr", "de", root=str(SHARED), variant="raw"))
    tok = read_lines(multi30k.locate("test_2016_flickr", "de", root=str(SHARED), variant="tok"))
    assert moses_tokenize_lc(raw, "de") == tok
