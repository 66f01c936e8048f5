"""Commands that ask which path carries a behaviour: ``patch``, ``paths``, ``logits``, ``qk`` and ``ov``."""

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
    if args.method == "attribution" or (args.method == "both" and args.of not in ("patterns", "values")):
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


def cmd_paths(args: argparse.Namespace) -> None:
    """Path patching of every sender head into every later receiver head, with composition scores."""
    from .. import circuits

    model = _load(args)
    pairs = _pairs(args, model)
    senders = _units(model, args.senders, "--senders")
    receivers = _units(model, args.receivers, "--receivers")
    via = tuple(args.via.split(","))
    found = circuits.path_patching(model, pairs, senders=senders, receivers=receivers, via=via, metric=args.metric)
    rows = found.table()
    print(
        f"{model.name}: {len(pairs)} pair(s), {args.metric} clean {found.clean.mean():.4g}, corrupted "
        f"{found.corrupt.mean():.4g}; a path's effect: how far the sender's clean write, reaching the "
        "receiver's query, key or value alone, moves the metric to the clean run's (1 = all the way)"
    )
    if found.unweighted:
        print(f"no composition scores: {found.unweighted}")
    print(f"\n{len(rows)} paths, largest effect first, the weights' composition score beside each:")
    for row in rows[: args.top]:
        path = f"{row['sender']} -> {row['receiver']}.{row['via']}"
        print(f"  {path:<44} {row['effect']:+.3f}   {row['via'].upper()}-composition {row['composition']:.3f}")
    if args.table:
        _write_table(rows, args.table, {"model": model.name, "metric": args.metric, "pairs": len(pairs)})


def _units(model, given: str | None, flag: str):
    """Heads named as blocks.0.attn.h4,... (None: every head)."""
    from .. import circuits

    if given is None:
        return None
    out = []
    for name in given.split(","):
        site, _, head = name.strip().rpartition(".h")
        if not site or not head.isdigit():
            raise ValueError(f"{flag}: {name!r} is not a head (blocks.0.attn.h4)")
        layer = next((s.layer for s in model.sites() if s.name == site and s.role == "attn"), None)
        if layer is None:
            raise ValueError(f"{flag}: {model.name} has no attention site {site!r}")
        out.append(circuits.Unit(f"{site}.z", layer, int(head)))
    return out


def cmd_qk(args: argparse.Namespace) -> None:
    """Why a head attends: its score at one cell by the writers of the query's and the key's streams."""
    from .. import circuits

    model = _load(args)
    found = circuits.qk_attribution(model, args.text, args.site, args.head, args.query, args.key, target=args.target)
    tok = found.tokens
    bias = f" + bias {found.bias:.4f}" if found.bias else ""
    print(
        f"{model.name}: {found.site} head {found.head}, query {found.query} {tok[found.query]!r} -> key "
        f"{found.key} {tok[found.key]!r}: weight {found.weight:.3f}, score {found.score:.4f}{bias}; the score "
        "is the sum of the terms (the writer at the query x the writer at the key)"
    )
    for what, shares in (("query", found.by_query), ("key", found.by_key)):
        best = sorted(zip(shares, found.names), key=lambda x: -abs(x[0]))[:4]
        print(f"  through the {what + ':':<6} " + ", ".join(f"{n} {v:+.3f}" for v, n in best))
    print("largest terms:")
    for row in found.table(args.top):
        pair = f"{row['query_writer']} x {row['key_writer']}"
        print(f"  {pair:<44} {row['score']:+.4f}  ({row['share']:+.0%} of the score)")
    if args.table:
        extra = {"model": model.name, "site": found.site, "head": found.head, "query": found.query, "key": found.key}
        _write_table(found.table(), args.table, {**extra, "score": found.score, "weight": found.weight})


def cmd_ov(args: argparse.Namespace) -> None:
    """What each head writes: its OV circuit's copying score and the tokens it raises."""
    from .. import circuits

    model = _load(args)
    heads = _units(model, args.heads, "--heads")
    found = circuits.ov_circuits(model, args.text, heads=heads, k=args.k, target=args.target)
    whose = "heads'" if len(found.names) != 1 else "head's"
    print(
        f"{model.name}: {len(found.names)} {whose} OV circuits (token embeddings -> logits); copying: the "
        "eigenvalues' sum over their absolute sum (1: raises the token it attends to, -1: lowers it); copies: "
        f"the share of the text's {len(found.sources)} distinct tokens each raises above every other"
    )
    for row in found.table()[: args.top]:
        print(f"  {row['head']:<24} copying {row['copying']:+.3f}   copies {row['copies']:.0%}")
    if heads is not None:
        for name, raised in zip(found.names, found.raised):
            print(f"\n{name}: attending to each token (at its first position), the {args.k} tokens it raises most")
            for source, at, top in zip(found.sources, found.at, raised):
                print(f"  {at:>4} {source!r:<14} -> " + ", ".join(f"{t!r} {v:+.2f}" for t, v in top))
    if args.table:
        _write_table(found.table(), args.table, {"model": model.name, "sources": found.sources})


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


