"""Satellites: Elara as the hub for wyoming-satellite instances in other rooms.

The hub connects to each configured satellite (`Satellites: [{"Name": "kitchen", "Uri":
"tcp://host:10700"}]`), sends `run-satellite`, and the satellite streams its microphone for good
(the hub hears the wake word, as with Home Assistant's always-streaming satellites). Each room
runs its own voice loop on that stream — its own wake detector, VAD, segmenter and dialogue — over
the household's shared engines, store and memory, and its replies go back to that satellite only
as `audio-start` / `audio-chunk` / `audio-stop`, paced in real time so "stop" and barge-in can cut
them. A satellite that can't be reached or goes quiet is retried with a doubling backoff (1 s to
30 s) while the other rooms go on.

wyoming-satellite 1.0.0 (on PyPI) sends no `played` and keeps streaming while it plays, so the
hub times playback itself and its room's dialogue mutes the wake word while a reply plays (no
echo cancellation across the network).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, SAMPLE_RATE, AudioClip, AudioFrame
from elara.errors import AudioDeviceError
from elara.service.backoff import Backoff
from elara.settings import ServiceAddress
from elara.voice.wyoming_client import WyomingClient, WyomingConnection

if TYPE_CHECKING:  # pragma: no cover - typing only
    from elara.skills.announcements import Announcer
    from elara.voice.parts import VoiceParts

log = logging.getLogger(__name__)

CONNECT_SECONDS = 3.0
#: A satellite streams ≈16 chunks a second; this long without one and the link is dead. A reply
#: it takes no audio of for this long fails as the speaker would (AudioDeviceError), not hangs.
QUIET_SECONDS = 5.0
FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
#: Frames kept for a room's loop that has fallen behind (older ones are dropped): 4 s.
MAX_QUEUED_FRAMES = 50
#: How far ahead of real time a reply's audio is sent (what is left to play once it is cut).
SEND_AHEAD_SECONDS = 0.2
PLAY_CHUNK_SAMPLES = 1024


class SatelliteLink:
    """The hub's connection to one satellite: its microphone as 80 ms frames, its speaker as events."""

    def __init__(self, name: str, address: ServiceAddress, *, clock: Callable[[], float] = time.monotonic,
                 first_retry: float = FIRST_RETRY_SECONDS, max_retry: float = MAX_RETRY_SECONDS,
                 quiet_seconds: float = QUIET_SECONDS) -> None:
        self.name = name
        self.address = address
        self._clock = clock
        self._client = WyomingClient(address, f"satellite {name}", timeout=quiet_seconds,
                                     setting="its Uri in Satellites", connect_seconds=CONNECT_SECONDS)
        self._backoff = Backoff(first_retry, max_retry, clock=clock)
        self._connection: WyomingConnection | None = None
        self._frames: asyncio.Queue[AudioFrame] = asyncio.Queue()
        self._pending = np.zeros(0, dtype=np.int16)
        self._write_lock = asyncio.Lock()
        #: "connecting", "connected" or "down" (waiting for the next try)
        self.state = "connecting"
        self.connections = 0
        self.last_error: str | None = None
        self.info: str | None = None  # what the satellite says of itself when it answers
        self.dropped_frames = 0
        self._converter: Any = None  # made once, for a satellite whose microphone isn't 16 kHz mono

    @property
    def failures_in_a_row(self) -> int:
        """Failed or lost connections since the satellite last streamed."""
        return self._backoff.failures_in_a_row

    # -- the connection ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Stay connected until cancelled: connect, stream, and after a failure wait and retry."""
        while True:
            try:
                await self._session()
                error = "the satellite closed the connection"
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.last_error = error
            delay = self._backoff.failed()
            self.state = "down"
            log.warning("satellite %s at %s: %s; trying again in %.0f s", self.name, self.address, error, delay)
            await asyncio.sleep(delay)
            self.state = "connecting"

    async def _session(self) -> None:
        from wyoming.audio import AudioChunk
        from wyoming.info import Describe, Info
        from wyoming.satellite import RunSatellite

        async with self._client.connect() as connection:
            self._connection = connection
            try:
                # `describe` first (it does not claim the satellite), then `run-satellite` claims it.
                await connection.send(Describe(), RunSatellite())
                while (event := await connection.receive()) is not None:
                    if Info.is_type(event.type):
                        satellite = Info.from_event(event).satellite
                        if satellite is not None:
                            self.info = f"{satellite.name}" + (f" ({satellite.area})" if satellite.area else "")
                    elif AudioChunk.is_type(event.type):
                        if self.state != "connected":
                            self._streaming()
                        self._heard(AudioChunk.from_event(event))
            finally:
                self._connection = None
                self._pending = np.zeros(0, dtype=np.int16)

    def _streaming(self) -> None:
        """The satellite's first chunk on this connection: it is connected."""
        self.state = "connected"
        self.connections += 1
        self._backoff.reset()
        log.info("satellite %s at %s: streaming%s", self.name, self.address, f" ({self.info})" if self.info else "")

    def _heard(self, chunk: Any) -> None:
        """A chunk of the satellite's microphone → 16 kHz mono int16 → whole 80 ms frames."""
        from wyoming.audio import AudioChunkConverter

        if (chunk.rate, chunk.width, chunk.channels) != (SAMPLE_RATE, 2, 1):
            if self._converter is None:
                self._converter = AudioChunkConverter(rate=SAMPLE_RATE, width=2, channels=1)
            chunk = self._converter.convert(chunk)
        samples = np.concatenate([self._pending, np.frombuffer(chunk.audio, dtype="<i2")])
        whole = len(samples) // FRAME_SAMPLES * FRAME_SAMPLES
        now = self._clock()
        count = whole // FRAME_SAMPLES
        for i in range(count):
            frame = samples[i * FRAME_SAMPLES:(i + 1) * FRAME_SAMPLES].astype(np.int16)
            ended = now - (count - 1 - i) * FRAME_SAMPLES / SAMPLE_RATE
            if self._frames.qsize() >= MAX_QUEUED_FRAMES:
                self._frames.get_nowait()
                self.dropped_frames += 1
            self._frames.put_nowait(AudioFrame(frame, ended))
        self._pending = samples[whole:].astype(np.int16)

    async def send(self, *eventables: Any) -> None:
        """Write events to the satellite; AudioDeviceError when it is not connected."""
        connection = self._connection
        if connection is None or self.state != "connected":
            raise AudioDeviceError(f"satellite {self.name} at {self.address} is not connected ({self.state})")
        async with self._write_lock:
            try:
                await connection.send(*eventables)
            except (OSError, RuntimeError) as exc:  # TimeoutError is an OSError
                raise AudioDeviceError(f"satellite {self.name}: the connection broke ({exc})") from exc

    # -- the microphone ---------------------------------------------------------------------------

    async def frames(self) -> AsyncGenerator[AudioFrame, None]:
        """The satellite's microphone, 80 ms at a time (a `loop.FrameSource`); waits while it is away."""
        while True:
            yield await self._frames.get()

    def status(self) -> dict[str, Any]:
        """For `elara status`: where, the state, how often it connected and failed."""
        return {"name": self.name, "uri": str(self.address), "state": self.state, "info": self.info,
                "connections": self.connections, "failures_in_a_row": self.failures_in_a_row,
                "last_error": self.last_error, "dropped_frames": self.dropped_frames}


