"""How a turn is heard, wired from settings and the loaded engines: the voice loop's parts, the
wake word's Whisper check, the reading of a question (the phantom filter, the end-of-turn judge,
the second reading of doubtful words) and the reader of "stop" over the playback. The daemon, its
satellites' rooms, the doctor and `elara transcribe` all wire them here."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from elara.brain.orchestrator import Orchestrator
from elara.errors import ElaraError
from elara.settings import Settings
from elara.skills import intents
from elara.voice.denoise import NoiseSuppressor
from elara.voice.dialogue import Dialogue
from elara.voice.echo import EchoFilter
from elara.voice.endpoint import Segmenter
from elara.voice.parts import FrameSource, ReadAgain, SpeechToText, VoiceParts, heard
from elara.voice.speech import SpeechSink
from elara.voice.stop import StopReader
from elara.voice.stt import SecondReading, Transcriber, Transcript, phantom_reason
from elara.voice.turn import PauseSignals, TurnJudge, TurnThresholds, read_again_wanted
from elara.voice.vad import VoiceActivity
from elara.voice.wake import (
    CONFIDENT_LOG_ODDS,
    CONFIRM_LOG_ODDS,
    SECOND_CONFIDENT_LOG_ODDS,
    SECOND_LOG_ODDS,
    WakeWordDetector,
    phrase_confirmed,
)
from elara.voice.wake_phrase import (
    names_wake_word,
    spoken_wake_phrase,
)

log = logging.getLogger(__name__)

#: WebRTC noise suppression level of the wake check's window (see `_check_cleaner`).
WAKE_CHECK_NOISE_SUPPRESSION = 2


# ---------------------------------------------------------------------------------------------
# a question's words


@dataclass(frozen=True)
class QuestionReading:
    """How the words of a question are read: by `transcriber`, through the phantom filter, judged
    at each pause (`judge`; None: the judgment is off) and, where the judgment doubts them, read
    again (`read_again`; None: the first reading stands)."""

    transcriber: SpeechToText
    phantom_reason: Callable[[Transcript], str | None]
    wake_phrases: tuple[str, ...]
    judge: TurnJudge | None
    is_command: Callable[[str], bool] | None
    read_again: ReadAgain | None


def question_reading(settings: Settings, transcriber: SpeechToText, wake_phrases: tuple[str, ...], *,
                     second: Transcriber | Callable[[], Transcriber] | None = None,
                     going_on_heard: bool = False) -> QuestionReading:
    """The reading of a question as the settings ask. `second`: the second Whisper model
    (`WakeWord.ConfirmSecondModel`) if there is one, loaded or (for a one-shot command) its loader,
    called the first time doubtful words are read again; `going_on_heard`: the person going on once
    her reply began is heard (echo cancelling and `Listening.GoOnMs`), which shortens doubtful pauses."""
    stt, listening = settings.speech_to_text, settings.listening
    threshold = stt.no_speech_threshold
    judge = (TurnJudge(TurnThresholds.from_settings(listening, wake_phrases, going_on_heard=going_on_heard))
             if listening.turn_judgment != "off" else None)
    by_second = second if stt.read_again_by_second_model else None
    again: ReadAgain | None
    if by_second is None or isinstance(by_second, Transcriber):
        again = read_again(transcriber, stt.read_again_beam_size, by_second)
    elif isinstance(transcriber, Transcriber) and stt.read_again_beam_size > 0:  # as `read_again` has it
        again = SecondReadingWhenAsked(transcriber, stt.read_again_beam_size, by_second)
    else:
        again = None
    return QuestionReading(
        transcriber=transcriber,
        phantom_reason=lambda transcript: phantom_reason(transcript, no_speech_threshold=threshold),
        wake_phrases=wake_phrases, judge=judge,
        is_command=(lambda text: intents.match(text) is not None) if settings.intents.enabled else None,
        read_again=again)


def is_question(reading: QuestionReading, transcript: Transcript) -> bool:
    """Whether the voice loop takes `transcript` for a question (`parts.heard`)."""
    return heard(transcript, reading.phantom_reason, reading.wake_phrases)[1] is None


def read_recording(reading: QuestionReading, samples: np.ndarray) -> Transcript:
    """A whole recording's words, read as the voice loop reads a question: the first reading,
    judged as at the end of the turn, and read again where the judgment doubts it
    (`read_again_wanted`); a second reading that hears no question leaves the first standing."""
    first = reading.transcriber.transcribe(samples)
    if reading.read_again is None or reading.judge is None or not is_question(reading, first):
        return first
    judgment = reading.judge.judge(PauseSignals.read(reading.judge.thresholds.max_pause_ms, first,
                                                     reading.wake_phrases, reading.is_command))
    if not read_again_wanted(judgment, first.avg_logprob):
        return first
    second = reading.read_again.reread(samples, first)
    if not is_question(reading, second) or second is first:
        log.info("read the doubted words again: the first reading stands")
        return first
    log.info("read the doubted words again: %s", "the same" if second.text == first.text else "changed")
    return second


def read_again(transcriber: SpeechToText, beam_size: int, second: Transcriber | None = None) -> SecondReading | None:
    """What reads doubtful words again with `beam_size`: `second`, another Whisper model, in the
    first one's language and through its cleaning, or else the local Whisper with the wider beam;
    of the first reading and those its beam ended with, the one both models find likeliest stands.
    None: no second reading — none asked for, the same model no wider than the first, or the words
    are read by a remote engine. Another model hears more of what the first misread than the same
    model with a wider beam (docs/listening.md)."""
    if not isinstance(transcriber, Transcriber) or beam_size <= 0:
        return None
    if second is not None:
        return SecondReading(transcriber, second.speaking(transcriber.language).with_beam_size(beam_size)
                             .cleaned_by(transcriber.clean))
    if beam_size > transcriber.beam_size:
        return SecondReading(transcriber, transcriber.with_beam_size(beam_size))
    return None


class SecondReadingWhenAsked:
    """`read_again` by a second model loaded the first time words are read again."""

    def __init__(self, first: Transcriber, beam_size: int, load: Callable[[], Transcriber]) -> None:
        self.first, self.beam_size = first, beam_size
        self._load = load
        self._reading: SecondReading | None = None

    def reread(self, samples: np.ndarray, reading: Transcript) -> Transcript:
        """The reading that stands (`SecondReading.reread`)."""
        if self._reading is None:
            self._reading = read_again(self.first, self.beam_size, self._load())
        assert self._reading is not None, "a beam above 0 and a second model always read again"
        return self._reading.reread(samples, reading)


def stop_reader(transcriber: SpeechToText, wake_names: Sequence[str]) -> StopReader | None:
    """What reads "stop" over the playback: the local Whisper told the stop commands and the wake
    phrases, without noise suppression, which learns the residual echo as the noise and took
    "stop"s away (`bench/echo.py`); None: a remote engine, read as it is."""
    if not isinstance(transcriber, Transcriber):
        return None
    whisper = transcriber.cleaned_by(None) if transcriber.clean is not None else transcriber
    return StopReader(whisper, tuple(spoken_wake_phrase(name) for name in wake_names))


# ---------------------------------------------------------------------------------------------
# the voice loop's parts


def voice_parts(settings: Settings, dialogue: Dialogue, *, wake: WakeWordDetector, vad: VoiceActivity,
                transcriber: SpeechToText, orchestrator: Orchestrator, speech: SpeechSink,
                microphone: FrameSource, echo: EchoFilter | None = None, stop_words: bool = False,
                second: Transcriber | None = None) -> VoiceParts:
    """What a voice loop runs a turn with, from settings: Elara's own, or a satellite's room's;
    `second`: the second Whisper model (`WakeWord.ConfirmSecondModel`), if loaded."""
    listening = settings.listening
    reading = question_reading(settings, transcriber, wake_phrases(wake), second=second,
                               going_on_heard=echo is not None and listening.go_on_ms > 0)
    return VoiceParts(
        dialogue=dialogue, wake=wake, vad=vad, echo=echo, stop_words=stop_words,
        segmenter=Segmenter.from_settings(listening, settings.speech_to_text),
        transcriber=transcriber, phantom_reason=reading.phantom_reason,
        orchestrator=orchestrator, speech=speech, microphone=microphone,
        vad_threshold=listening.vad_threshold, pre_roll_ms=listening.pre_roll_ms,
        speaker_tail_ms=settings.audio.speaker_tail_ms, wake_phrases=reading.wake_phrases,
        judge=reading.judge, speculative_reply=listening.speculative_reply,
        go_on_ms=listening.go_on_ms, min_speech_ms=listening.min_speech_ms,
        ring_seconds=settings.timers.ring_seconds, is_command=reading.is_command,
        read_again=reading.read_again, stop_reader=stop_reader(transcriber, wake.names))


def wake_phrases(wake: WakeWordDetector) -> tuple[str, ...]:
    """What each wake-word model listens for, as words ("hey jarvis")."""
    return tuple(name.replace("_", " ") for name in wake.names)


# ---------------------------------------------------------------------------------------------
# the wake word's Whisper check


def wire_wake_check(wake: WakeWordDetector, settings: Settings, transcriber: SpeechToText,
                    second: Transcriber | None = None) -> None:
    """Give the wake word its check as the settings ask (`WakeWord.ConfirmFrom` 0: none), with
    `second` (`WakeWord.ConfirmSecondModel`) reading again what the first reading turns down.
    Confident scores are checked only where a local Whisper can read the phrase: a remote
    transcript alone can't, so there they wake at once."""
    check = settings.wake_word
    # the confirmer first: its noise suppression is what can fail, and then nothing has changed
    confirmer = (transcript_confirmer(transcriber, check.confirm_beam_size, clean=_check_cleaner(), second=second)
                 if check.confirm_from > 0 else None)
    wake.confirm_confident = check.confirm_confident and _local_whisper(transcriber) is not None
    wake.confirm_with(confirmer)


