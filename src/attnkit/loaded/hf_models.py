"""Models run by transformers (``attnkit.pretrained.hf``): one class per family."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..attention.record import AttentionCall
from ..inspection.capture import (
    AttentionRecord,
    Prepared,
    check_sentences,
    patch_labels,
)
from ..inspection.explain import Walkthrough, explain_recorded
from ..inspection.maps import Maps
from ..memory import check_fits
from ..search import SearchOptions

if TYPE_CHECKING:
    from ..attribution.gradients import Scorer
    from ..pretrained.hf import HFModel

from ..attention.sites import Site
from .base import LoadedModel, _check_length, _no_output_side, one_token
from .capabilities import COMPACT_FROM, DEFAULT_NEW_TOKENS, GRADIENT_NAMES, MAP_METHODS, Capabilities


class TransformersModel(LoadedModel):
    """A Hugging Face model run by transformers (``attnkit.pretrained.hf``): one subclass per
    family (``TRANSFORMERS_TYPES``)."""

    READS: str = "text"
    WRITES: str | None = None
    ATTRIBUTIONS: tuple[str, ...] = (*MAP_METHODS, "value-norm", *GRADIENT_NAMES)
    CONTEXTUAL = False
    IMAGES = False  # an image may go beside its text

    def __init__(self, name: str, hf: HFModel) -> None:
        self.name, self.hf = name, hf
        self.info = hf.info(name)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            self.READS,
            self.WRITES,
            tuple(self.hf.layers_and_heads()),
            verbs=self.verbs,
            attributions=self.ATTRIBUTIONS,
            contextual=self.CONTEXTUAL,
            circuits=self.WRITES is not None and self.READS == "text" and self._reads_its_stream(),
            images=self.IMAGES and self.hf.processor is not None,
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
        longest = max(len(p.src_ids), len(p.src_tokens), len(p.tgt_in_ids or []))
        dtype = torch.float16 if longest > COMPACT_FROM else torch.float32  # a long input's record at half the memory
        check_fits(
            self.hf.forward_bytes(longest, values=vectors, itemsize=2 if dtype == torch.float16 else 4),
            f"recording {self.name}'s attention over {longest:,} tokens",
            "give a shorter input",
        )
        inputs = self._inputs(p)
        if "audio" in inputs:  # a speech model: its encoder hears the feature frames
            return self.hf.forward(None, inputs["tgt"], audio=inputs["audio"], vectors=vectors, dtype=dtype)
        if "pixels" in inputs:  # an image alone, or (a vision-language model) with its text
            return self.hf.forward(inputs.get("src"), pixels=inputs["pixels"], vectors=vectors)
        return self.hf.forward(inputs["src"], inputs.get("tgt"), vectors=vectors, dtype=dtype)

    def sites(self) -> list[Site]:
        return list(self.hf.sites)

    def _forward_pass(self, prepared: Prepared) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        inputs = self._inputs(prepared)
        out = self.hf.outputs(
            inputs.get("src"), inputs.get("tgt"), pixels=inputs.get("pixels"), audio=inputs.get("audio")
        )
        logits = getattr(out, "logits", None)
        return (logits, None) if logits is not None else (None, out.last_hidden_state)

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
            image_tokens=prepared.image_tokens,
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
        from ..attribution.value_norm import call_value_norms

        calls = self._calls(prepared, kind)
        return np.stack([call_value_norms(c, self.hf.output_projection(c.module)[0]).numpy() for c in calls])


class TransformersEncoder(TransformersModel):
    """A text encoder run by transformers (BERT, RoBERTa, DistilBERT, ...)."""

    CONTEXTUAL = True

    def scorer(self, prepared: Prepared) -> Scorer:
        from ..attribution.scorers import transformers_encoder_scorer

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

    def _check_output_side(self, targets, max_new_tokens) -> None:
        if targets is not None:
            raise ValueError("a decoder-only model continues its prompt: give the whole text, without `target`")

    def _prepared(self, text, ids, target, options, new) -> Prepared:
        new = DEFAULT_NEW_TOKENS if new is None else new
        if new < 0:
            raise ValueError(f"`max_new_tokens` must be >= 0 (0: the prompt alone), got {new}")
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

    def _run_input(self, text: str, target: str | None) -> Prepared:
        if target is not None:
            raise ValueError(
                "a decoder-only model runs over its text as given: put the whole text in it, not in target"
            )
        return self.prepare([text], max_new_tokens=0)[0]

    def _prompt_length(self, prepared: Prepared) -> int | None:
        return len(prepared.src_ids)

    def forward_positions(self, prepared: Prepared) -> int:
        return len(prepared.tgt_in_ids or prepared.src_ids)  # the prompt is the sequence's start

    def scorer(self, prepared: Prepared) -> Scorer:
        from ..attribution.scorers import transformers_decoder_scorer

        return transformers_decoder_scorer(self.hf, prepared)

    def answer_token(self, text: str) -> int:
        """The one output token ``text`` is (an answer a causal analysis reads the logit of)."""
        ids = self.hf.output_ids(text)
        return one_token(self, text, ids, self.hf.tokens(ids))

    def output_tokens(self, ids: list[int]) -> list[str]:
        """Output token ids as readable tokens."""
        return self.hf.tokens(ids)

    def generate(self, prompt: str, *, max_new_tokens: int = DEFAULT_NEW_TOKENS) -> str:
        return self.prepare([prompt], max_new_tokens=max_new_tokens)[0].output


class TransformersSeq2Seq(TransformersModel):
    """An encoder-decoder run by transformers (T5, BART, Marian, ...)."""

    WRITES = "translation"

    def _check_output_side(self, targets, max_new_tokens) -> None:
        if max_new_tokens is not None:
            raise ValueError("`max_new_tokens` is for decoder-only models; an encoder-decoder writes until </s>")

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
        from ..attribution.scorers import transformers_seq2seq_scorer

        return transformers_seq2seq_scorer(self.hf, prepared)

    def answer_token(self, text: str) -> int:
        """The one output token ``text`` is (an answer a causal analysis reads the logit of)."""
        ids = self.hf.output_ids(text)
        return one_token(self, text, ids, self.hf.tokens(ids))

    def output_tokens(self, ids: list[int]) -> list[str]:
        """Output token ids as readable tokens."""
        return self.hf.tokens(ids)

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

    def prepare_image(self, image, name, *, target=None, options=None, max_new_tokens=None) -> Prepared:
        """An image already at the processor's size ((H, W, 3) in [0, 1]) as [CLS] and its patches."""
        _no_output_side(self, None if target is None else [target], max_new_tokens)
        rows, columns = self.hf.patch_grid()
        tokens = ["[CLS]", *patch_labels(rows, columns)]
        return Prepared(name, [], tokens, image=image, grid=(rows, columns))

    def _inputs(self, p: Prepared) -> dict:
        assert p.image is not None  # prepared by prepare_image
        return {"pixels": self.hf.pixels(p.image)}

    def scorer(self, prepared: Prepared) -> Scorer:
        """Its image vector (the mean of its top layer), for ablation; no gradient method here."""
        from ..attribution.scorers import transformers_image_scorer

        return transformers_image_scorer(self.hf, prepared)


