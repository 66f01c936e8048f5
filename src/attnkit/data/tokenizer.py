"""Subword tokenization with sentencepiece (Kudo & Richardson 2018), BPE or unigram.

A joint model serves both languages (needed to tie source and target
embeddings); otherwise one model per side. Ids: 0 pad, 1 unk, 2 bos, 3 eos.
The model files live in the model directory so the model can be used later.
"""

from __future__ import annotations

import io
from pathlib import Path

import sentencepiece as spm

from ..atomic import atomic_open
from ..config import TOKENIZER_KINDS as KINDS
from ..config import TokenizerConfig
from ..errors import unknown_choice

PAD, UNK, BOS, EOS = 0, 1, 2, 3
WORD_START = "\u2581"  # sentencepiece's word-boundary mark
CONTINUES = "·"  # marks a subword piece that continues the word before it
SPACE = "\u2423"  # how a word-boundary mark standing alone is shown
BOS_LABEL, EOS_LABEL = "<s>", "</s>"  # how the start and end of a sequence are shown
# every special token a figure or page may show, attnkit's and BERT's: "hide special tokens" hides these
SPECIAL_LABELS = (BOS_LABEL, EOS_LABEL, "<pad>", "<unk>", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")


def readable(pieces: list[str]) -> list[str]:
    """Subword pieces as a reader sees them, word boundaries kept: a piece that starts a word loses
    sentencepiece's mark, a piece that continues the word before it starts with '·' ("c ·ott ·on"
    is one word; punctuation is left as it is), a bare mark becomes '␣'."""
    labels = []
    for i, p in enumerate(pieces):
        if p == WORD_START:
            labels.append(SPACE)
        elif (
            p.startswith(WORD_START)
            or i == 0
            or (p.startswith("<") and p.endswith(">"))
            or not any(map(str.isalnum, p))
        ):
            # punctuation attaches to the word before it: no mark needed to see that
            labels.append(p.removeprefix(WORD_START))
        else:
            labels.append(CONTINUES + p)
    return labels


def _train_one(lines: list[str], cfg: TokenizerConfig, prefix: Path) -> spm.SentencePieceProcessor:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type=cfg.kind,
        vocab_size=cfg.vocab_size,
        character_coverage=cfg.character_coverage,
        split_digits=cfg.split_digits,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        hard_vocab_limit=False,  # small corpora get a smaller vocabulary instead of an error
        num_threads=2,
        minloglevel=2,
    )
    path = prefix.parent / f"{prefix.name}.model"
    tmp = prefix.parent / f".{prefix.name}.model.tmp"
    tmp.write_bytes(model.getvalue())
    tmp.replace(path)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


class Tokenizer:
    """Source and target subword models (the same object when joint)."""

    def __init__(self, src: spm.SentencePieceProcessor, tgt: spm.SentencePieceProcessor, *, joint: bool) -> None:
        self.src, self.tgt, self.joint = src, tgt, joint

    @property
    def src_vocab(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        return self.src.encode(lines)

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return self.tgt.encode(lines)

    def sample(
        self, src_lines: list[str], tgt_lines: list[str], alpha: float
    ) -> tuple[list[list[int]], list[list[int]]]:
        """Both sides segmented by sampling instead of the one best way: BPE-dropout (Provilkov et
        al. 2020) for a BPE model, where ``alpha`` is the chance each merge is skipped; subword
        regularization (Kudo 2018) for a unigram one, ``alpha`` its smoothing. Every call draws
        anew (sentencepiece's sampler cannot be seeded to repeat across processes)."""
        sampled = lambda model, lines: model.encode(lines, enable_sampling=True, alpha=alpha, nbest_size=-1)
        return sampled(self.src, src_lines), sampled(self.tgt, tgt_lines)

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        return self.tgt.decode(ids)

    def src_pieces(self, line: str) -> list[str]:
        return self.src.encode(line, out_type=str)

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.tgt.id_to_piece(i) for i in ids]

    @classmethod
    def train(cls, cfg: TokenizerConfig, src_lines: list[str], tgt_lines: list[str], out_dir: str | Path) -> Tokenizer:
        if cfg.kind not in KINDS:
            raise unknown_choice("tokenizer.kind", cfg.kind, KINDS)
        if cfg.vocab_size < 8:
            raise ValueError(f"tokenizer.vocab_size must be at least 8, got {cfg.vocab_size}")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if cfg.joint:
            model = _train_one(src_lines + tgt_lines, cfg, out / "spm.joint")
            return cls(model, model, joint=True)
        return cls(
            _train_one(src_lines, cfg, out / "spm.src"), _train_one(tgt_lines, cfg, out / "spm.tgt"), joint=False
        )

    def same_as(self, other: Tokenizer) -> bool:
        """Whether ``other`` splits and numbers text exactly as this one does (same subword models)."""
        return self.joint == other.joint and all(
            a.serialized_model_proto() == b.serialized_model_proto()
            for a, b in ((self.src, other.src), (self.tgt, other.tgt))
        )

    def save(self, model_dir: str | Path) -> None:
        """The subword models into ``model_dir``, under the names ``load`` reads."""
        d = Path(model_dir)
        files = {"joint": self.src} if self.joint else {"src": self.src, "tgt": self.tgt}
        for side, model in files.items():
            with atomic_open(d / f"spm.{side}.model", "wb") as f:
                f.write(model.serialized_model_proto())

    @classmethod
    def load(cls, model_dir: str | Path) -> Tokenizer:
        d = Path(model_dir)
        if (d / "spm.joint.model").is_file():
            model = spm.SentencePieceProcessor(model_file=str(d / "spm.joint.model"))
            return cls(model, model, joint=True)
        src, tgt = d / "spm.src.model", d / "spm.tgt.model"
        if not (src.is_file() and tgt.is_file()):
            raise FileNotFoundError(f"no tokenizer in {d} (expected spm.joint.model or spm.src.model + spm.tgt.model)")
        return cls(
            spm.SentencePieceProcessor(model_file=str(src)),
            spm.SentencePieceProcessor(model_file=str(tgt)),
            joint=False,
        )
