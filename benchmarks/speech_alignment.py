"""A speech model's cross-attention against the true alignment: a tiny Whisper trained on spoken
"words" that are tones, where when each word sounds is known to the sample.

    python benchmarks/speech_alignment.py [--out runs/speech_tones] [--steps 1500]

Eight words, each a tone of its own pitch (250 to 2,500 Hz, a geometric scale); an utterance is
2 to 5 of them, 0.12 to 0.30 s each, 0.04 to 0.12 s apart, after up to 0.2 s of silence, in a
3-second window (150 encoder positions of 20 ms), with a little noise. The model is the tests'
tiny Whisper shape (``tests/tiny_hf.build_speech``: 2 + 2 layers of 4 heads) at width 64 with
32 mel bins, trained with AdamW on 6,000 utterances. On 200 held-out utterances, through
``attnkit.load`` of the saved directory: the share of transcripts the model writes exactly
(greedy), and for every cross-attention head (and the mean of each layer's heads) the share of
words whose strongest encoder position, read from the row that predicts the word, lies inside
the word's tone (one position of slack); the best head (and the best of heads and layer means,
which the figure draws) is chosen on the first 100 and scored on the other 100. Chance: a
position drawn uniformly from those that hold sound (each utterance ends 0.25 s after its last
word; the rest of the window is Whisper's padding).

Writes the model directory, ``example.wav``, ``result.json`` and ``speech_alignment.png`` (one
held-out utterance under the best head) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import attnkit  # noqa: E402
from attnkit.data.audio import encode_wav  # noqa: E402
from machine import cpu_name  # noqa: E402
from tiny_hf import build_speech  # noqa: E402

WORDS = ["red", "blue", "green", "black", "white", "big", "small", "dog"]
PITCH = {w: 250 * (10 ** (i / (len(WORDS) - 1))) for i, w in enumerate(WORDS)}  # 250 .. 2,500 Hz
RATE, SECONDS = 16000, 3


def utterance(rng: random.Random) -> tuple[np.ndarray, list[str], list[tuple[float, float]]]:
    """(samples, words, each word's (start, end) in seconds)."""
    wave = np.zeros(RATE * SECONDS, dtype=np.float32)
    at = rng.uniform(0.0, 0.2)
    words, spans = [], []
    for _ in range(rng.randint(2, 5)):
        length = rng.uniform(0.12, 0.30)
        if at + length > SECONDS - 0.1:
            break
        word = rng.choice(WORDS)
        t = np.arange(int(length * RATE)) / RATE
        ramp = np.minimum(1.0, np.minimum(t, length - t) / 0.01)  # 10 ms fades: no click at the edges
        start = int(at * RATE)
        wave[start : start + len(t)] += rng.uniform(0.3, 0.7) * ramp * np.sin(2 * np.pi * PITCH[word] * t)
        words.append(word)
        spans.append((at, at + length))
        at += length + rng.uniform(0.04, 0.12)
    wave += np.random.default_rng(rng.randrange(2**31)).normal(0, 0.01, len(wave)).astype(np.float32)
    end = min(len(wave), int((spans[-1][1] + 0.25) * RATE))  # the sound ends 0.25 s after its last word
    return np.clip(wave[:end], -1, 1), words, spans


def train(model, processor, steps: int, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    data = [utterance(rng) for _ in range(6000)]
    features = torch.cat(
        [processor.feature_extractor(w, sampling_rate=RATE, return_tensors="pt")["input_features"] for w, _, _ in data]
    )
    labels = [processor.tokenizer(text_target=" ".join(ws)).input_ids for _, ws, _ in data]
    end = processor.tokenizer.eos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=steps, pct_start=0.1)
    model.train()
    losses = []
    for step in range(steps):
        batch = rng.sample(range(len(data)), 32)
        longest = max(len(labels[i]) for i in batch)
        seq = torch.tensor([labels[i] + [end] * (longest - len(labels[i])) for i in batch])
        mask = torch.tensor([[1] * len(labels[i]) + [0] * (longest - len(labels[i])) for i in batch])
        target = seq[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
        out = model(input_features=features[batch], decoder_input_ids=seq[:, :-1])
        loss = torch.nn.functional.cross_entropy(out.logits.transpose(1, 2), target)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss))
        if step % 250 == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {np.mean(losses[-50:]):.3f}", flush=True)
    model.eval()
    return losses