class SatelliteSpeaker:
    """A room's speaker (a `speech.Player`): a clip goes to the satellite in real time, a little
    ahead, so that stopping it leaves at most `SEND_AHEAD_SECONDS` to play."""

    def __init__(self, link: SatelliteLink, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.link = link
        self._clock = clock
        self._stopped = asyncio.Event()
        self._running = asyncio.Event()
        self._running.set()

    async def play(self, clip: AudioClip) -> bool:
        """Send `clip` and return once it has been heard (True) or was stopped first (False)."""
        from wyoming.audio import AudioChunk, AudioStart, AudioStop

        self._stopped.clear()
        rate, audio = clip.sample_rate, np.asarray(clip.samples, dtype="<i2")
        shape = {"rate": rate, "width": 2, "channels": 1}
        await self.link.send(AudioStart(**shape))
        sent = 0.0
        started = self._clock()
        try:
            for i in range(0, len(audio), PLAY_CHUNK_SAMPLES):
                while True:
                    if self._stopped.is_set():
                        return False
                    await self._running.wait()
                    ahead = sent - (self._clock() - started)
                    if ahead < SEND_AHEAD_SECONDS:
                        break
                    await self._wait_stop(ahead - SEND_AHEAD_SECONDS / 2)
                piece = audio[i:i + PLAY_CHUNK_SAMPLES]
                await self.link.send(AudioChunk(audio=piece.tobytes(), **shape))
                sent += len(piece) / rate
            left = sent - (self._clock() - started)
            if left > 0:
                await self._wait_stop(left)
            return not self._stopped.is_set()
        finally:
            with contextlib.suppress(AudioDeviceError):
                await self.link.send(AudioStop())

    async def _wait_stop(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopped.wait()

    async def stop(self) -> None:
        """Cut the clip being sent (what the satellite already has plays out, ≤ 0.2 s)."""
        self._stopped.set()
        self._running.set()

    async def prepare(self, sample_rate: int) -> None:
        """Nothing to open ahead: the satellite opens its speaker at `audio-start`."""

    def pause(self) -> None:
        """Hold sending (the satellite falls silent once what it has is played)."""
        self._running.clear()

    def resume(self) -> None:
        """Go on sending."""
        self._running.set()


@dataclass(frozen=True)
class Room:
    """A satellite's room: its link and speaker, what it announces (its timers), its voice parts."""

    name: str
    link: SatelliteLink
    speaker: SatelliteSpeaker
    announcer: Announcer
    voice: VoiceParts