class TransformersVisionLanguage(TransformersDecoder):
    """A vision-language decoder run by transformers (LLaVA, PaliGemma, Gemma 3, ...): its text
    alone, or an image with the text about it, the image's features standing in its decoder's
    sequence as one token each, so every word's attention over the image is a slice of the
    decoder's self-attention; its vision tower's self-attention is the encoder's."""

    IMAGES = True
    ATTRIBUTIONS = MAP_METHODS

    def read_image(self, raw: bytes, name: str) -> np.ndarray:
        return self.hf.decode_image(raw, name)

    def prepare_image(self, image, name, *, target=None, options=None, max_new_tokens=None) -> Prepared:
        """``image`` at the processor's size ((H, W, 3) in [0, 1]) with the text ``name`` about it,
        continued by ``max_new_tokens``; its image tokens relabelled by the patch they stand for."""
        self._check_output_side(None if target is None else [target], None)
        new = DEFAULT_NEW_TOKENS if max_new_tokens is None else max_new_tokens
        if new < 0:
            raise ValueError(f"`max_new_tokens` must be >= 0 (0: the prompt alone), got {new}")
        ids = self.hf.image_prompt(name, image)
        _check_length(self, len(ids) + new)
        first, rows, columns = self._image_tokens(ids)
        pixels = self.hf.pixels(image)
        seq = self.hf.generate(ids, max_new_tokens=new, pixels=pixels) if new else list(ids)
        tokens = self.hf.tokens(seq)
        tokens[first : first + rows * columns] = patch_labels(rows, columns, "img ")
        return Prepared(
            name,
            list(ids),
            self._tower_tokens(),
            tgt_in_ids=seq,
            tgt_out_ids=seq[1:],
            tgt_in_tokens=tokens,
            tgt_out_tokens=tokens[1:] + [""],
            output=self.hf.decode(seq[len(ids) :]),
            image=image,
            grid=self.hf.patch_grid(),
            image_tokens=(first, rows, columns),
        )

    def _image_tokens(self, ids: list[int]) -> tuple[int, int, int]:
        """(first, rows, columns) of the image's tokens in ``ids``: one run, on a square grid."""
        token = self.hf.image_token
        at = [i for i, t in enumerate(ids) if t == token]
        side = round(len(at) ** 0.5)
        if not at or at != list(range(at[0], at[0] + len(at))) or side * side != len(at):
            raise ValueError(
                f"{self.name}'s {len(at)} image tokens are not one run on a square grid: attnkit draws an image "
                "whose tokens are one grid of its patches"
            )
        return at[0], side, side

    def _tower_tokens(self) -> list[str]:
        """The vision tower's positions: its patches, after a class token where it has one."""
        rows, columns = self.hf.patch_grid()
        return (["[CLS]"] if self.hf.tower_has_class_token() else []) + patch_labels(rows, columns)

    def _inputs(self, p: Prepared) -> dict:
        if p.image is None:
            return super()._inputs(p)
        return {"src": p.tgt_in_ids, "pixels": self.hf.pixels(p.image)}

    def capture(self, prepared: Prepared) -> AttentionRecord:
        record = super().capture(prepared)
        if prepared.image is not None and "encoder" in record.maps:
            seen = record.maps.shape("encoder")[-1]
            if seen != len(prepared.src_tokens):
                raise ValueError(
                    f"{self.name}'s vision tower saw {seen} positions, not the {len(prepared.src_tokens)} of its "
                    "patch grid: attnkit cannot label them"
                )
        return record

    def scorer(self, prepared: Prepared) -> Scorer:
        if prepared.image is not None:
            raise ValueError(
                f"{self.name}: the gradient methods read its text alone; with an image, use attention, rollout or flow"
            )
        return super().scorer(prepared)


