"""The second look at a doubtful wake: scores between WakeWord.ConfirmFrom and the threshold wake
only when Whisper reads the wake phrase into the last ≈2.2 s (`wake.phrase_confirmed`)."""

from __future__ import annotations

import numpy as np
import pytest

from elara.errors import ModelLoadError
from elara.service.listening import transcript_confirmer, wire_wake_check
from elara.voice.remote import FailoverTranscriber, ServiceHealth
from elara.voice.stt import PhraseCheck, Transcriber, Transcript
from elara.voice.wake import (
    CONFIDENT_LOG_ODDS,
    CONFIRM_AFTER_FRAMES,
    CONFIRM_LOG_ODDS,
    DURING_PLAYBACK_CONFIRM_FROM,
    RECHECK_RISE,
    WakeWordDetector,
    phrase_confirmed,
)
from elara.voice.wake_phrase import names_wake_word
from tests.rig.voice_clips import concat, espeak_speech, frames, piper_speech, silence, with_noise


@pytest.mark.parametrize(("heard", "prompted", "log_odds", "wakes"), [
    ("Hey, Jarvis", "Hey Jarvis.", -3.6, True),  # heard as it is: the hint's punctuation is no matter
    ("Hey, John of this.", "Hey Jarvis.", 3.1, True),  # a flat voice, likelier as the phrase
    ("Take our visit.", "Hey Jarvis.", -1.8, True),
    ("Hey, obviously", "Hey, Jarvis.", -3.7, False),  # the phrase only because it was hinted
    ("Hey Jaws, come here!", "Hey Jarvis. Come here.", -3.5, False),
    ("Hey Travis.", "Hey Travis.", 0.0, False),  # not even the hint makes it Jarvis
    ("I'm all to enjoy a run this.", "I'm all to Jara this.", 0.9, False),  # near, not the name
    ("Hey, Jervis.", "Hey, Jervis.", 0.0, False),
])
def test_a_doubtful_wake_stands_when_whisper_reads_the_phrase_into_it(heard, prompted, log_odds, wakes):
    assert phrase_confirmed(PhraseCheck(heard, prompted, log_odds, 0.0), "hey_jarvis", log_odds=-3.0) is wakes


@pytest.mark.parametrize(("heard", "prompted", "log_odds"), [
    # From bench_wake_live's long negative streams: names read as "Jarvis", the first three under
    # scores of 0.005–0.007, the last two confident ones that woke her under the older rule.
    ("Calling Jave, Reese Harrison.", "Calling Jarvis, Reese Harrison.", -0.36),
    ("followed by Jarvey. Jarvey Fisher.", "Followed by Jarvis.", -0.82),
    ("The film was called Jarvis.", "My film was called Jarvis.", -0.97),
    ("your German, Charles Jarevik.", "You're German. Charles Jarvis.", 0.55),
    ("Call and Derby. Careful.", "Call and Jarvis here.", -0.98),
])
def test_a_name_in_passing_is_no_wake_phrase_however_confident_the_score(heard, prompted, log_odds):
    check = PhraseCheck(heard, prompted, log_odds, 0.0)
    assert not phrase_confirmed(check, "hey_jarvis")
    assert not phrase_confirmed(check, "hey_jarvis", CONFIDENT_LOG_ODDS)
    # the older rule, the name alone, took it
    assert names_wake_word(check.prompted, "hey_jarvis", similarity=1.0) and log_odds >= CONFIDENT_LOG_ODDS


def test_the_shipped_odds_are_looser_for_a_confident_score():
    def told(odds: float) -> PhraseCheck:
        return PhraseCheck("Hey, obviously", "Hey, Jarvis.", odds, 0.0)

    assert (CONFIRM_LOG_ODDS, CONFIDENT_LOG_ODDS) == (-6.0, -10.0)
    assert phrase_confirmed(told(-5.9), "hey_jarvis") and not phrase_confirmed(told(-6.1), "hey_jarvis")
    assert phrase_confirmed(told(-9.9), "hey_jarvis", CONFIDENT_LOG_ODDS)
    assert not phrase_confirmed(PhraseCheck("Hey Travis.", "Hey Travis.", 0.0, 0.0), "hey_jarvis", CONFIDENT_LOG_ODDS)


