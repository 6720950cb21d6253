"""The voice loop: microphone frames in; wake word, endpointing, transcription and turns out.

It feeds each frame to the stage the dialogue's state calls for, turns what the stages observe
into dialogue events, and carries out the intents the dialogue answers with. Engines are handed
in; their blocking calls run in worker threads.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import re
import time
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Protocol

import numpy as np

from elara import dialogue as d
from elara.audio.frames import SAMPLE_RATE, AudioFrame
from elara.conversation.messages import PromptReady
from elara.orchestrator import Orchestrator
from elara.voice.endpoint import (EarlyEnd, NoSpeech, Segmenter, SpeechResumed, SpeechStarted,
                                  UtteranceEnded)
from elara.voice.speech import SpeechSink

log = logging.getLogger(__name__)


class WakeWord(Protocol):
    """Scores frames for the wake word."""

    def process(self, frame: AudioFrame):  # -> WakeDetection | None
        """A detection, or None."""

    def reset(self) -> None:
        """Forget the audio heard so far."""


class VoiceActivity(Protocol):
    """Speech probability per frame."""

    def speech_probability(self, frame: AudioFrame) -> float:
        """0 (silence) to 1 (speech)."""

    def reset(self) -> None:
        """Forget the audio heard so far."""


class SpeechToText(Protocol):
    """Transcribes 16 kHz int16 audio."""

    def transcribe(self, samples: np.ndarray):  # -> Transcript
        """The words heard."""


@dataclass
class LoopCounters:
    """What the loop has seen since it started (for logs and `elara status`)."""

    frames: int = 0
    wakes: int = 0
    turns: int = 0
    rejected_utterances: int = 0
    no_speech: int = 0
    model_errors: int = 0


@dataclass
class _Turn:
    """Moments of one turn, in monotonic seconds, for the per-turn timing line."""

    wake: float | None = None
    listening: float | None = None
    speech_end: float | None = None
    transcript: float | None = None
    first_token: float | None = None
    first_audio: float | None = None
    done: float | None = None


class VoiceLoop:
    """Runs the conversation over a stream of frames until stopped."""

    def __init__(self, *, dialogue: d.Dialogue, wake: WakeWord, vad: VoiceActivity,
                 vad_threshold: float, segmenter: Segmenter, transcriber: SpeechToText,
                 phantom_reason: Callable[[object], str | None], orchestrator: Orchestrator,
                 speech: SpeechSink, pre_roll_ms: int, speaker_tail_ms: int,
                 wake_phrases: tuple[str, ...] = ()) -> None:
        self.dialogue = dialogue
        self.wake = wake
        self.vad = vad
        self.vad_threshold = vad_threshold
        self.segmenter = segmenter
        self.transcriber = transcriber
        self.phantom_reason = phantom_reason
        self.orchestrator = orchestrator
        self.speech = speech
        self.speaker_tail = speaker_tail_ms / 1000  # seconds
        self.counters = LoopCounters()
        self.last_timings: dict[str, float | None] = {}
        self._wake_phrases = wake_phrases
        self._pre_roll: collections.deque[AudioFrame] = collections.deque(
            maxlen=max(1, round(pre_roll_ms / 80)))
        self._listening = False
        self._origin_frames = 0  # pre-roll frames in front of the segmenter's time 0
        self._buffer: list[AudioFrame] = []
        self._last_speech_at: float | None = None
        self._utterance: UtteranceEnded | None = None
        self._speculative: tuple[tuple[float, float], asyncio.Task] | None = None
        self._work: asyncio.Task | None = None  # the transcription or turn in flight
        self._speaking_until = 0.0
        self._turn = _Turn()
        self._last_frame_at: float | None = None
        #: called with the dialogue's new state whenever it changes
        self.on_state: Callable[[str], None] | None = None
        #: time.monotonic() when the last frame was processed (the watchdog's sign of life)
        self.last_progress = time.monotonic()
        self._pending: dict[str, object] = {}
        self._background: set[asyncio.Task] = set()

    def _now(self) -> float:
        # The dialogue's clock is the microphone's: frames carry their capture time, so tests can
        # feed recorded frames faster than real time and every timeout still holds.
        return self._last_frame_at if self._last_frame_at is not None else time.monotonic()

    @property
    def busy(self) -> bool:
        """True while a transcription or a reply is in flight."""
        return self._work is not None and not self._work.done()

    async def run(self, frames: AsyncIterator[AudioFrame]) -> None:
        """Process frames until the iterator ends or the task is cancelled."""
        log.info("waiting for the wake word")
        async for frame in frames:
            await self.on_frame(frame)

    async def shutdown(self, grace: float = 3.0) -> None:
        """Stop listening; give the turn in flight `grace` seconds to finish storing, then drop it."""
        self._listening = False
        await self.speech.stop()
        if self.busy:
            try:
                await asyncio.wait_for(asyncio.shield(self._work), grace)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._work.cancel()
                await asyncio.gather(self._work, return_exceptions=True)
                log.warning("shutdown dropped the turn in flight (the user's words are stored)")
        self._handle(d.Cancel(at=self._now()))

    def reconfigure(self, **parts: object) -> None:
        """Swap parts (wake, vad, vad_threshold, segmenter, transcriber, dialogue, speaker_tail,
        wake_phrases, pre_roll_ms) at the next idle moment, never in the middle of a turn."""
        self._pending.update(parts)

    def _reconfigure_now(self) -> None:
        parts, self._pending = self._pending, {}
        if "pre_roll_ms" in parts:
            frames = max(1, round(int(parts.pop("pre_roll_ms")) / 80))
            self._pre_roll = collections.deque(self._pre_roll, maxlen=frames)
        if "wake_phrases" in parts:
            self._wake_phrases = parts.pop("wake_phrases")
        for name, value in parts.items():
            setattr(self, name, value)
        if "dialogue" in parts and self.on_state is not None:
            self.on_state(self.dialogue.state)
        log.info("new settings in use: %s", ", ".join(sorted(parts)) or "pre-roll/wake phrases")

    async def on_frame(self, frame: AudioFrame) -> None:
        """Route one frame to the wake word or the segmenter, per the dialogue's state."""
        self.counters.frames += 1
        self._last_frame_at = frame.captured_at
        self.last_progress = time.monotonic()
        if self._pending and self.dialogue.state == d.IDLE and not self.busy:
            self._reconfigure_now()
        self._handle(d.Tick(now=frame.captured_at))
        if self._listening:
            await self._feed_segmenter(frame)
        else:
            state = self.dialogue.state
            if state == d.IDLE or (state == d.SPEAKING and self.dialogue.barge_in):
                await self._feed_wake_word(frame)
        self._pre_roll.append(frame)

    # -- stages --------------------------------------------------------------------------------

    async def _feed_wake_word(self, frame: AudioFrame) -> None:
        if self.dialogue.state == d.IDLE and frame.captured_at < self._speaking_until:
            return  # Elara's own voice (and its echo) must never wake her
        detection = await asyncio.to_thread(self.wake.process, frame)
        if detection is None:
            return
        self.counters.wakes += 1
        log.info("wake word %s (score %.2f)", detection.name, detection.score)
        self._turn = _Turn(wake=frame.captured_at)
        self._handle(d.WakeDetected(at=frame.captured_at))

    async def _feed_segmenter(self, frame: AudioFrame) -> None:
        probability = await asyncio.to_thread(self.vad.speech_probability, frame)
        # Just after Elara spoke, what the mic hears may be her own echo: count it as silence.
        is_speech = probability >= self.vad_threshold and frame.captured_at >= self._speaking_until
        if is_speech:
            self._last_speech_at = frame.captured_at
        self._buffer.append(frame)
        for event in self.segmenter.feed(frame.duration, is_speech):
            self._on_segment_event(event, frame)

    def _on_segment_event(self, event, frame: AudioFrame) -> None:
        now = frame.captured_at
        if isinstance(event, SpeechStarted):
            self._handle(d.SpeechHeard(at=now))
        elif isinstance(event, EarlyEnd):
            # Start transcribing now; kept if speech does not resume before the end silence.
            # Open the speaker too: opening the device would otherwise delay the first sentence.
            self._spawn(self.speech.prepare(), "prepare-speaker")
            span = (event.start, event.end)
            samples = self._slice(*span)
            self._speculative = (span, asyncio.create_task(
                asyncio.to_thread(self.transcriber.transcribe, samples), name="speculative-stt"))
        elif isinstance(event, SpeechResumed):
            self._speculative = None
        elif isinstance(event, UtteranceEnded):
            self._utterance = event
            self._turn.speech_end = self._last_speech_at
            self._handle(d.UtteranceCaptured(at=now))
        elif isinstance(event, NoSpeech):
            self.counters.no_speech += 1
            self._handle(d.NoSpeechHeard(at=now))

    def _slice(self, start: float, end: float) -> np.ndarray:
        audio = np.concatenate([f.samples for f in self._buffer]) if self._buffer else np.zeros(0, np.int16)
        first = self._origin_frames * 1280 + round(start * SAMPLE_RATE)
        if start <= 0:
            first = 0  # speech was already going when listening began: keep the pre-roll too
        return audio[first:self._origin_frames * 1280 + round(end * SAMPLE_RATE)]

    # -- intents -------------------------------------------------------------------------------

    def _spawn(self, coroutine, name: str) -> None:
        # The event loop holds tasks only weakly: keep a reference until each one is done.
        task = asyncio.create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _handle(self, event: d.DialogueEvent) -> None:
        before = self.dialogue.state
        intents = self.dialogue.handle(event)
        if self.dialogue.state != before and self.on_state is not None:
            self.on_state(self.dialogue.state)
        self._apply(intents)

    def _apply(self, intents: list) -> None:
        for intent in intents:
            if isinstance(intent, d.StartListening):
                self._start_listening(intent)
            elif isinstance(intent, d.StopListening):
                self._listening = False
            elif isinstance(intent, d.Transcribe):
                self._work = asyncio.create_task(self._transcribe(self.dialogue.turn), name="stt")
            elif isinstance(intent, PromptReady):
                self._work = asyncio.create_task(self._reply(intent, self.dialogue.turn), name="turn")
            elif isinstance(intent, d.StopSpeaking):
                self._spawn(self.speech.stop(), "stop-speaking")
            elif isinstance(intent, d.CancelTurn):
                if self._work is not None and self._work is not asyncio.current_task():
                    self._work.cancel()
            elif isinstance(intent, d.ArmWakeWord):
                self.wake.reset()
                log.info("waiting for the wake word")

    def _start_listening(self, intent: d.StartListening) -> None:
        self.segmenter.reset()
        self.vad.reset()
        self._listening = True
        self._buffer = [] if intent.follow_up else list(self._pre_roll)
        self._origin_frames = len(self._buffer)
        self._speculative = None
        self._utterance = None
        now = time.monotonic()
        if intent.follow_up:
            self._turn = _Turn()
        self._turn.listening = now

    async def _transcribe(self, turn: int) -> None:
        utterance = self._utterance
        span = (utterance.start, utterance.end)
        speculative = self._speculative
        try:
            if speculative is not None and speculative[0] == span:
                transcript = await speculative[1]
            else:
                transcript = await asyncio.to_thread(self.transcriber.transcribe, self._slice(*span))
        except Exception as exc:  # speech-to-text failing must not end the daemon
            log.error("speech-to-text failed: %s", exc)
            self._handle(d.TurnFailed(reason="stt", at=self._now(), turn=turn))
            return
        finally:
            self._buffer = []
        self._turn.transcript = time.monotonic()
        reason = self.phantom_reason(transcript)
        text = strip_wake_phrase(transcript.text, self._wake_phrases)
        if reason is None and not text:
            reason = "only the wake word"
        if reason is not None:
            self.counters.rejected_utterances += 1
            log.info("dropped an utterance: %s", reason)
            self._handle(d.TranscriptRejected(reason=reason, at=self._now(), turn=turn))
            return
        log.debug("heard: %s", text)
        self._handle(d.TranscriptReady(text=text, at=self._now(), turn=turn))

    async def _reply(self, prompt: PromptReady, turn: int) -> None:
        started = time.monotonic()
        self.counters.turns += 1
        self.speech.on_first_audio = lambda: self._handle(d.ReplyStarted(at=self._now(), turn=turn))
        try:
            result = await self.orchestrator.on_prompt_ready(prompt)
            await self.speech.finish()
        except asyncio.CancelledError:
            await self.speech.stop()
            raise
        if result.error is not None:
            self.counters.model_errors += 1
        now = time.monotonic()
        self._speaking_until = self._now() + self.speaker_tail
        self._turn.first_token = (started + result.timings.first_token
                                  if result.timings.first_token is not None else None)
        self._turn.first_audio = self.speech.first_audio_at
        self._turn.done = now
        self._log_timings()
        self._handle(d.ReplyFinished(at=self._now(), turn=turn))

    def _log_timings(self) -> None:
        t = self._turn

        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else b - a

        self.last_timings = {
            "wake_to_listening": span(t.wake, t.listening),
            "speech_end_to_transcript": span(t.speech_end, t.transcript),
            "transcript_to_first_token": span(t.transcript, t.first_token),
            "first_token_to_first_audio": span(t.first_token, t.first_audio),
            "speech_end_to_first_audio": span(t.speech_end, t.first_audio),
            "total": span(t.wake or t.listening, t.done),
        }
        log.info("turn timings: %s", ", ".join(
            f"{k} {'-' if v is None else f'{v:.3f} s'}" for k, v in self.last_timings.items()))


_WORD = re.compile(r"[a-z']+")


def strip_wake_phrase(text: str, phrases: tuple[str, ...]) -> str:
    """Remove a wake phrase ("Hey Jarvis," or just "Jarvis,") Whisper heard at the start."""
    stripped = text.strip()
    tokens = list(_WORD.finditer(stripped.lower()))
    for phrase in phrases:
        words = phrase.lower().split()
        # The phrase's tail alone counts too: the detector may fire before the whole phrase
        # left the pre-roll. "hey" alone is a real start of a sentence, so the last word must match.
        for first in range(len(words)):
            tail = words[first:]
            if [t.group() for t in tokens[:len(tail)]] == tail:
                return stripped[tokens[len(tail) - 1].end():].lstrip(" ,.!?;:-").strip()
    return stripped
