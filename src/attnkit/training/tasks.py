"""What the trainer trains on: the task (``data.task``) supplies the data, the vocabulary,
the batches, the model and how dev outputs are scored; the training loop is the same.

    translation  parallel text (files or Multi30k) -> sentencepiece -> length-bucketed batches;
                 dev BLEU
    caption      digit scenes (``data.scenes``) -> word vocabulary -> image batches;
                 dev BLEU and caption exact match
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..config import Config
from ..data import (
    Batch,
    BucketBatcher,
    ImageBatcher,
    ParallelText,
    Tokenizer,
    collate,
    collate_images,
    inference_batches,
    multi30k,
    read_parallel,
)
from ..data.scenes import max_caption_words
from ..data.tokenizer import PAD
from ..data.vocabulary import WordVocabulary
from ..evaluation import bleu
from ..models import RNNSeq2Seq, TransformerSeq2Seq, build_model
from ..models.factory import build_captioner
from ..models.image import RNNCaptioner, TransformerCaptioner
from ..search import SearchOptions


def load_corpora(cfg: Config) -> tuple[ParallelText, ParallelText]:
    """Training and dev pairs: explicit files if data.train_src is set, else Multi30k."""
    d = cfg.data
    if d.train_src or d.train_tgt:
        missing = [k for k in ("train_src", "train_tgt", "dev_src", "dev_tgt") if not getattr(d, k)]
        if missing:
            raise ValueError(f"data.{missing[0]} is not set (file corpora need train_src, train_tgt, dev_src, dev_tgt)")
        assert d.train_src and d.train_tgt and d.dev_src and d.dev_tgt  # checked above
        train = read_parallel(d.train_src, d.train_tgt)
        dev = read_parallel(d.dev_src, d.dev_tgt)
    else:
        loc = lambda split, lang: multi30k.locate(split, lang, root=d.multi30k, variant=d.multi30k_variant)
        train = read_parallel(loc("train", d.src_lang), loc("train", d.tgt_lang))
        dev = read_parallel(loc("val", d.src_lang), loc("val", d.tgt_lang))
    if d.max_dev_sentences > 0:
        dev = ParallelText(dev.src[: d.max_dev_sentences], dev.tgt[: d.max_dev_sentences], dev.skipped_empty)
    return train, dev


class TranslationTask:
    """Text to text."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.train_text, self.dev = load_corpora(cfg)
        self.search_options = SearchOptions(beam=1)

    def make_vocabulary(self, out_dir: Path) -> None:
        self.tok = Tokenizer.train(self.cfg.tokenizer, self.train_text.src, self.train_text.tgt, out_dir)

    def load_vocabulary(self, out_dir: Path) -> None:
        self.tok = Tokenizer.load(out_dir, right_to_left=self.cfg.tokenizer.right_to_left)

    def batcher(self) -> tuple[BucketBatcher, str]:
        """The training batches, and a line saying what the data is."""
        cfg, tok, train = self.cfg, self.tok, self.train_text
        src, tgt = tok.encode_src(train.src), tok.encode_tgt(train.tgt)
        keep = [
            i for i in range(len(src)) if 0 < len(src[i]) <= cfg.data.max_len and 0 < len(tgt[i]) <= cfg.data.max_len
        ]
        if not keep:
            raise ValueError(f"every training pair is longer than data.max_len={cfg.data.max_len} subwords")
        self.dev_src, self.dev_tgt = tok.encode_src(self.dev.src), tok.encode_tgt(self.dev.tgt)
        line = (
            f"data: {len(keep)} training pairs ({len(src) - len(keep)} longer than {cfg.data.max_len} subwords "
            f"dropped, {train.skipped_empty} with an empty side skipped), {len(self.dev)} dev pairs; "
            f"vocabulary {tok.src_vocab}{' joint' if tok.joint else f'/{tok.tgt_vocab}'}"
        )
        alpha = cfg.tokenizer.sampling
        resample = None
        if alpha > 0:
            kept_src, kept_tgt = [train.src[i] for i in keep], [train.tgt[i] for i in keep]

            def resample(epoch: int) -> tuple[list[list[int]], list[list[int]]]:
                return tok.sample(kept_src, kept_tgt, alpha)

            line += f"; subwords sampled afresh each epoch (alpha {alpha:g})"
        batcher = BucketBatcher(
            [src[i] for i in keep],
            [tgt[i] for i in keep],
            batch_tokens=cfg.train.batch_tokens,
            seed=cfg.train.seed,
            resample=resample,
            max_len=cfg.data.max_len,
        )
        return batcher, line

    def build_model(self) -> TransformerSeq2Seq | RNNSeq2Seq:
        model = build_model(
            self.cfg.model,
            src_vocab=self.tok.src_vocab,
            tgt_vocab=self.tok.tgt_vocab,
            pad_id=PAD,
            shared_vocab=self.tok.joint,
        )
        return cast(TransformerSeq2Seq | RNNSeq2Seq, model)  # check_config(training=True): no encoder alone

    def dev_batches(self) -> Iterator[Batch]:
        for idx in inference_batches(self.dev_src, self.cfg.train.batch_tokens):
            yield collate([self.dev_src[i] for i in idx], [self.dev_tgt[i] for i in idx], idx)

    @property
    def dev_size(self) -> int:
        return len(self.dev_src)

    def score(self, hyps: list[list[int]]) -> dict[str, Any]:
        score = bleu(self.tok.decode_tgt(hyps), self.dev.tgt, tokenize=self.cfg.train.bleu_tokenize)
        return {"dev_bleu": score.score, "bleu_signature": score.signature}


