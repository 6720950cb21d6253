"""The speaker: plays AudioClips through a PortAudio output stream and says when they were heard.

One callback stream stays open while clips keep coming (silence fills the gaps, so the sentences
of one reply follow each other without reopening the device) and closes after `idle_close_seconds`
without audio — or, with `keep_open` (echo cancellation on), stays open through a conversation and
closes only after `keep_open_idle_seconds` of quiet (an open stream's callbacks cost about 2 % of a
core, most of a daemon's idle listening). The callback
feeds queued clips in order and, when a clip's last sample goes out, reports when the device will
have played it (on the stream's timeline, which the callbacks' output DAC times settle: `_anchor`),
so `play()` returns when the clip was heard, not when it was handed over. Opening, closing and
aborting streams run in worker threads, never on the event loop thread.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from elara.audio.devices import AudioDeviceError, DeviceInfo, find_device
from elara.audio.frames import AudioClip
from elara.audio.reference import PlaybackHistory
from elara.audio.streams import close_stream, open_stream, post, resample

log = logging.getLogger(__name__)

#: callbacks over which a timeline's start is settled (≈0.5 s of 20 ms blocks)
ANCHOR_CALLBACKS = 25
#: the longest a fresh stream's first sound waits for its timeline to settle, and how often it looks
SETTLE_WAIT_SECONDS = 0.6
SETTLE_POLL_SECONDS = 0.01
#: a stream kept open for the echo canceller closes after this long without audio: past a
#: conversation's pauses and a timer's rings, and its callbacks cost nothing while the house is quiet
KEEP_OPEN_IDLE_SECONDS = 60.0


def as_mono_int16(samples: np.ndarray) -> np.ndarray:
    """A clip's samples as a 1-D int16 array: int16 as is, floats in [-1, 1] scaled."""
    a = np.asarray(samples)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"expected mono samples (n,) or (n, 1), got shape {a.shape}")
    if a.dtype == np.int16:
        return a
    if np.issubdtype(a.dtype, np.floating):
        return np.clip(np.rint(a * 32767.0), -32768, 32767).astype(np.int16)
    raise ValueError(f"expected int16 or float samples, got {a.dtype}")


class _Job:
    """One clip on its way out: fed by the callback, awaited by `play()`."""

    __slots__ = ("end", "fed", "played", "pos", "samples")

    def __init__(self, samples: np.ndarray, loop: asyncio.AbstractEventLoop) -> None:
        self.samples = samples
        self.pos = 0
        self.fed: asyncio.Future[float] = loop.create_future()  # → when its last sample is heard
        self.played: asyncio.Future[bool] = loop.create_future()  # → True heard, False cut
        self.end: float | None = None


class _Output:
    """An open output stream at one rate, with its queue of jobs (shared with the callback)."""

    def __init__(self, stream_rate: int, clip_rate: int) -> None:
        self.stream: Any = None
        self.stream_rate = stream_rate  # the rate the device runs at
        self.clip_rate = clip_rate  # the clip rate it serves (clips are resampled if they differ)
        self.jobs: collections.deque[_Job] = collections.deque()
        self.lock = threading.Lock()
        self.latency = 0.0
        self.dead = False
        # When the stream's first sample is heard, and samples handed over since: a block's time
        # follows from its place in the stream, free of the callbacks' jitter.
        self.first_heard: float | None = None
        self.handed = 0
        #: where this timeline's first callbacks put its first sample, until it is settled (`_anchor`)
        self.starts: list[float] = []
        self.timeline_from = 0  # samples handed when the timeline last started (open, underflow)


