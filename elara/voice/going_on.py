"""The moments after the pause taken for the end of the turn, in which the person may still go
on with it (`Listening.GoOnMs`): the turn is stored only once they pass in silence, and speech in
them (the person's, not her echo) drops the reply begun and listens on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from elara.audio.frames import FRAME_SECONDS, AudioFrame
from elara.voice import dialogue as d
from elara.voice.events import Committed, Dropped, GoneOn, TurnEvent, TurnRecord
from elara.voice.parts import LoopCounters, VoiceParts
from elara.voice.turn import GoingOn, GoOnWatch

log = logging.getLogger(__name__)

#: of a pause the person went on after, what Whisper hears beyond the words' own tail: the more,
#: the more often tiny.en ends at the pause ("How far is it from Paris?" for "… Paris … to
#: Berlin?"; bench/going_on.py measures it)
PAUSE_KEPT_FRAMES = 1


class GoingOnWindow:
    """Watches the moments after the turn was taken as over, and holds the turn's commits until
    they pass."""

    def __init__(self, *, clock: Callable[[], float], counters: LoopCounters,
                 record: Callable[[TurnEvent], None]) -> None:
        self._clock = clock
        self._counters = counters
        self._record = record
        self._watch: GoOnWatch | None = None
        self._commits: list[tuple[asyncio.Event, TurnRecord]] = []

    @property
    def open(self) -> bool:
        """True while the person may still go on with the turn."""
        return self._watch is not None

    def start(self, until: float, min_speech_ms: int) -> None:
        """Open the window until `until`: the person's speech ended `GoOnMs` before."""
        self._watch = GoOnWatch(until=until, min_speech_ms=min_speech_ms)
        self._commits = []

    def over(self, at: float) -> bool:
        """Have the moments passed at `at`?"""
        return self._watch is None or self._watch.over(at)

    async def weigh(self, frame: AudioFrame, parts: VoiceParts, state: str) -> GoingOn:
        """What one more frame shows (in the dialogue's `state`): the person went on (counted,
        logged and recorded: the reply begun is dropped), the moments are over, or still watching."""
        assert self._watch is not None
        probability = await asyncio.to_thread(parts.vad.speech_probability, frame)
        is_speech = probability >= parts.vad_threshold
        if is_speech and parts.echo is not None:
            # Over her voice, speech is what stands above what cancelling leaves of hers; just
            # after a gap in her voice that can be her own (each drop would start her again, and
            # again, never long enough for the canceller to relearn).
            is_speech = await asyncio.to_thread(parts.echo.person_over_playback, frame.captured_at)
            log.debug("going on? speech (%.2f): %s", probability, is_speech)
        elif is_speech and state == d.SPEAKING:
            is_speech = False  # her own voice, uncancelled, is all the microphone may hear
        seen = self._watch.feed(frame.captured_at, frame.duration, is_speech)
        if seen is GoingOn.WENT_ON:
            self._counters.went_on += 1
            self._counters.speculations_discarded += 1
            log.info("the person went on %.2f s after their words seemed done: dropping the reply "
                     "begun (%s) and listening on", frame.captured_at - self._watch.until + parts.go_on_ms / 1000,
                     state)
            self._record(Dropped(at=frame.captured_at, why="the person went on"))
            self._record(GoneOn(at=frame.captured_at))
        return seen

    def commit_when_sure(self, commit: asyncio.Event, record: TurnRecord) -> None:
        """Store the turn (set `commit`) now, or once the person can no longer go on with it."""
        if self._watch is None:
            self._commit([(commit, record)])
        else:
            self._commits.append((commit, record))

    def close(self) -> bool:
        """The person did not go on (or began something else): the turn is theirs to keep.
        True if the window was open."""
        watch, commits, self._watch, self._commits = self._watch, self._commits, None, []
        if watch is None:
            return False
        self._commit(commits)
        return True

    def resume(self) -> int:
        """The same turn goes on: close the window without committing; how many frames the speech
        that went on spans."""
        frames = 0 if self._watch is None else self._watch.speech_frames
        self._watch, self._commits = None, []
        return frames

    def _commit(self, commits: list[tuple[asyncio.Event, TurnRecord]]) -> None:
        if commits:
            self._counters.turns += 1
        for commit, record in commits:
            commit.set()
            record.add(Committed(at=self._clock()))


def shorten_pause(frames: list[AudioFrame], origin: int, words_end: float, resumed: int) -> list[AudioFrame]:
    """The words so far (up to `words_end`, segmenter time from `origin`), at most
    `PAUSE_KEPT_FRAMES` of the pause after them, and the last `resumed` frames (the speech that
    went on). A second of silence, or of what cancelling left of her reply, inside an utterance
    sends tiny Whisper into repeating itself."""
    end = origin + round(words_end / FRAME_SECONDS)
    going_on = len(frames) - resumed
    if going_on - end <= PAUSE_KEPT_FRAMES:
        return frames
    return frames[:end + PAUSE_KEPT_FRAMES] + frames[going_on:]
