"""Which attribution is right? Every method of `attnkit attribute`, measured three ways.

    python benchmarks/faithfulness.py [--data DIR] [--sentences 100] [--dates 300] [--out runs/faithfulness]

1. Against gold, on dates ("sunday, 22 november 2026" -> "2026-11-22"): each output digit comes
   from a known source token (the year's digits, the day's, the month's name). Alignment error
   rate (Och & Ney 2003) of each method's strongest source token per output token, and of the
   best single cross-attention head (chosen on the first third of the dates, reported on the rest,
   like the methods). Two models are trained here as `attnkit demo` trains them (800 updates):
   the Transformer and the RNN with global attention.
2. Deletion and insertion (AOPC) on Multi30k's test_2016 with the installed models, the reference
   translation forced: source tokens are deleted (or, from an empty source, inserted) most
   important first, a token's importance being its summed score over the output tokens. The score
   is the reference's mean log-probability per token. AOPC is the mean change over every step of
   the curve (deletion: the drop, higher is better; insertion: the rise, higher is better), against
   random orders (the mean of three).
   Digit scenes: attention correctness (the mean share of a correctly named digit's scores
   inside its box) of each caption method, for the CNN + LSTM captioner `attnkit demo --task
   caption` trains, on held-out scenes.
3. Jain & Wallace (2019): the output distribution's change (total variation distance, mean over
   output tokens; median over 20 random permutations; mean over sentences) when the last layer's
   cross-attention weights are permuted over the source; and Kendall's tau between raw attention
   and each gradient method, per output token.

Writes results.json, aopc.png (the mean curves per model) and a markdown table to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import kendalltau

import attnkit
from attnkit.attribution import LABELS, applicable, attribute_model
from attnkit.data.dates import MONTHS, date_pairs
from attnkit.data.tokenizer import EOS, PAD
from machine import cpu_name

GRADIENT = ["grad-attention", "integrated-gradients", "input-x-gradient"]


def read(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(n)]


# -- 1. dates: alignment error rate against gold ---------------------------------------------


def spans(pieces: list[str]) -> list[tuple[int, int]]:
    """Character span of each sentencepiece piece in the text (a leading ▁ is a space)."""
    out, pos = [], -1  # the text starts after the first piece's ▁
    for p in pieces:
        n = len(p)
        out.append((pos + (1 if p.startswith("▁") else 0), pos + n))
        pos += n
    return out


def source_fields(src: str) -> dict[str, tuple[int, int]]:
    """Character spans of the year, the day and the month's name in a rendered date."""
    year = re.search(r"\b\d{4}\b", src)
    day = re.search(r"\b\d{1,2}\b", src)
    names = "|".join(sorted({m for m in MONTHS} | {m[:3] for m in MONTHS}, key=len, reverse=True))
    month = re.search(rf"\b({names})\b", src)
    assert year and day and month, src
    return {"year": year.span(), "day": day.span(), "month": month.span()}


def gold(src: str, src_pieces: list[str], tgt_pieces: list[str]) -> list[tuple[set[int], set[int]] | None]:
    """Per output token: (sure, possible) source tokens, or None (a hyphen, </s>)."""
    fields = source_fields(src)
    src_spans = spans(src_pieces)

    def covering(lo: int, hi: int) -> set[int]:
        return {j for j, (a, b) in enumerate(src_spans) if a < hi and b > lo}

    day_lo, day_hi = fields["day"]
    out: list[tuple[set[int], set[int]] | None] = []
    for a, b in spans(tgt_pieces):
        if b - a != 1 or not (0 <= a < 10) or a in (4, 7):
            out.append(None)
            continue
        field = "year" if a < 4 else "month" if a < 7 else "day"
        possible = covering(*fields[field])
        sure: set[int] = set()
        if field == "year":
            sure = covering(fields["year"][0] + a, fields["year"][0] + a + 1)
        elif field == "day":
            k = a - 8 - (2 - (day_hi - day_lo))  # the day's digit in the source (a padding 0: none)
            if k >= 0:
                sure = covering(day_lo + k, day_lo + k + 1)
        out.append((sure, possible | sure))
    return out


