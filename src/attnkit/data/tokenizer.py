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
CONTINUES = "##"  # marks a subword piece that continues the word before it (as BERT writes it)
SPACE = "\u2423"  # a word-boundary mark standing alone, shown as the visible space ␣ (drawn upright, in grey)
BOS_LABEL, EOS_LABEL = "<s>", "</s>"  # how the start and end of a sequence are shown
# every special token a figure or page may show, attnkit's and BERT's: "hide special tokens" hides these
SPECIAL_LABELS = (BOS_LABEL, EOS_LABEL, "<pad>", "<unk>", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")


def readable(pieces: list[str]) -> list[str]:
    """Subword pieces as a reader sees them, word boundaries kept: a piece that starts a word loses
    sentencepiece's mark, a piece that continues the word before it starts with '##' ("c ##ott
    ##on" is one word; before a digit it reads as no decimal point; punctuation is left as it
    is), a bare mark is shown as '␣'."""
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
    """Source and target subword models (the same object when joint). With ``right_to_left`` the
    target ids run from the last piece to the first (a right-to-left model, Sennrich et al. 2016's
    reranker): ``encode_tgt`` reverses them and ``decode_tgt`` turns them back, so text in and
    text out read as usual; ``tgt_pieces`` keeps the model's order."""

    def __init__(
        self,
        src: spm.SentencePieceProcessor,
        tgt: spm.SentencePieceProcessor,
        *,
        joint: bool,
        right_to_left: bool = False,
    ) -> None:
        self.src, self.tgt, self.joint, self.right_to_left = src, tgt, joint, right_to_left

    def _order(self, ids: list[list[int]]) -> list[list[int]]:
        return [row[::-1] for row in ids] if self.right_to_left else ids

    @property
    def src_vocab(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        return self.src.encode(lines)

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return self._order(self.tgt.encode(lines))

    def sample(
        self, src_lines: list[str], tgt_lines: list[str], alpha: float
    ) -> tuple[list[list[int]], list[list[int]]]:
        """Both sides segmented by sampling instead of the one best way: BPE-dropout (Provilkov et
        al. 2020) for a BPE model, where ``alpha`` is the chance each merge is skipped; subword
        regularization (Kudo 2018) for a unigram one, ``alpha`` its smoothing. Every call draws
        anew (sentencepiece's sampler cannot be seeded to repeat across processes)."""
        sampled = lambda model, lines: model.encode(lines, enable_sampling=True, alpha=alpha, nbest_size=-1)
        return sampled(self.src, src_lines), self._order(sampled(self.tgt, tgt_lines))

    def decode_tgt(self, ids: list[list[int]]) -> list[str]:
        return self.tgt.decode(self._order([list(row) for row in ids]))

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
            return cls(model, model, joint=True, right_to_left=cfg.right_to_left)
        src, tgt = _train_one(src_lines, cfg, out / "spm.src"), _train_one(tgt_lines, cfg, out / "spm.tgt")
        return cls(src, tgt, joint=False, right_to_left=cfg.right_to_left)

    def same_as(self, other: Tokenizer) -> bool:
        """Whether ``other`` splits and numbers text exactly as this one does (same subword models,
        same target order)."""
        return (
            self.joint == other.joint
            and self.right_to_left == other.right_to_left
            and all(
                a.serialized_model_proto() == b.serialized_model_proto()
                for a, b in ((self.src, other.src), (self.tgt, other.tgt))
            )
        )

    def save(self, model_dir: str | Path) -> None:
        """The subword models into ``model_dir``, under the names ``load`` reads."""
        d = Path(model_dir)
        files = {"joint": self.src} if self.joint else {"src": self.src, "tgt": self.tgt}
        for side, model in files.items():
            with atomic_open(d / f"spm.{side}.model", "wb") as f:
                f.write(model.serialized_model_proto())

    @classmethod
    def load(cls, model_dir: str | Path, *, right_to_left: bool = False) -> Tokenizer:
        """The subword models in ``model_dir``; ``right_to_left`` is the model's
        ``tokenizer.right_to_left`` (its config, not its files, says it)."""
        d = Path(model_dir)
        if (d / "spm.joint.model").is_file():
            model = spm.SentencePieceProcessor(model_file=str(d / "spm.joint.model"))
            return cls(model, model, joint=True, right_to_left=right_to_left)
        src, tgt = d / "spm.src.model", d / "spm.tgt.model"
        if not (src.is_file() and tgt.is_file()):
            raise FileNotFoundError(f"no tokenizer in {d} (expected spm.joint.model or spm.src.model + spm.tgt.model)")
        return cls(
            spm.SentencePieceProcessor(model_file=str(src)),
            spm.SentencePieceProcessor(model_file=str(tgt)),
            joint=False,
            right_to_left=right_to_left,
        )
