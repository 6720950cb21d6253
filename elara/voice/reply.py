"""Speaking the reply to the person's words: the reply started ahead when it answers exactly them,
else a new one from the orchestrator; the turn is stored once the person can no longer go on, and
the reply's moments are recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from elara.brain.orchestrator import TurnResult
from elara.conversation.messages import PromptReady
from elara.errors import LanguageModelError
from elara.voice.ahead import ReplyAhead
from elara.voice.events import Done, Dropped, FirstAudio, FirstToken, Prompt, TurnRecord
from elara.voice.going_on import GoingOnWindow
from elara.voice.parts import LoopCounters, VoiceParts


class ReplySpeaker:
    """Speaks one reply at a time, to its end or until cut off."""

    def __init__(self, *, clock: Callable[[], float], counters: LoopCounters, ahead: ReplyAhead,
                 going_on: GoingOnWindow, playback_ends: Callable[[float], None]) -> None:
        self._clock = clock
        self._counters = counters
        self._ahead = ahead
        self._going_on = going_on
        self._playback_ends = playback_ends  # when her voice (and its tail) ends: the microphone may hear it until then

    async def speak(self, prompt: PromptReady, parts: VoiceParts, record: TurnRecord) -> TurnResult:
        """Answer `prompt` aloud and wait until the reply is heard; its moments go to `record`."""
        speech, started = parts.speech, self._clock()
        held = self._ahead.adopt(prompt.text, parts)
        ended = held.ended if held is not None else asyncio.Event()
        commit = held.commit if held is not None else asyncio.Event()
        ended.set()  # the words are stored now: the person going on drops only the reply
        try:
            if held is not None:
                # The reply started ahead answers exactly these words: let it play.
                started = held.started
                self._going_on.commit_when_sure(commit, record)
                speech.release()
                result = await held.task
            else:
                await self._ahead.drops_done()
                record.add(Prompt(at=started))
                self._going_on.commit_when_sure(commit, record)
                result = await parts.orchestrator.on_prompt_ready(prompt, commit=commit, ended=ended)
            await speech.finish()
        except asyncio.CancelledError:
            record.add(Dropped(at=self._clock(), why="the reply was cut off"))
            await speech.stop()
            raise
        self._playback_ends(self._clock() + parts.speaker_tail_ms / 1000)
        if isinstance(result.error, LanguageModelError):
            self._counters.model_errors += 1
        if result.timings.first_token is not None:
            read = result.prompt_tokens
            record.add(FirstToken(at=started + result.timings.first_token,
                                  evaluated=None if read is None else read.evaluated,
                                  reused=None if read is None else read.reused))
        # A reply with nothing to say ("stop") leaves the sink's first audio of an earlier one.
        first_audio = speech.first_audio_at
        if first_audio is not None and first_audio >= started:
            record.add(FirstAudio(at=first_audio))
        record.add(Done(at=self._clock()))
        return result
