"""Commands that use a trained model: ``models``, ``translate``, ``caption``, ``evaluate``."""

from __future__ import annotations

import argparse
import sys

from ..attribution.names import CAPTION_METHODS
from . import flags as F


def cmd_models(args: argparse.Namespace) -> None:
    from ..loading.packaged import models_report

    print(models_report())


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate stdin or --input, one output line per input line (or n-best lines)."""
    from ..inference.translate import Rerankers, Reverse, RightToLeft, translate_file
    from ..loading.model_dir import load_translators

    options = F.search_options(args)
    models, tok, limit = load_translators([args.model, *args.ensemble], **F.weights(args))
    reverse = Reverse.load(args.rerank, **F.weights(args)) if args.rerank is not None else None
    r2l = RightToLeft.load(args.rerank_r2l, **F.weights(args)) if args.rerank_r2l is not None else None
    if args.max_src_len and args.max_src_len > limit:
        what = "the model's" if len(models) == 1 else "the ensemble's"
        raise ValueError(f"--max-src-len {args.max_src_len} is beyond {what} limit of {limit} subwords")
    translate_file(
        models,
        tok,
        args.input,
        args.output,
        options,
        batch_tokens=args.batch_tokens,
        max_src_len=args.max_src_len or limit,
        workers=args.workers,
        interactive=args.input is None and sys.stdin.isatty(),
        rerankers=Rerankers(reverse, r2l),
    )


def cmd_caption(args: argparse.Namespace) -> None:
    """Caption image files; -o draws each word's attention over the image (--attribute: by each method)."""
    from ..inference.caption import caption_files

    if args.attribute and args.output is None:
        raise ValueError("--attribute draws a figure: give -o FIGURE")
    captions = caption_files(args.model, args.images, F.search_options(args), weights=F.weights(args))
    if args.attribute:
        _draw_caption_attributions(args, captions)
    elif args.output is not None:
        _draw_captions(args, captions)


def _draw_captions(args: argparse.Namespace, captions) -> None:
    """Each caption's words over the image's regions (name_1.png, ... for several images), with
    the true boxes of an image whose truth lies beside it (NAME.json, as the demo writes)."""
    from ..atomic import numbered, save_figure
    from ..evaluation.captioning import truth_boxes
    from ..inspection.capture import model_info, model_label
    from ..loading.model_dir import load_model
    from ..plots.images import plot_caption

    model, _, cfg = load_model(args.model, task="caption", **F.weights(args))  # what the title names
    info = model_info(model, cfg)
    cross = [s for s in model.attention_sites() if s.kind == "cross"]  # what the panels show
    for i, (path, cap) in enumerate(zip(args.images, captions)):
        if not cap.words:
            continue
        boxes, inside = truth_boxes(path, cap)
        # what each panel shows: the captioner's one attention, or (a Transformer's) the last decoder layer's heads averaged
        shown = "\ncross-attention, last decoder layer, mean of heads; " if cross[-1].heads > 1 else " "
        title = f"{model_label(info)}:{shown}{path.name}, “{' '.join(cap.words)}”"
        fig = plot_caption(cap.image, cap.words, cap.attention, boxes=boxes, inside=inside, title=title)
        target = numbered(args.output, i, len(args.images))
        save_figure(fig, target, dpi=args.dpi)
        print(f"figure: {target}")


