"""Multi30k task 1 (Elliott et al. 2016): find the files locally, or download them.

Local layout (the official repository's data/task1):
    raw/{train,val,test_2016_flickr}.{en,de,fr}.gz
    tok/{train,val,test_2016_flickr}.lc.norm.tok.{en,de,fr}.gz
The directory comes from the config (``data.multi30k``) or the environment
variable ATTNKIT_MULTI30K. With neither, the files are downloaded from the
official repository into ~/.cache/attnkit/multi30k and checked against the
SHA-256 of their text (so gzipped and plain copies verify alike).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import urllib.request
from pathlib import Path

from ..config import MULTI30K_VARIANTS as VARIANTS

ENV = "ATTNKIT_MULTI30K"
URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1"
SPLITS = ("train", "val", "test_2016_flickr")

# SHA-256 of the decompressed text of each file (en and de).
CHECKSUMS = {
    "raw/test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "raw/test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "raw/train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "raw/train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "raw/val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "raw/val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "tok/test_2016_flickr.lc.norm.tok.de": "c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4",
    "tok/test_2016_flickr.lc.norm.tok.en": "5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2",
    "tok/train.lc.norm.tok.de": "cb5a23529b65ec2061f1dc446192a9c37382b63cc75f81a0be59d34894b3a505",
    "tok/train.lc.norm.tok.en": "08925f8e0572bcd5a006702fc5fe20e2d77c6917d4eebd576fc20de6693c2119",
    "tok/val.lc.norm.tok.de": "97232bd273eceb7207f689527386a97e4be2616b18ada47576bdaf96c8ae1f00",
    "tok/val.lc.norm.tok.en": "46573ce391ae227f1c72f873392436a20ef18e0a6d518098cfbd70b77c8572ec",
}


def relative_name(split: str, lang: str, variant: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown Multi30k split {split!r} (valid: {', '.join(SPLITS)})")
    if variant not in VARIANTS:
        raise ValueError(f"unknown Multi30k variant {variant!r} (valid: {', '.join(VARIANTS)})")
    return f"raw/{split}.{lang}" if variant == "raw" else f"tok/{split}.lc.norm.tok.{lang}"


def text_sha256(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha256(gzip.decompress(data) if path.suffix == ".gz" else data).hexdigest()


def download(name: str, root: Path) -> Path:
    """Fetch one file from the official repository and verify it."""
    remote = f"{URL}/{name}.gz" if name.startswith("raw/") else f"{URL}/{name}"
    target = root / (name + ".gz" if name.startswith("raw/") else name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(remote, timeout=60) as response:
            tmp.write_bytes(response.read())
    except OSError as err:
        raise FileNotFoundError(
            f"could not download {remote} ({err}); set data.multi30k or {ENV} to a local copy"
        ) from None
    expected = CHECKSUMS.get(name)
    if expected and text_sha256(tmp) != expected:
        tmp.unlink()
        raise ValueError(f"downloaded {remote} does not match its checksum; not using it")
    tmp.replace(target)
    return target


def locate(split: str, lang: str, *, root: str | None = None, variant: str = "tok") -> Path:
    """Path of one Multi30k file: from ``root`` or $ATTNKIT_MULTI30K, else the download cache."""
    name = relative_name(split, lang, variant)
    given = root or os.environ.get(ENV)
    if given:
        base = Path(given).expanduser()
        for candidate in (base / f"{name}.gz", base / name):
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(f"Multi30k file {name}(.gz) not found under {base}")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "attnkit" / "multi30k"
    for candidate in (cache / f"{name}.gz", cache / name):
        if candidate.is_file():
            return candidate
    return download(name, cache)
