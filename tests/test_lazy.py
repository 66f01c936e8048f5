"""Packages that load their names on first use: the command line parses without torch, and a
name that is also a submodule's stays the name."""

import importlib
import subprocess
import sys
import types

import attnkit.attribution as attribution
from attnkit.lazy import LazyPackage


def test_parsing_the_command_line_does_not_import_torch():
    code = (
        "import sys\n"
        "from attnkit.cli import build_parser\n"
        "build_parser().parse_args(['translate', 'runs/demo', '--beam', '3', '--device', 'cpu'])\n"
        "print(sorted(m for m in ('torch', 'numpy', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_exits_zero_with_every_command():
    out = subprocess.run([sys.executable, "-m", "attnkit", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "translate" in out.stdout and "heads" in out.stdout


def test_an_exported_name_wins_over_its_submodule():
    module = importlib.import_module("attnkit.attribution.rollout")  # loaded first, as a sibling's import does

    assert isinstance(attribution, LazyPackage)
    assert isinstance(module, types.ModuleType)
    assert attribution.rollout is module.rollout


def test_every_exported_name_resolves_and_unknown_names_raise():
    for package in ("attnkit.attribution", "attnkit.config", "attnkit.data", "attnkit.search"):
        module = importlib.import_module(package)
        for name in module.__all__:
            assert getattr(module, name) is not None, (package, name)
        assert set(module.__all__) <= set(dir(module))
        try:
            module.no_such_name  # noqa: B018
        except AttributeError as err:
            assert "no_such_name" in str(err)
        else:
            raise AssertionError(f"{package}.no_such_name resolved")