class Speaker:
    """Plays mono int16 `AudioClip`s on a PortAudio output device.

    `device`: an index, a name (see `elara.audio.devices.find_device`) or None for the default.
    Construction looks the device up and raises AudioDeviceError if it is missing.
    """

    def __init__(self, device: int | str | None = None, *, idle_close_seconds: float = 0.5,
                 block_seconds: float = 0.02, latency: float | str = 0.1,
                 close_margin_seconds: float = 0.05, stall_slack_seconds: float = 3.0,
                 history: PlaybackHistory | None = None, keep_open: bool = False,
                 keep_open_idle_seconds: float = KEEP_OPEN_IDLE_SECONDS) -> None:
        self._spec = device
        #: every block played, by when it was heard (the echo canceller's far-end reference)
        self.history = history
        #: once open, the stream stays open (silence between clips, and `stop()` only drops what
        #: is queued): the echo canceller's reference then keeps one timeline, where every new
        #: stream's first time stamp would move it by milliseconds and make the canceller relearn
        self.keep_open = keep_open
        #: … until nothing played for this long: then the next reply starts a new timeline
        self.keep_open_idle_seconds = keep_open_idle_seconds
        #: while True the callback plays silence and holds its place in the queue (read by the
        #: audio thread: a plain bool, set and cleared by `pause` and `resume`)
        self.paused = False
        self._paused_since: float | None = None  # monotonic, while paused
        self._paused_total = 0.0  # seconds held by `pause` before that
        self.device: DeviceInfo = find_device(device, "output")
        self.idle_close_seconds = idle_close_seconds
        self.block_seconds = block_seconds
        self.latency = latency
        self.close_margin_seconds = close_margin_seconds
        self.stall_slack_seconds = stall_slack_seconds
        #: monotonic time at which the last sample handed to the device is (or was) heard; it is
        #: in the future while a clip plays. 0.0 before anything was played.
        self.last_audio_end = 0.0
        #: Callbacks PortAudio flagged as output underflow (a gap was heard).
        self.underflows = 0
        self._out: _Output | None = None
        self._open_lock: asyncio.Lock | None = None
        self._idle_handle: asyncio.TimerHandle | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._waiting: set[_Job] = set()
        self._epoch = 0  # bumped by stop(): a play() that started earlier must not start after it

    # -- public API --------------------------------------------------------------------------

    @property
    def speaking(self) -> bool:
        """True while a clip is queued or playing (until its last sample has been heard)."""
        return bool(self._waiting) or time.monotonic() < self.last_audio_end

    @property
    def is_open(self) -> bool:
        """True while an output stream is open."""
        return self._out is not None

    def status(self) -> dict[str, Any]:
        """The device, whether its stream is open, whether a clip is playing, and gaps heard."""
        return {
            "device": self.device.label(),
            "is_open": self.is_open,
            "speaking": self.speaking,
            "underflows": self.underflows,
        }

    async def __aenter__(self) -> Speaker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def play(self, clip: AudioClip) -> bool:
        """Play `clip`, after any clips already queued; return once its last sample was heard.

        Returns True when played to the end, False when `stop()` cut it. Raises AudioDeviceError
        when the device can't be opened or stops playing."""
        samples = as_mono_int16(clip.samples)
        if len(samples) == 0:
            return True
        loop = asyncio.get_running_loop()
        epoch = self._epoch
        self._cancel_idle_close()
        async with self._lock():
            out = self._out
            if out is not None and out.dead:  # it failed or stalled: nothing left to hear
                await self._close_output(abort=True)
                out = None
            elif out is not None and out.clip_rate != clip.sample_rate:
                await self._drain(out)  # let the other rate's clips finish first
                await self._close_output()
                out = None
            if out is None:
                out = await self._open_output_async(clip.sample_rate, loop)
            if out.stream_rate != clip.sample_rate:
                samples = await asyncio.to_thread(resample, samples, clip.sample_rate, out.stream_rate)
            await self._settled(out)
            if epoch != self._epoch:  # stop() was called while this clip was on its way
                self._schedule_idle_close()
                return False
            job = _Job(samples, loop)
            self._waiting.add(job)
            with out.lock:
                out.jobs.append(job)
        try:
            return await self._await_job(job, out, len(samples) / out.stream_rate)
        finally:
            if not job.played.done():  # cancelled: take the rest of the clip off the queue
                with out.lock:
                    if job in out.jobs:
                        out.jobs.remove(job)
            self._waiting.discard(job)
            self._schedule_idle_close()

    async def _settled(self, out: _Output) -> None:
        """Wait (at most `SETTLE_WAIT_SECONDS`) until a fresh stream's timeline is settled, when
        nothing plays on it yet and an echo canceller reads what plays: a sound begun before is
        read by the canceller where the first callbacks put it, then moved 5–20 ms under it, and
        the canceller learnt the wrong echo (the first ring's chime: her words after it were
        left in the microphone for seconds, and "Stop." over them went unheard)."""
        if self.history is None:
            return
        started = time.monotonic()
        while (not out.dead and time.monotonic() - started < SETTLE_WAIT_SECONDS and not out.jobs
               and (out.first_heard is None or out.starts)):
            await asyncio.sleep(SETTLE_POLL_SECONDS)
        waited = time.monotonic() - started
        if waited >= SETTLE_POLL_SECONDS:
            log.debug("speaker: waited %.0f ms for its timeline to settle", waited * 1000)

    async def prepare(self, sample_rate: int, hold_seconds: float = 10.0) -> None:
        """Open the output stream now, so a reply's first clip at `sample_rate` doesn't wait for
        the device; unless something plays, it closes again after `hold_seconds`."""
        loop = asyncio.get_running_loop()
        async with self._lock():
            if self._out is None:
                await self._open_output_async(sample_rate, loop)
        if not self._waiting:
            self._schedule_idle_close(hold_seconds)

    def pause(self) -> None:
        """Hold playback where it is (silence from the next block on) until `resume`."""
        self.paused = True
        if self._paused_since is None:
            self._paused_since = time.monotonic()

    def resume(self) -> None:
        """Go on from where `pause` held it."""
        self.paused = False
        if self._paused_since is not None:
            self._paused_total += time.monotonic() - self._paused_since
            self._paused_since = None

    def _held_seconds(self) -> float:
        """Seconds `pause` has held playback, in all (a stalled clip's budget leaves them out)."""
        since = self._paused_since
        return self._paused_total + (time.monotonic() - since if since is not None else 0.0)

    async def stop(self) -> None:
        """Cut playback at once (barge-in, shutdown): queued clips are dropped, pending `play()`
        calls return False, and the stream is aborted and closed — or, with `keep_open`, left
        playing silence."""
        self._epoch += 1
        self.resume()
        self._cancel_idle_close()
        out = self._out
        if out is not None:
            with out.lock:
                out.jobs.clear()
        for job in list(self._waiting):
            if not job.fed.done():
                job.fed.cancel()
            if not job.played.done():
                job.played.set_result(False)
        now = time.monotonic()
        if self.last_audio_end > now:
            self.last_audio_end = now
        if self.keep_open and out is not None and not out.dead:
            self._schedule_idle_close()
            return  # silence from the next block on; the device's own buffer plays out
        async with self._lock():
            if self._out is not None:
                await self._close_output(abort=True)

    async def close(self) -> None:
        """Let queued clips finish, then close the stream. `play()` may reopen it later."""
        self._cancel_idle_close()
        async with self._lock():
            if self._out is not None:
                await self._drain(self._out)
                await self._close_output()

    # -- internals ---------------------------------------------------------------------------

    def _lock(self) -> asyncio.Lock:
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        return self._open_lock

    async def _await_job(self, job: _Job, out: _Output, seconds: float) -> bool:
        """Wait until the callback fed the whole job, then until the device has played it."""
        budget = seconds + out.latency + self.stall_slack_seconds + self._queued_seconds(out, job)
        started = time.monotonic()
        deadline = started + budget
        held = self._held_seconds()
        try:
            while True:  # the time `pause` held it (a "stop" being checked) is not a stall
                try:
                    async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                        end = await asyncio.shield(job.fed)
                    break
                except TimeoutError:
                    more = self._held_seconds() - held
                    if more <= 0 and not self.paused:
                        raise
                    deadline, held = deadline + max(more, self.block_seconds), held + more
        except asyncio.CancelledError:
            if job.played.done():  # stop() cut it
                return job.played.result()
            raise
        except TimeoutError:
            log.warning("speaker: %s stopped playing (a %.1f s clip not done after %.1f s); "
                        "closing it", self.device.label(), seconds, time.monotonic() - started)
            out.dead = True
            raise AudioDeviceError(f"output device {self.device.label()} stopped playing "
                                   "(Audio.OutputDevice)", code="playback_stalled") from None
        except AudioDeviceError:
            out.dead = True
            raise
        if not job.played.done():
            def heard() -> None:
                if not job.played.done():
                    job.played.set_result(True)

            handle = asyncio.get_running_loop().call_at(end, heard)
            try:
                return await job.played
            finally:
                handle.cancel()
        return job.played.result()

    async def _open_output_async(self, clip_rate: int, loop: asyncio.AbstractEventLoop) -> _Output:
        """`_open_output` in a worker thread; the stream is kept (and so closed later) even if
        the caller is cancelled while it opens."""
        opening = asyncio.ensure_future(asyncio.to_thread(self._open_output, clip_rate, loop))
        try:
            out = await asyncio.shield(opening)
        except asyncio.CancelledError:
            try:
                async with asyncio.timeout(10):
                    self._out = await opening
                self._schedule_idle_close()
            except Exception:
                pass
            raise
        self._out = out
        return out

    @staticmethod
    def _queued_seconds(out: _Output, job: _Job) -> float:
        with out.lock:
            ahead = 0
            for other in out.jobs:
                if other is job:
                    break
                ahead += len(other.samples) - other.pos
        return ahead / out.stream_rate

    def _open_output(self, clip_rate: int, loop: asyncio.AbstractEventLoop) -> _Output:
        """Open and start a callback stream (worker thread), at the clip's rate if the device
        takes it, else at the device's default rate."""
        info = find_device(self._spec, "output")
        self.device = info
        # one _Output per attempt: a failed stream's late finished callback must not mark the
        # one that opened as dead
        outputs: dict[int, _Output] = {}

        def options(rate: int) -> dict[str, Any]:
            out = outputs[rate] = _Output(rate, clip_rate)
            return {"blocksize": max(1, round(rate * self.block_seconds)), "latency": self.latency,
                    "callback": self._make_callback(out, loop),
                    "finished_callback": self._make_finished_callback(out, loop)}

        rates = [clip_rate, int(info.default_samplerate), 48_000, 44_100]
        stream, rate = open_stream("output", info, rates, options)
        out = outputs[rate]
        out.stream = stream
        out.latency = float(stream.latency)
        log.info("speaker: %s open at %d Hz (latency %.0f ms)%s", info.label(), rate,
                 out.latency * 1000, "" if rate == clip_rate else f", clips resampled from {clip_rate} Hz")
        return out

    def _make_callback(self, out: _Output, loop: asyncio.AbstractEventLoop
                       ) -> Callable[[np.ndarray, int, Any, Any], None]:
        def callback(outdata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
            now = time.monotonic()
            if status.output_underflow:
                self.underflows += 1
            ahead = time_info.outputBufferDacTime - time_info.currentTime
            if not 0.0 <= ahead < 2.0:  # the host API gave no usable timing
                ahead = out.latency
            heard = _anchor(out, now + ahead, bool(status.output_underflow), self.history)
            filled = 0
            finished = []
            with out.lock:
                while filled < frames and out.jobs and not self.paused:
                    job = out.jobs[0]
                    n = min(frames - filled, len(job.samples) - job.pos)
                    outdata[filled:filled + n, 0] = job.samples[job.pos:job.pos + n]
                    job.pos += n
                    filled += n
                    if job.pos >= len(job.samples):
                        out.jobs.popleft()
                        finished.append((job, heard + filled / out.stream_rate))
            outdata[filled:] = 0
            if filled and self.history is not None:
                self.history.write(heard, outdata[:filled, 0], out.stream_rate)
            out.handed += frames
            for job, end in finished:
                post(loop, self._on_fed, job, end)

        return callback

    def _make_finished_callback(self, out: _Output, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        return lambda: post(loop, self._on_stream_finished, out)

    def _on_fed(self, job: _Job, end: float) -> None:
        job.end = end
        if end > self.last_audio_end:
            self.last_audio_end = end
        if not job.fed.done():
            job.fed.set_result(end)

    def _on_stream_finished(self, out: _Output) -> None:
        """The stream ended. Expected after our own stop/abort; otherwise fail its waiting jobs."""
        out.dead = True
        if out.stream is None:  # we closed it
            return
        self.last_audio_end = min(self.last_audio_end, time.monotonic())
        with out.lock:
            jobs, out.jobs = list(out.jobs), collections.deque()
        log.warning("speaker: the output stream on %s stopped unexpectedly%s", self.device.label(),
                    f"; {len(jobs)} clip(s) not played" if jobs else "")
        for job in jobs:
            if not job.fed.done():
                job.fed.set_exception(AudioDeviceError(
                    f"output device {self.device.label()} stopped (Audio.OutputDevice)",
                    code="playback_failed"))

    async def _drain(self, out: _Output) -> None:
        """Wait (bounded) until every queued job of `out` has been heard."""
        pending = [job.played for job in self._waiting if not job.played.done()]
        if pending:
            with out.lock:
                left = sum(len(j.samples) - j.pos for j in out.jobs) / out.stream_rate
            await asyncio.wait(pending, timeout=left + out.latency + self.stall_slack_seconds)
        tail = self.last_audio_end + self.close_margin_seconds - time.monotonic()
        if tail > 0:
            await asyncio.sleep(tail)

    async def _close_output(self, *, abort: bool = False) -> None:
        """Close the current stream in a worker thread (abort = drop what is buffered)."""
        out, self._out = self._out, None
        if out is None:
            return
        stream, out.stream = out.stream, None
        out.dead = True
        if stream is None:
            return
        await close_stream(stream, "speaker")
        log.debug("speaker: output stream closed%s", " (cut)" if abort else "")

    def _schedule_idle_close(self, delay: float | None = None) -> None:
        if self._waiting or self._out is None:
            return
        self._cancel_idle_close()
        delay = self.idle_close_seconds if delay is None else delay
        if self.keep_open:
            delay = max(delay, self.keep_open_idle_seconds)
        self._idle_handle = asyncio.get_running_loop().call_later(delay, self._idle_close)

    def _cancel_idle_close(self) -> None:
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None

    def _idle_close(self) -> None:
        self._idle_handle = None
        if self._waiting or self._out is None:
            return

        async def close_if_idle() -> None:
            async with self._lock():
                if not self._waiting and self._out is not None:
                    await self._drain(self._out)
                    if not self._waiting:
                        await self._close_output()

        self._idle_task = asyncio.get_running_loop().create_task(close_if_idle())


def _anchor(out: _Output, block_heard: float, underflow: bool, history: PlaybackHistory | None) -> float:
    """When this block's first sample is heard, on the stream's own timeline: its first sample's
    time plus the samples handed since. The first `ANCHOR_CALLBACKS` callbacks each put that
    time at their DAC time less what was handed before; it is settled once, at their median
    (what `history` holds so far is moved with it), and then held: the first callbacks fill
    the buffer before the sound server starts playing and put it 20–30 ms early (measured on
    PulseAudio), a late one puts it late, and every later move would slip the echo canceller's
    reference under it. A gap heard (underflow) delays everything after it: a new timeline
    starts there."""
    start = block_heard - out.handed / out.stream_rate
    if out.first_heard is None or underflow:
        if underflow and history is not None:
            history.gap()
        out.first_heard, out.timeline_from, out.starts = start, out.handed, [start]
    elif 0 < len(out.starts) < ANCHOR_CALLBACKS:
        out.starts.append(start)
        if len(out.starts) == ANCHOR_CALLBACKS:
            settled = sorted(out.starts)[ANCHOR_CALLBACKS // 2]
            if history is not None:
                history.restamp(out.first_heard + out.timeline_from / out.stream_rate, settled - out.first_heard)
            out.first_heard, out.starts = settled, []
    return out.first_heard + out.handed / out.stream_rate
