"""Speaking a streamed reply: synthesize the next sentence while the current one plays.

A reply can be held: synthesized ahead but not played until released (a speculative reply,
started before the turn was confirmed over, is dropped unheard if the person goes on speaking)."""

from __future__ import annotations

import asyncio
import collections
import logging
import re
import time
from collections.abc import Callable
from typing import Protocol

from elara.audio.frames import AudioClip
from elara.errors import ElaraError

log = logging.getLogger(__name__)

_CLAUSE = re.compile(r"[,;:—–]\s")


class Synthesizer(Protocol):
    """Text in, audio out (Piper); blocking."""

    @property
    def sample_rate(self) -> int:
        """The rate of the clips it speaks."""

    def synthesize(self, text: str) -> AudioClip:
        """The spoken text."""


class Player(Protocol):
    """Plays clips and can be cut off."""

    async def play(self, clip: AudioClip) -> object:
        """Return once the clip has been heard."""

    async def stop(self) -> None:
        """Cut playback now."""

    async def prepare(self, sample_rate: int) -> None:
        """Open the device ahead of the first clip."""

    def pause(self) -> None:
        """Hold playback where it is, silent, until `resume`."""

    def resume(self) -> None:
        """Go on from where `pause` held it."""


def first_chunk(sentence: str, words: int) -> tuple[str, str]:
    """Split a long first sentence at a clause after about `words` words, so audio starts sooner."""
    if words <= 0 or len(sentence.split()) <= 2 * words:
        return sentence, ""
    for match in _CLAUSE.finditer(sentence):
        if len(sentence[:match.start()].split()) >= words:
            return sentence[:match.end()].strip(), sentence[match.end():].strip()
    return sentence, ""