def date_alignment(model_dir: Path, n: int) -> dict[str, float]:
    model = attnkit.load(str(model_dir))
    sources, targets = date_pairs(n, seed=20261124)  # dates the demo's training (seed 1) did not draw
    choose = n // 3
    per: dict[str, list] = {}
    heads: dict[tuple[int, int], list] = {}
    for i, (src, tgt) in enumerate(zip(sources, targets)):
        (p,) = model.prepare([src], targets=[tgt])
        src_pieces = model.tok.src.id_to_piece(p.src_ids[:-1]) + ["</s>"]
        tgt_pieces = model.tok.tgt_pieces(p.tgt_out_ids[:-1]) + ["</s>"]
        g = gold(src, src_pieces, tgt_pieces)
        rows = [t for t, x in enumerate(g) if x is not None]
        sure = {(t, j) for t in rows for j in g[t][0]}
        possible = {(t, j) for t in rows for j in g[t][1]}
        record = model.capture(p)
        found = attribute_model(model, p, applicable(record, "output", with_model=True))
        for m, scores in found.scores.items():
            per.setdefault(m, []).append((i, [(t, int(scores[t].argmax())) for t in rows], sure, possible))
        cross = record.maps["cross"]
        for layer in range(cross.shape[0]):
            for head in range(cross.shape[1]):
                links = [(t, int(cross[layer, head, t].argmax())) for t in rows]
                heads.setdefault((layer, head), []).append((i, links, sure, possible))

    def corpus_aer(items) -> float:  # Och & Ney: 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|) over the corpus
        links = [(i, t, j) for i, ls, _, _ in items for t, j in ls]
        sure = {(i, t, j) for i, _, s, _ in items for t, j in s}
        possible = {(i, t, j) for i, _, _, p in items for t, j in p}
        a = set(links)
        return 1.0 - (len(a & sure) + len(a & possible)) / (len(a) + len(sure))

    out = {m: corpus_aer([x for x in items if x[0] >= choose]) for m, items in per.items()}
    best = min(heads, key=lambda h: corpus_aer([x for x in heads[h] if x[0] < choose]))
    out[f"best single head (layer {best[0]}, head {best[1]})"] = corpus_aer([x for x in heads[best] if x[0] >= choose])
    return out


# -- 1b. digit scenes: attention correctness ---------------------------------------------------


def caption_correctness(demo: Path, n: int) -> dict[str, float]:
    """Attention correctness (the share of a correctly named digit's scores inside its box) of
    every caption method, on ``n`` held-out scenes the demo's test did not draw."""
    from attnkit.attribution import attribute_caption
    from attnkit.attribution.methods import CAPTION_METHODS
    from attnkit.data.scenes import make_scenes, max_caption_words
    from attnkit.evaluation.captioning import named_boxes
    from attnkit.evaluation.correctness import attention_correctness
    from attnkit.inference.caption import caption_images
    from attnkit.loading.model_dir import load_model
    from attnkit.models.image import region_maps

    model, vocab, cfg = load_model(demo, checkpoint_name="best", task="caption")
    scenes = make_scenes(n, held_out=True, seed=20261124, size=cfg.data.scenes.image_size)
    captions = caption_images(
        model, vocab, np.stack([s.image for s in scenes]), max_words=max_caption_words(cfg.data.scenes.digits)
    )
    maps: dict[str, list] = {m: [] for m in CAPTION_METHODS}
    boxes: list = []
    for scene, cap in zip(scenes, captions):
        if not cap.words:
            continue
        found = attribute_caption(
            model, scene.image, cap.words, vocab.encode_tgt([" ".join(cap.words)])[0], CAPTION_METHODS
        )
        for m in CAPTION_METHODS:
            maps[m].extend(region_maps(found.scores[m][:-1], cap.attention.shape[1:]))
        boxes.extend(named_boxes(cap, scene)[0])
    size = scenes[0].image.shape
    out = {m: attention_correctness(maps[m], boxes, size).score for m in CAPTION_METHODS}
    out["uniform"] = attention_correctness(maps["attention"], boxes, size).uniform
    return out


