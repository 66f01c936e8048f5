"""Models attnkit runs itself: its translators (Transformer or RNN), encoders, BERT checkpoints
read into its own encoder, and captioners."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ..config import Config
from ..data.images import decode_image, greyscale, read_image
from ..data.scenes import max_caption_words
from ..data.tokenizer import Tokenizer
from ..data.vocabulary import WordVocabulary
from ..inspection.capture import (
    AttentionRecord,
    Prepared,
    capture_ids,
    capture_prepared,
    check_sentences,
    model_info,
    patch_labels,
    prepare,
    prepare_pretrained,
)
from ..inspection.explain import Walkthrough, explain
from ..inspection.multihead import LayerWalk, explain_layer
from ..models.interface import EncoderModel, ImageCaptioner, Seq2SeqModel
from ..search import SearchOptions

if TYPE_CHECKING:
    from ..attribution.gradients import Scorer
    from ..pretrained import PretrainedEncoder

from ..attention.sites import Site
from ..data.tokenizer import readable
from .base import LoadedModel, _check_length, _no_output_side, one_token
from .capabilities import GRADIENT_NAMES, MAP_METHODS, Capabilities, kinds_in


class OwnEngine(LoadedModel):
    """A model attnkit runs itself (``module``): its sites are the module's, its forward pass the
    module's own."""

    def sites(self) -> list[Site]:
        return cast(Any, self.module).sites()

    def _source(self, prepared: Prepared) -> torch.Tensor:
        """The forward's source batch (1, s): the ids (a captioner: the image's pixels)."""
        return torch.tensor([prepared.src_ids], device=self._device())

    def _device(self) -> torch.device:
        return next(cast(torch.nn.Module, self.module).parameters()).device

    def _forward_pass(self, prepared: Prepared) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        model = cast(Any, self.module)
        model.eval()
        src = self._source(prepared)
        mask = torch.ones(src.shape, dtype=torch.bool, device=src.device)
        if prepared.tgt_in_ids is None:  # an encoder: its last layer
            return None, model.encode(src, mask).memory
        return model(src, mask, torch.tensor([prepared.tgt_in_ids], device=src.device)).logits, None


class AttnkitModel(OwnEngine):
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
        return kinds_in({s.kind for s in self.model.attention_sites()})

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
            raise ValueError(f"`max_new_tokens` is for decoder-only models; {self.name} is {self.capabilities.a}")
        if targets is not None and not self.capabilities.forced:
            raise ValueError("an encoder has no target side: leave `target` out")
        return prepare(self.model, self.tok, sentences, targets=targets, options=options, max_src_len=self.max_tokens)

    def capture(self, prepared: Prepared) -> AttentionRecord:
        return capture_prepared(self.model, prepared, window=self.window)

    def walkthrough(self, prepared, *, kind, layer, head, query) -> Walkthrough:
        return explain(self.model, prepared, kind=kind, layer=layer, head=head, query=query)

    def layer_walkthrough(self, prepared, *, kind, layer) -> LayerWalk:
        return explain_layer(self.model, prepared, kind=kind, layer=layer)


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
            verbs=self.verbs,
            attributions=(*maps, *GRADIENT_NAMES),
            positions=bool(self.model.position_schemes()),
            circuits=self._reads_its_stream(),
        )

    @property
    def window(self) -> int | None:
        return self.cfg.model.local_window

    def target_count(self, text: str) -> int:
        return len(self.tok.encode_tgt([text])[0]) + 1

    def scorer(self, prepared: Prepared) -> Scorer:
        from ..attribution.scorers import seq2seq_scorer

        return seq2seq_scorer(self.model, prepared)

    def answer_token(self, text: str) -> int:
        """The one target token ``text`` is (an answer a causal analysis reads the logit of)."""
        ids = self.tok.encode_tgt([text])[0]
        return one_token(self, text, ids, self.tok.tgt_pieces(ids))

    def output_tokens(self, ids: list[int]) -> list[str]:
        """Target token ids as readable tokens."""
        return readable(self.tok.tgt_pieces(ids))

    def translate(self, text: str | list[str], *, beam: int = 5) -> str | list[str]:
        from ..inference.translate import translate

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
        from ..attribution.scorers import encoder_scorer

        return encoder_scorer(self.model, prepared)


class BertEncoder(OwnEngine):
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
            verbs=self.verbs,
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

    def layer_walkthrough(self, prepared, *, kind, layer) -> LayerWalk:
        return explain_layer(self.pretrained.model, prepared, kind=kind, layer=layer)

    def scorer(self, prepared: Prepared) -> Scorer:
        from ..attribution.scorers import encoder_scorer

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


class Captioner(OwnEngine):
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
            kinds_in({s.kind for s in self.model.attention_sites()}),
            verbs=self.verbs,
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
            raise ValueError("`max_new_tokens` is for decoder-only models; a captioner writes until </s>")
        if targets is not None and len(targets) != len(sentences):
            raise ValueError(f"{len(sentences)} images but {len(targets)} captions")
        size = self.cfg.data.scenes.image_size
        images = [read_image(Path(s), size) for s in sentences]  # every file checked before any runs
        return [
            self.prepare_image(im, str(s), target=None if targets is None else targets[i], options=options)
            for i, (im, s) in enumerate(zip(images, sentences))
        ]

    def prepare_image(self, image, name, *, target=None, options=None, max_new_tokens=None) -> Prepared:
        from ..data.tokenizer import BOS, EOS
        from ..inference.caption import caption_images

        if max_new_tokens is not None:
            raise ValueError("`max_new_tokens` is for decoder-only models; a captioner writes until </s>")
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
            patch_labels(rows, columns),
            tgt_in_ids=[BOS] + ids,
            tgt_out_ids=ids + [EOS],
            tgt_in_tokens=["<s>"] + words,
            tgt_out_tokens=words + ["</s>"],
            output=output,
            score=score,
            image=image if image.ndim == 3 else np.repeat(image[..., None], 3, axis=-1),
            grid=(rows, columns),
        )

    def _source(self, prepared: Prepared) -> torch.Tensor:
        return self._pixels(prepared)[None]

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

    def layer_walkthrough(self, prepared, *, kind, layer) -> LayerWalk:
        return explain_layer(self.model, prepared, kind=kind, layer=layer, source=self._pixels(prepared)[None])

    def scorer(self, prepared: Prepared) -> Scorer:
        from ..attribution.scorers import seq2seq_scorer

        return seq2seq_scorer(self.model, prepared, source=self._pixels(prepared)[None])

    def caption(self, image: str | Path | np.ndarray, *, beam: int = 1) -> str:
        if isinstance(image, (str, Path)):
            return self.prepare([str(image)], options=SearchOptions(beam=beam))[0].output
        return self.prepare_image(np.asarray(image, dtype=np.float32), "image", options=SearchOptions(beam=beam)).output