def _check_cleaner() -> NoiseSuppressor:
    """The wake check hears its window through WebRTC noise suppression at level 2 whatever
    `SpeechToText.NoiseSuppression` says: `bench/wake_live.py` measured the check with it."""
    return NoiseSuppressor(WAKE_CHECK_NOISE_SUPPRESSION, setting="WakeWord.ConfirmFrom")


def _local_whisper(transcriber: SpeechToText) -> Transcriber | None:
    """The local Whisper that reads for `transcriber`: itself, or a remote engine's stand-in."""
    local = transcriber if isinstance(transcriber, Transcriber) else getattr(transcriber, "local", None)
    return local if isinstance(local, Transcriber) else None


def transcript_confirmer(transcriber: SpeechToText, beam_size: int | None = None, *,
                         clean: Callable[[np.ndarray], np.ndarray] | None = None,
                         second: Transcriber | None = None,
                         ) -> Callable[[np.ndarray, str, bool], bool]:
    """Confirms a wake when Whisper reads the wake phrase into the audio (`phrase_confirmed`; a
    confident score by the looser CONFIDENT_LOG_ODDS), with `beam_size` (`WakeWord.ConfirmBeamSize`;
    None: the transcriber's own), through `clean` when given. The check needs Whisper's token
    scores, so a remote engine's local stand-in makes it; a remote engine alone is asked for a
    transcript that must name the wake word, and only about doubtful scores. A confident score
    nobody could check wakes. What the local reading turns down, `second` (another Whisper model)
    reads again, by SECOND_LOG_ODDS (SECOND_CONFIDENT_LOG_ODDS for a confident score): a window
    tiny.en mishears in noise or an accent ("Good job, Beast."), base often reads as the phrase."""
    local = _local_whisper(transcriber)
    if local is not None and beam_size is not None and beam_size != local.beam_size:
        local = local.with_beam_size(beam_size)
    if local is not None and clean is not None:
        local = local.cleaned_by(clean)
    if second is not None and clean is not None:
        second = second.cleaned_by(clean)

    def confirm(audio: np.ndarray, name: str, confident: bool = False) -> bool:
        if confident and local is None:
            return True
        try:
            if local is not None:
                return _local_check(local, second, audio, name, confident)
            transcript = transcriber.transcribe(audio)
        except ElaraError as exc:  # a doubtful wake nobody could check stays unconfirmed; a confident one stands
            log.warning("could not check a %s wake: %s", "confident" if confident else "doubtful", exc)
            return confident
        log.debug("the wake check heard %r", transcript.text)
        return names_wake_word(transcript.text, name)

    return confirm


def _local_check(local: Transcriber, second: Transcriber | None, audio: np.ndarray, name: str,
                 confident: bool) -> bool:
    """The local Whisper's check of one wake, and `second`'s of what it turns down."""
    check = local.check_phrase(audio, spoken_wake_phrase(name))
    log.debug("the wake check heard %r, and %r when told (log odds %.2f)",
              check.heard, check.prompted, check.log_odds)
    if phrase_confirmed(check, name, CONFIDENT_LOG_ODDS if confident else CONFIRM_LOG_ODDS):
        return True
    if second is None:
        return False
    again = second.check_phrase(audio, spoken_wake_phrase(name))
    log.debug("the second wake check heard %r, and %r when told (log odds %.2f)",
              again.heard, again.prompted, again.log_odds)
    return phrase_confirmed(again, name, SECOND_CONFIDENT_LOG_ODDS if confident else SECOND_LOG_ODDS)
