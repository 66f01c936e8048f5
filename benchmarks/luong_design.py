"""Luong et al.'s design space on one task: global, local-m and local-p attention, and the dot,
general and concat scores, each an RNN trained on the date task, side by side on one input.

    python benchmarks/luong_design.py [--out runs/luong] [--steps 800] [--example "sunday, 3 march 1985"]

Five models of ``attnkit demo --arch rnn``'s shape (an LSTM of 128, one layer each side, input
feeding, local windows of D = 3), trained on the same 20,000 dates with the same seed: global
attention with the general score (the demo itself), then ``attnkit train`` of its config with
``model.rnn.attention`` local-m and local-p, and ``model.rnn.score`` dot and concat. Each is
scored by exact match (greedy) on the demo's 500 held-out dates. A model directory already
finished under ``--out`` is kept, so an interrupted run resumes.

Writes ``result.json`` (each model's exact match, steps, seconds) and ``luong_design.png`` (every
model's attention on the example, one scale, 0 to 1) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import attnkit  # noqa: E402
from attnkit.atomic import save_figure  # noqa: E402
from attnkit.plots.attention import Panel, plot_alignment_panels  # noqa: E402
from machine import cpu_name  # noqa: E402

BASE = "global-general"
VARIANTS = {  # directory: (attention, score)
    BASE: ("global", "general"),
    "local-m-general": ("local-m", "general"),
    "local-p-general": ("local-p", "general"),
    "global-dot": ("global", "dot"),
    "global-concat": ("global", "concat"),
}
ROWS = [  # the figure: the alignment functions with the general score, then the scores with global attention
    ("How the keys are chosen (general score)", [BASE, "local-m-general", "local-p-general"]),
    ("How a key is scored (global attention)", ["global-dot", BASE, "global-concat"]),
]


def attnkit_cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "attnkit", *args], check=True)


def train(out: Path, steps: int) -> dict[str, dict]:
    """Each variant trained (or kept, where finished), with its exact match on the held-out dates."""
    results: dict[str, dict] = {}
    base = out / BASE
    for name, (attention, score) in VARIANTS.items():
        where = out / name
        started = time.perf_counter()
        if not (where / "checkpoints" / "best.pt").is_file():
            if name == BASE:
                attnkit_cli("demo", "--arch", "rnn", "--steps", str(steps), "--out-dir", str(where))
            else:
                attnkit_cli(
                    "train",
                    str(base / "config.yaml"),
                    f"out_dir={where}",
                    f"model.rnn.attention={attention}",
                    f"model.rnn.score={score}",
                    "train.attention_snapshots=0",
                )
        seconds = time.perf_counter() - started
        model = attnkit.load(where)
        sources = (base / "data" / "dev.src").read_text(encoding="utf-8").splitlines()
        references = (base / "data" / "dev.tgt").read_text(encoding="utf-8").splitlines()
        outputs = model.translate(sources, beam=1)
        exact = sum(o == r for o, r in zip(outputs, references)) / len(references)
        results[name] = {"attention": attention, "score": score, "exact": exact, "seconds": round(seconds, 1)}
        print(f"{name}: exact match {exact:.1%} on {len(references)} held-out dates", flush=True)
    return results


def figure(out: Path, results: dict[str, dict], example: str):
    """Every model's attention on ``example``, each row a question of the design space."""
    rows, seen = [], set()
    for _, names in ROWS:
        panels = []
        for name in names:
            again = " (= above)" if name in seen else ""
            seen.add(name)
            model = attnkit.load(out / name)
            record = model.attention(example, beam=1)
            attention, score = VARIANTS[name]
            local = attention != "global"
            panels.append(
                Panel(
                    record.select("cross", 0, 0),
                    record.src_tokens,
                    record.tgt_out_tokens,
                    f"{attention}, {score} score{again}\nexact match {results[name]['exact']:.1%}",
                    p_t=record.p_t if local else None,
                    window=record.window if local else None,
                )
            )
        rows.append(panels)
    note = (
        "Each panel is one RNN (LSTM 128, input feeding) trained on the same 20,000 dates with the same seed; exact "
        "match is greedy, on 500 held-out dates; rows are the model's own output. Local attention (D = 3) weighs only "
        "the keys inside its window (outlined in orange) around a centre (white ring): the output's own position $t$ "
        "for local-m, a predicted $p_t$ for local-p, which also multiplies the softmax by a Gaussian (a row may sum to "
        "less than 1); ▷: a centre past the last key. Scores: dot $h_t^\\top\\bar{h}_s$, general "
        "$h_t^{\\top}W_a\\bar{h}_s$, concat $v_a^\\top\\tanh(W_a[h_t;\\bar{h}_s])$. ␣: a space of its own, before the next word."
    )
    return plot_alignment_panels(
        rows,
        row_titles=[t for t, _ in ROWS],
        title=f'Luong et al. 2015\'s design space on one input: "{example}"',
        footnote=note,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("runs/luong"))
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--example", default="sunday, 3 march 1985")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results = train(args.out, args.steps)
    summary = {"cpu": cpu_name(), "steps": args.steps, "models": results, "seconds": time.perf_counter() - started}
    (args.out / "result.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    save_figure(figure(args.out, results, args.example), args.out / "luong_design.png")
    print(f"{args.out / 'result.json'}, {args.out / 'luong_design.png'} ({summary['seconds']:.0f} s, {cpu_name()})")


if __name__ == "__main__":
    main()
