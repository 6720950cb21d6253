"""What the voice loop runs a turn with: the engines' Protocols, and `VoiceParts`, the one value a
reload swaps whole between turns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from elara.audio.frames import AudioFrame
from elara.brain.orchestrator import TurnResult
from elara.conversation.messages import PromptReady
from elara.voice import dialogue as d
from elara.voice.echo import EchoFilter
from elara.voice.endpoint import Segmenter
from elara.voice.speech import SpeechSink
from elara.voice.stt import Transcript
from elara.voice.turn import TurnJudge
from elara.voice.vad import VoiceActivity
from elara.voice.wake import WakeDetection
from elara.voice.wake_phrase import is_wake_phrase_only, strip_wake_phrase

#: Why a transcript that is only "Hey Jarvis" is not the question (the question is still to come).
WAKE_PHRASE_ONLY = "only the wake word"


class WakeWord(Protocol):
    """Scores frames for the wake word."""

    #: Wakes handed to the Whisper check ("asked") and those it confirmed ("confirmed").
    confirmations: dict[str, int]
    #: True while she speaks (the wake listener sets it): the engine may then wake sooner, unchecked.
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

    async def on_prompt_ready(self, event: PromptReady, *, commit: asyncio.Event | None = None,
                              ended: asyncio.Event | None = None) -> TurnResult:
        """Run one turn; with `commit`, store the words once `ended` is set (the turn judged
        over) and keep the reply once `commit` is. Never raises for store, context or model
        failures."""

    def prepare(self) -> None:
        """Have the model read the next turn's prompt up to its question, where it can."""


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

    def heard(self, transcript: Transcript) -> tuple[str, str | None]:
        """The user's words without the wake phrase, and why they are no question (or None)."""
        return heard(transcript, self.phantom_reason, self.wake_phrases)


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

    def status(self, confirmations: dict[str, int]) -> dict[str, int]:
        """The counters `elara status` shows, with the wake word's checks (`confirmations`)."""
        return {"wakes": self.wakes, "turns": self.turns, "failed_turns": self.failed_turns,
                "false_wake_drops": self.no_speech + self.rejected_utterances,
                "model_errors": self.model_errors, "speculations_discarded": self.speculations_discarded,
                "went_on": self.went_on, "barge_ins": self.barge_ins,
                "self_wakes_suppressed": self.self_wakes_suppressed, "stops": self.stops,
                "stop_checks": self.stop_checks, "self_stops_suppressed": self.self_stops_suppressed,
                "wake_checks": confirmations["asked"], "wake_checks_confirmed": confirmations["confirmed"]}


def heard(transcript: Transcript, phantom_reason: Callable[[Transcript], str | None],
          wake_phrases: tuple[str, ...]) -> tuple[str, str | None]:
    """The user's words in `transcript` without the wake phrase, and why they are no question
    (a phantom, or the wake phrase alone), or None."""
    reason = phantom_reason(transcript)
    text = strip_wake_phrase(transcript.text, wake_phrases)
    if reason is None and (not text or is_wake_phrase_only(text, wake_phrases)):
        reason = WAKE_PHRASE_ONLY
    return text, reason
