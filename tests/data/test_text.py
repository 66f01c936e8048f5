"""Reading parallel text: each bad input is one clear error naming file and line."""

import gzip

import pytest

from attnkit.data import read_lines, read_parallel


def write(path, text: bytes):
    path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    return path


def test_plain_and_gz(tmp_path):
    a = write(tmp_path / "a.txt", b"eins\nzwei\r\n")
    b = write(tmp_path / "b.txt.gz", b"one\ntwo\n")
    p = read_parallel(a, b)
    assert (p.src, p.tgt, p.skipped_empty) == (["eins", "zwei"], ["one", "two"], 0)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="file not found: .*missing.txt"):
        read_lines(tmp_path / "missing.txt")


def test_non_utf8_names_file_and_line(tmp_path):
    bad = write(tmp_path / "bad.txt", b"ok\nalso ok\ncaf\xe9\n")
    with pytest.raises(ValueError, match=r"bad.txt: line 3 is not valid UTF-8 \(byte 0xe9\)"):
        read_lines(bad)


def test_corrupt_gzip(tmp_path):
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="not a readable gzip file"):
        read_lines(bad)


def test_line_counts_differ(tmp_path):
    a = write(tmp_path / "a.txt", b"1\n2\n3\n")
    b = write(tmp_path / "b.txt", b"1\n2\n")
    with pytest.raises(ValueError, match=r"a.txt has 3 lines, .*b.txt has 2 \(line 3 has no partner\)"):
        read_parallel(a, b)


def test_empty_lines_skipped_and_counted(tmp_path):
    a = write(tmp_path / "a.txt", b"1\n\n3\n4\n")
    b = write(tmp_path / "b.txt", b"x\ny\n  \nw\n")
    p = read_parallel(a, b)
    assert (p.src, p.tgt, p.skipped_empty) == (["1", "4"], ["x", "w"], 2)


def test_empty_corpus(tmp_path):
    a = write(tmp_path / "a.txt", b"\n\n")
    b = write(tmp_path / "b.txt", b"\n\n")
    with pytest.raises(ValueError, match="no sentence pairs in .* \\(all 2 lines empty\\)"):
        read_parallel(a, b)