def word_rows(record, words: list[str]) -> list[int] | None:
    """The cross-attention rows that predict each word (None: the tokens are not one per word)."""
    rows = [i for i, t in enumerate(record.tgt_out_tokens) if t.strip(" ␣") in WORDS]
    return rows if [record.tgt_out_tokens[i].strip(" ␣") for i in rows] == words else None


def hits(record, rows, spans, seconds: float) -> np.ndarray:
    """(layers, heads + 1, words): whether each head's (the last: the mean of the layer's heads)
    strongest position for each word lies inside its span, one position of slack."""
    cross = record.get("cross")  # (layers, heads, t, s)
    both = np.concatenate([cross, cross.mean(axis=1, keepdims=True)], axis=1)
    found = both[:, :, rows].argmax(-1)  # (layers, heads + 1, words)
    lo = np.array([int(a / seconds) - 1 for a, _ in spans])
    hi = np.array([int(b / seconds) + 1 for _, b in spans])
    return (found >= lo) & (found <= hi)


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--out", type=Path, default=Path("runs/speech_tones"))
    args.add_argument("--steps", type=int, default=1500)
    a = args.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model, processor = build_speech(a.out, seconds=SECONDS, words=WORDS, hidden=64, bins=32, save=False)
    start = time.perf_counter()
    losses = train(model, processor, a.steps)
    trained = time.perf_counter() - start
    a.out.mkdir(parents=True, exist_ok=True)
    processor.save_pretrained(a.out)
    model.save_pretrained(a.out)
    loaded = attnkit.load(str(a.out))
    rng = random.Random(12345)  # held out: another seed than training's
    exact, scored, chance = 0, [], []
    example = None
    for n in range(200):
        wave, words, spans = utterance(rng)
        own = loaded.prepare_audio(wave, f"held-out {n}", options=attnkit.search.SearchOptions(beam=1))
        exact += own.output.strip() == " ".join(words)
        record = loaded.capture(loaded.prepare_audio(wave, f"held-out {n}", target=" ".join(words)))
        rows = word_rows(record, words)
        if rows is None:
            continue
        seconds = record.frame_seconds
        scored.append(hits(record, rows, spans, seconds))
        heard = int(np.ceil(len(wave) / RATE / seconds))
        chance.append(np.mean([(b - a + 2 * seconds) / (heard * seconds) for a, b in spans]))
        if example is None and len(words) >= 4:
            example = (wave, words, spans, n)
    dev = np.concatenate([s for s in scored[:100]], axis=-1).mean(-1)  # (layers, heads + 1)
    test = np.concatenate([s for s in scored[100:]], axis=-1).mean(-1)
    layer, head = np.unravel_index(np.argmax(dev[:, :-1]), dev[:, :-1].shape)  # the best single head
    drawn_layer, drawn = np.unravel_index(np.argmax(dev), dev.shape)  # the best head or layer mean, drawn
    drawn_head = "mean" if drawn == dev.shape[1] - 1 else str(drawn)
    result = {
        "cpu": cpu_name(),
        "steps": a.steps,
        "train_s": round(trained, 1),
        "final_loss": round(float(np.mean(losses[-50:])), 4),
        "exact_transcripts": exact / 200,
        "best_head": [int(layer), int(head)],
        "best_head_test": round(float(test[layer, head]), 3),
        "layer_means_test": [round(float(v), 3) for v in test[:, -1]],
        "every_head_test": [[round(float(v), 3) for v in row[:-1]] for row in test],
        "drawn": [int(drawn_layer), drawn_head],
        "drawn_test": round(float(test[drawn_layer, drawn]), 3),
        "chance": round(float(np.mean(chance)), 3),
        "utterances_scored": len(scored),
    }
    print(json.dumps(result, indent=1))
    (a.out / "result.json").write_text(json.dumps(result, indent=1))
    assert example is not None
    wave, words, spans, n = example
    (a.out / "example.wav").write_bytes(encode_wav(wave, RATE))
    print("example:", " ".join(words), [f"{s:.2f}-{e:.2f}" for s, e in spans])
    attnkit_cli = [sys.executable, "-m", "attnkit"]
    import subprocess

    subprocess.run(
        [*attnkit_cli, "plot", str(a.out), str(a.out / "example.wav"), "--target", " ".join(words), "--layer",
         str(drawn_layer), "--head", drawn_head, "-o", str(a.out / "speech_alignment.png")],
        check=True,
    )  # fmt: skip


if __name__ == "__main__":
    main()
