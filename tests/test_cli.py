"""The command line: real output on success, one clear line and exit 1 on bad input."""

import subprocess
import sys

from attnkit.cli import main


def test_positions_writes_a_figure(tmp_path, capsys):
    out = tmp_path / "pe.svg"
    assert main(["positions", "--d-model", "32", "--length", "60", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PE(  1)[:8] = [0.841 0.54" in text  # sin(1), cos(1): the formula's first pair
    assert out.stat().st_size > 10_000 and out.read_text().startswith("<?xml")


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert main(["positions", "--d-model", "0", "--out", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "attnkit positions: error: d_model must be positive, got 0"
    assert main(["positions", "--out", str(tmp_path / "x.bmp")]) == 1
    assert "must end in one of .png, .svg, .pdf" in capsys.readouterr().err


def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "attnkit", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("attnkit ")
