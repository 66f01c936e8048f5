"""Contextual word vectors: a static embedding gives a word one vector
wherever it appears; after self-attention every occurrence carries its context.
And without position information, self-attention cannot tell repeated words
apart: the same token gets the same output wherever it stands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data.tokenizer import SPECIAL_LABELS
from ..pretrained.bert import PretrainedEncoder
from ..pretrained.hf import HFModel


@dataclass
class TokenVectors:
    """Vectors of every (non-special) token of several sentences, at every depth.

    labels[i] = (sentence index, position, token); static (N, d) token-table rows;
    layers (L + 1, N, d): the embedding layer output, then each encoder layer's."""

    labels: list[tuple[int, int, str]]
    static: np.ndarray
    layers: np.ndarray

    def find(self, word: str) -> list[int]:
        """Indices of the tokens spelled ``word`` (case-insensitive; WordPiece '##' ignored)."""
        w = word.lower()
        return [i for i, (_, _, t) in enumerate(self.labels) if t.lower().removeprefix("##") == w]

    def repeated(self) -> list[tuple[int, int]]:
        """Pairs of indices whose tokens are spelled the same."""
        out = []
        for i in range(len(self.labels)):
            for j in range(i + 1, len(self.labels)):
                if self.labels[i][2] == self.labels[j][2]:
                    out.append((i, j))
        return out


