"""Activation patching and direct logit attribution, attnkit beside TransformerLens on the same
weights and the same tokens.

    python benchmarks/circuits_peer.py --peer-python /tmp/tlv/bin/python
    python benchmarks/circuits_peer.py --peer-python PY --tokens 64 512

The model is ``capture_scale.py``'s (SmolLM2-135M's shape: Llama, 30 layers x 9 heads sharing 3
key/value heads, random weights, a Hugging Face directory). TransformerLens comes from PyPI into
its own environment, torch pinned:

    python -m venv /tmp/tlv && /tmp/tlv/bin/pip install torch==2.13.0
    /tmp/tlv/bin/pip install -c <(echo torch==2.13.0) transformer-lens

and opens the directory with ``TransformerBridge.boot_transformers`` (transformers' weights as
they are, eager attention). For each length T, one pair: T - 1 random tokens of the vocabulary
(the clean text) and the same with its first half replaced (the corrupted one), the answer the
clean text's next token at the repeat and the foil the corrupted one's; both tools then compute

  patching  every head's output patched from the clean run into the corrupted one, the logit
            difference of each run (attnkit ``activation_patching``; TransformerLens
            ``patching.get_act_patch_attn_head_out_all_pos``); max abs difference of the 270 values
  DLA       each head's direct logit attribution at the last position (attnkit
            ``direct_logit_attribution``; TransformerLens ``stack_head_results`` through the final
            norm frozen by ``logit_attrs``, its weight folded by ``enable_compatibility_mode``); max abs difference

with wall time and peak resident memory of each tool's process, and attnkit's attribution
patching of the same heads (one forward and one backward pass; TransformerLens has none built
in) with its agreement with activation patching (Pearson's r). A run that would not fit in the
memory free is refused in one line before it starts: TransformerLens's by the scores and
patterns its cache keeps (2 x layers x heads x T^2 floats), attnkit's by its peak at the two
lengths before, extrapolated linearly (its memory grows with T, no map is formed).

    python benchmarks/circuits_peer.py --tokens 512 2048 4096 8192 --patch-upto 512

    python benchmarks/circuits_peer.py --composition

compares the weights' Q-, K- and V-composition scores of every pair of heads (attnkit
``composition_scores``; TransformerLens ``all_composition_scores`` in compatibility mode, its
norms folded and its writes centred) on that model and on one of GPT-2 small's shape (12 layers
x 12 heads, LayerNorm, random weights, the same tokenizer): the max abs difference over every
pair of a later receiver, and each tool's time.

    python benchmarks/circuits_peer.py --copying

compares every head's OV copying score on both models (attnkit ``ov_circuits``; TransformerLens
``(W_E @ OV @ W_U).eigenvalues`` in compatibility mode, Elhage et al.'s sum over absolute sum).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import capture_scale  # noqa: E402  (beside this file)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pair_ids(folder: Path, n: int, seed: int = 0) -> dict:
    """One clean and one corrupted sequence of ``n`` token ids that read back as the same ids from
    their text: a random half of whole-word tokens, repeated up to the answer; the corrupted
    first half other words."""
    import transformers as T

    tok = T.AutoTokenizer.from_pretrained(folder)
    words = [i for t, i in tok.get_vocab().items() if t.startswith("Ġ") and t[1:].isalpha() and len(t) > 3]
    rng = random.Random(seed)
    half = n // 2 + 1
    cut = n - half  # the repeat runs to word ``cut`` - 1; the answer is word ``cut``
    pick = rng.sample if half <= len(words) else rng.choices  # a long pair repeats words within each half
    for _ in range(100):
        first, other = pick(words, k=half), pick(words, k=half)
        clean, corrupt = first + first[:cut], other + first[:cut]
        if all(
            tok(tok.decode(x))["input_ids"] == x for x in (clean, corrupt, first[cut : cut + 1], other[cut : cut + 1])
        ):
            return {"clean": clean, "corrupt": corrupt, "answer": first[cut], "foil": other[cut]}
    raise SystemExit(f"no {n}-token pair reads back as its ids")


def _fits(need: float) -> str | None:
    """None, or the one line of a run refused because it would need more memory than is free."""
    # read here, not from attnkit.memory: TransformerLens's environment has no attnkit
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemAvailable:"))
    free = int(line.split()[1]) * 1024
    return None if need <= 0.8 * free else f"refused: needs about {need / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free"


def run_attnkit(folder: Path, ids: dict) -> dict:
    import torch

    import attnkit
    from attnkit import circuits

    if ids.get("need") and (why := _fits(ids["need"])):  # attribution patching's graph, from the shorter runs
        return {"error": why}
    torch.set_num_threads(2)
    model = attnkit.load(str(folder), device="cpu")
    tok = model.hf.tokenizer
    text = {k: tok.decode(ids[k]) for k in ("clean", "corrupt")}
    assert [model.hf.encode_text(text[k]) for k in ("clean", "corrupt")] == [ids["clean"], ids["corrupt"]]
    answer, foil = tok.decode([ids["answer"]]), tok.decode([ids["foil"]])
    pair = circuits.Pair(text["clean"], text["corrupt"], answer, foil)
    t0 = time.perf_counter()
    patched = circuits.activation_patching(model, [pair]) if ids["patch"] else None
    t1 = time.perf_counter()
    dla = circuits.direct_logit_attribution(model, pair.clean, answer, foil)
    t2 = time.perf_counter()
    approx = circuits.attribution_patching(model, [pair])
    t3 = time.perf_counter()
    heads = [dla.values[dla.names.index(u.label)] for u in approx.units]
    return {
        "patching": None if patched is None else patched.values[0].tolist(),
        "dla": [float(h) for h in heads],
        "patch_s": None if patched is None else t1 - t0,
        "dla_s": t2 - t1,
        "attribution_s": t3 - t2,
        "agreement": None if patched is None else circuits.agreement(approx, patched),
        "peak_mib": _peak_mib(),
    }


def run_transformer_lens(folder: Path, ids: dict) -> dict:
    import torch
    from transformer_lens import patching
    from transformer_lens.model_bridge import TransformerBridge

    config = json.loads((folder / "config.json").read_text())
    t = len(ids["clean"])
    maps = (
        2 * config["num_hidden_layers"] * config["num_attention_heads"] * t * t * 4
    )  # the cache's scores and patterns
    if why := _fits(maps + 2**30):
        return {"error": why + " (run_with_cache keeps every head's scores and pattern, layers x heads x T^2)"}
    torch.set_num_threads(2)
    model = TransformerBridge.boot_transformers(str(folder), device="cpu")
    model.enable_compatibility_mode()  # the final norm's weight folded into the unembedding, as its DLA assumes
    clean, corrupt = torch.tensor([ids["clean"]]), torch.tensor([ids["corrupt"]])
    a, f = ids["answer"], ids["foil"]
    metric = lambda logits: logits[0, -1, a] - logits[0, -1, f]
    t0 = time.perf_counter()
    with torch.no_grad():
        _, cache = model.run_with_cache(clean)
    t1 = time.perf_counter()
    with torch.no_grad():
        patched = patching.get_act_patch_attn_head_out_all_pos(model, corrupt, cache, metric) if ids["patch"] else None
    t2 = time.perf_counter()
    with torch.no_grad():
        heads = cache.stack_head_results(layer=-1, pos_slice=-1)  # (layers x heads, 1, d); logit_attrs applies ln_final
        dla = cache.logit_attrs(heads, tokens=torch.tensor([a]), incorrect_tokens=torch.tensor([f]), pos_slice=-1)
    t3 = time.perf_counter()
    return {
        "patching": None if patched is None else patched.flatten().tolist(),
        "dla": dla.flatten().tolist(),
        "patch_s": None if patched is None else t2 - t0,  # the clean cache included, as attnkit's clean run
        "dla_s": (t1 - t0) + (t3 - t2),  # the cache's run and the attribution
        "peak_mib": _peak_mib(),
    }


def gpt2_small(folder: Path, tokenizer_from: Path) -> Path:
    """A model of GPT-2 small's shape with random weights and ``tokenizer_from``'s tokenizer, once."""
    if (folder / "model.safetensors").is_file():
        return folder
    import torch
    import transformers as T

    tok = T.AutoTokenizer.from_pretrained(tokenizer_from)
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=len(tok), bos_token_id=0, eos_token_id=0)).eval()
    tmp = folder.with_name(folder.name + ".part")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(folder)
    return folder


def compose_attnkit(folder: Path, _ids: dict) -> dict:
    import torch

    import attnkit
    from attnkit import circuits

    torch.set_num_threads(2)
    model = attnkit.load(str(folder), device="cpu")
    t0 = time.perf_counter()
    scores = circuits.composition_scores(model, "the")  # (senders, receivers, q k v), heads in layer order
    return {"scores": scores.tolist(), "s": time.perf_counter() - t0}


def compose_transformer_lens(folder: Path, _ids: dict) -> dict:
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    torch.set_num_threads(2)
    model = TransformerBridge.boot_transformers(str(folder), device="cpu")
    model.enable_compatibility_mode()
    t0 = time.perf_counter()
    with torch.no_grad():
        modes = [model.all_composition_scores(m) for m in ("Q", "K", "V")]  # (layers, heads, layers, heads) each
    layers, heads = modes[0].shape[:2]
    flat = torch.stack([m.reshape(layers * heads, layers * heads) for m in modes], -1)
    return {"scores": flat.tolist(), "s": time.perf_counter() - t0}


def copy_attnkit(folder: Path, _ids: dict) -> dict:
    import torch

    import attnkit
    from attnkit import circuits

    torch.set_num_threads(2)
    model = attnkit.load(str(folder), device="cpu")
    t0 = time.perf_counter()
    found = circuits.ov_circuits(model, "the")
    return {"scores": found.grid().tolist(), "s": time.perf_counter() - t0}


def copy_transformer_lens(folder: Path, _ids: dict) -> dict:
    import torch
    from transformer_lens.model_bridge import TransformerBridge

    torch.set_num_threads(2)
    model = TransformerBridge.boot_transformers(str(folder), device="cpu")
    model.enable_compatibility_mode()
    t0 = time.perf_counter()
    with torch.no_grad():
        eig = (model.W_E @ model.OV @ model.W_U).eigenvalues  # (layers, heads, head size)
        scores = (eig.sum(-1) / eig.abs().sum(-1)).real
    return {"scores": scores.tolist(), "s": time.perf_counter() - t0}


def copying(args: argparse.Namespace, folder: Path) -> None:
    import numpy as np

    print("| model | attnkit s | TransformerLens s | heads | copying score max diff |")
    print("|---|---|---|---|---|")
    for name, ours, theirs in _both(args, folder, "copy"):
        if "error" in ours or "error" in theirs:
            print(f"| {name} | {ours.get('error', '')} | {theirs.get('error', '')} | | |")
            continue
        a, b = np.array(ours["scores"]), np.array(theirs["scores"])
        print(f"| {name} | {ours['s']:.1f} | {theirs['s']:.1f} | {a.size} | {np.abs(a - b).max():.1e} |", flush=True)


def _both(args: argparse.Namespace, folder: Path, what: str):
    """(model, attnkit's result, TransformerLens's) of child ``what`` on both models."""
    gpt2 = gpt2_small(Path(tempfile.gettempdir()) / "attnkit-gpt2-small-shape", folder)
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = Path(tmp) / "none.json"
        ids_file.write_text("{}")
        for name, path in (("SmolLM2-135M shape", folder), ("GPT-2 small shape", gpt2)):
            ours = tool(f"{what}_attnkit", sys.executable, path, ids_file)
            yield name, ours, tool(f"{what}_transformer_lens", args.peer_python, path, ids_file)


def composition(args: argparse.Namespace, folder: Path) -> None:
    import numpy as np

    print("| model | attnkit s | TransformerLens s | pairs compared | Q max diff | K max diff | V max diff |")
    print("|---|---|---|---|---|---|---|")
    for name, ours, theirs in _both(args, folder, "compose"):
        if "error" in ours or "error" in theirs:
            print(f"| {name} | {ours.get('error', '')} | {theirs.get('error', '')} | | | | |")
            continue
        a, b = np.array(ours["scores"]), np.array(theirs["scores"])
        later = ~np.isnan(a[..., 0])  # a receiver of a later layer
        diffs = [float(np.abs(a[..., k][later] - b[..., k][later]).max()) for k in range(3)]
        print(
            f"| {name} | {ours['s']:.1f} | {theirs['s']:.1f} | {int(later.sum()):,} | "
            + " | ".join(f"{d:.1e}" for d in diffs)
            + " |",
            flush=True,
        )


def child(args: argparse.Namespace) -> None:
    ids = json.loads(Path(args.ids).read_text())
    run = {
        "attnkit": run_attnkit,
        "transformer_lens": run_transformer_lens,
        "compose_attnkit": compose_attnkit,
        "compose_transformer_lens": compose_transformer_lens,
        "copy_attnkit": copy_attnkit,
        "copy_transformer_lens": copy_transformer_lens,
    }[args.child]
    print(json.dumps(run(Path(args.folder), ids)))


def tool(name: str, python: str, folder: Path, ids_file: Path) -> dict:
    cmd = [python, __file__, "--child", name, "--folder", str(folder), "--ids", str(ids_file)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 512])
    parser.add_argument(
        "--patch-upto", type=int, default=512, help="activation patching (one pass per head) up to this length only"
    )
    parser.add_argument("--peer-python", default="/tmp/tlv/bin/python", help="TransformerLens's environment's python")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "attnkit-smollm2-135m-shape")
    parser.add_argument("--composition", action="store_true", help="compare the composition scores instead")
    parser.add_argument("--copying", action="store_true", help="compare the OV circuits' copying scores instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    import numpy as np

    from machine import cpu_name

    folder = capture_scale.build(args.folder)
    print(f"{cpu_name()}; model {folder}")
    if args.composition:
        composition(args, folder)
        return
    if args.copying:
        copying(args, folder)
        return
    print(
        "| tokens | tool | patching s | DLA s | attribution patching s (r) | peak MiB | patching max diff | "
        "DLA max diff |\n|---|---|---|---|---|---|---|---|"
    )
    peaks: list[tuple[int, float]] = []  # attnkit's (tokens, peak MiB): the next length's memory, extrapolated linearly
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.tokens:
            ids_file = Path(tmp) / f"ids_{n}.json"
            need = None
            if len(peaks) >= 2:
                (n0, m0), (n1, m1) = peaks[-2:]
                need = (m1 + (m1 - m0) / (n1 - n0) * (n - n1)) * 2**20
            ids_file.write_text(json.dumps({**pair_ids(folder, n), "patch": n <= args.patch_upto, "need": need}))
            ours = tool("attnkit", sys.executable, folder, ids_file)
            if "error" not in ours:
                peaks.append((n, ours["peak_mib"]))
            theirs = tool("transformer_lens", args.peer_python, folder, ids_file)
            diff = {
                k: float(np.abs(np.array(ours[k]) - np.array(theirs[k])).max())
                if "error" not in ours and "error" not in theirs and ours[k] is not None
                else float("nan")
                for k in ("patching", "dla")
            }
            for name, got in (("attnkit", ours), ("TransformerLens", theirs)):
                if "error" in got:
                    print(f"| {n} | {name} | {got['error']} | | | | | |")
                    continue
                approx = "none"
                if "attribution_s" in got:
                    r = f" ({got['agreement']:.3f})" if got["agreement"] is not None else ""
                    approx = f"{got['attribution_s']:.1f}{r}"
                patch = "not run" if got["patch_s"] is None else f"{got['patch_s']:.1f}"
                print(
                    f"| {n:,} | {name} | {patch} | {got['dla_s']:.2f} | {approx} | {got['peak_mib']:.0f} | "
                    f"{diff['patching']:.1e} | {diff['dla']:.1e} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