class Recorder:
    """A confirmer that answers as told and keeps what it was asked about."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[tuple[int, str]] = []
        self.confident: list[bool] = []

    def __call__(self, audio: np.ndarray, name: str, confident: bool = False) -> bool:
        self.asked.append((len(audio), name))
        self.confident.append(confident)
        return self.answer


def run(detector: WakeWordDetector, clip: np.ndarray):
    return [hit for frame in frames(clip) if (hit := detector.process(frame))]


CLIP = concat(silence(2.0), piper_speech("Hey Jarvis."), silence(2.0))


@pytest.mark.parametrize("answer", [True, False])
def test_a_doubtful_score_wakes_only_when_confirmed(hey_jarvis_path, answer):
    # A threshold no score reaches makes the real phrase "doubtful" for the model.
    detector = WakeWordDetector([hey_jarvis_path], threshold=1.0, confirm_from=0.05)
    confirmer = Recorder(answer)
    detector.confirm_with(confirmer)
    found = run(detector, CLIP)
    assert len(confirmer.asked) == 1  # one question per crossing, however long the score stays up
    samples, name = confirmer.asked[0]
    assert name == "hey_jarvis" and samples == 16_000 * 2.24  # 2 s before the crossing, 3 frames after
    assert detector.confirmations == {"asked": 1, "confirmed": int(answer)}
    if answer:
        assert [d.name for d in found] == ["hey_jarvis"]
        # Stamped at the crossing, not when the answer came.
        assert 2.0 < found[0].at < 2.0 + len(piper_speech("Hey Jarvis.")) / 16_000 + 0.5
    else:
        assert found == []


def scripted(detector: WakeWordDetector, scores: list[float]) -> list[float]:
    """Feed one silent frame per score, the model's score replaced by the script's; the times
    (the frames' `captured_at`) at which the confirmer was asked."""
    script = iter(scores)
    detector._model.predict = lambda samples: {"hey_jarvis": next(script)}  # the rest runs as it is
    asked: list[float] = []
    confirmer = detector._confirmer
    assert confirmer is not None
    now = 0.0

    def ask(audio: np.ndarray, name: str, confident: bool = False) -> bool:
        asked.append(now)
        return confirmer(audio, name, confident)

    detector.confirm_with(ask)
    for frame in frames(silence(0.08 * len(scores))):
        now = frame.captured_at
        detector.process(frame)
    return asked


def test_a_turned_down_score_that_rises_is_asked_about_again_on_later_audio(hey_jarvis_path):
    # From a low ConfirmFrom the first question can come with "Hey" alone, and the score need not
    # fall back before "Jarvis": a rise to RECHECK_RISE times what was turned down asks again.
    detector = WakeWordDetector([hey_jarvis_path], threshold=0.7, confirm_from=0.005)
    detector.confirm_with(Recorder(False))
    rise = [0.0, 0.006, 0.02, 0.03, 0.025, 0.03, 0.055, 0.07, 0.2, 0.3, 0.1, 0.05, 0.0, 0.0, 0.0]
    assert RECHECK_RISE == 2.0
    # Turned down at 0.03 (frames 2–5); 0.055 is not twice that, 0.07 is; 0.3 is not twice 0.3.
    assert scripted(detector, rise) == pytest.approx([0.40, 0.88])
    # A score that only wavers is asked about once; one that falls back re-arms as before.
    detector.reset()
    assert scripted(detector, [0.0, 0.01, 0.015, 0.012, 0.018, 0.02, 0.015, 0.0, 0.01, 0.0, 0.0, 0.0, 0.0]) == (
        pytest.approx([0.40, 0.96]))
    detector.reset()
    detector.confirm_with(Recorder(True))
    assert scripted(detector, rise) == pytest.approx([0.40])  # a confirmed one wakes, and that is all


def test_a_confident_score_wakes_at_once_and_no_confirmer_means_no_second_look(hey_jarvis_path):
    confirmer = Recorder(False)
    detector = WakeWordDetector([hey_jarvis_path], threshold=0.4, confirm_from=0.05)
    detector.confirm_with(confirmer)
    assert len(run(detector, CLIP)) == 1 and confirmer.asked == []
    detector = WakeWordDetector([hey_jarvis_path], threshold=1.0, confirm_from=0.05)
    assert run(detector, CLIP) == []  # nothing wired to confirm with: doubtful scores never wake
    with pytest.raises(ValueError, match="confirm_from"):
        WakeWordDetector([hey_jarvis_path], threshold=0.3, confirm_from=0.5)
    assert CONFIRM_AFTER_FRAMES == 3


@pytest.mark.parametrize("answer", [True, False])
def test_with_confirm_confident_a_confident_score_is_put_to_the_confirmer_too(hey_jarvis_path, answer):
    detector = WakeWordDetector([hey_jarvis_path], threshold=0.4, confirm_from=0.05, confirm_confident=True)
    confirmer = Recorder(answer)
    detector.confirm_with(confirmer)
    found = run(detector, CLIP)
    assert confirmer.confident.count(True) == 1  # asked as confident, once however long it stays up
    assert confirmer.asked[-1] == (16_000 * 2.24, "hey_jarvis")
    assert len(found) == int(answer)
    if answer:
        assert found[0].score >= 0.4
        assert 2.0 < found[0].at < 2.0 + len(piper_speech("Hey Jarvis.")) / 16_000 + 0.5


def test_over_her_doubtful_scores_are_checked_only_from_the_floor_her_echo_was_measured_at(hey_jarvis_path):
    # What cancelling leaves of her voice scores too: over her, a check only from 0.005, however
    # low WakeWord.ConfirmFrom is where she is silent.
    detector = WakeWordDetector([hey_jarvis_path], threshold=0.7, confirm_from=0.001)
    detector.confirm_with(Recorder(False))
    low = [0.0, 0.002, 0.003, 0.004, 0.003, 0.002, 0.0, 0.0, 0.0, 0.0]
    assert DURING_PLAYBACK_CONFIRM_FROM == 0.005
    assert scripted(detector, low) == pytest.approx([0.40])  # where she is silent: asked
    detector.reset()
    detector.during_playback = True
    assert scripted(detector, low) == []
    detector.reset()
    assert scripted(detector, [0.0, 0.002, 0.006, 0.004, 0.0, 0.0, 0.0, 0.0]) == pytest.approx([0.48])
    # A ConfirmFrom above the floor stands over her too.
    detector = WakeWordDetector([hey_jarvis_path], threshold=0.7, confirm_from=0.05)
    detector.confirm_with(Recorder(False))
    detector.during_playback = True
    assert scripted(detector, [0.0, 0.006, 0.02, 0.04, 0.0, 0.0, 0.0, 0.0]) == []


def test_over_her_a_confident_score_wakes_without_the_check(hey_jarvis_path):
    detector = WakeWordDetector([hey_jarvis_path], threshold=0.4, confirm_from=0.05, confirm_confident=True)
    confirmer = Recorder(False)
    detector.confirm_with(confirmer)
    detector.during_playback = True
    found = run(detector, CLIP)
    assert len(found) == 1 and found[0].score >= 0.4
    assert True not in confirmer.confident  # no confident score was put to the check


def test_a_confident_score_nobody_can_check_wakes_and_a_doubtful_one_does_not(transcriber, monkeypatch):
    class Remote:  # a Wyoming engine alone: no token scores for the phrase check
        def transcribe(self, samples: np.ndarray) -> Transcript:
            return Transcript("Hey, John of this.", 0.0, -0.1, len(samples) / 16000, 0.0)

    clip = concat(silence(0.5), espeak_speech("Hey Jarvis", voice="en-us+f3", speed=160), silence(0.3))
    assert transcript_confirmer(Remote())(clip, "hey_jarvis", True)
    assert not transcript_confirmer(Remote())(clip, "hey_jarvis", False)

    def broken(self, samples, phrase):
        raise ModelLoadError("SpeechToText.Model: gone")

    monkeypatch.setattr(Transcriber, "check_phrase", broken)
    assert transcript_confirmer(transcriber)(clip, "hey_jarvis", True)
    assert not transcript_confirmer(transcriber)(clip, "hey_jarvis", False)


def test_confident_scores_are_checked_only_where_a_local_whisper_can(hey_jarvis_path, transcriber):
    from elara.config import load_settings

    class Remote:  # a Wyoming engine alone
        def transcribe(self, samples: np.ndarray) -> Transcript:
            return Transcript("Hey Jarvis.", 0.0, -0.1, len(samples) / 16000, 0.0)

    settings = load_settings(env={})
    detector = WakeWordDetector([hey_jarvis_path], threshold=0.7, confirm_from=0.02)
    wire_wake_check(detector, settings, transcriber)
    assert detector.confirm_confident
    wire_wake_check(detector, settings, Remote())
    assert not detector.confirm_confident  # they wake at once, without the frames a check waits


def test_whisper_confirms_the_phrase_and_not_a_sound_alike(transcriber):
    confirm = transcript_confirmer(transcriber)
    assert confirm(concat(silence(0.6), piper_speech("Hey Jarvis."), silence(0.3)), "hey_jarvis")
    assert not confirm(concat(silence(0.6), piper_speech("Hey Travis."), silence(0.3)), "hey_jarvis")
    assert not confirm(concat(silence(0.6), espeak_speech("Hey Travis."), silence(0.3)), "hey_jarvis")


def test_a_phrase_whisper_mishears_alone_is_confirmed_by_the_hint(transcriber):
    """espeak-ng en-us+f3 at 160 wpm: "Hey, John of this." to Whisper alone."""
    clip = concat(silence(0.5), espeak_speech("Hey Jarvis", voice="en-us+f3", speed=160), silence(0.3))
    assert not names_wake_word(transcriber.transcribe(clip).text, "hey_jarvis")
    check = transcriber.check_phrase(clip, "Hey Jarvis.")
    assert check.prompted == "Hey Jarvis." and check.log_odds > 0  # likelier as the phrase than as heard
    assert transcript_confirmer(transcriber)(clip, "hey_jarvis")


def test_the_check_reads_with_its_own_beam_and_leaves_the_transcriber_as_it_was(transcriber, monkeypatch):
    beams = []
    check_phrase = Transcriber.check_phrase

    def watched(self, samples, phrase):
        beams.append(self.beam_size)
        return check_phrase(self, samples, phrase)

    monkeypatch.setattr(Transcriber, "check_phrase", watched)
    clip = concat(silence(0.6), piper_speech("Hey Jarvis."), silence(0.3))
    assert transcript_confirmer(transcriber, 5)(clip, "hey_jarvis")
    assert transcript_confirmer(transcriber)(clip, "hey_jarvis")
    assert beams == [5, 1] and transcriber.beam_size == 1


def test_the_check_needs_token_scores_a_remote_engine_alone_has_not(transcriber):
    """A Wyoming engine gives only a transcript: alone, it must name the wake word; with local Whisper
    standing by, the local phrase check decides."""
    class Remote:
        def __init__(self, text: str) -> None:
            self.text = text

        def transcribe(self, samples: np.ndarray) -> Transcript:
            return Transcript(self.text, 0.0, -0.1, len(samples) / 16000, 0.0)

    clip = concat(silence(0.5), espeak_speech("Hey Jarvis", voice="en-us+f3", speed=160), silence(0.3))
    assert not transcript_confirmer(Remote("Hey, John of this."))(clip, "hey_jarvis")
    assert transcript_confirmer(Remote("Hey, Jervis."))(clip, "hey_jarvis")
    with_local = FailoverTranscriber(Remote("Hey, John of this."), transcriber, ServiceHealth(),
                                     engine="wyoming://127.0.0.1:10300", service="speech-to-text")
    assert transcript_confirmer(with_local)(clip, "hey_jarvis")


# --- the shipped defaults on a small fixed set ------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    """The wake word as the daemon wires it: the packaged settings, the check's beam, Whisper's
    noise suppression, the second model's reading."""
    from elara.config import load_settings
    from elara.service.engines import load_second_check, load_wake_word, load_whisper
    from elara.service.slices import SecondCheckSlice, SpeechToTextSlice, WakeWordSlice

    settings = load_settings(env={})
    detector = load_wake_word(WakeWordSlice.of(settings).without_verifiers())
    wire_wake_check(detector, settings, load_whisper(SpeechToTextSlice.of(settings)),
                    load_second_check(SecondCheckSlice.of(settings)))
    return detector


def paused(voice: str, speed: int) -> np.ndarray:
    from tests.rig.voice_clips import espeak_ssml

    return espeak_ssml('<speak>Hey <break time="400ms"/> Jarvis</speak>', voice=voice, speed=speed)


POSITIVES = {
    "piper": lambda: piper_speech("Hey Jarvis."),
    "piper, a pause after hey": lambda: concat(piper_speech("Hey."), silence(0.45), piper_speech("Jarvis.")),
    "espeak en-gb fast": lambda: espeak_speech("Hey Jarvis", voice="en-gb", speed=190),
    "espeak en-us, a pause after hey": lambda: paused("en-us", 150),
    "piper in white noise at 10 dB": lambda: with_noise(concat(silence(0.5), piper_speech("Hey Jarvis.")), 10),
    "in a question": lambda: piper_speech("Hey Jarvis, what time is it?"),
    "espeak en-029 slow in pink noise at 10 dB": lambda: en_029_in_pink_noise(),
}


def en_029_in_pink_noise(seed: int = 0) -> np.ndarray:
    """A "Hey Jarvis" tiny.en turns down ("Good job, Beast.") and Whisper base reads as the phrase."""
    clip = concat(silence(1.5), espeak_speech("Hey Jarvis", voice="en-029", speed=130), silence(1.5))
    return with_noise(clip, 10, color="pink", seed=seed)
NEGATIVES = {
    "conversation": lambda: concat(
        piper_speech("Hey, are you coming to dinner or not? The dog needs a walk before it gets dark."),
        espeak_speech("Did you remember to buy milk on the way home? I think the train leaves at seven."),
        espeak_speech("Hey there, how was your day at work?", voice="en-gb")),
    "sound-alikes": lambda: concat(piper_speech("Hey Travis, can you come here?"),
                                   espeak_speech("I heard someone shout hey Marvin across the street.")),
    "news": lambda: piper_speech("The city council said on Monday that bus fares in Denver would rise by "
                                 "four percent next year, after two years of delays."),
    # Lists of names from bench_wake_live's seed-1 stream, on which a confident score woke her
    # when a confident one needed only the name ("Charles Jarvis.", "Call and Jarvis here.").
    "names": lambda: concat(
        with_noise(espeak_speech("Rhys Travers, Ursula Davies, Nadia Jarman, Charles Jarvik. Those four are "
                                 "on the night shift.", voice="en-us+f3", speed=170), 20, seed=1),
        silence(1.0),
        with_noise(piper_speech("Calling Jarvie, Gareth Barnes and Fiona to gate twelve."), 10, seed=2)),
}


@pytest.mark.parametrize("clip", POSITIVES.values(), ids=POSITIVES.keys())
def test_the_shipped_wake_word_hears_these(shipped, clip):
    assert len(run_fresh(shipped, concat(silence(1.0), clip(), silence(1.5)))) == 1


@pytest.mark.parametrize("clip", NEGATIVES.values(), ids=NEGATIVES.keys())
def test_the_shipped_wake_word_ignores_these(shipped, clip):
    assert run_fresh(shipped, concat(silence(1.0), clip(), silence(1.0))) == []


def run_fresh(detector: WakeWordDetector, clip: np.ndarray):
    detector.reset()
    return run(detector, clip)


def test_the_daemons_check_asks_every_score_for_the_whole_phrase_a_confident_one_at_looser_odds(
        transcriber, monkeypatch):
    readings = {"check": PhraseCheck("Mr. Jarvis will call you.", "Mr. Jarvis will call you.", 0.0, 0.0)}
    monkeypatch.setattr(Transcriber, "check_phrase", lambda self, samples, phrase: readings["check"])
    confirm = transcript_confirmer(transcriber, 5)
    audio = silence(2.2)
    assert not confirm(audio, "hey_jarvis", False)
    assert not confirm(audio, "hey_jarvis", True)
    readings["check"] = PhraseCheck("Hey, obviously.", "Hey Jarvis.", -8.0, 0.0)
    assert not confirm(audio, "hey_jarvis", False)
    assert confirm(audio, "hey_jarvis", True)


# --- the second reading (WakeWord.ConfirmSecondModel) -----------------------------------------


def second_reading(transcriber, monkeypatch, first: PhraseCheck, second: PhraseCheck | None):
    """A confirmer whose first reading (tiny.en) reads `first` and whose second model reads
    `second` (None: no second model); the readings it asked for are listed in the return value."""
    import copy

    other = copy.copy(transcriber)
    other.reads_second = True  # the copies the confirmer makes (beam, cleaning) keep the mark
    asked: list[str] = []

    def read(self, samples, phrase):
        which = "second" if getattr(self, "reads_second", False) else "first"
        asked.append(which)
        return second if which == "second" else first

    monkeypatch.setattr(Transcriber, "check_phrase", read)
    return transcript_confirmer(transcriber, 5, second=other if second is not None else None), asked


def test_what_the_first_reading_turns_down_a_second_model_reads_again(transcriber, monkeypatch):
    from elara.voice.wake import SECOND_LOG_ODDS

    tiny = PhraseCheck("Good job, Beast.", "Good job, Beast.", 0.0, 0.0)
    confirm, asked = second_reading(transcriber, monkeypatch, tiny, PhraseCheck("That job is…", "Hey Jarvis.", -1.5, 0.0))
    assert confirm(silence(2.2), "hey_jarvis", False) and asked == ["first", "second"]
    # by the first reading's odds, no looser: told the phrase, base writes it into more
    assert SECOND_LOG_ODDS >= CONFIRM_LOG_ODDS
    beyond = PhraseCheck("Hey, Charmin.", "Hey Jarvis.", SECOND_LOG_ODDS - 1.0, 0.0)
    confirm, _ = second_reading(transcriber, monkeypatch, tiny, beyond)
    assert not confirm(silence(2.2), "hey_jarvis", False)
    confirm, asked = second_reading(transcriber, monkeypatch, tiny, None)
    assert not confirm(silence(2.2), "hey_jarvis", False) and asked == ["first"]


def test_the_second_model_is_not_asked_when_the_first_reading_confirms(transcriber, monkeypatch):
    heard = PhraseCheck("Hey Jarvis.", "Hey Jarvis.", 0.0, 0.0)
    confirm, asked = second_reading(transcriber, monkeypatch, heard, PhraseCheck("", "", -99.0, 0.0))
    assert confirm(silence(2.2), "hey_jarvis", False) and asked == ["first"]


def test_for_a_confident_score_too_the_second_model_must_read_the_whole_phrase(transcriber, monkeypatch):
    tiny = PhraseCheck("Hey, novice.", "Hey, novice. Hey, novice.", -0.8, 0.0)
    name_only = PhraseCheck("Mr. Jarvis, please.", "Mr. Jarvis, please.", 0.0, 0.0)
    confirm, asked = second_reading(transcriber, monkeypatch, tiny, name_only)
    assert not confirm(silence(2.2), "hey_jarvis", True) and asked == ["first", "second"]
    whole = PhraseCheck("Hey, novice.", "Hey Jarvis.", -2.5, 0.0)
    confirm, asked = second_reading(transcriber, monkeypatch, tiny, whole)
    assert confirm(silence(2.2), "hey_jarvis", True) and asked == ["first", "second"]


def test_for_a_confident_score_the_second_model_may_read_the_phrase_at_looser_odds(transcriber, monkeypatch):
    from elara.voice.wake import SECOND_CONFIDENT_LOG_ODDS, SECOND_LOG_ODDS

    # A robotic voice the model is sure of; base alone hears "Okay, sorry." (held-out set 2).
    tiny = PhraseCheck("Okay, sorry.", "Okay, Jarvis.", -3.9, 0.0)
    base = PhraseCheck("Okay, sorry if it's...", "Hey Jarvis.", -7.2, 0.0)
    assert SECOND_CONFIDENT_LOG_ODDS < base.log_odds < SECOND_LOG_ODDS
    confirm, asked = second_reading(transcriber, monkeypatch, tiny, base)
    assert confirm(silence(2.2), "hey_jarvis", True) and asked == ["first", "second"]
    assert not confirm(silence(2.2), "hey_jarvis", False)  # a doubtful score: stricter
    beyond = PhraseCheck("Okay, sorry.", "Hey Jarvis.", SECOND_CONFIDENT_LOG_ODDS - 0.5, 0.0)
    confirm, _ = second_reading(transcriber, monkeypatch, tiny, beyond)
    assert not confirm(silence(2.2), "hey_jarvis", True)


def test_the_second_model_loads_as_set_and_not_when_it_would_read_the_same(monkeypatch):
    from elara.config import load_settings
    from elara.service.engines import load_second_check
    from elara.service.slices import SecondCheckSlice

    def second_check(env):
        return load_second_check(SecondCheckSlice.of(load_settings(env=env)))

    base = second_check({})
    assert base is not None and base.multilingual and base.language == "en" and base.beam_size == 5
    assert second_check({"ELARA__WakeWord__ConfirmSecondModel": ""}) is None
    # without a wake check it still reads the questions' doubtful words, unless told not to
    no_check = {"ELARA__WakeWord__ConfirmFrom": "0"}
    assert second_check(no_check) is not None
    assert second_check({**no_check, "ELARA__SpeechToText__ReadAgainBySecondModel": "false"}) is None
    assert second_check({**no_check, "ELARA__SpeechToText__ReadAgainBeamSize": "0"}) is None
    remote = {**no_check, "ELARA__SpeechToText__Engine": "wyoming://127.0.0.1:10300"}
    assert second_check(remote) is None  # a remote engine's words aren't read again
    same = {"ELARA__SpeechToText__Model": "base", "ELARA__SpeechToText__Language": "en"}
    assert second_check(same) is None


def test_a_missing_second_model_names_its_setting(tmp_path):
    from elara.config import load_settings
    from elara.errors import ModelNotFoundError
    from elara.service.engines import load_second_check
    from elara.service.slices import SecondCheckSlice

    settings = load_settings(env={"ELARA__WakeWord__ConfirmSecondModel": str(tmp_path / "whisper-small")})
    with pytest.raises(ModelNotFoundError) as caught:
        load_second_check(SecondCheckSlice.of(settings))
    assert caught.value.message.startswith("WakeWord.ConfirmSecondModel: no Whisper model")


@pytest.mark.parametrize("seed", [0, 1])
def test_the_second_model_hears_what_the_first_reading_turns_down(transcriber, shipped, seed):
    from elara.config import load_settings
    from elara.service.engines import load_wake_word
    from elara.service.slices import WakeWordSlice

    settings = load_settings(env={})
    detector = load_wake_word(WakeWordSlice.of(settings).without_verifiers())
    clip = en_029_in_pink_noise(seed)
    wire_wake_check(detector, settings, transcriber.with_beam_size(5))
    assert run_fresh(detector, clip) == []
    assert len(run_fresh(shipped, clip)) == 1  # the same, with base reading again
