"""Typed configuration: the schema (one dataclass per section, one per model component), reading
and writing YAML with dotted overrides, the rules every key obeys, and what a resumed run may
change."""

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .files import config_from_dict, load_config, parse_overrides, save_config
    from .resume import RESUMABLE, resume_changes
    from .rules import RULES, check_captioner, check_captioning, check_config, check_model, check_tied_embeddings
    from .schema import (
        ARCHS,
        BLEU_TOKENIZERS,
        DETOKENIZE_LANGS,
        DEVICES,
        EARLY_STOP_METRICS,
        IMAGE_ENCODERS,
        IMAGE_POSITIONS,
        INIT_HIDDEN,
        MULTI30K_VARIANTS,
        OPTIMIZERS,
        RNN_CELLS,
        SCHEDULES,
        TASKS,
        TOKENIZER_KINDS,
        Config,
        DataConfig,
        ImageConfig,
        ModelConfig,
        RNNConfig,
        ScenesConfig,
        TokenizerConfig,
        TrainConfig,
        TransformerConfig,
        unread,
    )

exports(
    __name__,
    {
        "files": ("config_from_dict", "load_config", "parse_overrides", "save_config"),
        "resume": ("RESUMABLE", "resume_changes"),
        "rules": (
            "RULES",
            "check_captioner",
            "check_captioning",
            "check_config",
            "check_model",
            "check_tied_embeddings",
        ),
        "schema": (
            "ARCHS",
            "BLEU_TOKENIZERS",
            "DETOKENIZE_LANGS",
            "DEVICES",
            "EARLY_STOP_METRICS",
            "IMAGE_ENCODERS",
            "IMAGE_POSITIONS",
            "INIT_HIDDEN",
            "MULTI30K_VARIANTS",
            "OPTIMIZERS",
            "RNN_CELLS",
            "SCHEDULES",
            "TASKS",
            "TOKENIZER_KINDS",
            "Config",
            "DataConfig",
            "ImageConfig",
            "ModelConfig",
            "RNNConfig",
            "ScenesConfig",
            "TokenizerConfig",
            "TrainConfig",
            "TransformerConfig",
            "unread",
        ),
    },
)

__all__ = [
    "ARCHS",
    "BLEU_TOKENIZERS",
    "DETOKENIZE_LANGS",
    "DEVICES",
    "EARLY_STOP_METRICS",
    "IMAGE_ENCODERS",
    "IMAGE_POSITIONS",
    "INIT_HIDDEN",
    "MULTI30K_VARIANTS",
    "OPTIMIZERS",
    "RESUMABLE",
    "RNN_CELLS",
    "RULES",
    "SCHEDULES",
    "TASKS",
    "TOKENIZER_KINDS",
    "Config",
    "DataConfig",
    "ImageConfig",
    "ModelConfig",
    "RNNConfig",
    "ScenesConfig",
    "TokenizerConfig",
    "TrainConfig",
    "TransformerConfig",
    "check_captioner",
    "check_captioning",
    "check_config",
    "check_model",
    "check_tied_embeddings",
    "config_from_dict",
    "load_config",
    "parse_overrides",
    "resume_changes",
    "save_config",
    "unread",
]
