"""Speech engines on another machine, over the Wyoming protocol (wyoming-faster-whisper,
wyoming-piper, Home Assistant's add-ons).

A remote engine is one more implementation of the engine Protocols the loop and the speech sink
already use — `transcribe(samples) → Transcript` and `synthesize(text) → AudioClip` — so the
speculative transcription, the turn judge and the echo reference work unchanged. Each call is
one request on its own connection: the servers keep no state between requests, and a fresh
connection after a failure is the retry (`wyoming_client.WyomingClient.request`). Calls block
(the loop runs them in worker threads) and every read and write is bounded by `TimeoutSeconds`,
so a service that dies or never answers fails the call with a `SpeechServiceError`, never hangs a
turn.

`FailoverTranscriber` and `FailoverSynthesizer` put a remote engine in front of an optional local
one: after a failure the remote one is left alone for a backoff (1 s, doubling to a minute) and
the local engine answers meanwhile. Without a local engine each call still tries the service (it
may be back), except while it is known not to answer at all (its last failure a timeout): then the
call fails at once, with the apology the orchestrator speaks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from elara.audio.frames import SAMPLE_RATE, AudioClip
from elara.errors import SpeechServiceError
from elara.service.backoff import Backoff
from elara.voice.stt import Transcript
from elara.voice.tts import speakable
from elara.voice.wyoming_client import WyomingClient, WyomingConnection

log = logging.getLogger(__name__)

#: Samples of 16 kHz audio sent per audio-chunk event (a quarter of a second).
CHUNK_SAMPLES = 4_000
FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0


def describe_info(info: Any) -> str:
    """A one-line summary of a service's `info`: its programs and their models or voices."""
    parts = []
    for program in [*info.asr, *info.tts, *info.wake]:
        items = getattr(program, "models", None) or getattr(program, "voices", None) or []
        installed = [item.name for item in items if getattr(item, "installed", True)]
        names = ", ".join(installed[:3]) + (f" and {len(installed) - 3} more" if len(installed) > 3 else "")
        version = f" {program.version}" if getattr(program, "version", None) else ""
        parts.append(f"{program.name}{version} ({names or 'nothing installed'})")
    return "; ".join(parts) or "no speech programs"


# ---------------------------------------------------------------------------------------------
# the engines


class WyomingTranscriber:
    """Speech to text on a Wyoming service (a `loop.SpeechToText`); `transcribe` blocks."""

    def __init__(self, client: WyomingClient, *, language: str | None = "en",
                 model: str | None = None) -> None:
        self.client = client
        self.language = language
        self.model = model  # None: the service's default model
        self.load_seconds = 0.0

    def transcribe(self, samples: np.ndarray) -> Transcript:
        """Send 16 kHz mono audio (int16, or float in -1..1); the service's transcript.

        Wyoming carries only the text: Whisper's confidence is not known here, so the transcript
        counts as sure (no-speech 0, log probability 0) and the phantom filter judges its words."""
        started = time.perf_counter()
        audio = np.asarray(samples).reshape(-1)
        if audio.dtype.kind == "f":
            audio = np.clip(audio * 32768.0, -32768, 32767)
        pcm = audio.astype("<i2").tobytes()
        text = self.client.request(lambda connection: self._transcript(connection, pcm))
        return Transcript(text=text.strip(), no_speech_prob=0.0, avg_logprob=0.0,
                          audio_seconds=len(audio) / SAMPLE_RATE, seconds=time.perf_counter() - started)

    async def _transcript(self, connection: WyomingConnection, pcm: bytes) -> str:
        from wyoming.asr import Transcribe, TranscriptChunk, TranscriptStop
        from wyoming.asr import Transcript as WyomingTranscript
        from wyoming.audio import AudioChunk, AudioStart, AudioStop

        audio_format = {"rate": SAMPLE_RATE, "width": 2, "channels": 1}
        step = CHUNK_SAMPLES * 2
        await connection.send(Transcribe(name=self.model, language=self.language), AudioStart(**audio_format),
                              *(AudioChunk(audio=pcm[i:i + step], **audio_format) for i in range(0, len(pcm), step)),
                              AudioStop())
        streamed: list[str] = []
        while True:
            event = await connection.reply()
            if WyomingTranscript.is_type(event.type):
                return str(WyomingTranscript.from_event(event).text)
            if TranscriptChunk.is_type(event.type):
                streamed.append(TranscriptChunk.from_event(event).text)
            elif TranscriptStop.is_type(event.type):  # a streaming service ends without a transcript
                return "".join(streamed)


