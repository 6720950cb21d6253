"""The voice loop: microphone frames in; wake word, endpointing, transcription and turns out.

It feeds each frame to the stage the dialogue's state calls for, turns what the stages observe
into dialogue events, and carries out the intents the dialogue answers with. Engines are handed
in as one `VoiceParts` value; their blocking calls run in worker threads. A new `VoiceParts` (a
reload) is swapped in whole at the next idle moment, so no part of a running turn changes under it.

Every moment a turn reports comes from one clock: the one handed in (`time.monotonic` in the
daemon), which is also the clock the microphone stamps its frames with.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from elara.audio.frames import FRAME_SAMPLES, FRAME_SECONDS, SAMPLE_RATE, AudioClip, AudioFrame
from elara.brain.orchestrator import TurnResult
from elara.conversation.messages import PromptReady
from elara.errors import ElaraError, LanguageModelError
from elara.skills.announcements import APOLOGY, Announcement, Announcer, chime
from elara.voice import dialogue as d
from elara.voice.echo import SPEECH_OVER_PLAYBACK_MARGIN_DB, EchoFilter, is_barge_in
from elara.voice.endpoint import (
    SILENCE,
    EarlyEnd,
    NoSpeech,
    Segmenter,
    SpeechResumed,
    SpeechStarted,
    UtteranceEnded,
)
from elara.voice.speech import SpeechSink
from elara.voice.stop import StopCandidate, StopSpotter, heard_stop
from elara.voice.stt import Transcript
from elara.voice.turn import (
    GoingOn,
    GoOnWatch,
    Judgment,
    PauseSignals,
    TurnJudge,
    answer_ahead,
    is_wake_phrase_only,
    pause_limit_ms,
    read_again_wanted,
    said_wake_phrase,
)
from elara.voice.vad import VoiceActivity
from elara.voice.wake import WakeDetection, names_wake_word

log = logging.getLogger(__name__)

#: Why a transcript that is only "Hey Jarvis" is not the question (the question is still to come).
WAKE_PHRASE_ONLY = "only the wake word"

class WakeWord(Protocol):
    """Scores frames for the wake word."""

    #: Wakes handed to the Whisper check ("asked") and those it confirmed ("confirmed").
    confirmations: dict[str, int]
    #: True while she speaks (the loop sets it): the engine may then wake sooner, unchecked.
    during_playback: bool

    def process(self, frame: AudioFrame) -> WakeDetection | None:
        """A detection, or None."""

    def reset(self) -> None:
        """Forget the audio heard so far."""


class SpeechToText(Protocol):
    """Transcribes 16 kHz int16 audio."""

    def transcribe(self, samples: np.ndarray) -> Transcript:
        """The words heard."""


class ReadAgain(Protocol):
    """Reads doubtful words again and says which reading stands."""

    def reread(self, samples: np.ndarray, reading: Transcript) -> Transcript:
        """The reading that stands: `reading` itself, or a new one."""


class FrameSource(Protocol):
    """The microphone: an open stream of 80 ms frames."""

    def frames(self) -> AsyncGenerator[AudioFrame, None]:
        """Frames as they are captured."""


class Replier(Protocol):
    """Answers the user's words (the orchestrator)."""

    async def on_prompt_ready(self, event: PromptReady, *,
                              commit: asyncio.Event | None = None) -> TurnResult:
        """Run one turn; with `commit`, store nothing until it is set. Never raises for store,
        context or model failures."""


@dataclass(frozen=True)
class VoiceParts:
    """Everything the loop runs a turn with, swapped in whole between turns."""

    dialogue: d.Dialogue
    wake: WakeWord
    vad: VoiceActivity
    segmenter: Segmenter
    transcriber: SpeechToText
    phantom_reason: Callable[[Transcript], str | None]
    orchestrator: Replier
    speech: SpeechSink
    microphone: FrameSource
    vad_threshold: float = 0.5
    pre_roll_ms: int = 300
    speaker_tail_ms: int = 400
    wake_phrases: tuple[str, ...] = ()
    judge: TurnJudge | None = None  # None: every pause ends after EndSilenceMs
    speculative_reply: bool = False
    ring_seconds: float = 60.0  # how long a timer's announcement repeats unless stopped
    is_command: Callable[[str], bool] | None = None  # words a local command answers whole
    echo: EchoFilter | None = None  # takes her own voice out of the microphone (None: muted instead)
    stop_words: bool = False  # "stop" without the wake word while she speaks or a timer rings
    go_on_ms: int = 0  # after the end of speech, the person may go on this long: the same turn
    min_speech_ms: int = 200  # speech that counts as going on (as it counts as an onset)
    #: reads again the words the end-of-turn judgment doubts (Whisper base, or a wider beam) and
    #: keeps the likeliest reading; None: the first reading stands
    read_again: ReadAgain | None = None
    #: reads what may be "stop" over her voice or a ringing timer; None: the transcriber
    stop_reader: SpeechToText | None = None


@dataclass
class LoopCounters:
    """What the loop has seen since it started (for logs and `elara status`)."""

    frames: int = 0
    wakes: int = 0
    turns: int = 0
    rejected_utterances: int = 0
    no_speech: int = 0
    model_errors: int = 0
    failed_turns: int = 0
    speculations_discarded: int = 0
    went_on: int = 0  # the person went on after the pause taken for the end: the reply was dropped
    barge_ins: int = 0  # the wake word over her reply or an announcement stopped it
    self_wakes_suppressed: int = 0  # a wake while she spoke that her own voice could explain
    stops: int = 0  # "stop" without the wake word silenced her
    stop_checks: int = 0  # short utterances over her voice transcribed to look for "stop"
    self_stops_suppressed: int = 0  # a "stop" her own voice could explain


@dataclass
class _Turn:
    """Moments of one turn, in seconds of the loop's clock, for the per-turn timing line."""

    wake: float | None = None
    listening: float | None = None
    speech_end: float | None = None
    turn_end: float | None = None  # when the pause was taken as the end of the turn
    transcript: float | None = None
    first_token: float | None = None
    first_audio: float | None = None
    done: float | None = None
    judgment: Judgment | None = None
    judged_at_silence_ms: float | None = None
    judge_seconds: float | None = None