class CaptionTask:
    """Image to text: scenes of real digit scans; dev scenes use scans no training scene has."""

    def __init__(self, cfg: Config) -> None:
        from ..data.scenes import make_scenes

        self.cfg, d = cfg, cfg.data.scenes
        kwargs: dict[str, Any] = dict(size=d.image_size, count=d.digits, noise=d.noise)
        train = make_scenes(d.train, seed=cfg.train.seed, **kwargs)
        self.dev = make_scenes(d.dev, held_out=True, seed=cfg.train.seed, **kwargs)
        self.train_images = np.stack([s.image for s in train])
        self.train_captions = [" ".join(s.words) for s in train]
        self.dev_images = np.stack([s.image for s in self.dev])
        self.dev_captions = [" ".join(s.words) for s in self.dev]
        self.search_options = SearchOptions(beam=1, max_len_ratio=0.0, max_len_extra=max_caption_words(d.digits))

    def make_vocabulary(self, out_dir: Path) -> None:
        self.tok = WordVocabulary.from_captions(self.train_captions)
        self.tok.save(out_dir)

    def load_vocabulary(self, out_dir: Path) -> None:
        self.tok = WordVocabulary.load(out_dir)

    def batcher(self) -> tuple[ImageBatcher, str]:
        d = self.cfg.data.scenes
        self.dev_tgt = self.tok.encode_tgt(self.dev_captions)
        line = (
            f"data: {len(self.train_captions)} training scenes, {len(self.dev_captions)} dev scenes from held-out "
            f"scans ({d.image_size} x {d.image_size} pixels, {d.digits[0]}-{d.digits[1]} digits); "
            f"vocabulary {self.tok.tgt_vocab} words"
        )
        batcher = ImageBatcher(
            self.train_images,
            self.tok.encode_tgt(self.train_captions),
            batch_tokens=self.cfg.train.batch_tokens,
            seed=self.cfg.train.seed,
        )
        return batcher, line

    def build_model(self) -> RNNCaptioner | TransformerCaptioner:
        return build_captioner(
            self.cfg.model, vocab=self.tok.tgt_vocab, pad_id=PAD, image_size=self.cfg.data.scenes.image_size
        )

    def dev_batches(self) -> Iterator[Batch]:
        per_batch = max(1, self.cfg.train.batch_tokens // (self.cfg.data.scenes.digits[1] + 1))
        for start in range(0, len(self.dev_tgt), per_batch):
            idx = np.arange(start, min(start + per_batch, len(self.dev_tgt)))
            yield collate_images(self.dev_images[idx], [self.dev_tgt[i] for i in idx], idx)

    @property
    def dev_size(self) -> int:
        return len(self.dev_tgt)

    def score(self, hyps: list[list[int]]) -> dict[str, Any]:
        out = self.tok.decode_tgt(hyps)
        score = bleu(out, self.dev_captions, tokenize="none")
        exact = float(np.mean([h == r for h, r in zip(out, self.dev_captions)])) * 100
        return {"dev_bleu": score.score, "dev_exact": exact, "bleu_signature": score.signature}


TASKS: dict[str, Callable[[Config], TranslationTask | CaptionTask]] = {
    "translation": TranslationTask,
    "caption": CaptionTask,
}


def make_task(cfg: Config) -> TranslationTask | CaptionTask:
    """The task ``cfg.data.task`` names, its data read (or made)."""
    return TASKS[cfg.data.task](cfg)
