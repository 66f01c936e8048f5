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
    assert main(["positions", "--d-model", "0", "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("attnkit positions: error: argument --d-model: expected an integer >= 1, got '0' "
                           "(see attnkit positions --help)")
    assert main(["positions", "--output", str(tmp_path / "x.bmp")]) == 2
    assert "must end in one of .png, .svg, .pdf" in capsys.readouterr().err
    assert main(["positions", "--d-model", "4096", "--length", "100000", "-o", str(tmp_path / "x.png")]) == 1
    assert "beyond the 4,000,000 a figure can show" in capsys.readouterr().err
    assert main(["positions", "--heads", "3", "-o", str(tmp_path / "x.png")]) == 1
    assert "--heads 3 must divide --d-model 128 into an even head size" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "attnkit", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("attnkit ")