@dataclass
class _Speculation:
    """A reply started before the turn was confirmed over, held unheard until it is."""

    text: str
    started: float
    commit: asyncio.Event
    holding: asyncio.Event  # set once the sink holds this reply's audio
    task: asyncio.Task[TurnResult]


@dataclass
class _GoOn:
    """The moments after a turn was taken as over when the person may still go on with it: the
    turn is stored (`commits` set) only once they pass in silence."""

    watch: GoOnWatch
    commits: list[asyncio.Event] = field(default_factory=list)


@dataclass
class _Swap:
    """A `VoiceParts` waiting for the next idle moment, and who waits for it."""

    parts: VoiceParts
    done: asyncio.Future[VoiceParts] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class VoiceLoop:
    """Runs the conversation over the microphone's frames until stopped."""

    def __init__(self, parts: VoiceParts, *, clock: Callable[[], float] = time.monotonic,
                 on_state: Callable[[str], None] | None = None,
                 announcer: Announcer | None = None) -> None:
        self.parts = parts
        #: what to say unasked, at idle moments (it outlives reloads, as the loop does)
        self.announcer = announcer
        self.counters = LoopCounters()
        self.last_timings: dict[str, float | None] = {}
        self.last_judgment: dict[str, Any] = {}  # the last turn's end-of-turn judgment
        #: the clock's time when the last frame was processed (the watchdog's sign of life)
        self.last_progress = clock()
        self._clock = clock
        self._on_state = on_state
        self._pre_roll: collections.deque[AudioFrame] = collections.deque(
            maxlen=_pre_roll_frames(parts.pre_roll_ms))
        self._listening = False
        self._origin_frames = 0  # pre-roll frames in front of the segmenter's time 0
        self._buffer: list[AudioFrame] = []
        self._last_speech_at: float | None = None
        self._utterance: UtteranceEnded | None = None
        self._speculative: tuple[tuple[float, float], asyncio.Task[Transcript]] | None = None
        self._speculative_at: tuple[asyncio.Task[Transcript], float] | None = None  # when it came
        self._ahead: asyncio.Task[Transcript] | None = None  # the last speculative transcription
        self._speculation: _Speculation | None = None
        self._go_on: _GoOn | None = None
        self._dropping: asyncio.Task[None] | None = None  # a speculation being dropped
        self._work: asyncio.Task[None] | None = None  # the transcription or turn in flight
        self._announcing: asyncio.Task[None] | None = None
        self._speaking_until = 0.0
        self._turn = _Turn()
        self._swap: _Swap | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._rearming = False
        # Set by a wake: the wake word's engine forgets what it heard before the next frame it
        # scores (here, not at the wake: it may be scoring a frame in its thread right then).
        self._wake_heard = False
        # "stop" without the wake word: short utterances over her voice, checked one at a time
        self._spotter = StopSpotter()
        self._spotting = False
        self._spot_frames: collections.deque[AudioFrame] = collections.deque(maxlen=_SPOT_FRAMES)
        self._spot_fed = 0  # frames fed to the spotter since it was reset
        self._spot_epoch = 0  # bumped whenever spotting starts or ends: older checks are stale
        self._stop_check: asyncio.Task[None] | None = None
        self._stop_next: tuple[StopCandidate, int] | None = None  # a candidate waiting its turn

    @property
    def clock(self) -> Callable[[], float]:
        """The clock every moment of a turn is read from."""
        return self._clock

    @property
    def state(self) -> str:
        """The dialogue's state."""
        return self.parts.dialogue.state

    @property
    def busy(self) -> bool:
        """True while a transcription or a reply is in flight."""
        return self._work is not None and not self._work.done()

    @property
    def settled(self) -> bool:
        """True when nothing is in flight: no transcription, reply, pause judgment, drop,
        announcement or check for "stop"."""
        return (not self.busy and all(t.done() for t in self._background)
                and all(t is None or t.done() for t in (self._dropping, self._announcing, self._stop_check)))

    def status(self) -> dict[str, Any]:
        """The loop's part of `elara status`: state, counters, the last turn's timings."""
        c = self.counters
        return {"state": self.state,
                "counters": {"wakes": c.wakes, "turns": c.turns, "failed_turns": c.failed_turns,
                             "false_wake_drops": c.no_speech + c.rejected_utterances,
                             "model_errors": c.model_errors,
                             "speculations_discarded": c.speculations_discarded, "went_on": c.went_on,
                             "barge_ins": c.barge_ins, "self_wakes_suppressed": c.self_wakes_suppressed,
                             "stops": c.stops, "stop_checks": c.stop_checks,
                             "self_stops_suppressed": c.self_stops_suppressed,
                             "wake_checks": self.parts.wake.confirmations["asked"],
                             "wake_checks_confirmed": self.parts.wake.confirmations["confirmed"]},
                "last_turn": dict(self.last_timings), "last_judgment": dict(self.last_judgment)}

    async def run(self) -> None:
        """Process the microphone's frames until cancelled; a swapped-in microphone takes over."""
        log.info("waiting for the wake word")
        while True:
            source = self.parts.microphone
            async with contextlib.aclosing(source.frames()) as frames:
                async for frame in frames:
                    await self.on_frame(frame)
                    if self.parts.microphone is not source:
                        break  # a reload swapped the microphone: read the new one from here on
                else:
                    return

    def swap(self, parts: VoiceParts) -> asyncio.Future[VoiceParts]:
        """Use `parts` from the next idle moment on; the future gives the parts replaced then.
        A swap still waiting is superseded (its future gives the new parts back: never used)."""
        if self._swap is not None and not self._swap.done.done():
            self._swap.done.set_result(self._swap.parts)
        self._swap = _Swap(parts)
        if self._idle():
            self._swap_now()
        return self._swap.done

    def cancel(self) -> None:
        """Abandon whatever is going on (the user said "stop") and wait for the wake word."""
        self._close_go_on()
        self._handle(d.Cancel(at=self._clock()))

    async def shutdown(self, grace: float = 3.0) -> None:
        """Stop listening; give the turn in flight `grace` seconds to finish storing, then drop it."""
        self._listening = False
        self._close_go_on()  # what was said is the turn: the reply in flight stores it
        for task in (self._announcing, self._stop_check):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.parts.speech.stop()
        deadline = asyncio.get_running_loop().time() + grace
        # A transcription in flight becomes a reply in flight: wait for whichever comes.
        while self._work is not None and not self._work.done():
            work = self._work
            try:
                async with asyncio.timeout_at(deadline):
                    await asyncio.shield(work)
            except (TimeoutError, asyncio.CancelledError):
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                log.warning("shutdown dropped the turn in flight (the user's words are stored)")
                break
        self._handle(d.Cancel(at=self._clock()))
        if self._dropping is not None:
            await asyncio.gather(self._dropping, return_exceptions=True)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    async def on_frame(self, frame: AudioFrame) -> None:
        """Route one frame to the wake word or the segmenter, per the dialogue's state."""
        self.counters.frames += 1
        self.last_progress = self._clock()
        if self.parts.echo is not None:
            frame = await asyncio.to_thread(self.parts.echo.clean, frame)
        if self._swap is not None and not self._swap.done.done() and self._idle():
            self._swap_now()
        self._handle(d.Tick(now=frame.captured_at))
        self._maybe_announce()
        if self._listening:
            await self._feed_segmenter(frame)
        elif self._go_on is None or not await self._watch_going_on(frame):
            state = self.state
            if state == d.IDLE or (state in (d.SPEAKING, d.ANNOUNCING) and self.parts.dialogue.barge_in):
                await self._feed_wake_word(frame)
        await self._spot_stop(frame)
        self._pre_roll.append(frame)

    # -- announcements -------------------------------------------------------------------------

    def _maybe_announce(self) -> None:
        """Start the next announcement due, if nothing else is going on."""
        if (self.announcer is None or not self._idle() or not self.settled
                or (self._announcing is not None and not self._announcing.done())):
            return
        announcement = self.announcer.next(self._clock())
        if announcement is not None:
            self._announcing = asyncio.create_task(self._announce(announcement, self.parts),
                                                   name="announcement")

    async def _announce(self, announcement: Announcement, parts: VoiceParts) -> None:
        assert self.announcer is not None
        self._handle(d.AnnouncementStarted(at=self._clock()))
        speech = parts.speech
        speech.on_first_audio = None
        log.info("announcing (%s)", announcement.why)
        log.debug("announcement: %s", announcement.text)
        try:
            if announcement.chime:
                await speech.sound(_chime(speech.sample_rate))
            await speech.say(announcement.text)
            await speech.finish()
        except asyncio.CancelledError:
            await speech.stop()
            raise
        finally:
            self._speaking_until = self._clock() + parts.speaker_tail_ms / 1000
        if speech.failure is not None:
            self.announcer.failed(announcement, self._clock(), speech.failure)
        else:
            log.info("announced (%s)", announcement.why)
            self.announcer.played(announcement, self._clock(), parts.ring_seconds)
        self._handle(d.AnnouncementFinished(at=self._clock()))

    # -- swapping parts ------------------------------------------------------------------------

    def _idle(self) -> bool:
        return self.state == d.IDLE and not self.busy

    def _swap_now(self) -> None:
        assert self._swap is not None
        old, new = self.parts, self._swap.parts
        self.parts = new
        self._pre_roll = collections.deque(self._pre_roll, maxlen=_pre_roll_frames(new.pre_roll_ms))
        new.wake.reset()
        self._swap.done.set_result(old)
        log.info("new settings in use")
        if self._on_state is not None:
            self._on_state(self.state)

    # -- stages --------------------------------------------------------------------------------

    async def _feed_wake_word(self, frame: AudioFrame) -> None:
        echo = self.parts.echo
        if self.state == d.IDLE and echo is None and frame.captured_at < self._speaking_until:
            return  # Elara's own voice (and its echo) must never wake her
        if self._wake_heard:
            self._wake_heard = False
            self.parts.wake.reset()  # else the phrase, still in its window, would wake her again
        self.parts.wake.during_playback = self.state != d.IDLE
        detection = await asyncio.to_thread(self.parts.wake.process, frame)
        if detection is None:
            return
        if self.state not in (d.IDLE, d.SPEAKING, d.ANNOUNCING):
            # Woken while the model scored this frame: the "stop" reader heard the phrase over her.
            self.parts.wake.reset()
            return
        if self.state != d.IDLE and echo is not None:
            near, far = echo.recent_levels(_WAKE_WINDOW_FRAMES)
            if self._explained_by_playback(detection.name, near, far, self.parts.speech.recent_text(_PLAYED_WORDS_SECONDS)):
                self.parts.wake.reset()
                return
        self._on_wake(detection.name, detection.at, f"score {detection.score:.2f}")

    def _explained_by_playback(self, name: str, near: float, far: float, played_words: str) -> bool:
        """Could her own voice explain wake word `name` heard over her (counted and logged if so)?
        It is the user's only if louder than what cancelling can leave of hers, and never just
        after she said the wake word's name herself."""
        echo = self.parts.echo
        if names_wake_word(played_words, name, similarity=_PLAYED_WAKE_SIMILARITY):
            why = "she just said it"
        elif echo is not None and not is_barge_in(near, far, echo.erle_db):
            why = f"{near:.0f} vs {far:.0f} RMS, ERLE {echo.erle_db:.1f} dB"
        else:
            return False
        self.counters.self_wakes_suppressed += 1
        log.info("ignored a wake word while speaking: her own voice could explain it (%s)", why)
        return True

    def _on_wake(self, name: str, at: float, how: str) -> None:
        """Wake word `name`, heard at `at`, counts: start listening (over her reply, a barge-in)."""
        log.info("wake word %s (%s)", name, how)
        self._wake_heard = True
        if self.state != d.IDLE:
            self.counters.barge_ins += 1
            self._close_go_on()  # a new turn over the reply: the one it answers stays stored
        self.counters.wakes += 1
        self._turn = _Turn(wake=at)
        self._handle(d.WakeDetected(at=at))

    async def _feed_segmenter(self, frame: AudioFrame) -> None:
        parts = self.parts
        probability = await asyncio.to_thread(parts.vad.speech_probability, frame)
        # Just after Elara spoke, what the mic hears may be her own echo: count it as silence
        # (unless the echo is cancelled).
        is_speech = probability >= parts.vad_threshold and (
            parts.echo is not None or frame.captured_at >= self._speaking_until)
        if is_speech:
            self._last_speech_at = frame.captured_at
        self._buffer.append(frame)
        for event in parts.segmenter.feed(frame.duration, is_speech):
            self._on_segment_event(event, frame.captured_at)

    def _on_segment_event(self, event: object, now: float) -> None:
        if isinstance(event, SpeechStarted):
            self._handle(d.SpeechHeard(at=now))
        elif isinstance(event, EarlyEnd):
            # Start transcribing now; kept if speech does not resume before the end silence.
            # Open the speaker too: opening the device would otherwise delay the first sentence.
            self._spawn(self.parts.speech.prepare(), "prepare-speaker")
            span = (event.start, event.end)
            samples = self._slice(*span)
            task = self._transcribe_ahead(samples)
            self._speculative = (span, task)
            self._spawn(self._judge_pause(task, self.parts, samples), "judge-pause")
        elif isinstance(event, SpeechResumed):
            self._speculative = None
            self._drop_speculation("speech resumed")
        elif isinstance(event, UtteranceEnded):
            self._utterance = event
            self._turn.speech_end = self._last_speech_at
            self._turn.turn_end = now
            go_on_ms = self.parts.go_on_ms
            if event.reason == SILENCE and go_on_ms > 0 and self._last_speech_at is not None:
                self._go_on = _GoOn(GoOnWatch(until=self._last_speech_at + go_on_ms / 1000,
                                              min_speech_ms=self.parts.min_speech_ms))
            self._handle(d.UtteranceCaptured(at=now))
        elif isinstance(event, NoSpeech):
            self.counters.no_speech += 1
            self._handle(d.NoSpeechHeard(at=now))

    def _slice(self, start: float, end: float) -> np.ndarray:
        audio = np.concatenate([f.samples for f in self._buffer]) if self._buffer else np.zeros(0, np.int16)
        origin = self._origin_frames * FRAME_SAMPLES
        # Speech already going when listening began keeps the pre-roll too.
        first = 0 if start <= 0 else origin + round(start * SAMPLE_RATE)
        return audio[first:origin + round(end * SAMPLE_RATE)]

    # -- the person going on after the pause taken for the end --------------------------------

    async def _watch_going_on(self, frame: AudioFrame) -> bool:
        """Watch the moments after the turn was taken as over: the person going on with it drops
        the reply begun (heard or not) and listens on, their first words kept. True if so."""
        go_on, parts = self._go_on, self.parts
        assert go_on is not None
        if go_on.watch.over(frame.captured_at) or self.state not in _TURN_TAKEN:
            self._close_go_on()
            return False
        self._buffer.append(frame)
        probability = await asyncio.to_thread(parts.vad.speech_probability, frame)
        is_speech = probability >= parts.vad_threshold
        if is_speech and parts.echo is not None:
            # Over her voice, speech is what stands above what cancelling leaves of hers; just
            # after a gap in her voice that can be her own (each drop would start her again, and
            # again, never long enough for the canceller to relearn).
            is_speech = await asyncio.to_thread(parts.echo.person_over_playback, frame.captured_at)
            log.debug("going on? speech (%.2f): %s", probability, is_speech)
        elif is_speech and self.state == d.SPEAKING:
            is_speech = False  # her own voice, uncancelled, is all the microphone may hear
        seen = go_on.watch.feed(frame.captured_at, frame.duration, is_speech)
        if seen is GoingOn.OVER:
            self._close_go_on()
        if seen is not GoingOn.WENT_ON:
            return False
        self.counters.went_on += 1
        self.counters.speculations_discarded += 1
        log.info("the person went on %.2f s after their words seemed done: dropping the reply "
                 "begun (%s) and listening on",
                 frame.captured_at - go_on.watch.until + parts.go_on_ms / 1000, self.state)
        dropped = self._work
        self._handle(d.SpeechContinued(at=frame.captured_at))  # the capture takes over the watch
        if dropped is not None and not dropped.done():
            # A reply started ahead for the words that go on must not be held and then let
            # go by this one's stop(): it waits for this one to be gone, as for any drop.
            self._after_drops(functools.partial(asyncio.gather, dropped, return_exceptions=True),
                              "drop-reply-gone-on")
        return True

    def _close_go_on(self) -> None:
        """The person did not go on (or began something else): the turn is theirs to keep."""
        go_on, self._go_on = self._go_on, None
        if go_on is None:
            return
        if go_on.commits:
            self.counters.turns += 1
        for commit in go_on.commits:
            commit.set()
        self._buffer = []  # the transcription took its slice when it began

    def _commit_when_sure(self, commit: asyncio.Event) -> None:
        """Store the turn (set `commit`) now, or once the person can no longer go on with it."""
        if self._go_on is None:
            self.counters.turns += 1
            commit.set()
        else:
            self._go_on.commits.append(commit)

    # -- "stop" without the wake word -------------------------------------------------------

    def _should_spot(self, frame: AudioFrame) -> bool:
        """Listen for "stop" while she speaks (her echo cancelled) or while a timer rings."""
        parts = self.parts
        if not parts.stop_words or self._listening or self._go_on is not None:
            return False  # while the person may go on, the go-on watch has the VAD
        state = self.state
        if state in (d.SPEAKING, d.ANNOUNCING):
            return parts.echo is not None
        ringing = self.announcer is not None and bool(self.announcer.ringing)
        # Between two rings she is silent: with her echo gone, "stop" is heard there too.
        return (state == d.IDLE and ringing and not self.busy
                and (parts.echo is not None or frame.captured_at >= self._speaking_until))

    async def _spot_stop(self, frame: AudioFrame) -> None:
        if not self._should_spot(frame):
            if self._spotting:
                self._spotting, self._stop_next = False, None
                self._spot_epoch += 1
            return
        parts = self.parts
        if not self._spotting:
            self._spotting = True
            self._spot_epoch += 1
            self._spotter.reset()
            parts.vad.reset()
            self._spot_frames.clear()
            self._spot_fed = 0
        probability = await asyncio.to_thread(parts.vad.speech_probability, frame)
        self._spot_frames.append(frame)
        self._spot_fed += 1
        is_speech = probability >= parts.vad_threshold
        if is_speech and parts.echo is not None:
            # Speech over her voice is speech louder than what cancelling leaves of her voice.
            near, far = parts.echo.recent_levels(1)
            is_speech = is_barge_in(near, far, parts.echo.erle_db, SPEECH_OVER_PLAYBACK_MARGIN_DB)
        candidate = self._spotter.feed(frame.duration, is_speech)
        if candidate is None:
            return
        if self._stop_check is not None and not self._stop_check.done():
            self._stop_next = (candidate, self._spot_epoch)  # checked when this one is done
            return
        self._check_stop_soon(candidate)

    def _check_stop_soon(self, candidate: StopCandidate) -> None:
        parts, epoch = self.parts, self._spot_epoch
        # The words, with a little before them (Whisper needs the onset) and the silent frame.
        first = max(0, int(candidate.start / FRAME_SECONDS) - _SPOT_LEAD_FRAMES)
        last = self._spot_fed
        at = self._spot_frames[-1].captured_at
        skipped = self._spot_fed - len(self._spot_frames)
        frames = list(self._spot_frames)[max(0, first - skipped):last - skipped]
        samples = np.concatenate([f.samples for f in frames])
        near, far = (parts.echo.recent_levels(last - int(candidate.start / FRAME_SECONDS))
                     if parts.echo is not None else (0.0, 0.0))
        played_words = parts.speech.recent_text(_PLAYED_WORDS_SECONDS)
        self.counters.stop_checks += 1
        # She falls silent while the words are checked, as a person interrupted does: a "stop"
        # is then obeyed at once, and anything else costs her a pause of a fifth of a second.
        pause = self.state in (d.SPEAKING, d.ANNOUNCING)
        if pause:
            parts.speech.pause()
        self._stop_check = asyncio.create_task(
            self._check_stop(samples, near, far, played_words, epoch, parts, pause, at), name="stop-check")

    async def _check_stop(self, samples: np.ndarray, near: float, far: float, played_words: str,
                          epoch: int, parts: VoiceParts, paused: bool, at: float) -> None:
        heard: str | None = None
        try:
            heard = await self._read_over_playback(samples, near, far, played_words, epoch, parts)
        finally:
            if paused and heard is None:
                parts.speech.resume()
        if heard == _STOP:
            self._stop_heard()
            return
        if heard is not None:
            # The wake phrase alone, read as it came: she is silent already, so listen now
            # rather than let her go on until the wake word's own check is done.
            self._on_wake(heard, at, "read alone over her by the \"stop\" reader")
            return
        waiting, self._stop_next = self._stop_next, None
        if waiting is not None and waiting[1] == self._spot_epoch:
            self._check_stop_soon(waiting[0])

    async def _read_over_playback(self, samples: np.ndarray, near: float, far: float, played_words: str,
                             epoch: int, parts: VoiceParts) -> str | None:
        """What the words over her voice ask, still when the check is done: `_STOP`, the name of
        the wake word said alone (while she speaks, with barge-in on), or None."""
        try:
            transcript = await asyncio.to_thread((parts.stop_reader or parts.transcriber).transcribe, samples)
        except Exception as exc:  # a failed check must not end anything: she goes on
            log.warning("could not check for \"stop\": %s", exc)
            return None
        if epoch != self._spot_epoch:
            return None  # she fell silent, or a turn began, while Whisper worked
        log.debug("heard over her voice: %r (no speech %.2f)", transcript.text, transcript.no_speech_prob)
        if parts.phantom_reason(transcript) is not None:
            return None
        text = strip_wake_phrase(transcript.text, parts.wake_phrases)
        ringing = self.announcer is not None and bool(self.announcer.ringing)
        if heard_stop(text, played_words, ringing=ringing):
            if parts.echo is not None and not is_barge_in(near, far, parts.echo.erle_db):
                self.counters.self_stops_suppressed += 1
                log.info("ignored a \"stop\": her own voice could explain it (%.0f vs %.0f RMS)", near, far)
                return None
            return _STOP
        phrase = said_wake_phrase(transcript.text, parts.wake_phrases)
        if phrase is None or not parts.dialogue.barge_in or self.state not in (d.SPEAKING, d.ANNOUNCING):
            return None
        name = phrase.replace(" ", "_")
        return None if self._explained_by_playback(name, near, far, played_words) else name

    def _stop_heard(self) -> None:
        """The person said "stop": silence the reply or the ringing, start no turn, ask nothing."""
        self.counters.stops += 1
        self._close_go_on()
        state = self.state
        log.info("heard \"stop\" while %s: silenced", state)
        if self.announcer is not None:
            self.announcer.stop()
        self._spot_epoch += 1
        self._stop_next = None
        if state in (d.SPEAKING, d.ANNOUNCING):
            self._handle(d.StopHeard(at=self._clock()))

    # -- the end of the turn, and a reply started before it ----------------------------------

    async def _judge_pause(self, task: asyncio.Task[Transcript], parts: VoiceParts,
                           samples: np.ndarray) -> None:
        """Once the pause's speculative transcript is in: judge whether the person is done,
        set when this pause ends, and start the reply ahead if the words may be the whole turn.
        Words the judgment doubts are read again (`VoiceParts.read_again`) before the pause ends."""
        try:
            transcript = await task
        except Exception:  # _transcribe reports it if it is the final transcript
            transcript = None
        if self._speculative is None or self._speculative[1] is not task or not self._listening:
            return  # speech resumed, or the turn moved on, while Whisper worked
        span = self._speculative[0]
        self._speculative_at = (task, self._clock())
        segmenter = parts.segmenter
        began = self._clock()
        judgment = None
        if parts.judge is not None:
            command = (transcript is not None and parts.is_command is not None
                       and parts.is_command(strip_wake_phrase(transcript.text, parts.wake_phrases)))
            judgment = parts.judge.judge(PauseSignals(
                silence_ms=segmenter.silence_ms,
                transcript=None if transcript is None else transcript.text,
                transcript_logprob=None if transcript is None else transcript.avg_logprob,
                command=command))
            self._turn.judgment = judgment
            self._turn.judged_at_silence_ms = segmenter.silence_ms
            self._turn.judge_seconds = self._clock() - began
            log.info("pause judged %s at %.0f ms of silence (%s): the turn ends after %d ms",
                     judgment.verdict.value, segmenter.silence_ms, judgment.reason,
                     judgment.end_after_ms)
        speculation = None
        if transcript is not None:
            text, reason = self._heard(transcript)
            if answer_ahead(judgment, enabled=parts.speculative_reply, is_question=reason is None):
                speculation = self._start_speculation(text, parts)
            if (parts.read_again is not None and reason is None
                    and read_again_wanted(judgment, transcript.avg_logprob)):
                # Doubtful words are where the first reading goes wrong; the reply started on it
                # goes on meanwhile and is kept if the first reading stands or the second agrees.
                again = self._transcribe_ahead(
                    samples, functools.partial(parts.read_again.reread, reading=transcript), instead=transcript)
                self._speculative = (span, again)
                second = await again
                if self._speculative is None or self._speculative[1] is not again or not self._listening:
                    return
                second_text, second_reason = self._heard(second)
                if second_reason is not None:  # the wider beam heard no question: the first stands
                    self._speculative = (span, task)
                    log.info("read the doubted words again: no question heard, the first reading stands")
                elif second is transcript:
                    self._speculative = (span, task)
                    log.info("read the doubted words again: the first reading stands")
                elif second_text == text:
                    self._speculative_at = (again, self._clock())
                    log.info("read the doubted words again: the same")
                else:
                    self._speculative_at = (again, self._clock())
                    log.info("read the doubted words again: changed")
                    log.debug("read again: %r", second_text)
                    self._drop_speculation("the second reading differs")
                    speculation = None
                    if answer_ahead(judgment, enabled=parts.speculative_reply, is_question=True):
                        speculation = self._start_speculation(second_text, parts)
        if parts.judge is None:
            return
        end_after = pause_limit_ms(judgment, round(segmenter.end_silence_ms))
        if speculation is not None:
            # The reply can't be heard before its first audio exists anyway: until then the
            # person may still go on, and the pause ends no sooner (up to MaxPauseMs).
            await self._audio_ready(speculation, parts)
            if self._speculation is not speculation or not self._listening:
                return
        for event in segmenter.end_pause_after(end_after):
            self._on_segment_event(event, self._clock())

    async def _audio_ready(self, speculation: _Speculation, parts: VoiceParts) -> None:
        """Wait until the speculation's first audio is synthesized, or the speculation is over."""
        async def ready() -> None:
            await speculation.holding.wait()
            await parts.speech.audio_ready()

        waiter = asyncio.ensure_future(ready())
        try:
            await asyncio.wait({waiter, speculation.task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()

    def _transcribe_ahead(self, samples: np.ndarray, read: Callable[[np.ndarray], Transcript] | None = None, *,
                          instead: Transcript | None = None) -> asyncio.Task[Transcript]:
        """Whisper on the words so far (or `read`, a second reading), one at a time: a short gap
        between words starts one too, and two running side by side on two cores would slow the one
        at the real end. A second reading that fails gives the first one (`instead`)."""
        previous = self._ahead
        read = read or self.parts.transcriber.transcribe

        async def transcribe() -> Transcript:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            if self._speculative is None or self._speculative[1] is not task:
                raise asyncio.CancelledError  # speech resumed while it waited: nobody needs it
            try:
                return await asyncio.to_thread(read, samples)
            except Exception as exc:
                if instead is None:
                    raise
                log.warning("reading the words again failed (%s): the first reading stands", exc)
                return instead

        task = asyncio.create_task(transcribe(), name="speculative-stt")
        self._ahead = task
        return task

    def _heard(self, transcript: Transcript) -> tuple[str, str | None]:
        """The user's words without the wake phrase, and why they are no question (or None)."""
        reason = self.parts.phantom_reason(transcript)
        text = strip_wake_phrase(transcript.text, self.parts.wake_phrases)
        if reason is None and (not text or is_wake_phrase_only(text, self.parts.wake_phrases)):
            reason = WAKE_PHRASE_ONLY
        return text, reason

    def _start_speculation(self, text: str, parts: VoiceParts) -> _Speculation:
        text = text.strip()
        self._drop_speculation("a newer transcript")
        commit, holding = asyncio.Event(), asyncio.Event()
        previous = self._dropping

        async def speculate() -> TurnResult:
            if previous is not None:  # its stop() must not release this reply's hold
                await asyncio.gather(previous, return_exceptions=True)
            if not commit.is_set():  # the turn may have been confirmed while the drop finished
                parts.speech.hold()
            holding.set()
            return await parts.orchestrator.on_prompt_ready(PromptReady(text, source="voice"),
                                                             commit=commit)

        log.debug("answering ahead: %s", text)
        self._speculation = _Speculation(text=text, started=self._clock(), commit=commit,
                                         holding=holding,
                                         task=asyncio.create_task(speculate(), name="speculation"))
        return self._speculation

    def _drop_speculation(self, why: str) -> None:
        speculation, self._speculation = self._speculation, None
        if speculation is None:
            return
        self.counters.speculations_discarded += 1
        log.info("dropped the reply started ahead: %s", why)
        speech = self.parts.speech

        async def drop() -> None:
            speculation.task.cancel()
            await asyncio.gather(speculation.task, return_exceptions=True)
            await speech.stop()  # the held audio is dropped unheard

        self._after_drops(drop, "drop-speculation")

    def _after_drops(self, then: Callable[[], Awaitable[Any]], name: str) -> None:
        """Run `then` once the drops before it are done; the next drop (and the next reply
        started ahead) waits for it in turn."""
        previous = self._dropping

        async def drop() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await then()

        self._dropping = asyncio.create_task(drop(), name=name)

    def _adopt_speculation(self, text: str) -> _Speculation | None:
        """The speculation answering exactly `text`, taken over by the turn; any other is dropped."""
        speculation = self._speculation
        if speculation is not None and speculation.text == text and not speculation.task.cancelled():
            self._speculation = None
            return speculation
        self._drop_speculation("the final words differ")
        return None

    # -- intents -------------------------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        # The event loop holds tasks only weakly: keep a reference until each one is done.
        task = asyncio.create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _handle(self, event: d.DialogueEvent) -> None:
        before = self.state
        intents = self.parts.dialogue.handle(event)
        if self.state != before and self._on_state is not None:
            self._on_state(self.state)
        if self._speculation is not None and self.state in (d.IDLE, d.SPEAKING):
            self._drop_speculation(f"the turn went on to {self.state}")
        self._apply(intents)

    def _apply(self, intents: list[d.Intent]) -> None:
        dialogue = self.parts.dialogue
        for intent in intents:
            if isinstance(intent, d.StartListening):
                self._start_listening(intent)
            elif isinstance(intent, d.StopListening):
                self._listening = False
            elif isinstance(intent, d.Transcribe):
                self._work = asyncio.create_task(self._transcribe(dialogue.turn), name="stt")
            elif isinstance(intent, PromptReady):
                self._work = asyncio.create_task(self._reply(intent, dialogue.turn, self.parts),
                                                 name="turn")
            elif isinstance(intent, d.StopSpeaking):
                self._spawn(self.parts.speech.stop(), "stop-speaking")
            elif isinstance(intent, d.CancelTurn):
                if self._work is not None and self._work is not asyncio.current_task():
                    self._work.cancel()
            elif isinstance(intent, d.ArmWakeWord):
                self.parts.wake.reset()
                if not self._rearming:
                    log.info("waiting for the wake word")

    def _start_listening(self, intent: d.StartListening) -> None:
        self._drop_speculation("listening anew")
        segmenter = self.parts.segmenter
        segmenter.reset()
        self._listening = True
        self._speculative = None
        words_so_far, self._utterance = self._utterance, None
        if intent.resumed:
            # The same turn goes on: its words so far, the pause, and the speech that went on
            # (already in the buffer) are one utterance; the segmenter starts on that speech.
            resumed = 0 if self._go_on is None else self._go_on.watch.speech_frames
            self._go_on = None
            if words_so_far is not None:
                self._buffer = _shorten_pause(self._buffer, self._origin_frames, words_so_far.end,
                                              resumed)
            self._origin_frames = len(self._buffer) - resumed
            for frame in self._buffer[self._origin_frames:]:
                for event in segmenter.feed(frame.duration, True):
                    self._on_segment_event(event, frame.captured_at)
            self._turn = _Turn(wake=self._turn.wake, listening=self._turn.listening)
            return
        self._close_go_on()
        self.parts.vad.reset()
        self._buffer = [] if intent.follow_up else list(self._pre_roll)
        self._origin_frames = len(self._buffer)
        if intent.follow_up:
            self._turn = _Turn()
        self._turn.listening = self._clock()

    async def _transcribe(self, turn: int) -> None:
        utterance = self._utterance
        assert utterance is not None, "Transcribe comes only after UtteranceCaptured"
        span = (utterance.start, utterance.end)
        speculative = self._speculative
        try:
            if speculative is not None and speculative[0] == span:
                transcript = await speculative[1]
            else:
                transcript = await asyncio.to_thread(self.parts.transcriber.transcribe,
                                                     self._slice(*span))
        except Exception as exc:  # speech-to-text failing must not end the daemon
            log.error("speech-to-text failed: %s", exc)
            self._fail(turn, "stt")
            apology = exc.apology if isinstance(exc, ElaraError) else None
            if apology and self.announcer is not None:
                # said at the next quiet moment, which is now: the turn has just been given up
                self.announcer.post(Announcement(apology, APOLOGY, chime=False, stored=False))
            return
        finally:
            if self._go_on is None and turn == self.parts.dialogue.turn:
                self._buffer = []  # else kept while the person may still go on with these words
        now = self._clock()
        came = self._speculative_at
        # The speculative transcript counts from when it came, not from when the turn ended.
        self._turn.transcript = (came[1] if speculative is not None and came is not None
                                 and came[0] is speculative[1] and speculative[0] == span else now)
        text, reason = self._heard(transcript)
        if reason == WAKE_PHRASE_ONLY:
            # "Hey Jarvis" and a pause (a follow-up often starts with it too): the question is
            # still to come, so the wake phrase alone never ends the turn — listen for it.
            log.info("heard only the wake word: listening for the question")
            self._rearming = True  # idle only for a moment: not "waiting for the wake word"
            try:
                self._handle(d.TranscriptRejected(reason=reason, at=now, turn=turn))
                self._turn = _Turn(wake=now)
                self._handle(d.WakeDetected(at=now))
            finally:
                self._rearming = False
            return
        if reason is not None:
            self.counters.rejected_utterances += 1
            log.info("dropped an utterance: %s", reason)
            self._handle(d.TranscriptRejected(reason=reason, at=self._clock(), turn=turn))
            return
        log.debug("heard: %s", text)
        self._handle(d.TranscriptReady(text=text, at=self._clock(), turn=turn))

    async def _reply(self, prompt: PromptReady, turn: int, parts: VoiceParts) -> None:
        started = self._clock()
        speech = parts.speech
        speculation = self._adopt_speculation(prompt.text)
        speech.on_first_audio = lambda: self._handle(d.ReplyStarted(at=self._clock(), turn=turn))
        try:
            if speculation is not None:
                # The reply started ahead answers exactly these words: store them, let it play.
                started = speculation.started
                self._commit_when_sure(speculation.commit)
                speech.release()
                result = await speculation.task
            else:
                if self._dropping is not None:
                    await asyncio.gather(self._dropping, return_exceptions=True)
                commit = asyncio.Event()
                self._commit_when_sure(commit)
                result = await parts.orchestrator.on_prompt_ready(prompt, commit=commit)
            await speech.finish()
        except asyncio.CancelledError:
            await speech.stop()
            raise
        self._speaking_until = self._clock() + parts.speaker_tail_ms / 1000
        if isinstance(result.error, LanguageModelError):
            self.counters.model_errors += 1
        self._turn.first_token = (started + result.timings.first_token
                                  if result.timings.first_token is not None else None)
        # A reply with nothing to say ("stop") leaves the sink's first audio of an earlier one.
        first_audio = speech.first_audio_at
        self._turn.first_audio = first_audio if first_audio is not None and first_audio >= started else None
        self._turn.done = self._clock()
        self._log_timings()
        if speech.failure is not None:
            log.error("the reply could not be played: %s", speech.failure)
            self._fail(turn, "playback")
            return
        self._handle(d.ReplyFinished(at=self._clock(), turn=turn, expects_answer=result.expects_answer,
                                     quiet=result.quiet))

    def _fail(self, turn: int, reason: str) -> None:
        self.counters.failed_turns += 1
        self._handle(d.TurnFailed(reason=reason, at=self._clock(), turn=turn))

    def _log_timings(self) -> None:
        t = self._turn

        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else b - a

        self.last_judgment = {} if t.judgment is None else {
            "verdict": t.judgment.verdict.value, "reason": t.judgment.reason,
            "at_silence_ms": t.judged_at_silence_ms, "end_after_ms": t.judgment.end_after_ms,
            "judge_ms": None if t.judge_seconds is None else t.judge_seconds * 1000}
        self.last_timings = {
            "wake_to_listening": span(t.wake, t.listening),
            "speech_end_to_turn_end": span(t.speech_end, t.turn_end),
            "speech_end_to_transcript": span(t.speech_end, t.transcript),
            "transcript_to_first_token": span(t.transcript, t.first_token),
            "first_token_to_first_audio": span(t.first_token, t.first_audio),
            "speech_end_to_first_audio": span(t.speech_end, t.first_audio),
            "total": span(t.wake or t.listening, t.done),
        }
        judged = "no judgment" if t.judgment is None else (
            f"judged {t.judgment.verdict.value} at {t.judged_at_silence_ms:.0f} ms of silence in "
            f"{(t.judge_seconds or 0) * 1000:.1f} ms ({t.judgment.reason}), ended after "
            f"{t.judgment.end_after_ms} ms")
        log.info("turn timings: %s; %s", ", ".join(
            f"{k} {'-' if v is None else f'{v:.3f} s'}" for k, v in self.last_timings.items()), judged)


@functools.lru_cache(maxsize=4)
def _chime(sample_rate: int) -> AudioClip:
    return chime(sample_rate)


#: the states in which the turn was taken as over and the person may still go on with it
_TURN_TAKEN = (d.TRANSCRIBING, d.THINKING, d.SPEAKING)
#: frames a wake phrase spans, over which the barge-in decision compares levels
_WAKE_WINDOW_FRAMES = 12
#: the audio kept while spotting "stop": the longest candidate, its joined gaps and a lead
_SPOT_FRAMES = 40
#: frames before a candidate's first speech given to Whisper with it
_SPOT_LEAD_FRAMES = 3
#: what `_read_over_playback` returns for "stop" (a wake word's name has no spaces)
_STOP = "stop said"
#: how far back her own words count as what a "stop" or a wake heard could be an echo of
_PLAYED_WORDS_SECONDS = 3.0
#: how alike a word she said must be to the wake word's name to explain a wake ("Jervis" is,
#: "Paris" is not): her words are exact, not Whisper's guesses
_PLAYED_WAKE_SIMILARITY = 0.8


#: of a pause the person went on after, what Whisper hears beyond the words' own tail: the more,
#: the more often tiny.en ends at the pause ("How far is it from Paris?" for "… Paris … to
#: Berlin?"); bench/going_on.py read on past it in 136 / 136 / 135 / 126 of 140 questions
#: with 0 / 1 / 2 / 5 frames, 127 with the whole pause
_PAUSE_KEPT_FRAMES = 1


def _shorten_pause(frames: list[AudioFrame], origin: int, words_end: float, resumed: int) -> list[AudioFrame]:
    """The words so far (up to `words_end`, segmenter time from `origin`), at most
    `_PAUSE_KEPT_FRAMES` of the pause after them, and the last `resumed` frames (the speech that
    went on). A second of silence, or of what cancelling left of her reply, inside an utterance
    sends tiny Whisper into repeating itself."""
    end = origin + round(words_end / FRAME_SECONDS)
    going_on = len(frames) - resumed
    if going_on - end <= _PAUSE_KEPT_FRAMES:
        return frames
    return frames[:end + _PAUSE_KEPT_FRAMES] + frames[going_on:]


def _pre_roll_frames(pre_roll_ms: int) -> int:
    return max(1, round(pre_roll_ms / 1000 / FRAME_SECONDS))


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
