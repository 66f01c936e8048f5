"""Sound as a speech model reads it: one reader for WAV files and uploads, mixed to one channel
and resampled to the model's rate."""

from __future__ import annotations

import io
from math import gcd

import numpy as np

LONGEST_SECONDS = 30 * 60  # a file longer than this is refused before it is resampled


def decode_wav(raw: bytes, rate: int, *, name: str = "the audio") -> np.ndarray:
    """The bytes of a WAV file (PCM of 8, 16, 24 or 32 bits, or float) -> float32 samples in
    [-1, 1] at ``rate`` Hz, its channels averaged; ValueError with one line naming ``name`` for
    bytes that are not a WAV file, hold no sample, or are longer than half an hour."""
    from scipy.io import wavfile
    from scipy.signal import resample_poly

    try:
        found, data = wavfile.read(io.BytesIO(raw))
    except (ValueError, OSError, EOFError, IndexError) as err:
        raise ValueError(
            f"{name} is not a readable WAV file ({type(err).__name__}): attnkit reads WAV; convert other formats "
            "first (ffmpeg -i in.mp3 out.wav)"
        ) from None
    samples = np.asarray(data)
    if samples.size == 0 or found <= 0:
        raise ValueError(f"{name} holds no sound (0 samples)")
    if samples.shape[0] / found > LONGEST_SECONDS:
        raise ValueError(f"{name} is {samples.shape[0] / found / 60:.0f} minutes long: attnkit reads at most 30")
    wave: np.ndarray
    if samples.dtype == np.uint8:  # 8-bit PCM is unsigned around 128
        wave = (samples.astype(np.float32) - 128) / 128
    elif np.issubdtype(samples.dtype, np.integer):
        wave = samples.astype(np.float32) / float(np.iinfo(samples.dtype).max)
    else:
        wave = samples.astype(np.float32)
    if wave.ndim == 2:
        wave = wave.mean(axis=1)
    if found != rate:
        common = gcd(int(found), int(rate))
        wave = resample_poly(wave, rate // common, int(found) // common).astype(np.float32)
    return np.clip(wave, -1.0, 1.0)


def encode_wav(wave: np.ndarray, rate: int) -> bytes:
    """``wave`` (float samples in [-1, 1]) as the bytes of a 16-bit mono WAV file."""
    from scipy.io import wavfile

    out = io.BytesIO()
    wavfile.write(out, rate, (np.clip(wave, -1, 1) * 32767).astype(np.int16))
    return out.getvalue()
