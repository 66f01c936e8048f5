"""Pretrained BERT-family encoders loaded into attnkit's own modules."""

from .bert import (
    Encoded,
    PretrainedEncoder,
    build_bert,
    convert_state_dict,
    load_pretrained,
    resolve,
)

__all__ = ["Encoded", "PretrainedEncoder", "build_bert", "convert_state_dict", "load_pretrained", "resolve"]
