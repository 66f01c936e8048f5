"""Where a new run starts from: a trained model's vocabulary and weights (``train.init_from``),
and the teacher it learns from (``train.teacher``), each checked against the run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from torch import Tensor

from ..config.files import flat
from ..config.schema import Config, TokenizerConfig, is_unread, unread
from ..data.tokenizer import Tokenizer
from ..data.vocabulary import WordVocabulary
from ..loading.model_dir import load_model
from .distillation import Teacher, load_teacher


@dataclass
class StartingPoint:
    """What ``train.init_from`` gives a new run: a trained model's vocabulary and weights."""

    tokenizer: TokenizerConfig
    vocabulary: Tokenizer | WordVocabulary
    weights: dict[str, Tensor]


# settings that do not shape the weights: a run may change them from the model it starts from
_FREE_MODEL_KEYS = ("dropout", "attention_dropout", "activation_dropout")


def starting_point(cfg: Config) -> StartingPoint:
    """The model ``cfg.train.init_from`` names, checked against ``cfg``: same task, same
    architecture and sizes (dropout may differ)."""
    source = cfg.train.init_from
    try:
        model, vocabulary, saved = load_model(source, checkpoint_name="best", task=None)
    except (FileNotFoundError, ValueError) as err:
        raise ValueError(f"train.init_from={source}: {err}") from None
    if saved.data.task != cfg.data.task:
        raise ValueError(
            f"train.init_from={source} is a {saved.data.task} model; this run is data.task={cfg.data.task}"
        )
    ours, theirs = (flat(dataclasses.asdict(c.model), "model.") for c in (cfg, saved))
    skipped = unread(cfg)  # sections and keys this architecture does not read
    differ = [
        k
        for k in ours
        if k.rsplit(".", 1)[-1] not in _FREE_MODEL_KEYS and not is_unread(k, skipped) and ours[k] != theirs[k]
    ]
    if differ:
        k = differ[0]
        more = f" (and {', '.join(differ[1:])})" if len(differ) > 1 else ""
        raise ValueError(
            f"train.init_from={source} has {k}={theirs[k]!r}, this config {ours[k]!r}{more}: "
            "a run starts only from weights of its own shape"
        )
    return StartingPoint(saved.tokenizer, vocabulary, model.state_dict())


def teacher_for(cfg: Config, start: StartingPoint | None, kept: bool) -> Teacher | None:
    """The models ``cfg.train.teacher`` names, checked against the run (None: no teacher, or a
    resumed run that ``kept`` its teacher's words)."""
    if not cfg.train.teacher or kept:
        return None
    teacher = load_teacher(cfg.train.teacher)
    shared = start is None or (isinstance(start.vocabulary, Tokenizer) and start.vocabulary.same_as(teacher.tokenizer))
    if not shared:
        raise ValueError(
            f"train.teacher={cfg.train.teacher} and train.init_from={cfg.train.init_from} have different "
            "vocabularies: the student learns the teacher's words, so they need one"
        )
    return teacher