def sentence_name(index: int) -> str:
    """Sentences are named A, B, C, ... (a token is "apple A4": sentence A, position 4, [CLS] = 0)."""
    return chr(ord("A") + index) if index < 26 else f"S{index}"


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of a (..., d) and b (..., d)."""
    num = (a * b).sum(-1)
    return num / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    n = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return n @ n.T


@torch.no_grad()
def token_vectors(
    encoder: PretrainedEncoder | HFModel, sentences: list[str], *, positions: bool = True
) -> TokenVectors:
    """Run ``encoder`` on ``sentences`` (with or without its position embeddings: attnkit's own
    encoder can leave them out; a model run by transformers cannot)."""
    if isinstance(encoder, HFModel):
        if not positions:
            raise ValueError("a model run by transformers cannot leave its position embeddings out")
        found: list[tuple[int, int, str]] = []
        rows_static: list[torch.Tensor] = []
        rows_layers: list[torch.Tensor] = []
        for b, text in enumerate(sentences):
            tokens, special, table, hidden = encoder.token_states(text)
            keep = [p for p, is_special in enumerate(special) if not is_special]
            found += [(b, p, tokens[p]) for p in keep]
            rows_static.append(table[keep])
            rows_layers.append(hidden[:, keep])
        return TokenVectors(found, torch.cat(rows_static).numpy(), torch.cat(rows_layers, 1).numpy())
    batch = encoder.encode(sentences)
    states = encoder.hidden_states(batch, use_positions=positions)
    labels, rows = [], []
    for b, toks in enumerate(batch.tokens):
        for p, t in enumerate(toks):
            if t not in SPECIAL_LABELS:
                labels.append((b, p, t))
                rows.append((b, p))
    idx_b = torch.tensor([r[0] for r in rows])
    idx_p = torch.tensor([r[1] for r in rows])
    layers = torch.stack([s[idx_b, idx_p] for s in states]).float().cpu().numpy()
    static = encoder.model.token_vectors(batch.ids[idx_b, idx_p]).float().cpu().numpy()
    return TokenVectors(labels, static, layers)


def pair_report(v: TokenVectors, pairs: list[tuple[int, int]]) -> str:
    """Cosine similarity of each pair: static vectors, then after each layer."""
    depth = v.layers.shape[0]
    head = f"{'pair':<40} {'static':>7} " + " ".join(f"{('emb' if k == 0 else f'L{k - 1}'):>6}" for k in range(depth))
    lines = [head]
    for i, j in pairs:
        (si, pi, ti), (sj, pj, tj) = v.labels[i], v.labels[j]
        name = f"{ti!r} {sentence_name(si)}{pi} ~ {tj!r} {sentence_name(sj)}{pj}"
        sims = cosine(v.layers[:, i], v.layers[:, j])
        lines.append(
            f"{name:<40} {float(cosine(v.static[i], v.static[j])):7.3f} " + " ".join(f"{s:6.3f}" for s in sims)
        )
    return "\n".join(lines)


def cosine_map(x: np.ndarray, keep: Sequence[int] = (), *, weight: float = 100.0, steps: int = 1000) -> np.ndarray:
    """(N, d) -> (N, 2): places whose distances approximate the cosine distances 1 − cos of the rows
    of ``x`` (metric multidimensional scaling by SMACOF, started from classical scaling); the pairs
    among ``keep`` count ``weight`` times, so that their distances are kept close to exact. Turned
    so that the places spread most across."""
    d = np.clip(1.0 - cosine_matrix(x.astype(np.float64)), 0.0, 2.0)
    d = (d + d.T) / 2
    np.fill_diagonal(d, 0.0)
    n = len(d)
    w = np.ones((n, n))
    kept = np.asarray(keep, dtype=int)
    w[np.ix_(kept, kept)] = weight
    np.fill_diagonal(w, 0.0)
    v = np.diag(w.sum(1)) - w
    v_inv = np.linalg.pinv(v)
    centred = np.eye(n) - 1.0 / n  # classical scaling: the two main axes of the double-centred squares
    values, vectors = np.linalg.eigh(-0.5 * centred @ d**2 @ centred)
    places = vectors[:, -2:][:, ::-1] * np.sqrt(np.maximum(values[-2:][::-1], 0.0))
    stress = np.inf
    apart = np.linalg.norm(places[:, None] - places[None], axis=-1)
    for _ in range(steps):  # the Guttman transform: each step lowers the weighted stress
        ratio = np.divide(w * d, apart, out=np.zeros_like(d), where=apart > 0)
        b = np.diag(ratio.sum(1)) - ratio
        places = v_inv @ b @ places
        apart = np.linalg.norm(places[:, None] - places[None], axis=-1)
        before, stress = stress, float((w * (apart - d) ** 2).sum() / 2)
        if before - stress <= 1e-10 * max(stress, 1e-12):
            break
    places -= places.mean(0)
    _, _, axes = np.linalg.svd(places, full_matrices=False)
    return places @ axes.T


def depth_names(depth: int) -> list[str]:
    """Names of the ``depth`` stacked vectors of ``TokenVectors.layers``: the embeddings, then after
    each layer, counted from 0 as everywhere in attnkit, the last one named so."""
    names = ["embeddings (+ positions)"] + [f"after layer {k}" for k in range(depth - 1)]
    if depth > 1:
        names[-1] += " (the last)"
    return names


def _quoted(token: str) -> str:
    """A token as a figure names it: punctuation alone in quotes, so that ". A11" reads as a token."""
    return token if any(c.isalnum() for c in token) else f"“{token}”"


def contextual_figure(v: TokenVectors, words: list[str], *, texts: Sequence[str] = (), title: str = ""):
    """The figure of ``plots.plot_contextual`` for ``v``: similarities of the static vectors and
    of the last layer's; one map of the cosine distances per depth; the occurrences of ``words`` marked; the
    sentences written out from ``texts`` (what was given, in order)."""
    from ..plots.inspection import plot_contextual

    depth = v.layers.shape[0]
    panels = [("static (token table)", v.static)] + list(zip(depth_names(depth), v.layers))
    # the most repeated word's occurrences (up to 3): their cosines under each map's name, their distances kept
    word = max(words, key=lambda w: len(v.find(w)), default="")
    found = v.find(word)[:3] if word else []
    pairs = [(i, j) for a, i in enumerate(found) for j in found[a + 1 :]]
    short = {i: f"{sentence_name(v.labels[i][0])}{v.labels[i][1]}" for i in found}

    def named(name: str, x: np.ndarray) -> str:
        if not pairs:
            return name
        return name + "\n" + "  ".join(f"{short[i]}–{short[j]} {float(cosine(x[i], x[j])):.2f}" for i, j in pairs)

    return plot_contextual(
        [f"{_quoted(t)} {sentence_name(s)}{p}" for s, p, t in v.labels],
        [(name, cosine_matrix(x)) for name, x in (panels[0], panels[-1])],
        [(named(name, x), cosine_map(x, found)) for name, x in panels],
        {i: v.labels[i][0] for w in words for i in v.find(w)},
        sentences=[sentence_name(s) for s in sorted({s for s, _, _ in v.labels})],
        texts=texts,
        words=words,
        paired=word if pairs else "",
        title=title,
    )


def embed_report(
    encoder: PretrainedEncoder | HFModel, sentences: list[str], words: list[str] | None = None
) -> tuple[str, TokenVectors, list[str]]:
    """The text `attnkit embed` prints: the tokens of each sentence, then the cosine similarity of
    each repeated word (or each of ``words``) in its two places, at every depth; with and without
    position embeddings for a word repeated within one sentence. Returns (text, vectors, words compared)."""
    v = token_vectors(encoder, sentences)
    info = encoder.info(encoder.path.name) if isinstance(encoder, HFModel) else encoder.info
    lines = [
        f"{info['name']}: {info['layers']} layers, d_model {info['d_model']}; "
        f"{len(v.labels)} tokens in {len(sentences)} sentence(s)"
    ]
    lines += [f"  {sentence_name(i)}: {' '.join(t for b, _, t in v.labels if b == i)}" for i in range(len(sentences))]
    if words:
        absent = [w for w in words if not v.find(w)]
        if absent:
            tokens = sorted({t for _, _, t in v.labels})
            raise ValueError(f"word {absent[0]!r} is not among the sentences' tokens: {', '.join(tokens)}")
        pairs = [(i, j) for w in words for k, i in enumerate(v.find(w)) for j in v.find(w)[k + 1 :]]
    else:
        pairs = v.repeated()
    if not pairs:
        lines.append("\nno word occurs twice: nothing to compare (use --word, or repeat a word)")
    else:
        lines += [
            "\ncosine similarity of the same word in two places: static token vectors are identical (1.000);",
            "after self-attention each occurrence carries its own context",
            "(a token is named by its sentence and position, [CLS] = 0; emb: the embeddings with positions,",
            "Lk: after encoder layer k, from 0):\n",
            pair_report(v, pairs),
        ]
        same = [(i, j) for i, j in pairs if v.labels[i][0] == v.labels[j][0]]
        if same and isinstance(encoder, HFModel):
            lines.append("\n(without position embeddings: shown for encoders read into attnkit's own, BERT)")
        elif same:
            nopos = token_vectors(encoder, sentences, positions=False)
            lines += [
                "\nwithout position embeddings, the same word twice in one sentence is indistinguishable:\n",
                pair_report(nopos, same),
            ]
    shown = list(words) if words else sorted({v.labels[i][2] for p in pairs for i in p})[:4]
    return "\n".join(lines), v, shown
