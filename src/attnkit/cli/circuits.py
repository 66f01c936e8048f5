"""Commands that ask which path carries a behaviour: ``patch`` and ``logits``."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any

from . import flags as F

TASKS = ("repeated", "names")


def _load(args: argparse.Namespace):
    from ..loaded import load

    return load(args.model, **F.weights(args))


def _write_table(rows: list[dict[str, Any]], path: Path, extra: dict[str, Any]) -> None:
    from ..atomic import write_text

    if path.suffix.lower() == ".json":
        text = json.dumps({**extra, "rows": rows}, indent=1) + "\n"
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, list(dict.fromkeys(k for row in rows for k in row)), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    print(f"table: {write_text(path, text)}")


def _pairs(args: argparse.Namespace, model):
    from .. import circuits

    if args.pairs is not None:
        if args.task is not None:
            raise ValueError("give pairs from a file (--pairs) or built ones (--task), not both")
        return circuits.read_pairs(args.pairs)
    if args.task == "names":
        return circuits.name_swap_pairs(model, args.n, seed=args.seed)
    return circuits.repeated_pairs(model, n=args.n, length=args.length, seed=args.seed)


def cmd_patch(args: argparse.Namespace) -> None:
    """Activation patching (and attribution patching) of every head or stream position."""
    from .. import circuits

    model = _load(args)
    pairs = _pairs(args, model)
    found = []
    if args.method in ("activation", "both"):
        found.append(circuits.activation_patching(model, pairs, of=args.of, metric=args.metric))
    if args.method in ("attribution", "both"):
        found.append(circuits.attribution_patching(model, pairs, of=args.of, metric=args.metric))
    first = found[0]
    print(
        f"{model.name}: {len(pairs)} pair(s), {args.metric} clean {first.clean.mean():.4g}, corrupted "
        f"{first.corrupt.mean():.4g}; effect 1 = the clean run restored, 0 = none of it"
    )
    for result in found:
        rows = result.table()
        print(f"\n{result.method} patching, {len(rows)} units, largest effect first (95% bootstrap interval):")
        for row in rows[: args.top]:
            print(f"  {row['unit']:<28} {row['effect']:+.3f}  [{row['low']:+.3f}, {row['high']:+.3f}]")
    if len(found) == 2:
        print(f"\nagreement (Pearson r of the effects): {circuits.agreement(found[1], found[0]):.4f}")
    if args.table:
        rows = [{**row, "method": r.method} for r in found for row in r.table()]
        _write_table(rows, args.table, {"model": model.name, "metric": args.metric, "pairs": len(pairs)})


def cmd_logits(args: argparse.Namespace) -> None:
    """Direct logit attribution of every head and MLP, and the logit lens."""
    from .. import circuits

    model = _load(args)
    found = circuits.direct_logit_attribution(model, args.text, args.answer, args.foil, target=args.target)
    what = f"{args.answer!r}" + (f" less {args.foil!r}" if args.foil else "")
    print(
        f"{model.name}: the logit of {what} at the last position is {found.logit:.4f} = the terms below, summed, "
        f"+ {found.constant:.4f} (the final norm's shift and the unembedding's bias)"
    )
    rows = found.table()
    for row in rows[: args.top]:
        print(f"  {row['term']:<28} {row['logit']:+.4f}")
    lens = circuits.logit_lens(model, args.text, args.answer, args.foil, target=args.target)
    print("\nlogit lens (each layer's output read by the final norm and the unembedding):")
    for layer, top, rank in zip(lens.layers, lens.top, lens.rank):
        best = ", ".join(f"{t!r} {p:.3f}" for t, p in top[:3])
        print(f"  layer {layer:>2}: answer rank {rank:>5}; top {best}")
    if args.table:
        _write_table(rows, args.table, {"model": model.name, "answer": args.answer, "foil": args.foil})


def add_commands(add) -> None:
    p = add(
        "patch",
        cmd_patch,
        "which heads (or stream positions) carry a behaviour: activation patching from clean to corrupted "
        "inputs, and attribution patching",
    )
    F.model_arg(p)
    p.add_argument(
        "--pairs",
        type=F.existing_file,
        metavar="FILE",
        help='JSON lines, each {"clean", "corrupt", "answer", "foil"} (a translator\'s also "target": the '
        "output before the answer); clean and corrupt the same length in tokens",
    )
    p.add_argument(
        "--task",
        choices=TASKS,
        help="pairs built for the model's tokenizer: repeated (a random sequence repeated, its first copy "
        "corrupted: induction) or names (indirect-object sentences, the giver's name swapped)",
    )
    p.add_argument("--n", type=F.positive_int, default=8, help="built pairs (default 8)")
    p.add_argument("--length", type=F.positive_int, default=10, help="--task repeated: words per copy (default 10)")
    p.add_argument("--seed", type=int, default=0, help="the built pairs' seed (default 0)")
    p.add_argument(
        "--of",
        choices=("heads", "heads_by_position", "resid"),
        default="heads",
        help="what is patched: each head's output at every position, each head at each position, or each "
        "layer's residual stream at each position (default heads)",
    )
    p.add_argument(
        "--method",
        choices=("activation", "attribution", "both"),
        default="both",
        help="activation: one forward pass per unit and pair; attribution: every unit from one forward "
        "and one backward pass (Nanda 2023); both, with their agreement (default)",
    )
    p.add_argument(
        "--metric", choices=("logit_diff", "prob", "loss"), default="logit_diff", help="read at the last position"
    )
    p.add_argument("--top", type=F.positive_int, default=12, help="units printed (default 12)")
    p.add_argument("--table", type=F.table_path, metavar="FILE", help="every unit's effect to this .json or .csv")

    q = add("logits", cmd_logits, "what each head and MLP writes into an answer's logit, and the logit lens")
    F.model_arg(q)
    q.add_argument("text", type=F.non_empty, help="the input (a decoder-only model's prompt; a translator's source)")
    q.add_argument("--answer", required=True, help="the next token whose logit is attributed (one token)")
    q.add_argument("--foil", help="attribute the answer's logit less this token's")
    q.add_argument("--target", help="a translator's output before the answer")
    q.add_argument("--top", type=F.positive_int, default=12, help="terms printed (default 12)")
    q.add_argument("--table", type=F.table_path, metavar="FILE", help="every term's logit to this .json or .csv")