# -- 2. deletion and insertion ----------------------------------------------------------------


@torch.no_grad()
def mean_log_probs(model, sources: list[list[int]], tgt_in: list[int], tgt_out: list[int]) -> np.ndarray:
    """The reference's mean log-probability per token under each source (a batch)."""
    width = max(len(s) for s in sources)
    src = torch.tensor([s + [PAD] * (width - len(s)) for s in sources])
    mask = src != PAD
    tgt = torch.tensor([tgt_in] * len(sources))
    logits = model(src, mask, tgt).logits
    lp = logits.log_softmax(-1).gather(-1, torch.tensor(tgt_out)[None, :, None].expand(len(sources), -1, 1))
    return lp[..., 0].mean(-1).numpy()


def curves(model, p, order: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(deletion, insertion) curves over k = 0 .. K content tokens, most important first."""
    content = p.src_ids[:-1]  # </s> stays
    K = len(content)
    deleted = [[content[j] for j in range(K) if j not in set(order[:k])] + [EOS] for k in range(K + 1)]
    inserted = [[content[j] for j in range(K) if j in set(order[:k])] + [EOS] for k in range(K + 1)]
    f = mean_log_probs(model, deleted + inserted, p.tgt_in_ids, p.tgt_out_ids)
    return f[: K + 1], f[K + 1 :]


def on_grid(curve: np.ndarray, points: int = 11) -> np.ndarray:
    return np.interp(np.linspace(0, 1, points), np.linspace(0, 1, len(curve)), curve)


def permutation_tvd(model, p, permutations: int, rng: np.random.Generator) -> float:
    """Median over permutations of the mean TVD of the output distributions when the last
    cross-attention layer's weights are permuted over the source (every row its own order)."""
    net = model.model
    site = [s for s in net.attention_sites() if s.kind == "cross"][-1].module
    src = torch.tensor([p.src_ids])
    mask = torch.ones_like(src, dtype=torch.bool)
    tgt = torch.tensor([p.tgt_in_ids])
    perm: list[torch.Tensor | None] = [None]  # (t, s): each output row's order of the source
    row = [0]  # an RNN attends one step at a time: the rows used so far

    def hook(module, args, kwargs, output):
        if perm[0] is None:
            return output
        values = args[2] if len(args) > 2 else kwargs.get("value", kwargs.get("values"))
        w = output.weights  # (b, h, t, s) or an RNN's (b, t, s)
        rows = perm[0][row[0] : row[0] + w.shape[-2]]
        row[0] += w.shape[-2]
        wp = torch.gather(w, -1, rows.expand_as(w))
        if w.dim() == 4:  # multi-head: the change in Σ_h Σ_j a_ij f^h(x_j)
            f = module.value_vectors(values)
            context = output.context + torch.einsum("bhts,bhsd->btd", wp - w, f)
        else:
            context = output.context + (wp - w) @ values
        return dataclasses.replace(output, context=context)

    def weights_asked(module, args, kwargs):  # the module returns its weights (its fifth argument)
        if len(args) > 4:
            return (*args[:4], True, *args[5:]), kwargs
        return args, {**kwargs, "need_weights": True}

    handles = [site.register_forward_pre_hook(weights_asked, with_kwargs=True)]
    handles.append(site.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            base = net(src, mask, tgt).logits.softmax(-1)[0]
            t, s = base.shape[0], src.shape[1]
            tvds = []
            for _ in range(permutations):
                perm[0], row[0] = torch.from_numpy(np.stack([rng.permutation(s) for _ in range(t)])), 0
                out = net(src, mask, tgt).logits.softmax(-1)[0]
                tvds.append(float(0.5 * (out - base).abs().sum(-1).mean()))
                perm[0] = None
    finally:
        for handle in handles:
            handle.remove()
    return float(np.median(tvds))


def standard_error(values: list, sentences: int) -> np.ndarray:
    """The standard error of the mean over sentences: values come in sentence order, several per
    sentence where a method is drawn several times (the random order), and those are averaged first."""
    v = np.asarray(values, dtype=float)
    v = v.reshape(sentences, -1, *v.shape[1:]).mean(axis=1)
    return v.std(axis=0, ddof=1) / np.sqrt(sentences)


def deletion_insertion(name: str, sources: list[str], refs: list[str], seed: int) -> dict:
    model = attnkit.load(name)
    rng = np.random.default_rng(seed)
    results: dict = {"aopc_del": {}, "aopc_ins": {}, "curves_del": {}, "curves_ins": {}, "tau": {}, "tvd": []}
    del_sum: dict[str, list] = {}
    ins_sum: dict[str, list] = {}
    timing: dict[str, float] = {}
    for src, ref in zip(sources, refs):
        (p,) = model.prepare([src], targets=[ref])
        record = model.capture(p)
        methods = applicable(record, "output", with_model=True)
        att = attribute_model(model, p, ["attention"]).scores["attention"]
        orders = {}
        for m in methods:
            start = time.perf_counter()
            scores = attribute_model(model, p, [m]).scores[m]
            timing[m] = timing.get(m, 0.0) + time.perf_counter() - start
            importance = scores[:, :-1].sum(0)  # per content source token
            orders[m] = list(np.argsort(-importance, kind="stable"))
            if m in GRADIENT:
                taus = [kendalltau(att[t, :-1], scores[t, :-1]).statistic for t in range(scores.shape[0])]
                results["tau"].setdefault(m, []).append(float(np.nanmean(taus)))
        for r in range(3):
            orders[f"random {r}"] = list(rng.permutation(len(p.src_ids) - 1))
        for m, order in orders.items():
            d, i = curves(model.model, p, order)
            key = "random" if m.startswith("random") else m
            del_sum.setdefault(key, []).append((d[0] - d[1:]).mean() if len(d) > 1 else 0.0)
            ins_sum.setdefault(key, []).append((i[1:] - i[0]).mean() if len(i) > 1 else 0.0)
            results["curves_del"].setdefault(key, []).append(on_grid(d - d[0]).tolist())
            results["curves_ins"].setdefault(key, []).append(on_grid(i - i[0]).tolist())
        results["tvd"].append(permutation_tvd(model, p, 20, rng))
    for what, per_sentence in (("del", del_sum), ("ins", ins_sum)):
        results[f"aopc_{what}"] = {m: float(np.mean(v)) for m, v in per_sentence.items()}
        results[f"aopc_{what}_se"] = {m: float(standard_error(v, len(sources))) for m, v in per_sentence.items()}
        curves_of = results[f"curves_{what}"]
        results[f"curves_{what}_se"] = {m: standard_error(v, len(sources)).tolist() for m, v in curves_of.items()}
        results[f"curves_{what}"] = {m: np.mean(v, axis=0).tolist() for m, v in curves_of.items()}
    results["tau"] = {m: float(np.mean(v)) for m, v in results["tau"].items()}
    results["tvd"] = float(np.mean(results["tvd"]))
    results["seconds_per_sentence"] = {m: t / len(sources) for m, t in timing.items()}
    results["sentences"] = len(sources)
    return results


SHORT = {  # the methods as a narrow table names them
    "attention": "raw attention",
    "rollout": "rollout",
    "value-norm": "value-norm",
    "grad-attention": "grad.-weighted attn.",
    "integrated-gradients": "integrated grad.",
    "input-x-gradient": "input × gradient",
    "random": "random order",
}


def aopc_cell(res: dict, m: str, what: str) -> str:
    """A method's deletion or insertion AOPC for the figure's table, ± its standard error where known."""
    value = f"{res[f'aopc_{what}'][m]:.2f}"
    return f"{value} ± {res[f'aopc_{what}_se'][m]:.2f}" if f"aopc_{what}_se" in res else value


def plot_curves(all_results: dict[str, dict], path: Path) -> None:
    """One row per model: the deletion and insertion curves, and beside them each method's AOPC
    (deletion / insertion) in its curve's colour, best first, so that no legend lies over a curve."""

    from matplotlib.figure import Figure

    from attnkit.plots.layout import WIDTH

    fig = Figure(figsize=(WIDTH, 2.5 * len(all_results) + 1.0), layout="constrained")
    axes = fig.subplots(len(all_results), 3, squeeze=False, width_ratios=[1, 1, 1.6])
    x = np.linspace(0, 100, 11)
    colours = {m: f"C{i}" for i, m in enumerate(["attention", "rollout", "value-norm", *GRADIENT])}
    colours["random"] = "0.4"
    # a marker of its own per method, drawn on its curve and before its name in the table: curves
    # that run close together are told apart by shape as well as colour
    markers = dict(zip([*colours], "osD^vPX*"))
    for r, (row, (name, res)) in enumerate(zip(axes, all_results.items())):
        for ax, key, what in ((row[0], "curves_del", "deleted"), (row[1], "curves_ins", "inserted")):
            for m, curve in res[key].items():
                ax.plot(x, curve, marker=markers[m], markersize=4, lw=1.3, color=colours[m],
                        linestyle="--" if m == "random" else "-")  # fmt: skip
                if f"{key}_se" in res:  # a band of one standard error over sentences
                    se = np.asarray(res[f"{key}_se"][m])
                    ax.fill_between(
                        x, np.asarray(curve) - se, np.asarray(curve) + se, color=colours[m], alpha=0.25, lw=0
                    )
            if r == 0:
                ax.set_title("deletion" if key == "curves_del" else "insertion", fontsize=10)
            ax.set_xlabel(f"% of source tokens {what}", fontsize=9)
            ax.tick_params(labelsize=8.5)
            ax.grid(alpha=0.3)
        row[0].set_ylabel(f"{name}\nchange in mean log-prob.", fontsize=9)
        table = row[2]
        table.axis("off")
        table.set_title("AOPC ↑" if r == 0 else "", fontsize=10)
        methods = sorted(res["aopc_del"], key=lambda m: -res["aopc_del"][m])
        for x_at, head in ((0.72, "deletion"), (1.0, "insertion")):
            table.text(x_at, 0.98, head, fontsize=9, ha="right", va="top", transform=table.transAxes)
        for k, m in enumerate(methods):
            y = 0.85 - k * 0.12
            table.plot(
                [0.02], [y - 0.035], marker=markers[m], color=colours[m], markersize=5, transform=table.transAxes
            )
            table.text(0.06, y, SHORT.get(m, m), color=colours[m], fontsize=9, transform=table.transAxes, va="top")
            for x_at, what in ((0.72, "del"), (1.0, "ins")):
                table.text(x_at, y, aopc_cell(res, m, what), color=colours[m], fontsize=9, ha="right",
                           transform=table.transAxes, va="top")  # fmt: skip
    first = next(iter(all_results.values()))
    over = f" over {first['sentences']} test sentences" if "sentences" in first else ""
    title = (  # the rest (what AOPC measures) is the docs' caption
        "Source tokens deleted (or inserted) most important first: the reference's log-probability\n"
        f"higher AOPC is better (ordered by deletion); dashed: a random order; bands and ±: one SE{over}"
    )
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=130)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=os.environ.get("ATTNKIT_MULTI30K"), help="the Multi30k directory")
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--dates", type=int, default=300)
    ap.add_argument("--models", nargs="+", default=["multi30k-en-de", "multi30k-en-de-rnn"])
    ap.add_argument("--out", type=Path, default=Path("runs/faithfulness"))
    ap.add_argument("--scenes", type=int, default=300)
    ap.add_argument("--parts", nargs="+", default=["dates", "captions", "multi30k"], help="which measures to run")
    ap.add_argument("--replot", action="store_true", help="only redraw aopc.png from results.json")
    args = ap.parse_args()
    if args.replot:
        saved = json.loads((args.out / "results.json").read_text())["multi30k"]
        plot_curves({n: {"sentences": args.sentences, **r} for n, r in saved.items()}, args.out / "aopc.png")
        return
    if args.data is None:
        ap.error("give --data (the Multi30k directory) or set ATTNKIT_MULTI30K")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads")
    saved = args.out / "results.json"
    results: dict = json.loads(saved.read_text()) if saved.is_file() else {}
    results = {"dates": {}, "captions": {}, "multi30k": {}, **results, "cpu": cpu_name()}

    from attnkit.demos.captions import run_caption_demo
    from attnkit.demos.dates import run_demo

    if "captions" in args.parts:
        demo = args.out / "caption-rnn"
        if not (demo / "config.yaml").is_file():
            run_caption_demo(demo, arch="rnn")
        results["captions"]["rnn"] = caption_correctness(demo, args.scenes)
        print("digit scenes, CNN + LSTM:", json.dumps(results["captions"]["rnn"], indent=1))
    for arch in ("transformer", "rnn") if "dates" in args.parts else ():
        demo = args.out / f"dates-{arch}"
        if not (demo / "config.yaml").is_file():
            start = time.perf_counter()
            run_demo(demo, arch=arch)
            print(f"dates {arch}: trained in {time.perf_counter() - start:.0f} s")
        results["dates"][arch] = date_alignment(demo, args.dates)
        print(f"dates {arch}:", json.dumps(results["dates"][arch], indent=1))

    sources = read(args.data / "raw" / "test_2016_flickr.en.gz", args.sentences)
    refs = read(args.data / "raw" / "test_2016_flickr.de.gz", args.sentences)
    for name in args.models if "multi30k" in args.parts else ():
        start = time.perf_counter()
        results["multi30k"][name] = deletion_insertion(name, sources, refs, seed=0)
        saved.write_text(json.dumps(results, indent=1))  # each model's results kept as they come
        print(f"{name}: {time.perf_counter() - start:.0f} s")
        print(json.dumps({k: v for k, v in results["multi30k"][name].items() if not k.startswith("curves")}, indent=1))
    saved.write_text(json.dumps(results, indent=1))
    if results["multi30k"]:
        plot_curves(results["multi30k"], args.out / "aopc.png")

    methods = ["attention", "rollout", "value-norm", *GRADIENT]
    print(
        "\n| method | "
        + " | ".join(f"dates AER, {a}" for a in results["dates"])
        + " | "
        + " | ".join(f"scenes correctness, {a}" for a in results["captions"])
        + " | "
        + " | ".join(f"{n}: AOPC del / ins" for n in results["multi30k"])
        + " |"
    )
    for m in [*methods, "random"]:
        cells = [f"{results['dates'][a][m]:.3f}" if m in results["dates"][a] else "–" for a in results["dates"]]
        cells += [
            f"{results['captions'][a][m]:.3f}" if m in results["captions"][a] else "–" for a in results["captions"]
        ]
        for res in results["multi30k"].values():
            cells.append(f"{res['aopc_del'][m]:.3f} / {res['aopc_ins'][m]:.3f}" if m in res["aopc_del"] else "–")
        print(f"| {LABELS.get(m, m)} | " + " | ".join(cells) + " |")
    for a, res in results["dates"].items():
        for m, v in res.items():
            if m.startswith("best"):
                print(f"dates {a}: {m}: AER {v:.3f}")
    for n, res in results["multi30k"].items():
        print(
            f"{n}: permuted attention TVD {res['tvd']:.3f}; Kendall tau vs attention: "
            + ", ".join(f"{m} {t:.2f}" for m, t in res["tau"].items())
        )


if __name__ == "__main__":
    main()
