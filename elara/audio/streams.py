"""What the microphone and the speaker share: resampling, opening a PortAudio stream at a rate the
device takes, closing a stream off the event loop, and posting from PortAudio's threads to the loop.

Opening tries the wanted rate first and falls back to rates the device may take (its default,
then common ones), so a device that won't do 16 kHz still works: the caller resamples. Closing
runs in a worker thread with a time limit, because a broken device can block `Pa_CloseStream`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from elara.audio.devices import (
    CONFIG_KEYS,
    AudioDeviceError,
    DeviceInfo,
    Kind,
    is_rate_error,
    load_sounddevice,
)

log = logging.getLogger(__name__)


class Resampler:
    """Streaming band-limited resampler for mono audio (windowed sinc, Kaiser window).

    Output sample n sits exactly at input time n * in_rate / out_rate (no delay), so a stream
    resampled block by block equals the whole signal resampled at once. The low-pass cut-off is
    `rolloff` × the lower Nyquist frequency, so downsampling does not alias. Weights are tabled per
    phase (out_rate / gcd phases), so each block costs one gather and one multiply-add.
    """

    def __init__(self, in_rate: int, out_rate: int, *, zero_crossings: int = 16,
                 rolloff: float = 0.92, beta: float = 8.0) -> None:
        if in_rate <= 0 or out_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {in_rate} and {out_rate}")
        g = math.gcd(in_rate, out_rate)
        self.in_rate, self.out_rate = in_rate, out_rate
        self._up, self._down = out_rate // g, in_rate // g  # positions count in 1/_up input samples
        cutoff = min(1.0, out_rate / in_rate) * rolloff  # relative to the input Nyquist frequency
        self._half = half = math.ceil(zero_crossings / cutoff)
        self._taps = np.arange(-half + 1, half + 1)  # input samples around floor(position)
        phases = np.arange(self._up)[:, None] / self._up
        d = phases - self._taps[None, :]  # distance from the output position to each input sample
        window = np.i0(beta * np.sqrt(np.clip(1.0 - (d / half) ** 2, 0.0, None))) / np.i0(beta)
        table = cutoff * np.sinc(cutoff * d) * window
        self._table = table / table.sum(axis=1, keepdims=True)  # unity gain at DC
        self.reset()

    def reset(self) -> None:
        """Forget the stream so far (e.g. after a reopen)."""
        self._buf = np.zeros(self._half, dtype=np.float64)  # holds input samples _base, _base+1, …
        self._base = -self._half
        self._pos = 0  # next output's input position, in units of 1/_up input samples

    def process(self, samples: np.ndarray) -> np.ndarray:
        """Feed input samples; returns the output samples that are now complete (int16)."""
        buf = np.concatenate([self._buf, np.asarray(samples, dtype=np.float64).reshape(-1)])
        last_usable = self._base + len(buf) - self._half  # floor(position) must stay below this
        count = (last_usable * self._up - 1 - self._pos) // self._down + 1
        if count <= 0:
            self._buf = buf
            return np.zeros(0, dtype=np.int16)
        positions = self._pos + np.arange(count, dtype=np.int64) * self._down
        index = (positions // self._up - self._base)[:, None] + self._taps[None, :]
        out = np.einsum("ij,ij->i", buf[index], self._table[positions % self._up])
        self._pos += count * self._down
        keep_from = self._pos // self._up - self._half + 1
        self._buf = buf[keep_from - self._base:]
        self._base = keep_from
        return np.clip(np.rint(out), -32768, 32767).astype(np.int16)

    def flush(self) -> np.ndarray:
        """The remaining output, as if the input were followed by silence; then reset."""
        out = self.process(np.zeros(self._half + 1, dtype=np.float64))
        self.reset()
        return out


def resample(samples: np.ndarray, in_rate: int, out_rate: int) -> np.ndarray:
    """Resample a whole mono clip; the result has round(len × out_rate / in_rate) int16 samples."""
    samples = np.asarray(samples).reshape(-1)
    if in_rate == out_rate:
        return samples.astype(np.int16, copy=False)
    r = Resampler(in_rate, out_rate)
    out = np.concatenate([r.process(samples), r.flush()])
    want = round(len(samples) * out_rate / in_rate)
    return np.pad(out, (0, max(0, want - len(out))))[:want]


def open_stream(kind: Kind, device: DeviceInfo, rates: Iterable[int],
                options: Callable[[int], dict[str, Any]],
                before_start: Callable[[int], None] | None = None) -> tuple[Any, int]:
    """Open and start a mono int16 stream of `kind` on `device` at the first of `rates` it takes.

    Runs in a worker thread (PortAudio blocks). `options(rate)` gives the stream's other keyword
    arguments (callbacks, block size, latency); `before_start(rate)` runs just before `start()`,
    because the first callbacks may fire before this returns. Returns (stream, rate); raises
    AudioDeviceError naming the device, every rate tried and the key to set."""
    sd = load_sounddevice()
    check = sd.check_input_settings if kind == "input" else sd.check_output_settings
    stream_class = sd.InputStream if kind == "input" else sd.OutputStream
    errors = []
    for rate in dict.fromkeys(r for r in rates if r > 0):
        try:
            check(device=device.index, channels=1, dtype="int16", samplerate=rate)
            stream = stream_class(device=device.index, samplerate=rate, channels=1, dtype="int16",
                                  **options(rate))
        except (sd.PortAudioError, ValueError) as e:
            errors.append(f"{rate} Hz: {e}")
            if is_rate_error(e):
                continue  # try the next rate
            break  # the device itself is the problem
        if before_start is not None:
            before_start(rate)
        try:
            stream.start()
        except sd.PortAudioError as e:
            stream.close(ignore_errors=True)
            errors.append(f"{rate} Hz: {e}")
            continue
        return stream, rate
    raise AudioDeviceError(
        f"can't open {kind} device {device.label()} ({CONFIG_KEYS[kind]}): " + "; ".join(errors),
        code="device_unusable")


async def close_stream(stream: Any, owner: str, timeout: float = 5.0) -> None:
    """Abort and close `stream` in a worker thread, waiting at most `timeout` seconds; a stream
    that fails or hangs while closing is logged (as `owner`'s) and left behind, never raised."""
    def close() -> None:
        try:
            stream.abort(ignore_errors=True)  # what was worth hearing was heard already
        finally:
            stream.close(ignore_errors=True)

    try:
        # shielded: a cancelled caller must not leave the device half closed
        async with asyncio.timeout(timeout):
            await asyncio.shield(asyncio.to_thread(close))
    except TimeoutError:
        log.warning("%s: closing the stream took over %g s; left behind", owner, timeout)
    except Exception as e:
        log.debug("%s: closing the stream failed: %s", owner, e)


def post(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: Any) -> None:
    """Run `callback(*args)` on `loop` soon, from a PortAudio thread; nothing if the loop is closed."""
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop is closed: nobody is listening any more
        pass
