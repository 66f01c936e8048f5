"""Files are written whole or not at all: an error (or a kill) mid-write leaves the old file."""

import os
import signal
import subprocess
import sys

import pytest

from attnkit.atomic import atomic_open, save_figure, write_text


def test_replaces_whole_or_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.txt"
    write_text(path, "old\n")
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write("half of the new")
        raise RuntimeError("stopped mid-write")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]  # no temporary file left
    write_text(path, "new\n")
    assert path.read_text() == "new\n" and oct(path.stat().st_mode & 0o777) == "0o644"
    with pytest.raises(IsADirectoryError):
        write_text(tmp_path, "x")


def test_figures_keep_their_format(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([0, 1])
    assert save_figure(fig, tmp_path / "f.svg").read_text().startswith("<?xml")
    assert save_figure(fig, tmp_path / "sub" / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # kills a process
def test_a_killed_writer_leaves_the_old_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    code = (
        f"from attnkit.atomic import atomic_open\n"
        f"with atomic_open({str(path)!r}) as f:\n"
        f"    f.write('partial'); f.flush(); print('writing', flush=True); import time; time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert path.read_text() == "old\n"