class WyomingSynthesizer:
    """Text to speech on a Wyoming service (a `speech.Synthesizer`); `synthesize` blocks.

    One request per sentence: the speech sink already asks for sentence n+1 while sentence n
    plays, so the first sentence is heard while later ones are still being made."""

    def __init__(self, client: WyomingClient, *, voice: str | None = None,
                 sample_rate: int = 22_050) -> None:
        self.client = client
        self.voice = voice  # None: the service's default voice
        #: The rate of the last audio the service sent (the speaker resamples other rates).
        self.sample_rate = sample_rate
        self.load_seconds = 0.0

    def synthesize(self, text: str) -> AudioClip:
        """Speak `text` (cleaned by `speakable` first); an empty clip when nothing is left."""
        spoken = speakable(text)
        if not spoken:
            return AudioClip(samples=np.zeros(0, dtype=np.int16), sample_rate=self.sample_rate)
        clip = self.client.request(lambda connection: self._speech(connection, spoken))
        self.sample_rate = clip.sample_rate
        return clip

    async def _speech(self, connection: WyomingConnection, spoken: str) -> AudioClip:
        from wyoming.audio import AudioChunk, AudioStart, AudioStop
        from wyoming.tts import Synthesize, SynthesizeVoice

        voice = SynthesizeVoice(name=self.voice) if self.voice else None
        await connection.send(Synthesize(text=spoken, voice=voice))
        pieces: list[np.ndarray] = []
        rate, width, channels = self.sample_rate, 2, 1
        while True:
            event = await connection.reply()
            if AudioStart.is_type(event.type):
                start = AudioStart.from_event(event)
                rate, width, channels = start.rate, start.width, start.channels
            elif AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                rate, width, channels = chunk.rate, chunk.width, chunk.channels
                pieces.append(_mono_int16(chunk.audio, width, channels))
            elif AudioStop.is_type(event.type):
                break
        samples = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int16)
        return AudioClip(samples=samples, sample_rate=int(rate))


