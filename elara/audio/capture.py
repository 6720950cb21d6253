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
from collections.abc import AsyncGenerator, Callable
from typing import Any

import numpy as np

from elara.audio.devices import DeviceInfo, find_device
from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioFrame
from elara.audio.streams import Resampler, close_stream, open_stream, post
from elara.service.backoff import Backoff

log = logging.getLogger(__name__)

#: Rates tried, after the wanted one and the device's default, when a device refuses 16 kHz.
_FALLBACK_RATES = (48_000, 44_100, 32_000, 96_000, 22_050, 24_000, 8_000)


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
        #: How long to wait before each try to reopen a stream that failed.
        self.backoff = Backoff(retry_initial_seconds, retry_max_seconds)
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

    def status(self) -> dict[str, Any]:
        """The device, whether it is open, the frame and device rates, and what was lost or redone."""
        return {
            "device": self.device.label(),
            "is_open": self.is_open,
            "sample_rate": self.sample_rate,
            "device_rate": self.device_rate,
            "dropped_frames": self.dropped_frames,
            "overflows": self.overflows,
            "reopens": self.reopens,
        }

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
            await close_stream(stream, "microphone")
        self.device_rate = None

    async def frames(self) -> AsyncGenerator[AudioFrame, None]:
        """The captured frames, oldest first, until `stop()`."""
        while self._running:
            if self._queue:
                yield self._queue.popleft()
                continue
            self._frame_ready.clear()
            await self._frame_ready.wait()

    # -- PortAudio side (worker / callback threads) --------------------------------------------

    def _candidate_rates(self, info: DeviceInfo) -> list[int]:
        if self._forced_rate:
            return [self._forced_rate]
        return [self.sample_rate, int(info.default_samplerate), *_FALLBACK_RATES]

    def _open_stream(self, generation: int) -> Any:
        """Open and start an input stream (worker thread); AudioDeviceError if no rate works."""
        info = find_device(self._spec, "input")
        callback = self._make_callback(generation)
        finished = self._make_finished_callback(generation)

        def options(rate: int) -> dict[str, Any]:
            return {"blocksize": round(self.frames_per_block * rate / self.sample_rate),
                    "callback": callback, "finished_callback": finished}

        def before_start(rate: int) -> None:
            # the first blocks reach the loop while this thread still runs
            self._resampler = Resampler(rate, self.sample_rate) if rate != self.sample_rate else None
            self._pending = np.zeros(0, dtype=np.int16)
            self._last_block_at = time.monotonic()

        stream, rate = open_stream("input", info, self._candidate_rates(info), options, before_start)
        self.device = info
        self.device_rate = rate
        log.info("microphone: %s open at %d Hz%s", info.label(), rate,
                 "" if rate == self.sample_rate else f", resampled to {self.sample_rate} Hz")
        return stream

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

    def _make_callback(self, generation: int) -> Callable[[np.ndarray, int, Any, Any], None]:
        loop = self._loop
        assert loop is not None

        def callback(indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
            now = time.monotonic()
            self._last_block_at = now
            post(loop, self._on_block, generation, indata[:, 0].copy(), bool(status.input_overflow), now)

        return callback

    def _make_finished_callback(self, generation: int) -> Callable[[], None]:
        loop = self._loop
        assert loop is not None
        return lambda: post(loop, self._on_finished, generation)

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
                async with asyncio.timeout(0.5):
                    await self._wake_supervisor.wait()
            except TimeoutError:
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
            await close_stream(stream, "microphone")
        self.backoff.reset()
        delay = self.backoff.failed()
        while self._running:
            try:
                async with asyncio.timeout(delay):
                    await self._wake_supervisor.wait()
            except TimeoutError:
                pass
            self._wake_supervisor.clear()
            if not self._running:
                return
            generation = self._generation
            try:
                installed = await asyncio.to_thread(self._open_and_install, generation)
            except Exception as e:
                delay = self.backoff.failed()
                log.warning("microphone: still unavailable (%s); retrying in %.1f s", e, delay)
                continue
            if not installed:
                return
            self._failure = None
            self.reopens += 1
            log.warning("microphone: back on %s", self.device.label())
            return
