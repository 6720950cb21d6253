"""The voice loop: microphone frames in; wake word, endpointing, transcription and turns out.

It routes each frame to the stage the dialogue's state calls for, turns what the stages observe
into dialogue events, and carries out the intents the dialogue answers with. Each behaviour that
owns tasks is a collaborator: the pause reader (`pause`), the reply started ahead (`ahead`), the
going-on window (`going_on`), the stop listener (`stop_listener`) and announcement playback
(`announcing`). Engines are handed in as one `VoiceParts` value; their blocking calls run in
worker threads. A new `VoiceParts` (a reload) is swapped in whole at the next idle moment, so no
part of a running turn changes under it.

Every moment a turn reports is a typed event (`events`) on one clock: the one handed in
(`time.monotonic` in the daemon), which is also the clock the microphone stamps its frames with.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from elara.audio.frames import AudioFrame
from elara.conversation.messages import PromptReady
from elara.errors import ElaraError
from elara.skills.announcements import APOLOGY, Announcement, Announcer
from elara.voice import dialogue as d
from elara.voice.ahead import ReplyAhead
from elara.voice.announcing import AnnouncementPlayer
from elara.voice.endpoint import SILENCE, EarlyEnd, NoSpeech, SpeechResumed, SpeechStarted, UtteranceEnded
from elara.voice.events import (
    Dropped,
    Listening,
    SpeechEnd,
    SpeechStart,
    Transcribed,
    TurnEnd,
    TurnLog,
    Wake,
)
from elara.voice.going_on import GoingOnWindow
from elara.voice.parts import WAKE_PHRASE_ONLY, LoopCounters, VoiceParts
from elara.voice.pause import PauseReader
from elara.voice.reply import ReplySpeaker
from elara.voice.stop_listener import StopListener
from elara.voice.stt import Transcript
from elara.voice.turn import GoingOn
from elara.voice.utterance import Utterance
from elara.voice.wake_listener import READER, WakeListener
from elara.voice.wake_phrase import said_wake_phrase

log = logging.getLogger(__name__)

#: the states in which the turn was taken as over and the person may still go on with it
_TURN_TAKEN = (d.TRANSCRIBING, d.THINKING, d.SPEAKING)


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
        self.counters = LoopCounters()
        self.turns = TurnLog()  # the turn under way and the last one, as typed events
        #: the clock's time when the last frame was processed (the watchdog's sign of life)
        self.last_progress = clock()
        self._clock = clock
        self._on_state = on_state
        self._listening = False
        self.utterance = Utterance(parts.pre_roll_ms)
        self._work: asyncio.Task[None] | None = None  # the transcription or turn in flight
        self._speaking_until = 0.0
        self._swap: _Swap | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._rearming = False
        self.wakes = WakeListener(counters=self.counters, state=lambda: self.state, on_wake=self._on_wake)
        self.ahead = ReplyAhead(clock=clock, counters=self.counters, record=self.turns.add)
        self.going_on = GoingOnWindow(clock=clock, counters=self.counters, record=self.turns.add)
        self.replies = ReplySpeaker(clock=clock, counters=self.counters, ahead=self.ahead,
                                    going_on=self.going_on, playback_ends=self._playback_ends_at)
        self.pauses = PauseReader(clock=clock, ahead=self.ahead, record=self.turns.add,
                                  listening=lambda: self._listening, on_segment=self._on_segment_event)
        self.stop_listener = StopListener(
            counters=self.counters, parts=lambda: self.parts, state=lambda: self.state, ringing=self._ringing,
            explained=lambda name, near, far, played, at: self.wakes.explained(
                name, near, far, played, self.parts.echo, at=at, ear=READER),
            on_stop=self._stop_heard, on_wake=self._on_wake)
        #: what to say unasked, at idle moments (it outlives reloads, as the loop does)
        self._announcer = announcer
        self.announcements = (AnnouncementPlayer(announcer, clock=clock, handle=self._handle,
                                                 playback_ends=self._playback_ends_at)
                              if announcer is not None else None)

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
        return (not self.busy and all(t.done() for t in self._background) and self.pauses.settled
                and self.ahead.settled and self.stop_listener.settled
                and (self.announcements is None or not self.announcements.playing))

    def status(self) -> dict[str, Any]:
        """The loop's part of `elara status`: state, counters, the last turn's timings."""
        return {"state": self.state, "counters": self.counters.status(self.parts.wake.confirmations),
                **self.turns.status()}

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
        self._close_going_on()
        self._handle(d.Cancel(at=self._clock()))

    async def shutdown(self, grace: float = 3.0) -> None:
        """Stop listening; give the turn in flight `grace` seconds to finish storing, then drop it."""
        self._listening = False
        self._close_going_on()  # what was said is the turn: the reply in flight stores it
        if self.announcements is not None:
            await self.announcements.stop()
        await self.stop_listener.stop()
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
        await self.ahead.drops_done()
        await self.pauses.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    async def on_frame(self, frame: AudioFrame) -> None:
        """Route one frame to the wake word, the segmenter, the going-on window or the stop
        listener, per the dialogue's state."""
        self.counters.frames += 1
        self.last_progress = self._clock()
        echo = self.parts.echo
        if echo is not None:
            # Nothing played lately: the frame passes as it is, which is not worth a thread.
            frame = echo.clean(frame) if echo.passes(frame) else await asyncio.to_thread(echo.clean, frame)
        if self._swap is not None and not self._swap.done.done() and self._idle():
            self._swap_now()
        self._handle(d.Tick(now=frame.captured_at))
        if self.announcements is not None and self._idle() and self.settled:
            self.announcements.start_due(self.parts)
        if self._listening:
            await self._feed_segmenter(frame)
        elif not self.going_on.open or not await self._watch_going_on(frame):
            state = self.state
            if state == d.IDLE or (state in (d.SPEAKING, d.ANNOUNCING) and self.parts.dialogue.barge_in):
                await self.wakes.feed(frame, self.parts, self._speaking_until)
        await self.stop_listener.feed(frame, self.parts, self._stop_wanted(frame))
        self.utterance.keep(frame)

    # -- swapping parts ------------------------------------------------------------------------

    def _idle(self) -> bool:
        return self.state == d.IDLE and not self.busy

    def _swap_now(self) -> None:
        assert self._swap is not None
        old, new = self.parts, self._swap.parts
        self.parts = new
        self.utterance.resize(new.pre_roll_ms)
        new.wake.reset()
        self._swap.done.set_result(old)
        log.info("new settings in use")
        if self._on_state is not None:
            self._on_state(self.state)

    # -- the wake word -------------------------------------------------------------------------

    def _on_wake(self, name: str, at: float, how: str, said_from: float | None = None) -> None:
        """Wake word `name`, heard at `at`, counts: start listening (over her reply, a barge-in),
        with what was heard since `said_from` for a wake read once the phrase was over."""
        log.info("wake word %s (%s)", name, how)
        self.wakes.wake_counted()
        if self.state != d.IDLE:
            self.counters.barge_ins += 1
            self._close_going_on()  # a new turn over the reply: the one it answers stays stored
        self.counters.wakes += 1
        self.turns.begin()
        self.turns.add(Wake(at=at, name=name, how=how))
        self._handle(d.WakeDetected(at=at, said_from=said_from))

    # -- the person's words --------------------------------------------------------------------

    async def _feed_segmenter(self, frame: AudioFrame) -> None:
        for event in await self.utterance.hear(frame, self.parts, self._speaking_until):
            self._on_segment_event(event, frame.captured_at)

    def _on_segment_event(self, event: object, now: float) -> None:
        if isinstance(event, SpeechStarted):
            self.turns.add(SpeechStart(at=now))
            self._handle(d.SpeechHeard(at=now))
        elif isinstance(event, EarlyEnd):
            # Start transcribing now; kept if speech does not resume before the end silence.
            # Open the speaker too: opening the device would otherwise delay the first sentence.
            self._spawn(self.parts.speech.prepare(), "prepare-speaker")
            span = (event.start, event.end)
            self.pauses.at_pause(span, self.utterance.slice(*span), self.parts)
        elif isinstance(event, SpeechResumed):
            self.pauses.forget()
            self.ahead.drop("speech resumed", self.parts)
        elif isinstance(event, UtteranceEnded):
            self.utterance.ended = event
            spoke = self.utterance.last_speech_at
            if spoke is not None:
                self.turns.add(SpeechEnd(at=spoke))
            self.turns.add(TurnEnd(at=now))
            go_on_ms = self.parts.go_on_ms
            if event.reason == SILENCE and go_on_ms > 0 and spoke is not None:
                self.going_on.start(spoke + go_on_ms / 1000, self.parts.min_speech_ms)
            self._handle(d.UtteranceCaptured(at=now))
        elif isinstance(event, NoSpeech):
            self.counters.no_speech += 1
            self.turns.add(Dropped(at=now, why="no speech"))
            self._handle(d.NoSpeechHeard(at=now))

    # -- the person going on after the pause taken for the end --------------------------------

    async def _watch_going_on(self, frame: AudioFrame) -> bool:
        """Watch the moments after the turn was taken as over: the person going on with it drops
        the reply begun (heard or not) and listens on, their first words kept. True if so."""
        if self.going_on.over(frame.captured_at) or self.state not in _TURN_TAKEN:
            self._close_going_on()
            return False
        self.utterance.frames.append(frame)
        seen = await self.going_on.weigh(frame, self.parts, self.state)
        if seen is GoingOn.OVER:
            self._close_going_on()
        if seen is not GoingOn.WENT_ON:
            return False
        dropped = self._work
        self._handle(d.SpeechContinued(at=frame.captured_at))  # the capture takes over the window
        if dropped is not None and not dropped.done():
            # A reply started ahead for the words that go on must not be held and then let
            # go by this one's stop(): it waits for this one to be gone, as for any drop.
            self.ahead.after_drops(functools.partial(asyncio.gather, dropped, return_exceptions=True),
                                   "drop-reply-gone-on")
        return True

    def _close_going_on(self) -> None:
        """The person did not go on (or began something else): the turn is theirs to keep."""
        if self.going_on.close():
            self.utterance.frames = []  # the transcription took its slice when it began

    # -- "stop" without the wake word ----------------------------------------------------------

    def _ringing(self) -> bool:
        return self._announcer is not None and bool(self._announcer.ringing)

    def _stop_wanted(self, frame: AudioFrame) -> bool:
        """Listen for "stop" while she speaks (her echo cancelled) or while a timer rings."""
        parts = self.parts
        if not parts.stop_words or self._listening or self.going_on.open:
            return False  # while the person may go on, the going-on window has the VAD
        state = self.state
        if state in (d.SPEAKING, d.ANNOUNCING):
            return parts.echo is not None
        # Between two rings she is silent: with her echo gone, "stop" is heard there too.
        return (state == d.IDLE and self._ringing() and not self.busy
                and (parts.echo is not None or frame.captured_at >= self._speaking_until))

    def _stop_heard(self) -> None:
        """The person said "stop": silence the reply or the ringing, start no turn, ask nothing."""
        self.counters.stops += 1
        self._close_going_on()
        state = self.state
        log.info("heard \"stop\" while %s: silenced", state)
        if self._announcer is not None:
            self._announcer.stop()
        self.stop_listener.forget()
        if state in (d.SPEAKING, d.ANNOUNCING):
            self._handle(d.StopHeard(at=self._clock()))

    def _playback_ends_at(self, at: float) -> None:
        self._speaking_until = at

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
        if self.ahead.held is not None and self.state in (d.IDLE, d.SPEAKING):
            self.ahead.drop(f"the turn went on to {self.state}", self.parts)
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
                self._work = asyncio.create_task(self._reply(intent, dialogue.turn, self.parts), name="turn")
            elif isinstance(intent, d.StopSpeaking):
                self._spawn(self.parts.speech.stop(), "stop-speaking")
            elif isinstance(intent, d.CancelTurn):
                if self._work is not None and self._work is not asyncio.current_task():
                    self._work.cancel()
            elif isinstance(intent, d.ArmWakeWord):
                self.wakes.rearm()  # not reset here: a frame may be scoring in its thread
                if not self._rearming:
                    log.info("waiting for the wake word")

    def _start_listening(self, intent: d.StartListening) -> None:
        self.ahead.drop("listening anew", self.parts)
        segmenter = self.parts.segmenter
        segmenter.reset()
        self._listening = True
        self.pauses.forget()
        if intent.resumed:
            # The same turn goes on: its words so far, the pause, and the speech that went on
            # (already heard) are one utterance; the segmenter starts on that speech.
            for frame in self.utterance.resume(self.going_on.resume()):
                for event in segmenter.feed(frame.duration, True):
                    self._on_segment_event(event, frame.captured_at)
            return
        self._close_going_on()
        self.parts.vad.reset()
        self.utterance.begin(follow_up=intent.follow_up, said_from=intent.said_from)
        if intent.follow_up:
            self.turns.begin()
        self.turns.add(Listening(at=self._clock()))

    async def _transcribe(self, turn: int) -> None:
        utterance = self.utterance.ended
        assert utterance is not None, "Transcribe comes only after UtteranceCaptured"
        span = (utterance.start, utterance.end)
        try:
            transcript, came = await self.pauses.final(span, self.parts, lambda: self.utterance.slice(*span))
        except Exception as exc:  # speech-to-text failing must not end the daemon
            self._transcription_failed(exc, turn)
            return
        finally:
            if not self.going_on.open and turn == self.parts.dialogue.turn:
                self.utterance.frames = []  # else kept while the person may still go on with these words
        now = self._clock()
        self.turns.add(Transcribed(at=came if came is not None else now))
        self._on_transcript(transcript, turn, now)

    def _transcription_failed(self, exc: Exception, turn: int) -> None:
        log.error("speech-to-text failed: %s", exc)
        self.turns.add(Dropped(at=self._clock(), why="speech-to-text failed"))
        self._fail(turn, "stt")
        apology = exc.apology if isinstance(exc, ElaraError) else None
        if apology and self._announcer is not None:
            # said at the next quiet moment, which is now: the turn has just been given up
            self._announcer.post(Announcement(apology, APOLOGY, chime=False, stored=False))

    def _on_transcript(self, transcript: Transcript, turn: int, now: float) -> None:
        text, reason = self.parts.heard(transcript)
        if reason == WAKE_PHRASE_ONLY:
            # "Hey Jarvis" and a pause (a follow-up often starts with it too): the question is
            # still to come, so the wake phrase alone never ends the turn — listen for it.
            log.info("heard only the wake word: listening for the question")
            self.turns.add(Dropped(at=now, why=reason))
            self._rearming = True  # idle only for a moment: not "waiting for the wake word"
            try:
                self._handle(d.TranscriptRejected(reason=reason, at=now, turn=turn))
                self.turns.begin()
                phrase = said_wake_phrase(transcript.text, self.parts.wake_phrases) or ""
                self.turns.add(Wake(at=now, name=phrase.replace(" ", "_"), how=WAKE_PHRASE_ONLY))
                self._handle(d.WakeDetected(at=now))
            finally:
                self._rearming = False
            return
        if reason is not None:
            self.counters.rejected_utterances += 1
            log.info("dropped an utterance: %s", reason)
            self.turns.add(Dropped(at=self._clock(), why=reason))
            self._handle(d.TranscriptRejected(reason=reason, at=self._clock(), turn=turn))
            return
        log.debug("heard: %s", text)
        self._handle(d.TranscriptReady(text=text, at=self._clock(), turn=turn))

    async def _reply(self, prompt: PromptReady, turn: int, parts: VoiceParts) -> None:
        record, speech = self.turns.current, parts.speech
        speech.on_first_audio = lambda: self._handle(d.ReplyStarted(at=self._clock(), turn=turn))
        result = await self.replies.speak(prompt, parts, record)
        self.turns.finished(record)
        if speech.failure is not None:
            log.error("the reply could not be played: %s", speech.failure)
            self._fail(turn, "playback")
            return
        self._handle(d.ReplyFinished(at=self._clock(), turn=turn, expects_answer=result.expects_answer,
                                     quiet=result.quiet))

    def _fail(self, turn: int, reason: str) -> None:
        self.counters.failed_turns += 1
        self._handle(d.TurnFailed(reason=reason, at=self._clock(), turn=turn))