def _mono_int16(data: bytes, width: int, channels: int) -> np.ndarray:
    """Raw little-endian PCM → mono int16 (the first channel)."""
    if width == 2:
        samples = np.frombuffer(data, dtype="<i2")
    elif width == 4:
        samples = (np.frombuffer(data, dtype="<i4") >> 16).astype(np.int16)
    elif width == 1:
        samples = ((np.frombuffer(data, dtype=np.uint8).astype(np.int16) - 128) << 8).astype(np.int16)
    else:
        raise SpeechServiceError(f"the text-to-speech service sent {width}-byte samples", code="service_error",
                                 service="text-to-speech")
    if channels > 1:
        samples = samples[: len(samples) // channels * channels].reshape(-1, channels)[:, 0]
    return samples.astype(np.int16, copy=True)


# ---------------------------------------------------------------------------------------------
# backoff and falling back to the local engine


class ServiceHealth:
    """Whether to try a remote service now: always while it answers; after a failure, once the
    backoff has passed (1 s, doubling with each failure in a row, at most a minute). Shared by
    the worker threads that call the service."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic,
                 first_retry: float = FIRST_RETRY_SECONDS, max_retry: float = MAX_RETRY_SECONDS) -> None:
        self._backoff = Backoff(first_retry, max_retry, clock=monotonic)
        self._lock = threading.Lock()
        self.failures = 0
        self.fallbacks = 0  # calls the local engine answered instead
        self.last_error: str | None = None

    @property
    def failures_in_a_row(self) -> int:
        """Failures since the service last answered."""
        return self._backoff.failures_in_a_row

    @property
    def up(self) -> bool:
        """True unless the last call to the service failed."""
        return self.failures_in_a_row == 0

    def should_try(self) -> bool:
        """True when the service answers, or its backoff is over (then one call tries it, and
        the others wait for its answer's backoff)."""
        with self._lock:
            return self._backoff.ready()

    def succeeded(self) -> None:
        """The service answered."""
        with self._lock:
            self._backoff.reset()

    def failed(self, error: SpeechServiceError) -> None:
        """The service failed: leave it alone for the next backoff."""
        with self._lock:
            self._backoff.failed()
            self.failures += 1
            self.last_error = error.code

    def status(self) -> dict[str, Any]:
        """For `elara status`: up or down, failures, when it is tried again."""
        with self._lock:
            retry = self._backoff.remaining()
            return {"state": "up" if self.up else "down", "failures": self.failures,
                    "fallbacks": self.fallbacks, "last_error": self.last_error,
                    "retry_in_seconds": None if retry is None else round(retry, 1)}


class _Failover:
    """Calls the remote engine while it answers; else the local one, or a SpeechServiceError."""

    def __init__(self, remote: Any, local: Any | None, health: ServiceHealth, *, engine: str,
                 service: str) -> None:
        self.remote = remote
        self.local = local
        self.health = health
        self.engine = engine  # the Engine setting, for status and messages
        self.service = service
        self.load_seconds = 0.0
        #: what the service said it runs, asked at start-up (None: it did not answer then)
        self.info: str | None = None

    def _call(self, method: str, *args: Any) -> Any:
        if self.health.should_try() or self._worth_trying_while_down():
            try:
                result = getattr(self.remote, method)(*args)
            except SpeechServiceError as exc:
                self.health.failed(exc)
                log.warning("%s; %s", exc, "the local engine answers meanwhile" if self.local is not None
                            else f"tried again in {self.health.status()['retry_in_seconds']} s")
                if self.local is None:
                    raise
            else:
                if not self.health.up:
                    log.info("the %s service at %s answers again", self.service, self.engine)
                self.health.succeeded()
                return result
        if self.local is None:
            raise SpeechServiceError(
                f"{self.service} at {self.engine} is down (last error: {self.health.last_error}); "
                f"tried again in {self.health.status()['retry_in_seconds']} s", code="unreachable",
                service=self.service)
        self.health.fallbacks += 1
        return getattr(self.local, method)(*args)

    def _worth_trying_while_down(self) -> bool:
        """With no local engine, a question inside the backoff is still sent unless the service
        last failed by not answering: a refusal costs milliseconds, and a service that restarts
        every few seconds may be back; the alternative is an apology."""
        return self.local is None and self.health.last_error != "timeout"

    def status(self) -> dict[str, Any]:
        """For `elara status`: the engine, its health, and whether a local engine stands by."""
        return {"engine": self.engine, "info": self.info,
                "fallback": "local" if self.local is not None else None, **self.health.status()}


class FailoverTranscriber(_Failover):
    """A remote speech-to-text engine with the local one standing by (a `loop.SpeechToText`)."""

    def transcribe(self, samples: np.ndarray) -> Transcript:
        """The remote transcript, or the local one while the service is down."""
        transcript: Transcript = self._call("transcribe", samples)
        return transcript


class FailoverSynthesizer(_Failover):
    """A remote text-to-speech engine with the local one standing by (a `speech.Synthesizer`)."""

    @property
    def sample_rate(self) -> int:
        """The rate the remote voice speaks at (the local one's while only it has spoken)."""
        if self.local is not None and self.health.fallbacks and not self.health.up:
            return int(self.local.sample_rate)
        return int(self.remote.sample_rate)

    def synthesize(self, text: str) -> AudioClip:
        """The remote voice, or the local one while the service is down."""
        clip: AudioClip = self._call("synthesize", text)
        return clip
