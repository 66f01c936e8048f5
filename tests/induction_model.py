"""A model whose heads' roles are known: a tiny Llama (``tiny_hf``'s, 2 layers x 8 heads)
trained on random words with a segment of them repeated, <s> p_1 .. p_m w_1 .. w_n w_1 .. w_n ..,
as Olsson et al. 2022 train theirs (m and n vary, so the previous copy is no fixed distance back;
with one fixed distance the model learns a positional head instead).
The repeat can only be predicted by finding the previous copy of the current word and copying
the word after it, so the model grows a previous-token head in layer 0 and an induction head in
layer 1 that reads it; the first half stays at chance."""

from __future__ import annotations

import random
from pathlib import Path

import torch

import tiny_hf

SEGMENT = 12  # words per half


def words() -> list[str]:
    return sorted(set(tiny_hf.WORDS))


def random_words(rng: random.Random, n: int) -> list[str]:
    """n random words, no word twice in a row."""
    seg: list[str] = []
    vocab = words()
    while len(seg) < n:
        w = rng.choice(vocab)
        if not seg or w != seg[-1]:
            seg.append(w)
    return seg


def repeated(rng: random.Random, n: int = SEGMENT) -> list[str]:
    """n random words, then the same n again."""
    seg = random_words(rng, n)
    return seg + seg


def training_sequence(rng: random.Random) -> list[str]:
    """A few random words, then a random segment of random length repeated to the end: the
    distance back to the previous copy varies, so no head can predict the copy from position."""
    prefix = random_words(rng, rng.randint(0, 6))
    seg = random_words(rng, rng.randint(5, 14))
    return (prefix + seg * LENGTH)[:LENGTH]


LENGTH = 40  # words per training sequence
# room in the residual stream for a word and the word before it (K-composition, Olsson et al.)
WIDTH = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 8, "num_key_value_heads": 8}


PERIOD = 4  # the positional model's word t is a fixed function of word t - PERIOD


def _shift() -> dict[str, str]:
    vocab = words()
    image = random.Random(0).sample(vocab, len(vocab))
    return dict(zip(vocab, image))


def offset_sequence(rng: random.Random, length: int = 60) -> list[str]:
    """PERIOD random words, then each word the image of the one PERIOD back under a fixed
    permutation of the vocabulary: a head that always looks that far back predicts every word
    (a positional head, Voita et al. 2019), and the words do not repeat as a pattern, so copying
    an earlier continuation (induction) does not."""
    shift, seq = _shift(), random_words(rng, PERIOD)
    while len(seq) < length:
        seq.append(shift[seq[-PERIOD]])
    return seq


def train(path: Path, *, steps: int = 800, batch: int = 32, seed: int = 0, sequence=None) -> Path:
    """Build and train the model into ``path`` (a Hugging Face directory) on ``sequence(rng)``
    (default: ``training_sequence``); returns ``path``."""
    import transformers as T

    tiny_hf.build("llama", path)  # its word-level tokenizer; the model wider than tiny_hf's
    tok = T.AutoTokenizer.from_pretrained(path)
    config = T.AutoConfig.from_pretrained(path)
    config.update(WIDTH)
    torch.manual_seed(seed)
    model = T.LlamaForCausalLM(config)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        ids = torch.tensor([tok(" ".join((sequence or training_sequence)(rng)))["input_ids"] for _ in range(batch)])
        logits = model(ids).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(path)
    return path


def half_losses(model, tok, n: int = 64, seed: int = 1) -> tuple[float, float]:
    """Mean next-word loss of ``model`` (a causal LM module) over the first half's and the second
    half's predictions of ``n`` random repeated sequences."""
    rng = random.Random(seed)
    ids = torch.tensor([tok(" ".join(repeated(rng)))["input_ids"] for _ in range(n)])
    with torch.no_grad():
        logits = model(ids).logits[:, :-1]
    loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (n, t-1)
    # position p predicts token p+1; tokens 1..SEGMENT are the first half, SEGMENT+1.. the second
    first, second = loss[:, 1:SEGMENT], loss[:, SEGMENT + 1 :]  # the first word of each half unpredictable
    return float(first.mean()), float(second.mean())