class TransformersSpeech(TransformersModel):
    """A speech encoder-decoder run by transformers (Whisper): its encoder hears a sound's
    log-mel frames, its decoder writes the text; each output token's cross-attention over the
    encoder's positions is an alignment over time."""

    READS = "audio"
    WRITES = "translation"  # its output is searched from the sound, or forced with a target
    ATTRIBUTIONS = MAP_METHODS
    _positions_found: range | None = None

    def token_count(self, text: str) -> int:
        return len(self._encoder_positions())

    def target_count(self, text: str) -> int:
        return len(self.hf.encode_target(text))

    def read_audio(self, raw: bytes, name: str) -> np.ndarray:
        """A WAV file's bytes as the model hears them: samples at its rate, one channel."""
        return self.hf.decode_audio(raw, name)

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        """``sentences``: WAV files, each with its ``targets`` (a transcript to force) or none."""
        check_sentences(sentences)
        if targets is not None and len(targets) != len(sentences):
            raise ValueError(f"{len(sentences)} sound files but {len(targets)} targets")
        if max_new_tokens is not None:
            raise ValueError("`max_new_tokens` is for decoder-only models; a speech model writes until its end token")
        out = []
        for i, name in enumerate(sentences):
            wave = self._read_file(name)
            out.append(
                self.prepare_audio(wave, str(name), target=None if targets is None else targets[i], options=options)
            )
        return out

    def _read_file(self, name: str | Path) -> np.ndarray:
        """A WAV file by its path, as the model hears it; one line for a missing file."""
        if not Path(str(name)).is_file():
            raise FileNotFoundError(f"sound file not found: {name}")
        return self.read_audio(Path(str(name)).read_bytes(), str(name))

    def prepare_audio(self, wave: np.ndarray, name: str, *, target=None, options=None) -> Prepared:
        """``wave`` (samples at the model's rate) named ``name``, with its transcript: the model's
        own (searched with ``options``) or ``target`` forced; the encoder's positions labelled by
        the time they start at."""
        features = self.hf.audio_features(wave)
        start = self.hf.decoder_start()
        if target is not None:
            out_ids = self.hf.encode_target(target)
            if out_ids and out_ids[0] == start:  # its tokenizer puts the start (and the task tokens) first
                seq = out_ids
            else:
                seq = [start, *out_ids]
            output = target
        else:
            limit = self.max_tokens or 448
            seq = self.hf.generate([], max_new_tokens=limit - 1, beam=(options or SearchOptions()).beam, audio=features)
            output = self.hf.decode(seq)
        _check_length(self, len(seq))
        positions = self._encoder_positions()
        seconds = self.hf.feature_seconds() * features.shape[-1] / len(positions)
        heard = min(len(positions), max(1, int(np.ceil(len(wave) / self.hf.sampling_rate / seconds))))
        return Prepared(
            name,
            [],
            [f"{i * seconds:.2f}s" for i in positions],
            tgt_in_ids=seq[:-1],
            tgt_out_ids=seq[1:],
            tgt_in_tokens=self.hf.tokens(seq[:-1]),
            tgt_out_tokens=self.hf.tokens(seq[1:]),
            output=output,
            audio=wave,
            spectrogram=_spectrogram(features, len(positions), heard),
            frame_seconds=seconds,
        )

    def transcribe(self, audio: str | np.ndarray | list, *, beam: int = 5) -> str | list[str]:
        """The model's text of ``audio``: a WAV file's path or samples at its rate (a list: one each)."""
        many = isinstance(audio, list)
        given: list = audio if isinstance(audio, list) else [audio]
        found = []
        for one in given:
            if isinstance(one, np.ndarray):
                wave, name = one.astype(np.float32), "the sound"
            else:
                wave, name = self._read_file(one), str(one)
            found.append(self.prepare_audio(wave, name, options=SearchOptions(beam=beam)).output)
        return found if many else found[0]

    def _encoder_positions(self) -> range:
        """The encoder's positions: its feature frames after its convolutions' strides (found once)."""
        if self._positions_found is None:
            frames = self.hf.audio_features(np.zeros(1, dtype=np.float32)).shape[-1]
            shrink = getattr(self.hf.model, "_get_feat_extract_output_lengths", None)
            self._positions_found = range(int(shrink(torch.tensor(frames))) if callable(shrink) else frames)
        return self._positions_found

    def _inputs(self, p: Prepared) -> dict:
        assert p.audio is not None  # prepared by prepare_audio
        return {"audio": self.hf.audio_features(p.audio), "tgt": p.tgt_in_ids}

    def capture(self, prepared: Prepared) -> AttentionRecord:
        record = super().capture(prepared)
        record.spectrogram, record.frame_seconds = prepared.spectrogram, prepared.frame_seconds
        return record

    def scorer(self, prepared: Prepared) -> Scorer:
        raise ValueError(
            f"{self.name}: the gradient methods and ablation read text inputs; a speech model's attention, "
            "rollout and flow are read"
        )

    def output_tokens(self, ids: list[int]) -> list[str]:
        return self.hf.tokens(ids)


def _spectrogram(features: torch.Tensor, positions: int, heard: int) -> np.ndarray:
    """The log-mel frames (1, bins, frames) pooled to one column per encoder position, the first
    ``heard`` (those holding sound) kept, scaled to [0, 1]."""
    mel = features[0].float()
    per = mel.shape[-1] // positions
    pooled = mel[:, : per * positions].reshape(mel.shape[0], positions, per).mean(-1)[:, :heard]
    low, high = pooled.min(), pooled.max()
    return ((pooled - low) / (high - low).clamp_min(1e-6)).numpy().astype(np.float32)


TRANSFORMERS_TYPES: dict[str, type[TransformersModel]] = {
    "encoder": TransformersEncoder,
    "decoder": TransformersDecoder,
    "seq2seq": TransformersSeq2Seq,
    "vision": TransformersImage,
    "vision-language": TransformersVisionLanguage,
    "speech": TransformersSpeech,
}
