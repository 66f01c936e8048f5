"""A model directory holds everything needed to use a trained model later (an installed
model, ``attnkit.loading.packaged``, holds config, tokenizer, ``model.safetensors`` and a manifest):

    config.yaml              the resolved configuration
    spm.joint.model          sentencepiece model(s) (or spm.src.model + spm.tgt.model)
    checkpoints/last.pt      full training state (model, optimizer, schedule, RNG, data position)
    checkpoints/best.pt      model weights at the best validation score
    checkpoints/step_N.pt    model weights of the last K validations (for averaging)
    log.jsonl                every logged figure, one JSON object per line

Checkpoints are written atomically (temporary file, fsync, rename) and read with
``weights_only=True``; step checkpoints can be averaged (Vaswani et al. 2017, sec. 6.1).
"""

from __future__ import annotations

import pickle
import re
import warnings
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import torch

from ..atomic import atomic_path
from ..config import DEVICES, Config, load_config
from ..data.tokenizer import PAD, Tokenizer
from ..data.vocabulary import WordVocabulary
from ..errors import shorten, unknown_choice
from ..models import build_model
from ..models.factory import build_captioner
from ..models.image import RNNCaptioner, TransformerCaptioner
from ..models.rnn import RNNSeq2Seq
from ..models.transformer import TransformerEncoderModel, TransformerSeq2Seq
from . import CHECKPOINT_CHOICES, packaged


def save_atomic(obj: Any, path: str | Path) -> None:
    """torch.save to ``path`` atomically (``atomic.atomic_path``): a crash leaves either the
    old file or the new one, never a torn one."""
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint safely; a missing or corrupt file is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            zip_start = f.read(4) == b"PK\x03\x04"
        reason = "truncated or damaged" if zip_start else "not a PyTorch file: attnkit saves zip archives"
        raise ValueError(f"{path} is not a readable checkpoint ({reason})")
    try:
        with warnings.catch_warnings():  # PyTorch's advice on pickle protocols is not for our users
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(
            f"{path} is not an attnkit checkpoint (it holds Python objects besides tensors, which attnkit never loads)"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError):
        raise ValueError(f"{path} is not a readable checkpoint (truncated or damaged)") from None
    if not isinstance(obj, dict) or "model" not in obj:
        raise ValueError(f"{path} is not an attnkit checkpoint (no model state)")
    return obj


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model parameters of several checkpoints."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] | None = None
    dtypes: dict[str, torch.dtype] = {}
    for p in paths:
        state = load_checkpoint(p)["model"]
        if total is None:
            dtypes = {k: v.dtype for k, v in state.items()}
            total = {k: v.detach().clone().double() if v.is_floating_point() else v.clone() for k, v in state.items()}
            continue
        if state.keys() != total.keys():
            raise ValueError(f"{p} has different parameters from {paths[0]}; cannot average")
        for k, v in state.items():
            if v.is_floating_point():
                total[k] += v.double()
    assert total is not None  # paths is not empty
    n = len(paths)
    return {k: (v / n).to(dtypes[k]) if v.is_floating_point() else v for k, v in total.items()}


@dataclass
class ModelDir:
    path: Path

    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def last(self) -> Path:
        return self.checkpoints / "last.pt"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best.pt"

    @property
    def log(self) -> Path:
        return self.path / "log.jsonl"

    @property
    def snapshots(self) -> Path:
        """Attention snapshots taken during training (``train.attention_snapshots``)."""
        return self.path / "snapshots"

    def snapshot_files(self) -> list[tuple[int, Path]]:
        """(step, snapshots/step_N.npz), oldest first."""
        found = [
            (int(m.group(1)), p)
            for p in self.snapshots.glob("step_*.npz")
            if (m := re.fullmatch(r"step_(\d+)\.npz", p.name))
        ]
        return sorted(found)

    def step_checkpoints(self) -> list[Path]:
        """step_N.pt files, oldest first."""
        found = [
            (int(m.group(1)), p)
            for p in self.checkpoints.glob("step_*.pt")
            if (m := re.fullmatch(r"step_(\d+)\.pt", p.name))
        ]
        return [p for _, p in sorted(found)]

    def has_run(self) -> bool:
        return self.last.is_file()


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in DEVICES:
        raise unknown_choice("device", name, DEVICES)
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device=cuda but no CUDA device is available")
    return torch.device(name)


TASK_USE = {
    "translation": "translate text with `attnkit translate MODEL`",
    "caption": "caption images with `attnkit caption MODEL IMAGE`",
}


# What load_model returns: a translation model (or an encoder), or a captioner (a subclass of either seq2seq)
LoadedModel = TransformerSeq2Seq | RNNSeq2Seq | TransformerEncoderModel


