"""Test clips made on the spot (never downloaded): Piper and espeak-ng speech, silence, noise.

Every clip is 16 kHz mono int16 (what the microphone path delivers) unless said otherwise.
Synthesized speech is cached twice: in memory for this process and as WAV files in one
temporary directory per test session (`ELARA_CLIP_CACHE` overrides it, e.g. for benchmarks).

    from tests.rig.voice_clips import piper_speech, espeak_speech, silence, noise, concat, with_noise, frames
    clip = concat(silence(1.0), piper_speech("Hey Jarvis"), silence(0.5))
    for frame in frames(clip): ...
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, FRAME_SECONDS, SAMPLE_RATE, AudioFrame

#: espeak-ng voices (with speeds in words per minute) that say "Hey Jarvis" recognisably.
ESPEAK_VOICES = (("en-us", 150), ("en-us+f3", 165), ("en-us+m3", 175))


# ---------------------------------------------------------------------------------------------
# cache


@functools.cache
def cache_dir() -> Path:
    """The session's clip cache (created on first use, removed at exit unless given by env)."""
    given = os.environ.get("ELARA_CLIP_CACHE")
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(tempfile.mkdtemp(prefix="elara-clips-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _cached(kind: str, *key: object) -> Path:
    digest = hashlib.sha256(repr((kind, *key)).encode()).hexdigest()[:16]
    return cache_dir() / f"{kind}-{digest}.wav"


def _store(path: Path, samples: np.ndarray) -> None:
    """Write a clip to the cache whole or not at all: two benches sharing a cache (ELARA_CLIP_CACHE)
    may make the same clip at once, and neither must read the other's half-written file."""
    with tempfile.NamedTemporaryFile(dir=cache_dir(), suffix=".wav", delete=False) as tmp:
        partial = Path(tmp.name)
    write_wav(partial, samples)
    os.replace(partial, path)


# ---------------------------------------------------------------------------------------------
# WAV files and resampling


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """Mono int16 samples and the rate of a 16-bit WAV file (channels are averaged)."""
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError(f"{path}: expected 16-bit samples")
        data = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
        channels, rate = wav.getnchannels(), wav.getframerate()
    if channels > 1:
        data = data.reshape(-1, channels).mean(axis=1).astype(np.int16)
    return data.copy(), rate


def write_wav(path: Path, samples: np.ndarray, rate: int = SAMPLE_RATE) -> Path:
    """Write mono int16 samples as a WAV file."""
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(np.asarray(samples, dtype=np.int16).tobytes())
    return path


def resample(samples: np.ndarray, rate: int, to_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Resample mono int16 audio with sox (high quality); numpy (FFT) when sox is missing."""
    if rate == to_rate or len(samples) == 0:
        return np.asarray(samples, dtype=np.int16)
    if shutil.which("sox"):
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            src, dst = Path(tmp) / "in.wav", Path(tmp) / "out.wav"
            write_wav(src, samples, rate)
            subprocess.run(
                # -D: no dither, so the same text always makes the same clip.
                ["sox", "-q", "-D", str(src), "-r", str(to_rate), "-c", "1", "-b", "16", str(dst)],
                check=True,
            )
            return read_wav(dst)[0]
    n = int(round(len(samples) * to_rate / rate))
    spectrum = np.fft.rfft(samples.astype(np.float64))
    keep = min(len(spectrum), n // 2 + 1)
    out = np.fft.irfft(spectrum[:keep], n) * (n / len(samples))
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


# ---------------------------------------------------------------------------------------------
# speech


@functools.cache
def synthesizer():
    """The real Piper voice (en_US-joe-medium), loaded once per process."""
    from elara.voice.models import JOE_VOICE, resolve_voice
    from elara.voice.tts import PiperSynthesizer

    record = resolve_voice(JOE_VOICE)
    return PiperSynthesizer(record.path, record.config_path)


@functools.cache
def _piper(text: str, length_scale: float, varied: bool) -> np.ndarray:
    path = _cached("piper-varied", text, length_scale) if varied else _cached("piper", text, length_scale)
    if path.exists():
        return read_wav(path)[0]
    from piper import SynthesisConfig

    voice = synthesizer()._voice
    # Piper's own defaults vary each saying (random, so a varied clip is the first one cached)
    noise_scale, noise_w_scale = (0.667, 0.8) if varied else (0.0, 0.0)
    config = SynthesisConfig(length_scale=length_scale, noise_scale=noise_scale, noise_w_scale=noise_w_scale)
    chunks = [c.audio_int16_array.reshape(-1) for c in voice.synthesize(text, syn_config=config)]
    native = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
    # Piper normalises to full scale; bring it down to a plausible microphone level (≈ -6 dBFS peak).
    native = (native.astype(np.float64) * 0.5).astype(np.int16)
    samples = resample(native, voice.config.sample_rate, SAMPLE_RATE)
    _store(path, samples)
    return samples


def piper_speech(text: str, *, length_scale: float = 1.0, varied: bool = False) -> np.ndarray:
    """`text` in the real Piper voice at 16 kHz: deterministic (no generator noise), or `varied`
    as Piper speaks by default."""
    return _piper(text, float(length_scale), varied).copy()


def _espeak_into(path: Path, args: list[str]) -> np.ndarray:
    """espeak-ng run with `args`, at 16 kHz, kept at `path` (read from there when it is)."""
    if path.exists():
        return read_wav(path)[0]
    if not shutil.which("espeak-ng"):
        raise RuntimeError("espeak-ng is not installed (scripts/setup installs it)")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        raw = Path(tmp) / "raw.wav"
        subprocess.run(["espeak-ng", "-w", str(raw), *args], check=True, capture_output=True)
        native, rate = read_wav(raw)
    samples = resample(native, rate, SAMPLE_RATE)
    _store(path, samples)
    return samples


@functools.cache
def _espeak(text: str, voice: str, speed: int, pitch: int) -> np.ndarray:
    return _espeak_into(_cached("espeak", text, voice, speed, pitch),
                        ["-s", str(speed), "-p", str(pitch), "-v", voice, text])


@functools.cache
def _espeak_ssml(ssml: str, voice: str, speed: int, pitch: int) -> np.ndarray:
    path = _cached("ssml", ssml, voice, speed) if pitch == 50 else _cached("ssml", ssml, voice, speed, pitch)
    return _espeak_into(path, ["-m", "-s", str(speed), "-p", str(pitch), "-v", voice, ssml])


def espeak_ssml(ssml: str, voice: str = "en-us", speed: int = 150, pitch: int = 50) -> np.ndarray:
    """SSML (`<speak>… <break time="800ms"/> …</speak>`) spoken by espeak-ng in one go, 16 kHz."""
    return _espeak_ssml(ssml, voice, int(speed), int(pitch)).copy()


def espeak_speech(text: str, *, voice: str = "en-us", speed: int = 150, pitch: int = 50) -> np.ndarray:
    """`text` spoken by espeak-ng (`voice` such as "en-us", "en-gb", "en-us+f3"), at 16 kHz."""
    return _espeak(text, voice, int(speed), int(pitch)).copy()


# ---------------------------------------------------------------------------------------------
# silence, noise, mixing


def silence(seconds: float) -> np.ndarray:
    """Digital silence."""
    return np.zeros(int(round(seconds * SAMPLE_RATE)), dtype=np.int16)


def noise(seconds: float, *, dbfs: float = -30.0, color: str = "white", seed: int = 0) -> np.ndarray:
    """Gaussian noise at an RMS level of `dbfs`; `color` "white", "pink" (1/f) or "brown" (1/f²)."""
    n = int(round(seconds * SAMPLE_RATE))
    rng = np.random.default_rng(seed)
    signal = rng.standard_normal(n)
    if color != "white" and n:
        spectrum = np.fft.rfft(signal)
        freqs = np.fft.rfftfreq(n, 1 / SAMPLE_RATE)
        freqs[0] = freqs[1] if n > 1 else 1.0
        power = {"pink": 1.0, "brown": 2.0}[color]
        spectrum /= freqs ** (power / 2)
        signal = np.fft.irfft(spectrum, n)
    rms = float(np.sqrt(np.mean(signal**2))) if n else 1.0
    signal *= (10 ** (dbfs / 20) * 32767) / (rms or 1.0)
    return np.clip(np.round(signal), -32768, 32767).astype(np.int16)


def rms_dbfs(samples: np.ndarray) -> float:
    """RMS level relative to full scale (-inf for digital silence)."""
    x = np.asarray(samples, dtype=np.float64)
    rms = np.sqrt(np.mean(x**2)) if len(x) else 0.0
    return float(20 * np.log10(rms / 32767)) if rms > 0 else float("-inf")


def with_noise(samples: np.ndarray, snr_db: float, *, color: str = "white", seed: int = 0) -> np.ndarray:
    """`samples` plus noise whose level is `snr_db` below the RMS of the non-silent part."""
    x = np.asarray(samples, dtype=np.float64)
    loud = x[np.abs(x) > 0.01 * (np.abs(x).max() or 1)]
    level = rms_dbfs(loud if len(loud) else x)
    mixed = x + noise(len(x) / SAMPLE_RATE, dbfs=level - snr_db, color=color, seed=seed)[: len(x)]
    return np.clip(np.round(mixed), -32768, 32767).astype(np.int16)


def concat(*parts: np.ndarray, gap_seconds: float = 0.0) -> np.ndarray:
    """Join clips, with `gap_seconds` of silence between each."""
    pieces: list[np.ndarray] = []
    for i, part in enumerate(parts):
        if i and gap_seconds:
            pieces.append(silence(gap_seconds))
        pieces.append(np.asarray(part, dtype=np.int16))
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int16)


def frames(samples: np.ndarray, *, start: float = 0.0) -> Iterator[AudioFrame]:
    """Cut a clip into 80 ms AudioFrames (the last one zero-padded), stamped as if live.

    A frame's `captured_at` is `start` plus the time its last sample would have arrived.
    """
    samples = np.asarray(samples, dtype=np.int16)
    count = -(-len(samples) // FRAME_SAMPLES)
    padded = np.zeros(count * FRAME_SAMPLES, dtype=np.int16)
    padded[: len(samples)] = samples
    for i in range(count):
        block = padded[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES]
        yield AudioFrame(samples=block, captured_at=start + (i + 1) * FRAME_SECONDS)
