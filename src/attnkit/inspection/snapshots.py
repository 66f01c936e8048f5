"""Attention as it forms during training: the snapshots a run with ``train.attention_snapshots: N``
saves at every validation (the first N dev sentences, teacher-forced on their references, so
every step has the same rows and columns), read back for the viewer's step slider and for a
figure of selected steps."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import numpy as np

from ..data.tokenizer import CONTINUES, SPACE
from ..loading.model_dir import ModelDir
from .capture import LABELS, AttentionRecord, load_records, model_label
from .figures import layer_name


def has_snapshots(path: str | Path) -> bool:
    return Path(path).is_dir() and bool(ModelDir(Path(path)).snapshot_files())


def load_snapshots(run_dir: str | Path) -> list[tuple[int, list[AttentionRecord], dict]]:
    """(step, records, model info) of every snapshot of ``run_dir``, oldest first."""
    found = ModelDir(Path(run_dir)).snapshot_files()
    if not found:
        raise FileNotFoundError(f"no attention snapshots in {run_dir} (train with train.attention_snapshots=N)")
    return [(step, *load_records(path)) for step, path in found]


def pick(items: list, count: int) -> list:
    """``count`` items spread evenly over ``items``, the first and the last included."""
    if count < 1:
        raise ValueError(f"the number of steps must be >= 1, got {count}")
    if count >= len(items):
        return list(items)
    if count == 1:
        return [items[-1]]
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def pick_by_change(items: list, count: int, change: list[float]) -> list:
    """``count`` of ``items`` (in training order) chosen where the attention changes: ``change[k]``
    is how much it changed from item k - 1 to item k (``change[0]`` is ignored). The picks split
    the total change into equal parts, the first and the last item included, so a stretch of
    training where nothing moves gets one column and the steps where attention forms get the rest."""
    if count < 1:
        raise ValueError(f"the number of steps must be >= 1, got {count}")
    if len(change) != len(items):
        raise ValueError(f"{len(change)} changes for {len(items)} items")
    if count >= len(items):
        return list(items)
    if count == 1:
        return [items[-1]]
    cumulative = np.cumsum([0.0, *change[1:]])
    if cumulative[-1] <= 0:  # nothing changed: spread evenly
        return pick(items, count)
    chosen = [0, len(items) - 1]
    for target in np.linspace(0.0, cumulative[-1], count)[1:-1]:  # the nearest item not yet taken
        free = [i for i in range(len(items)) if i not in chosen]
        chosen.append(min(free, key=lambda i: (abs(cumulative[i] - target), i)))
    return [items[i] for i in sorted(chosen)]


def _panel_title(step: int, info: dict) -> str:
    scores = [f"dev loss {info['dev_loss']:.2f}"] if "dev_loss" in info else []
    scores += [f"BLEU {info['dev_bleu']:.1f}"] if "dev_bleu" in info else []
    return f"step {step}" + (f"\n{', '.join(scores)}" if scores else "")


def _ordinal(n: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _data_label(run_dir: str | Path) -> str:
    """What the run learned, as a title says it: "Multi30k en→de", "digit scenes", else its first
    dev pair ('pairs like "22 november 2026" → "2026-11-22"'); "" when its config cannot tell."""
    from ..config import load_config

    try:
        data = load_config(Path(run_dir) / "config.yaml").data
    except (FileNotFoundError, ValueError):
        return ""
    if data.captions:
        return "digit scenes"
    if data.multi30k:
        return f"Multi30k {data.src_lang}→{data.tgt_lang}"
    if data.dev_src is None or data.dev_tgt is None:
        return ""
    try:
        pair = [Path(f).read_text(encoding="utf-8").split("\n", 1)[0].strip() for f in (data.dev_src, data.dev_tgt)]
    except (OSError, UnicodeDecodeError):
        return ""
    short = [textwrap.shorten(text, 32, placeholder="…") for text in pair]
    return f'pairs like "{short[0]}" → "{short[1]}"' if all(short) else ""


def _bleu_every(run_dir: str | Path) -> int | None:
    """The run's train.bleu_every, when its config says it (more than every validation)."""
    from ..config import load_config

    try:
        every = load_config(Path(run_dir) / "config.yaml").train.bleu_every
    except (FileNotFoundError, ValueError):
        return None
    return every if every > 1 else None


def steps_figure(
    run_dir: str | Path,
    *,
    steps: int = 6,
    kind: str | None = None,
    layer: int = -1,
    head: int | str = "mean",
    sentences: int = 3,
):
    """A figure of ``steps`` snapshots, chosen where the attention shown changes most (``pick_by_change``;
    first and last included): one row per snapshot sentence (at most ``sentences``), one column per
    step, titled with the step's dev loss and BLEU where the run measured them."""
    from ..plots import plot_attention_steps

    every = load_snapshots(run_dir)
    first = every[-1][1][0]
    kind = kind or ("cross" if "cross" in first.maps else first.kinds[0])
    shown = range(min(sentences, len(every[-1][1])))
    maps = [np.concatenate([records[i].select(kind, layer, head).ravel() for i in shown]) for _, records, _ in every]
    change = [0.0] + [float(np.abs(b - a).mean()) for a, b in itertools.pairwise(maps)]
    snaps = pick_by_change(every, steps, change)
    rows = []
    for i in range(min(sentences, len(snaps[-1][1]))):
        rec = snaps[-1][1][i]
        rows.append(
            (
                rec.queries(kind),
                rec.keys(kind),
                [(_panel_title(step, info), records[i].select(kind, layer, head)) for step, records, info in snaps],
            )
        )
    layers, heads = first.get(kind).shape[:2]
    which = f"head {head}" if head != "mean" else "mean of heads" if heads > 1 else "one attention (no heads)"
    cross = kind == "cross"
    tokens = {t for q, k, _ in rows for t in (*q, *k)}
    every_nth = _bleu_every(run_dir)
    note = [
        "Rows: dev sentences, each with its reference output forced. Step 0: before training. Dev loss: "
        "label-smoothed cross-entropy, above 0 even for perfect outputs. BLEU: greedy, on the dev set, "
        + (
            f"at the first validation, every {_ordinal(every_nth)} after it and the last (the run's "
            "train.bleu_every); the other steps have the loss alone."
            if every_nth
            else "at every validation."
        )
    ]
    marks = [f"{mark} {what}" for mark, what in ((SPACE, "a word boundary on its own"),) if mark in tokens]
    marks += [f"{CONTINUES}x a piece that continues a word"] if any(t.startswith(CONTINUES) for t in tokens) else []
    if marks:
        note.append("Tokens: " + "; ".join(marks) + ".")
    data = _data_label(run_dir)
    return plot_attention_steps(
        rows,
        title=f"{LABELS[kind]} forming during training{' on ' + data if data else ''}\n{model_label(snaps[-1][2])}: {layer_name(layer, layers)}, {which}",
        note="\n".join(note),
        xlabel="source" if cross else "key",
        ylabel="reference output" if cross else "query",
    )
