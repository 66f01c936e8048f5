"""The command line: real output on success; one clear line and exit 1 on a bad value, exit 2 on a
command line that does not parse; one vocabulary of flags."""

import argparse
import subprocess
import sys

import pytest

from attnkit.cli import main
from attnkit.cli.flags import HelpFormatter


def test_positions_writes_a_figure(tmp_path, capsys):
    out = tmp_path / "pe.svg"
    assert main(["positions", "--d-model", "32", "--length", "60", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PE(  1)[:8] = [0.841 0.54" in text  # sin(1), cos(1): the formula's first pair
    assert out.stat().st_size > 10_000 and out.read_text().startswith("<?xml")


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert main(["positions", "--d-model", "0", "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "attnkit positions: error: argument --d-model: expected an integer >= 1, got '0' (see attnkit positions --help)"
    )
    assert main(["positions", "--output", str(tmp_path / "x.bmp")]) == 2
    assert "must end in one of .png, .svg, .pdf" in capsys.readouterr().err
    assert main(["positions", "--d-model", "4096", "--length", "100000", "-o", str(tmp_path / "x.png")]) == 1
    assert "beyond the 4,000,000 a figure can show" in capsys.readouterr().err
    assert main(["positions", "--heads", "3", "-o", str(tmp_path / "x.png")]) == 1
    assert "--heads 3 must divide --d-model 128 into an even head size" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.slow  # a fresh interpreter
def test_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "attnkit", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("attnkit ")


def _subcommands():
    from attnkit.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


WRITES_FILES = {
    "translate",
    "evaluate",
    "capture",
    "plot",
    "view",
    "explain",
    "heads",
    "embed",
    "positions",
    "attribute",
}
LOADS_MODELS = WRITES_FILES  # every command that writes a file loads a model
SEARCHES = {"translate", "evaluate", "capture", "plot", "view", "explain", "heads", "attribute"}


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_speaks_the_shared_flags(name, capsys):
    """One vocabulary: -o/--output for files, --out-dir for directories, --device and --beam with
    one default; every option explained with its default; examples at the end of --help."""
    parser = _subcommands()[name]
    options = {s: a for a in parser._actions for s in a.option_strings}
    visible = [a for a in parser._actions if a.help != argparse.SUPPRESS]
    assert all(a.help for a in visible), [a.dest for a in visible if not a.help]
    if name in WRITES_FILES:
        assert options["-o"] is options["--output"]
    if name == "demo":
        assert "--out-dir" in options and "--output" not in options
    if name in LOADS_MODELS:
        assert tuple(options["--device"].choices) == ("auto", "cpu", "cuda") and options["--device"].default == "auto"
    if name in SEARCHES:
        assert options["--beam"].default == 5
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "\nexamples:\n" in text and f"attnkit {name} " in text.split("\nexamples:\n")[1]
    for flag in ("--device", "--beam", "--checkpoint"):
        if flag in options:
            assert f"(default: {options[flag].default})" in " ".join(text.split()), flag
    for action in visible:  # each default said once: by the help's own words or by the formatter
        said = HelpFormatter(name)._get_help_string(action)
        assert said.count("(default") - said.count("%(default") <= 1, action.option_strings
    assert not any(o.help == argparse.SUPPRESS for o in options.values())  # no hidden spellings


def test_an_option_is_taken_by_its_whole_name_only(capsys):
    """A prefix of an option is no second spelling of it: ``--out`` is not ``--output``."""
    assert main(["positions", "--out", "x.png"]) == 2
    assert "unrecognized arguments: --out x.png" in capsys.readouterr().err


def test_importing_attnkit_and_its_help_leave_matplotlib_out():
    code = (
        "import sys, attnkit, attnkit.cli; attnkit.cli.build_parser(); "
        "print(sorted(m for m in ('matplotlib', 'attnkit.plots') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_demo_checks_everything_before_touching_an_earlier_demo(tmp_path, capsys):
    earlier = tmp_path / "demo"
    earlier.mkdir()
    (earlier / "demo.json").write_text("{}")
    (earlier / "attention.png").write_bytes(b"an earlier figure")
    assert main(["demo", "--steps", "0", "--out-dir", str(earlier)]) == 2  # refused by the parser
    assert main(["demo", "--arch", "transformer", "--attention", "local-p", "--out-dir", str(earlier)]) == 1
    assert "is an RNN (Luong) attention" in capsys.readouterr().err
    from attnkit.demos.dates import run_demo

    with pytest.raises(ValueError, match="train.max_steps=0 is out of range"):
        run_demo(earlier, max_steps=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no half-built demo left beside it
    assert (earlier / "attention.png").read_bytes() == b"an earlier figure"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["demo", "--out-dir", str(a_file)]) == 1
    assert "is a file; the demo writes a directory" in capsys.readouterr().err