class SpeechSink:
    """A SentenceSink that speaks: `say` queues text and returns at once; a synthesis task and
    a playback task run behind it, so sentence n+1 is synthesized while sentence n plays."""

    def __init__(self, synthesizer: Synthesizer, player: Player, *, first_chunk_words: int = 0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._synthesizer = synthesizer
        self._player = player
        self._first_chunk_words = first_chunk_words
        self._monotonic = monotonic
        self._texts: asyncio.Queue[str | AudioClip | None] = asyncio.Queue()
        self._clips: asyncio.Queue[tuple[AudioClip, str | None] | None] = asyncio.Queue()
        self._heard: list[str] = []  # the current reply's sentences heard to their end
        self._playing: tuple[str, float, float] | None = None  # text, when handed over, seconds
        #: the last sentences handed to the speaker, with when each ends: what she said lately
        self._spoken: collections.deque[tuple[str, float]] = collections.deque(maxlen=4)
        self._cut: str | None = None  # what had been heard when the last reply was stopped
        self._tasks: list[asyncio.Task] = []
        self._first_in_reply = True
        self._released = asyncio.Event()
        self._released.set()
        self._audio_ready = asyncio.Event()
        #: monotonic time the current reply's first sample was heard (None before)
        self.first_audio_at: float | None = None
        #: called once per reply when its first audio starts
        self.on_first_audio: Callable[[], None] | None = None
        #: why the current reply's audio stopped short (the speaker failed), else None
        self.failure: Exception | None = None
        self._heard_when_failed: str | None = None

    async def say(self, sentence: str) -> None:
        """Queue a sentence to be spoken; never waits for the audio."""
        self._ensure_running()
        if self._first_in_reply:
            self._first_in_reply = False
            head, rest = first_chunk(sentence, self._first_chunk_words)
            await self._texts.put(head)
            if rest:
                await self._texts.put(rest)
            return
        await self._texts.put(sentence)

    @property
    def sample_rate(self) -> int:
        """The voice's sample rate (a sound played between sentences is best made at it)."""
        return self._synthesizer.sample_rate

    async def sound(self, clip: AudioClip) -> None:
        """Queue a sound (a chime) to play in turn with the sentences; never waits for the audio."""
        self._ensure_running()
        self._first_in_reply = False
        await self._texts.put(clip)

    async def prepare(self) -> None:
        """Get the speaker ready while the reply is still being worked out; failures are logged."""
        try:
            await self._player.prepare(self._synthesizer.sample_rate)
        except Exception as exc:  # the reply will try again, and report, when it plays
            log.warning("could not open the speaker ahead of the reply: %s", exc)

    def pause(self) -> None:
        """Fall silent mid-sentence (someone may be telling her to stop) until `resume`."""
        self._player.pause()

    def resume(self) -> None:
        """Go on where `pause` left off."""
        self._player.resume()

    def hold(self) -> None:
        """Synthesize what is said from now on but play none of it until `release()`."""
        self._released.clear()

    def release(self) -> None:
        """Play the held reply (the turn it answers is confirmed over)."""
        self._released.set()

    async def audio_ready(self) -> None:
        """Return once the current reply's first audio is synthesized (or the reply was stopped
        or ended without any)."""
        if not self._tasks and not self.held:
            return  # no reply under way (it may have ended with nothing to say): nothing to wait for
        await self._audio_ready.wait()

    def heard_text(self) -> str:
        """What of the current reply has been heard so far: the sentences played to their end,
        and the words of the one playing now in proportion to its time played (cut with "…").
        After `stop()`, what had been heard when it was stopped, until the next reply starts."""
        if self._cut is not None:
            return self._cut
        parts = list(self._heard)
        if self._playing is not None:
            text, since, seconds = self._playing
            words = text.split()
            played = max(0.0, min(1.0, (self._monotonic() - since) / seconds)) if seconds > 0 else 0.0
            count = int(len(words) * played)
            if count:
                parts.append(" ".join(words[:count]) + " …")
        return " ".join(parts)

    def cut_short(self) -> str | None:
        """What was heard of the last reply when its audio stopped short because the speaker
        failed (a device gone mid-reply); None when it played to its end or was stopped."""
        return self._heard_when_failed if self.failure is not None else None

    def recent_text(self, seconds: float) -> str:
        """The sentences heard (or playing) in the last `seconds`, across replies and
        announcements: what she could have been heard saying."""
        since = self._monotonic() - seconds
        return " ".join(text for text, end in self._spoken if end >= since)

    @property
    def held(self) -> bool:
        """True while a reply is held back."""
        return not self._released.is_set()

    async def finish(self) -> None:
        """Wait until everything queued has been heard, then get ready for the next reply."""
        if self._tasks:
            await self._texts.put(None)
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._reset()

    async def stop(self) -> None:
        """Drop what is queued and cut the audio now (barge-in, shutdown)."""
        if self._tasks:
            self._cut = self.heard_text()
        for task in self._tasks:
            task.cancel()
        await self._player.stop()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._reset()

    def _reset(self) -> None:
        self._tasks = []
        self._texts = asyncio.Queue()
        self._clips = asyncio.Queue()
        self._heard = []
        self._playing = None
        self._first_in_reply = True
        self._released.set()
        self._audio_ready.set()  # nobody waits for this reply's audio any more
        self._audio_ready = asyncio.Event()

    def _ensure_running(self) -> None:
        if not self._tasks:
            self.first_audio_at = None
            self.failure = None
            self._heard_when_failed = None
            self._cut = None
            self._tasks = [asyncio.create_task(self._synthesize_all(), name="tts"),
                           asyncio.create_task(self._play_all(), name="playback")]

    async def _synthesize_all(self) -> None:
        try:
            while (text := await self._texts.get()) is not None:
                if isinstance(text, AudioClip):
                    await self._clips.put((text, None))
                    self._audio_ready.set()
                    continue
                try:
                    clip = await asyncio.to_thread(self._synthesizer.synthesize, text)
                except ElaraError as exc:  # a speech service down: said once per sentence, no trace
                    log.error("text-to-speech failed for a sentence; skipping it: %s", exc)
                    continue
                except Exception:  # a sentence Piper can't say must not silence the rest
                    log.exception("text-to-speech failed for a sentence; skipping it")
                    continue
                if len(clip.samples):
                    await self._clips.put((clip, text))
                    self._audio_ready.set()
        finally:
            self._audio_ready.set()
            self._clips.put_nowait(None)

    async def _play_all(self) -> None:
        while (item := await self._clips.get()) is not None:
            clip, text = item
            await self._released.wait()
            first = self.first_audio_at is None
            if first and self.on_first_audio is not None:
                self.on_first_audio()
            handed_over = self._monotonic()
            if text is not None:
                self._playing = (text, handed_over, clip.duration)
                self._spoken.append((text, handed_over + clip.duration))
            try:
                whole = await self._player.play(clip)
            except Exception as exc:
                log.exception("playback failed; dropping the rest of the reply's audio")
                self._heard_when_failed = self.heard_text()
                self.failure = exc
                return
            finally:
                self._playing = None
            if whole is False:
                # The speaker was stopped (barge-in): the rest of this reply must not play, even
                # though the speaker answered the cut where this task's cancellation would be.
                return
            if text is not None:
                self._heard.append(text)
            if first:
                # play() returns once the last sample was heard, so the first was heard one clip
                # length earlier: that counts opening the stream and the device's latency too.
                self.first_audio_at = max(handed_over, self._monotonic() - clip.duration)