@overload
def load_model(
    path: str | Path,
    *,
    checkpoint_name: str = ...,
    average_last: int = ...,
    device: str | torch.device = ...,
    task: Literal["caption"],
) -> tuple[RNNCaptioner | TransformerCaptioner, WordVocabulary, Config]: ...
@overload
def load_model(
    path: str | Path,
    *,
    checkpoint_name: str = ...,
    average_last: int = ...,
    device: str | torch.device = ...,
    task: Literal["translation"] = ...,
) -> tuple[LoadedModel, Tokenizer, Config]: ...
@overload
def load_model(
    path: str | Path,
    *,
    checkpoint_name: str = ...,
    average_last: int = ...,
    device: str | torch.device = ...,
    task: str | None,
) -> tuple[LoadedModel, Tokenizer | WordVocabulary, Config]: ...
def load_model(
    path: str | Path,
    *,
    checkpoint_name: str = "best",
    average_last: int = 0,
    device: str | torch.device = "cpu",
    task: str | None = "translation",
) -> tuple[LoadedModel, Tokenizer | WordVocabulary, Config]:
    """Rebuild a trained model from its directory (or an installed model's name,
    ``attnkit.loading.packaged``), in eval mode, on ``device`` (auto: cuda if present).

    checkpoint_name: "best", "last", or "average" (of the last ``average_last`` step checkpoints,
    all if 0). An installed model holds one set of weights, loaded for "best" (the default).
    task: the ``data.task`` the caller can use ("translation", "caption"; None: either). A
    captioning model comes with its ``WordVocabulary``.
    """
    if checkpoint_name not in CHECKPOINT_CHOICES:
        raise unknown_choice("checkpoint", checkpoint_name, CHECKPOINT_CHOICES)
    if average_last < 0:
        raise ValueError(f"average_last must be >= 0 (0: every kept step checkpoint), got {average_last}")
    md = ModelDir(packaged.resolve_model(path))
    if not md.path.is_dir():
        raise FileNotFoundError(f"model directory not found: {md.path}")
    if packaged.is_packaged(md.path):
        packaged.verify(md.path)
    if not md.config_path.is_file():
        raise FileNotFoundError(f"{md.path} is not a model directory (no config.yaml)")
    cfg = load_config(md.config_path)
    if task is not None and cfg.data.task != task:
        raise ValueError(f"{md.path} is a {cfg.data.task} model: {TASK_USE[cfg.data.task]}")
    tok: Tokenizer | WordVocabulary
    model: LoadedModel
    if cfg.data.captions:
        tok = WordVocabulary.load(md.path)
        model = build_captioner(cfg.model, vocab=tok.tgt_vocab, pad_id=PAD, image_size=cfg.data.scenes.image_size)
    else:
        tok = Tokenizer.load(md.path, right_to_left=cfg.tokenizer.right_to_left)
        model = build_model(
            cfg.model, src_vocab=tok.src_vocab, tgt_vocab=tok.tgt_vocab, pad_id=PAD, shared_vocab=tok.joint
        )
    if packaged.is_packaged(md.path):
        if checkpoint_name != "best" or average_last:
            raise ValueError(
                f"{md.path.name} is an installed model with one set of weights; "
                "`checkpoint_name` and `average_last` apply to directories made by `attnkit train`"
            )
        state = packaged.load_weights(md.path / packaged.WEIGHTS)
    elif checkpoint_name == "average":
        steps = md.step_checkpoints()
        if not steps:
            raise FileNotFoundError(f"no step checkpoints to average in {md.checkpoints}")
        state = average_checkpoints(steps[-average_last:] if average_last > 0 else steps)
    elif checkpoint_name in ("best", "last"):
        state = load_checkpoint(md.best if checkpoint_name == "best" else md.last)["model"]
    else:
        raise ValueError(f"unknown checkpoint {checkpoint_name!r} (valid: {', '.join(CHECKPOINT_CHOICES)})")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        lines = [line.strip() for line in str(err).splitlines()[1:] if line.strip()] or [str(err)]
        raise ValueError(f"checkpoint does not fit the model in {md.config_path}: {shorten(lines[0], 200)}") from None
    return model.to(resolve_device(device) if isinstance(device, str) else device).eval(), tok, cfg


def load_translators(
    paths: Sequence[str | Path],
    *,
    checkpoint_name: str = "best",
    average_last: int = 0,
    device: str | torch.device = "cpu",
) -> tuple[list[TransformerSeq2Seq | RNNSeq2Seq], Tokenizer, int]:
    """Translation models to decode together (an ensemble; one path: a single model), each
    loaded as ``load_model`` does. They must share one tokenizer. Returns the models, the
    tokenizer, and the longest source (in subwords) that every one of them accepts."""
    models, limits, first = [], [], None
    for path in paths:
        model, tok, cfg = load_model(path, checkpoint_name=checkpoint_name, average_last=average_last, device=device)
        if not isinstance(model, TransformerSeq2Seq | RNNSeq2Seq):
            raise ValueError(f"{path} does not translate: it is a {type(model).__name__}")
        if first is None:
            first = (path, tok)
        elif tok.right_to_left != first[1].right_to_left:
            raise ValueError(
                f"{first[0]} and {path} write their outputs in opposite directions (tokenizer.right_to_left); "
                "an ensemble's models need one"
            )
        elif not tok.same_as(first[1]):
            raise ValueError(f"{first[0]} and {path} have different vocabularies; an ensemble's models need one")
        models.append(model)
        limits.append(cfg.model.max_positions - 1)
    if first is None:
        raise ValueError("no model given")
    return models, first[1], min(limits)