def _draw_caption_attributions(args: argparse.Namespace, captions) -> None:
    """Each caption's words over the image's regions by every asked method, one row each."""
    from ..atomic import numbered, save_figure
    from ..attribution import attribute_caption
    from ..data.images import greyscale
    from ..evaluation.captioning import truth_boxes
    from ..evaluation.correctness import attention_in_box
    from ..inspection.capture import model_info, model_label
    from ..loading.model_dir import load_model
    from ..models.image import region_maps
    from ..plots.images import plot_caption_methods

    model, vocab, cfg = load_model(args.model, task="caption", **F.weights(args))
    name = model_label(model_info(model, cfg))
    methods = CAPTION_METHODS if args.attribute == "all" else [args.attribute]
    found = [
        attribute_caption(model, greyscale(c.image), c.words, vocab.encode_tgt([" ".join(c.words)])[0], methods)
        for c in captions
    ]  # every image before any figure
    for i, (path, cap, a) in enumerate(zip(args.images, captions, found)):
        if not cap.words:
            continue
        grid = cap.attention.shape[1:]
        panels = [(a.label(m), region_maps(a.scores[m][:-1], grid)) for m in methods]  # the end of the caption left out
        boxes, _ = truth_boxes(path, cap)
        size = cap.image.shape[:2]
        inside = None if boxes is None else [
            [None if box is None else attention_in_box(maps[i], box, size) for i, box in enumerate(boxes)]
            for _, maps in panels
        ]  # fmt: skip
        title = f"{name}: {path.name}, “{' '.join(cap.words)}”"
        fig = plot_caption_methods(cap.image, cap.words, panels, boxes=boxes, inside=inside, title=title)
        target = numbered(args.output, i, len(args.images))
        save_figure(fig, target, dpi=args.dpi)
        print(f"figure: {target}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Translate --src and score it against --ref (or a Multi30k split): BLEU, chrF, signatures, speed."""
    from ..evaluation import evaluate_files

    src, ref = args.src, args.ref
    if args.multi30k:
        from ..data.multi30k import locate

        langs = args.langs.split("-")
        variant = "tok" if args.tokenize == "none" else "raw"  # tokenized references go with --tokenize none
        src, ref = (locate(args.multi30k, lang, variant=variant) for lang in langs)
    print(
        evaluate_files(
            args.model,
            src,
            ref,
            F.search_options(args),
            weights=F.weights(args),
            ensemble=args.ensemble,
            reverse=args.rerank,
            r2l=args.rerank_r2l,
            output=args.output,
            batch_tokens=args.batch_tokens,
            tokenize=args.tokenize,
            lowercase=args.lowercase,
            detokenize_lang=args.detokenize,
            workers=args.workers,
        )
    )


def add_commands(add) -> None:
    """The commands that use a trained model, each with its flags."""
    add("models", cmd_models, "list the trained models installed with attnkit (usable by name as MODEL)")
    for add_one in (_add_translate, _add_caption, _add_evaluate):
        add_one(add)


def _add_translate(add) -> None:
    p = add("translate", cmd_translate, "translate stdin or a file with a trained model")
    F.model_arg(p)
    F.ensemble(p)
    F.decoding(p)
    p.add_argument(
        "-i",
        "--input",
        type=F.existing_file,
        help="input file (plain or .gz); default stdin (interactive on a terminal)",
    )
    F.output(p, None, "output file (written whole or not at all); default stdout")
    p.add_argument("--n-best", type=F.positive_int, default=1, help="write the N best as 'line ||| text ||| score'")
    p.add_argument(
        "--max-src-len",
        type=F.positive_int,
        default=None,
        help="longer inputs are cut to this many subwords, with a warning (default: the model's limit)",
    )


def _add_caption(add) -> None:
    p = add("caption", cmd_caption, "caption image files with a trained captioning model and draw its attention")
    F.model_arg(p)
    p.add_argument(
        "images",
        nargs="+",
        type=F.existing_file,
        help="image files (PNG, JPEG, ...) of the size the model was trained on, read as greyscale",
    )
    F.search_args(p)
    p.add_argument(
        "--attribute",
        choices=[*CAPTION_METHODS, "all"],
        default=None,
        help="with -o: draw each word's share of every region by this method (all: one row per method, one "
        "scale): raw attention, gradient-weighted attention (Chefer et al. 2021), integrated gradients or "
        "input x gradient on the region features",
    )
    F.output(
        p,
        None,
        "figure: the image with each word's attention over it (name_1.png, ... for several images)",
        kind="figure",
    )
    F.dpi(p)


def _add_evaluate(add) -> None:
    p = add("evaluate", cmd_evaluate, "translate a test set and print BLEU, chrF and speed")
    F.model_arg(p)
    F.ensemble(p)
    F.decoding(p)
    p.add_argument("--src", type=F.existing_file, help="source file (plain or .gz)")
    p.add_argument("--ref", type=F.existing_file, help="reference file, one line per source line")
    p.add_argument(
        "--multi30k",
        metavar="SPLIT",
        choices=F.MULTI30K_SPLITS,
        help="instead of --src/--ref: a Multi30k split (val, test_2016_flickr), from the directory in "
        "$ATTNKIT_MULTI30K or downloaded once and checksum-verified",
    )
    p.add_argument(
        "--langs",
        default="en-de",
        choices=["en-de", "en-fr", "de-en", "fr-en"],
        help="with --multi30k: source and reference language",
    )
    p.add_argument(
        "--tokenize",
        choices=F.BLEU_TOKENIZERS,
        default="13a",
        help="sacreBLEU tokenizer: 13a for raw text, none for tokenized text",
    )
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    p.add_argument(
        "--detokenize",
        metavar="LANG",
        choices=F.DETOKENIZE_LANGS,
        help="Moses-detokenize outputs first (a model trained on tokenized text)",
    )
    F.output(p, None, "also write the translations to this file")
