"""The microphone: 80 ms, 16 kHz mono int16 frames from a PortAudio input stream, as an async stream.

The PortAudio callback only copies each block and hands it to the event loop
(`loop.call_soon_threadsafe`); resampling and cutting into frames happen on the loop thread, and
the frames wait in a bounded queue (the oldest is dropped when the consumer lags). A stream that
errors or goes silent while running is reopened with backoff; the frame iterator keeps going.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from elara.audio.devices import (AudioDeviceError, DeviceInfo, find_device, is_rate_error,
                                 load_sounddevice)
from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioFrame

log = logging.getLogger(__name__)

#: Rates tried, after the wanted one and the device's default, when a device refuses 16 kHz.
_FALLBACK_RATES = (48_000, 44_100, 32_000, 96_000, 22_050, 24_000, 8_000)


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


class _RateLimitedWarning:
    """Logs a warning at most once every `interval` seconds, with the count since the last one."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._last = -math.inf
        self._suppressed = 0

    def __call__(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            self._suppressed += 1
            return
        extra = f" (and {self._suppressed} more since the last warning)" if self._suppressed else ""
        log.warning(message + extra, *args)
        self._last, self._suppressed = now, 0


class Microphone:
    """16 kHz mono int16 `AudioFrame`s of `frames_per_block` samples from a PortAudio input device.

    `device`: an index, a name (see `elara.audio.devices.find_device`) or None for the default.
    `sample_rate` is the rate of the frames; the device is opened at that rate if it can be, else
    at a rate it supports, and resampled. `device_rate` forces the device rate (for tests).
    Construction looks the device up and raises AudioDeviceError if it is missing.
    """

    def __init__(self, device: int | str | None = None, *, frames_per_block: int = FRAME_SAMPLES,
                 sample_rate: int = SAMPLE_RATE, device_rate: int | None = None,
                 max_queued_frames: int = 64, stall_seconds: float = 3.0,
                 retry_initial_seconds: float = 0.5, retry_max_seconds: float = 10.0) -> None:
        self._spec = device
        self.device: DeviceInfo = find_device(device, "input")
        self.frames_per_block = frames_per_block
        self.sample_rate = sample_rate
        self._forced_rate = device_rate
        #: The rate the device stream is open at (None while closed).
        self.device_rate: int | None = None
        self.max_queued_frames = max_queued_frames
        self.stall_seconds = stall_seconds
        self.retry_initial_seconds = retry_initial_seconds
        self.retry_max_seconds = retry_max_seconds
        #: Blocks PortAudio flagged as input overflow (samples lost before we got them).
        self.overflows = 0
        #: Frames dropped from the queue because the consumer lagged.
        self.dropped_frames = 0
        #: Times the stream was reopened after an error or a stall.
        self.reopens = 0
        self._stream: Any = None
        # guards _stream/_generation/_running against a worker thread that opens a stream while
        # stop() runs: whoever comes second closes the stream, so none is left open
        self._stream_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generation = 0
        self._last_block_at = 0.0  # monotonic time of the last callback (written by PortAudio's thread)
        self._failure: str | None = None
        self._wake_supervisor = asyncio.Event()
        self._frame_ready = asyncio.Event()
        self._queue: collections.deque[AudioFrame] = collections.deque()
        self._pending = np.zeros(0, dtype=np.int16)
        self._resampler: Resampler | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._running = False
        self._warn_overflow = _RateLimitedWarning()
        self._warn_drop = _RateLimitedWarning()

    # -- public API --------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """True while started and a device stream is open (False during a reconnect)."""
        return self._running and self._stream is not None

    async def __aenter__(self) -> Microphone:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open and start the stream; AudioDeviceError if it can't be opened."""
        if self._running:
            return
        self._loop = asyncio.get_running_loop()
        self._wake_supervisor = asyncio.Event()
        self._frame_ready = asyncio.Event()
        self._queue.clear()
        self._running = True
        try:
            await asyncio.to_thread(self._open_and_install, self._generation)
        except BaseException:
            await self.stop()
            raise
        self._supervisor = asyncio.create_task(self._supervise(), name="microphone-supervisor")

    async def stop(self) -> None:
        """Stop and close the stream; a running `frames()` iterator ends."""
        with self._stream_lock:
            if not self._running:
                return
            self._running = False
            self._generation += 1
            stream, self._stream = self._stream, None
        self._frame_ready.set()
        self._wake_supervisor.set()
        if self._supervisor is not None:
            self._supervisor.cancel()
            try:
                await self._supervisor
            except asyncio.CancelledError:
                pass
            self._supervisor = None
        if stream is not None:
            await self._close_stream(stream)
        self.device_rate = None

    async def frames(self) -> AsyncIterator[AudioFrame]:
        """The captured frames, oldest first, until `stop()`."""
        while self._running:
            if self._queue:
                yield self._queue.popleft()
                continue
            self._frame_ready.clear()
            await self._frame_ready.wait()

    # -- PortAudio side (worker / callback threads) --------------------------------------------

    def _candidate_rates(self) -> list[int]:
        if self._forced_rate:
            return [self._forced_rate]
        rates = [self.sample_rate, int(self.device.default_samplerate), *_FALLBACK_RATES]
        return [r for i, r in enumerate(rates) if r > 0 and r not in rates[:i]]

    def _open_stream(self, generation: int) -> Any:
        """Open and start an input stream (worker thread); AudioDeviceError if no rate works."""
        sd = load_sounddevice()
        info = find_device(self._spec, "input")
        errors = []
        for rate in self._candidate_rates():
            blocksize = round(self.frames_per_block * rate / self.sample_rate)
            try:
                sd.check_input_settings(device=info.index, channels=1, dtype="int16", samplerate=rate)
                stream = sd.InputStream(
                    device=info.index, samplerate=rate, channels=1, dtype="int16",
                    blocksize=blocksize, callback=self._make_callback(generation),
                    finished_callback=self._make_finished_callback(generation))
            except (sd.PortAudioError, ValueError) as e:
                errors.append(f"{rate} Hz: {e}")
                if is_rate_error(e):
                    continue  # try the next rate
                break  # the device itself is the problem
            # set before start(): the first blocks reach the loop while this thread still runs
            self._resampler = Resampler(rate, self.sample_rate) if rate != self.sample_rate else None
            self._pending = np.zeros(0, dtype=np.int16)
            self._last_block_at = time.monotonic()
            try:
                stream.start()
            except sd.PortAudioError as e:
                stream.close(ignore_errors=True)
                errors.append(f"{rate} Hz: {e}")
                continue
            self.device = info
            self.device_rate = rate
            log.info("microphone: %s open at %d Hz%s", info.label(), rate,
                     "" if rate == self.sample_rate else f", resampled to {self.sample_rate} Hz")
            return stream
        raise AudioDeviceError(
            f"can't open input device {info.label()} (Audio.InputDevice): " + "; ".join(errors),
            code="device_unusable")

    def _open_and_install(self, generation: int) -> bool:
        """Open a stream (worker thread) and make it current, unless stop() or a newer reopen
        came first, in which case it is closed again. Raises what `_open_stream` raises."""
        stream = self._open_stream(generation)
        with self._stream_lock:
            if generation == self._generation and self._running:
                self._stream = stream
                return True
        stream.abort(ignore_errors=True)
        stream.close(ignore_errors=True)
        return False

    def _make_callback(self, generation: int):
        loop = self._loop
        assert loop is not None

        def callback(indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
            now = time.monotonic()
            self._last_block_at = now
            block = indata[:, 0].copy()
            try:
                loop.call_soon_threadsafe(self._on_block, generation, block,
                                          bool(status.input_overflow), now)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                pass

        return callback

    def _make_finished_callback(self, generation: int):
        loop = self._loop
        assert loop is not None

        def finished() -> None:
            try:
                loop.call_soon_threadsafe(self._on_finished, generation)
            except RuntimeError:
                pass

        return finished

    @staticmethod
    async def _close_stream(stream: Any, timeout: float = 5.0) -> None:
        """Abort and close `stream` in a worker thread, waiting at most `timeout` seconds."""
        def close() -> None:
            try:
                stream.abort(ignore_errors=True)
            finally:
                stream.close(ignore_errors=True)

        try:
            await asyncio.wait_for(asyncio.shield(asyncio.to_thread(close)), timeout)
        except asyncio.TimeoutError:
            log.warning("microphone: closing the old stream took over %.0f s; left behind", timeout)
        except Exception as e:  # noqa: BLE001 - a broken stream may fail to close; it is gone anyway
            log.debug("microphone: closing the old stream failed: %s", e)

    # -- event loop side ---------------------------------------------------------------------------

    def _on_block(self, generation: int, block: np.ndarray, overflow: bool, arrived: float) -> None:
        if generation != self._generation or not self._running:
            return
        if overflow:
            self.overflows += 1
            self._warn_overflow("microphone: input overflow, some audio was lost (%d so far)",
                                self.overflows)
        if self._resampler is not None:
            block = self._resampler.process(block)
        pending = np.concatenate([self._pending, block]) if len(self._pending) else block
        n = self.frames_per_block
        whole = len(pending) // n
        for i in range(whole):
            self._enqueue(AudioFrame(samples=pending[i * n:(i + 1) * n], captured_at=arrived))
        self._pending = pending[whole * n:].copy() if whole else pending
        if whole:
            self._frame_ready.set()

    def _enqueue(self, frame: AudioFrame) -> None:
        if len(self._queue) >= self.max_queued_frames:
            self._queue.popleft()
            self.dropped_frames += 1
            self._warn_drop("microphone: the consumer lags; dropped the oldest frame (%d so far)",
                            self.dropped_frames)
        self._queue.append(frame)

    def _on_finished(self, generation: int) -> None:
        if generation == self._generation and self._running:
            self._failure = "the stream stopped"
            self._wake_supervisor.set()

    async def _supervise(self) -> None:
        """Watch for a stopped or silent stream and reopen it with backoff."""
        while self._running:
            self._wake_supervisor.clear()
            try:
                await asyncio.wait_for(self._wake_supervisor.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                pass
            if not self._running:
                return
            silent_for = time.monotonic() - self._last_block_at
            if self._failure is None and silent_for > self.stall_seconds:
                self._failure = f"no audio for {silent_for:.1f} s"
            if self._failure is not None:
                await self._reopen(self._failure)

    async def _reopen(self, reason: str) -> None:
        log.warning("microphone: %s on %s; reopening", reason, self.device.label())
        with self._stream_lock:
            self._generation += 1
            stream, self._stream = self._stream, None
        self._failure = None
        if stream is not None:
            await self._close_stream(stream)
        delay = self.retry_initial_seconds
        while self._running:
            try:
                await asyncio.wait_for(self._wake_supervisor.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass
            self._wake_supervisor.clear()
            if not self._running:
                return
            generation = self._generation
            try:
                installed = await asyncio.to_thread(self._open_and_install, generation)
            except Exception as e:  # noqa: BLE001 - any failure here means "not back yet"
                delay = min(delay * 2, self.retry_max_seconds)
                log.warning("microphone: still unavailable (%s); retrying in %.1f s", e, delay)
                continue
            if not installed:
                return
            self._failure = None
            self.reopens += 1
            log.warning("microphone: back on %s", self.device.label())
            return
