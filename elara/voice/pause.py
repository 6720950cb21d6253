"""The pause reader: at each pause in the person's speech, the words so far are read before the
turn is known to be over, the pause is judged on them, doubtful words are read again, and the
reply may be started ahead — all while the pause goes on.

Whisper reads one stretch at a time: a short gap between words starts a reading too, and two
running side by side on two cores would slow the one at the real end. A reading is moot once the
person speaks again (`forget`) or the turn moves on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np

from elara.voice.ahead import HeldReply, ReplyAhead
from elara.voice.events import PauseJudged, TurnEvent
from elara.voice.parts import VoiceParts
from elara.voice.stt import Transcript
from elara.voice.turn import Judgment, PauseSignals, answer_ahead, pause_limit_ms, read_again_wanted

log = logging.getLogger(__name__)

Span = tuple[float, float]


class PauseReader:
    """Reads the words so far at each pause and judges when the pause ends; owns those tasks."""

    def __init__(self, *, clock: Callable[[], float], ahead: ReplyAhead, record: Callable[[TurnEvent], None],
                 listening: Callable[[], bool], on_segment: Callable[[object, float], None]) -> None:
        self._clock = clock
        self._ahead = ahead
        self._record = record
        self._listening = listening  # the loop still listens to this turn's words
        self._on_segment = on_segment  # the segmenter's events when the judged pause ends
        #: the reading of the words so far at the latest pause: its span and its task
        self.reading: tuple[Span, asyncio.Task[Transcript]] | None = None
        self._came: tuple[asyncio.Task[Transcript], float] | None = None  # when a reading came
        self._last: asyncio.Task[Transcript] | None = None  # the last reading started
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def settled(self) -> bool:
        """True when no pause is being judged."""
        return all(task.done() for task in self._tasks)

    def at_pause(self, span: Span, samples: np.ndarray, parts: VoiceParts) -> None:
        """A pause began after the words in `span` (`samples`): read them and judge it."""
        task = self._read(samples, parts.transcriber.transcribe)
        self.reading = (span, task)
        self._spawn(self._judge(task, parts, samples), "judge-pause")

    def forget(self) -> None:
        """The person spoke again (or listening began anew): the reading so far is moot."""
        self.reading = None

    def reading_of(self, span: Span) -> asyncio.Task[Transcript] | None:
        """The reading of exactly the words in `span`, if one was started."""
        return self.reading[1] if self.reading is not None and self.reading[0] == span else None

    async def final(self, span: Span, parts: VoiceParts,
                    samples: Callable[[], np.ndarray]) -> tuple[Transcript, float | None]:
        """The transcript of the turn's words (`span`): the reading at their last pause when it
        read exactly them, and when it came (a transcript read at the pause counts from then);
        else Whisper reads `samples()` now (None)."""
        task = self.reading_of(span)
        if task is None:
            return await asyncio.to_thread(parts.transcriber.transcribe, samples()), None
        transcript = await task
        return transcript, self._came[1] if self._came is not None and self._came[0] is task else None

    async def stop(self) -> None:
        """Cancel the judging in flight (shutdown)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _current(self, task: asyncio.Task[Transcript]) -> bool:
        return self.reading is not None and self.reading[1] is task and self._listening()

    def _read(self, samples: np.ndarray, read: Callable[[np.ndarray], Transcript], *,
              instead: Transcript | None = None) -> asyncio.Task[Transcript]:
        """Whisper (or `read`, a second reading) on the words so far, after the reading before it.
        A second reading that fails gives the first one (`instead`)."""
        previous = self._last

        async def transcribe() -> Transcript:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            if self.reading is None or self.reading[1] is not task:
                raise asyncio.CancelledError  # speech resumed while it waited: nobody needs it
            try:
                return await asyncio.to_thread(read, samples)
            except Exception as exc:
                if instead is None:
                    raise
                log.warning("reading the words again failed (%s): the first reading stands", exc)
                return instead

        task = asyncio.create_task(transcribe(), name="stt-at-pause")
        self._last = task
        return task

    async def _judge(self, task: asyncio.Task[Transcript], parts: VoiceParts, samples: np.ndarray) -> None:
        """Once the pause's reading is in: judge whether the person is done, start the reply
        ahead if the words may be the whole turn, read doubtful words again, and end the pause
        when the judgment says (and no sooner than the held reply's first audio exists)."""
        try:
            transcript = await task
        except Exception:  # the loop reports it if it is the final transcript
            transcript = None
        if not self._current(task):
            return  # speech resumed, or the turn moved on, while Whisper worked
        self._came = (task, self._clock())
        judgment = self._judgment(transcript, parts)
        held = None
        if transcript is not None:
            text, reason = parts.heard(transcript)
            if answer_ahead(judgment, enabled=parts.speculative_reply, is_question=reason is None):
                held = self._ahead.start(text, parts)
            if (parts.read_again is not None and reason is None
                    and read_again_wanted(judgment, transcript.avg_logprob)):
                current, held = await self._read_again(task, transcript, text, judgment, samples, parts, held)
                if not current:
                    return
        if parts.judge is None:
            return
        end_after = pause_limit_ms(judgment, round(parts.segmenter.end_silence_ms))
        if held is not None:
            # The reply can't be heard before its first audio exists anyway: until then the
            # person may still go on, and the pause ends no sooner (up to MaxPauseMs).
            await ReplyAhead.audio_ready(held, parts)
            if self._ahead.held is not held or not self._listening():
                return
        for event in parts.segmenter.end_pause_after(end_after):
            self._on_segment(event, self._clock())

    def _judgment(self, transcript: Transcript | None, parts: VoiceParts) -> Judgment | None:
        """The end-of-turn judgment on the words so far (None: no judge), recorded and logged."""
        if parts.judge is None:
            return None
        segmenter = parts.segmenter
        began = self._clock()
        judgment = parts.judge.judge(
            PauseSignals.read(segmenter.silence_ms, transcript, parts.wake_phrases, parts.is_command))
        self._record(PauseJudged(at=began, verdict=judgment.verdict.value, reason=judgment.reason,
                                 silence_ms=segmenter.silence_ms, end_after_ms=judgment.end_after_ms,
                                 seconds=self._clock() - began))
        log.info("pause judged %s at %.0f ms of silence (%s): the turn ends after %d ms",
                 judgment.verdict.value, segmenter.silence_ms, judgment.reason, judgment.end_after_ms)
        return judgment

    async def _read_again(self, first: asyncio.Task[Transcript], transcript: Transcript, text: str,
                          judgment: Judgment | None, samples: np.ndarray, parts: VoiceParts,
                          held: HeldReply | None) -> tuple[bool, HeldReply | None]:
        """Doubtful words are where the first reading goes wrong: read them again. The reply
        started on the first reading goes on meanwhile, kept if it stands or the second agrees.
        Returns whether the reading still counts, and the reply held now."""
        assert parts.read_again is not None and self.reading is not None
        span = self.reading[0]
        again = self._read(samples, functools.partial(parts.read_again.reread, reading=transcript),
                           instead=transcript)
        self.reading = (span, again)
        second = await again
        if not self._current(again):
            return False, held
        second_text, second_reason = parts.heard(second)
        if second_reason is not None:  # the wider beam heard no question: the first stands
            self.reading = (span, first)
            log.info("read the doubted words again: no question heard, the first reading stands")
        elif second is transcript:
            self.reading = (span, first)
            log.info("read the doubted words again: the first reading stands")
        elif second_text == text:
            self._came = (again, self._clock())
            log.info("read the doubted words again: the same")
        else:
            self._came = (again, self._clock())
            log.info("read the doubted words again: changed")
            log.debug("read again: %r", second_text)
            self._ahead.drop("the second reading differs", parts)
            held = None
            if answer_ahead(judgment, enabled=parts.speculative_reply, is_question=True):
                held = self._ahead.start(second_text, parts)
        return True, held
