"""Reading and writing 16-bit PCM WAV files (the standard library's `wave`)."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from elara.audio.frames import AudioClip
from elara.errors import WavError


def read_wav(path: Path) -> AudioClip:
    """A mono int16 clip from a 16-bit PCM WAV (channels are averaged)."""
    try:
        with wave.open(str(path), "rb") as w:
            width, channels, rate = w.getsampwidth(), w.getnchannels(), w.getframerate()
            data = w.readframes(w.getnframes())
    except FileNotFoundError:
        raise WavError(f"{path} does not exist") from None
    except (wave.Error, EOFError) as exc:
        raise WavError(f"{path} is not a PCM WAV file ({exc}); convert it, e.g. "
                       f"`sox {path} -b 16 out.wav`") from None
    if width != 2:
        raise WavError(f"{path} has {8 * width}-bit samples; Elara reads 16-bit PCM "
                       f"(convert with `sox {path} -b 16 out.wav`)")
    samples = np.frombuffer(data, dtype="<i2").reshape(-1, channels)
    mono = samples[:, 0] if channels == 1 else samples.mean(axis=1).round().astype(np.int16)
    return AudioClip(samples=mono.astype(np.int16), sample_rate=rate)


def write_wav(path: Path, clip: AudioClip) -> None:
    """Write a mono 16-bit PCM WAV."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(clip.sample_rate)
        w.writeframes(np.asarray(clip.samples, dtype="<i2").tobytes())