def _pair_args(p) -> None:
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
        "--metric", choices=("logit_diff", "prob", "loss"), default="logit_diff", help="read at the last position"
    )


def add_commands(add) -> None:
    p = add(
        "patch",
        cmd_patch,
        "which heads (or stream positions) carry a behaviour: activation patching from clean to corrupted "
        "inputs, and attribution patching",
    )
    F.model_arg(p)
    _pair_args(p)
    p.add_argument(
        "--of",
        choices=("heads", "heads_by_position", "resid", "patterns", "values"),
        default="heads",
        help="what is patched: each head's output at every position, each head at each position, each "
        "layer's residual stream at each position, a head's pattern alone or its values alone (default heads)",
    )
    p.add_argument(
        "--method",
        choices=("activation", "attribution", "both"),
        default="both",
        help="activation: one forward pass per unit and pair; attribution: every unit from one forward "
        "and one backward pass (Nanda 2023); both, with their agreement (default; patterns and values: "
        "activation)",
    )
    p.add_argument("--top", type=F.positive_int, default=12, help="units printed (default 12)")
    p.add_argument("--table", type=F.table_path, metavar="FILE", help="every unit's effect to this .json or .csv")

    r = add(
        "paths",
        cmd_paths,
        "through which path one head reaches another: path patching into a later head's query, key or "
        "value, with the weights' composition scores",
    )
    F.model_arg(r)
    _pair_args(r)
    r.add_argument(
        "--senders", metavar="HEADS", help="sending heads, as blocks.0.attn.h4,blocks.0.attn.h1 (default all)"
    )
    r.add_argument("--receivers", metavar="HEADS", help="receiving heads (default all; each reads the earlier senders)")
    r.add_argument("--via", default="q,k,v", help="the receivers' inputs patched, of q,k,v (default all three)")
    r.add_argument("--top", type=F.positive_int, default=12, help="paths printed (default 12)")
    r.add_argument("--table", type=F.table_path, metavar="FILE", help="every path's effect to this .json or .csv")

    s = add("qk", cmd_qk, "why a head attends where it does: its score at one cell by what wrote the two streams")
    F.model_arg(s)
    s.add_argument("text", type=F.non_empty, help="the input (a decoder-only model's text)")
    s.add_argument("--site", required=True, help="a self-attention site (blocks.1.attn, decoder.0.attn)")
    s.add_argument("--head", type=int, required=True, help="the head")
    s.add_argument("--query", type=int, default=-1, help="the query's position (default the last)")
    s.add_argument("--key", type=int, help="the key's position (default the one the head attends to most)")
    s.add_argument("--target", help="a translator's output, whose positions its decoder's sites cover")
    s.add_argument("--top", type=F.positive_int, default=10, help="terms printed (default 10)")
    s.add_argument("--table", type=F.table_path, metavar="FILE", help="every term to this .json or .csv")

    o = add("ov", cmd_ov, "what each head writes: its OV circuit's copying score and the tokens it raises most")
    F.model_arg(o)
    o.add_argument("text", type=F.non_empty, help="the input whose tokens the circuits are read on")
    o.add_argument("--heads", metavar="HEADS", help="these heads (blocks.1.attn.h2,...), each token's top raised too")
    o.add_argument("--k", type=F.positive_int, default=5, help="tokens raised, per token read (default 5)")
    o.add_argument("--target", help="a translator's output, whose tokens its decoder reads")
    o.add_argument("--top", type=F.positive_int, default=12, help="heads printed (default 12)")
    o.add_argument("--table", type=F.table_path, metavar="FILE", help="every head's scores to this .json or .csv")

    q = add("logits", cmd_logits, "what each head and MLP writes into an answer's logit, and the logit lens")
    F.model_arg(q)
    q.add_argument("text", type=F.non_empty, help="the input (a decoder-only model's prompt; a translator's source)")
    q.add_argument("--answer", required=True, help="the next token whose logit is attributed (one token)")
    q.add_argument("--foil", help="attribute the answer's logit less this token's")
    q.add_argument("--target", help="a translator's output before the answer")
    q.add_argument("--top", type=F.positive_int, default=12, help="terms printed (default 12)")
    q.add_argument("--table", type=F.table_path, metavar="FILE", help="every term's logit to this .json or .csv")
