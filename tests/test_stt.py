"""Whisper tiny.en on generated speech, and the phantom filter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tokenizers

from elara.config import load_settings
from elara.errors import ModelNotFoundError
from elara.service.engines import load_second_check
from elara.service.engines import transcriber as load_whisper
from elara.service.listening import read_again, stop_reader
from elara.service.slices import SecondCheckSlice, SpeechToTextSlice
from elara.voice.models import resolve_whisper
from elara.voice.stt import Transcriber, Transcript, complete_merges, normalize_text, phantom_reason
from elara.voice.turn import PauseSignals, TurnJudge, TurnThresholds, read_again_wanted
from tests.rig.voice_clips import concat, espeak_speech, noise, piper_speech, silence, with_noise


def utterance(speech: np.ndarray) -> np.ndarray:
    """Speech as the listener hands it over: a little pre-roll and trailing silence."""
    return concat(silence(0.3), speech, silence(0.6))


def words(text: str) -> set[str]:
    return set(normalize_text(text).split())


# tiny.en's small errors are allowed ("Paris" may come out as "pairs"): check key words only.
QUESTIONS = [
    ("What is the weather like in Paris tomorrow?", {"weather", "tomorrow"}),
    ("Set a timer for ten minutes.", {"timer", "minutes"}),
    ("How many kilometers are in a mile?", {"how", "many", "mile"}),
]


@pytest.mark.parametrize(("text", "keys"), QUESTIONS)
def test_piper_questions_transcribe_to_their_words(transcriber, text, keys):
    transcript = transcriber.transcribe(utterance(piper_speech(text)))
    assert keys <= words(transcript.text), transcript
    assert transcriber.phantom_reason(transcript) is None
    assert transcript.no_speech_prob < 0.5
    assert transcript.audio_seconds == pytest.approx(len(utterance(piper_speech(text))) / 16_000)
    assert transcript.seconds > 0


def test_espeak_question_transcribes(transcriber):
    transcript = transcriber.transcribe(utterance(espeak_speech("Can you tell me a joke about computers?")))
    assert {"joke", "computers"} <= words(transcript.text), transcript


@pytest.mark.parametrize("lead", [0.0, 0.1, 0.2, 0.3])
def test_the_last_word_survives_a_short_tail_at_any_alignment(transcriber, lead):
    # The loop hands over speech cut 80 ms after the VAD's end; the window must be padded with
    # silence the way Whisper was trained (padding the log-mel features made "moon" into "man").
    clip = concat(silence(lead), piper_speech("How far away is the moon?"), silence(0.08))
    assert "moon" in words(transcriber.transcribe(clip).text)


@pytest.mark.parametrize("answer", ["Yes.", "Stop.", "No."])
def test_short_real_answers_pass_the_phantom_filter(transcriber, answer):
    transcript = transcriber.transcribe(utterance(piper_speech(answer)))
    assert normalize_text(transcript.text) == normalize_text(answer)
    assert phantom_reason(transcript) is None


@pytest.mark.parametrize(
    "clip",
    [
        pytest.param(lambda: silence(2.0), id="silence"),
        pytest.param(lambda: silence(0.5), id="short-silence"),
        pytest.param(lambda: noise(2.0, dbfs=-35), id="white"),
        pytest.param(lambda: noise(1.5, dbfs=-25, seed=5), id="loud-white"),
        pytest.param(lambda: noise(3.0, dbfs=-30, color="pink"), id="pink"),
        pytest.param(lambda: noise(4.0, dbfs=-40, color="pink", seed=2), id="quiet-pink"),
        pytest.param(lambda: noise(2.0, dbfs=-30, color="brown"), id="brown"),
    ],
)
def test_silence_and_noise_give_phantoms_the_filter_rejects(transcriber, clip):
    transcript = transcriber.transcribe(clip())
    assert transcript.text == "" or transcriber.phantom_reason(transcript) is not None, transcript


def test_the_full_window_agrees_with_the_short_one(transcriber):
    """The 10 s window is the speed-up; the 30 s window is Whisper's own. Same key words."""
    full = Transcriber(transcriber.model_dir, window_seconds=30.0)
    for text, keys in QUESTIONS[:2]:
        audio = utterance(piper_speech(text))
        assert keys <= words(full.transcribe(audio).text)
        assert keys <= words(transcriber.transcribe(audio).text)


def test_an_initial_prompt_still_hears_the_question(transcriber):
    # The prompt is decoded as text said before the audio: it biases the words, it is not echoed.
    prompted = Transcriber(transcriber.model_dir, initial_prompt="  Hey Jarvis, set a timer for ten minutes.  ")
    assert prompted.initial_prompt == "Hey Jarvis, set a timer for ten minutes."
    transcript = prompted.transcribe(utterance(piper_speech("What is the weather like in Paris tomorrow?")))
    assert {"weather", "tomorrow"} <= words(transcript.text), transcript
    assert "timer" not in words(transcript.text)
    assert prompted.phantom_reason(transcript) is None
    assert Transcriber(transcriber.model_dir, initial_prompt=" ").initial_prompt is None


def test_words_the_judgment_doubts_are_read_right_with_a_wider_beam(transcriber):
    """Beam 1 mishears this voice's "Cancel the timer." ("Kental Nutaimo"), and the end-of-turn
    judgment doubts it; the same model read again with beam 5 (`listening.read_again`) hears it."""
    said, keys = espeak_speech("Cancel the timer.", voice="en-us+f3", speed=180), {"cancel", "timer"}
    audio = concat(silence(0.3), said, silence(0.08))  # as the loop cuts it at the first silent frame
    first = transcriber.transcribe(audio)
    judged = TurnJudge(TurnThresholds()).judge(PauseSignals(silence_ms=80, transcript=first.text,
                                                            transcript_logprob=first.avg_logprob))
    assert read_again_wanted(judged, first.avg_logprob) and not keys <= words(first.text), first
    again = read_again(transcriber, 5)
    assert again is not None and again.again.beam_size == 5 and transcriber.beam_size == 1
    assert again.first is transcriber and again.again._model is transcriber._model  # not a second copy
    assert keys <= words(again.reread(audio, first).text)  # and the likelier of the two readings
    assert read_again(transcriber, 1) is None and read_again(transcriber, 0) is None


def test_the_second_model_reads_doubtful_words_tiny_en_mishears_at_any_beam(transcriber):
    """en-029's "Set a timer for ten minutes." in pink noise at 10 dB: tiny.en reads "So, to
    tighten my bottom, be leaders." at beam 1 and 5; Whisper base (`WakeWord.ConfirmSecondModel`,
    `SpeechToText.ReadAgainBySecondModel`), the loaded wake check's model, reads it right, and
    surer of it than tiny.en was of its reading, so the loop takes base's reading."""
    settings = load_settings(env={})
    said = espeak_speech("Set a timer for ten minutes.", voice="en-029", speed=140)
    audio = with_noise(concat(silence(0.3), said, silence(0.08)), 10, color="pink", seed=0)
    first = transcriber.transcribe(audio)
    judged = TurnJudge(TurnThresholds()).judge(PauseSignals(silence_ms=80, transcript=first.text,
                                                            transcript_logprob=first.avg_logprob))
    keys = {"timer", "10", "minutes"}
    assert read_again_wanted(judged, first.avg_logprob) and not keys <= words(first.text), first
    wider = read_again(transcriber, 5)
    assert wider is not None and not keys <= words(wider.again.transcribe(audio).text)
    second = load_second_check(SecondCheckSlice.of(settings))
    assert second is not None and settings.speech_to_text.read_again_by_second_model
    again = read_again(transcriber, 5, second)
    assert again is not None and again.again._model is second._model and again.again.beam_size == 5
    assert again.first is transcriber
    assert again.again.language == transcriber.language and again.again.clean is transcriber.clean
    assert second.speaking("de").language == "de" and transcriber.speaking("de").language == "en"
    reread = again.reread(audio, first)
    assert keys <= words(reread.text)  # both models find base's reading likelier, so the loop takes it
    first_ll, second_ll = again.likelihoods(audio, [first.text, reread.text])
    assert second_ll > first_ll and again.reread(audio, dataclasses.replace(first, text=reread.text)).text == reread.text
    # a second model reads even at the first model's beam; no beam, no second reading
    assert read_again(transcriber, 1, second) is not None and read_again(transcriber, 0, second) is None


#: espeak-ng clips tiny.en and Whisper base misread, as (sentence, voice, words per minute).
#: Which readings base's beam ends with depends on the CPU's numerics: where these were chosen,
#: on five of the six a reading other than base's best stood ("Cancel the timer." over "Conceal
#: the timer", "The road pride and prejudice." over "Load pride and plan this."), and on the
#: first, the only one then, on the machine before.
MISREAD = [
    ("Cancel the timer.", "en-us+f3", 180),
    ("Cancel the timer.", "en-029", 140),
    ("Who wrote Pride and Prejudice?", "en-us+f3", 180),
    ("Who wrote Pride and Prejudice?", "en-us", 200),
    ("Who wrote Pride and Prejudice?", "en-gb-scotland", 165),
    ("What time is it in Tokyo?", "en-gb-scotland", 165),
]


def test_the_reading_that_stands_may_be_any_words_the_beam_ended_with(transcriber):
    """Of tiny.en's reading and the five Whisper base's beam ended with, the one both models find
    likeliest stands (the likelihoods weighed here again, whatever words this CPU's beam ends
    with), on each misread clip up to the first where that is none of base's best and tiny.en's."""
    again = read_again(transcriber, 5, load_second_check(SecondCheckSlice.of(load_settings(env={}))))
    assert again is not None
    other_readings_stood = []
    for sentence, voice, speed in MISREAD:
        audio = concat(silence(0.3), espeak_speech(sentence, voice=voice, speed=speed), silence(0.08))
        first = transcriber.transcribe(audio)
        hearing = again.again.hear(audio, [first.text])
        readings = [r.text for r in hearing.readings]
        assert len(readings) == 5 and first.text, (first, readings)
        # the first reading is weighed, and readings told apart only by case and punctuation once
        assert next(iter(hearing.log_likelihoods)) == first.text
        assert len(hearing.log_likelihoods) == len({normalize_text(t) for t in [first.text, *readings]})
        reread = again.reread(audio, first)
        if first.text == readings[0]:
            assert reread.text == first.text  # the same words: nothing to weigh
            continue
        texts = list(hearing.log_likelihoods)
        both = dict(zip(texts, again.likelihoods(audio, texts), strict=True))
        assert reread.text in {first.text, *readings} and reread.text in both, (reread, both)
        assert both[reread.text] >= max(both.values()) - 1e-3, (reread.text, both)
        if normalize_text(reread.text) not in {normalize_text(readings[0]), normalize_text(first.text)}:
            other_readings_stood.append((sentence, voice, first.text, readings[0], reread.text))
            break  # the likeliest stood on every clip so far, and here it was another reading: enough
    assert other_readings_stood
    # audio longer than the window is only transcribed, as `transcribe` would
    long = concat(*[utterance(piper_speech("Who wrote the novel Pride and Prejudice?"))] * 4)
    assert transcriber.hear(long, ["Stop."]).log_likelihoods == {}


def test_noise_suppression_hears_words_the_hiss_hid(transcriber):
    """White noise at 10 dB SNR turns Piper's "…snow in Chicago…" into "…snow into cargo…" for
    tiny.en; through WebRTC noise suppression (`SpeechToText.NoiseSuppression` 2) the words come
    through, and a second reading cleans the audio the same way."""
    stt = dataclasses.replace(SpeechToTextSlice.of(load_settings(env={})), noise_suppression=2)
    shipped = load_whisper(resolve_whisper("tiny.en"), stt)
    said = piper_speech("Is it going to snow in Chicago this weekend?")
    audio = with_noise(concat(silence(0.3), said, silence(0.3)), 10, color="white", seed=2)
    assert "chicago" not in words(transcriber.transcribe(audio).text)
    assert {"snow", "chicago", "weekend"} <= words(shipped.transcribe(audio).text)
    again = read_again(shipped, 5)
    assert again is not None and again.again.clean is shipped.clean
    off = load_whisper(resolve_whisper("tiny.en"), dataclasses.replace(stt, noise_suppression=0))
    assert off.clean is None
    # "stop" over her voice is read as it comes (the same loaded model), and so is all of it when off
    plain, as_is = stop_reader(shipped, ["hey_jarvis"]), stop_reader(off, ["hey_jarvis"])
    assert plain is not None and plain.whisper.clean is None and plain.whisper._model is shipped._model
    assert shipped.clean is not None and as_is is not None and as_is.whisper is off
    assert plain.wake_phrases == ("Hey Jarvis.",)


def test_audio_longer_than_the_window_and_float_input(transcriber):
    # 12 s: longer than the 10 s window, so it is decoded with the full 30 s window.
    question = piper_speech("Who wrote the novel Pride and Prejudice?")
    audio = concat(silence(0.5), question, silence(12.0 - 0.5 - len(question) / 16_000))
    transcript = transcriber.transcribe(audio)
    assert {"who", "wrote", "novel"} <= words(transcript.text)
    assert transcript.audio_seconds == pytest.approx(12.0)
    as_float = transcriber.transcribe(utterance(question).astype(np.float32) / 32768)
    assert {"who", "wrote", "novel"} <= words(as_float.text)


def test_the_phrase_check_scores_both_readings_on_the_audio_alone(transcriber):
    said = utterance(piper_speech("Hey Jarvis."))
    check = transcriber.check_phrase(said, "Hey Jarvis.")
    assert check.heard == check.prompted == "Hey Jarvis." and check.log_odds == 0.0  # the same reading
    other = transcriber.check_phrase(utterance(piper_speech("Who wrote the novel Pride and Prejudice?")),
                                     "Hey Jarvis.")
    assert "jarvis" not in other.prompted.lower() or other.log_odds < -10  # the hint alone can't make it
    # Longer than the window: decoded whole in the full window, as `transcribe` does.
    question = piper_speech("Who wrote the novel Pride and Prejudice?")
    long = concat(*[concat(question, silence(0.5))] * 4, said)
    assert len(long) > 12 * 16_000
    assert transcriber.check_phrase(long, "Hey Jarvis.").heard.lower().endswith("hey jarvis.")


def test_weighing_told_phrases_scores_them_against_whispers_own_reading(transcriber):
    said = utterance(piper_speech("Thank you."))
    weighing = transcriber.weigh(said, ["Stop.", "Thank you."], settled=lambda text: False)
    assert weighing.transcript.text == "Thank you." and weighing.transcript.no_speech_prob < 0.5
    assert weighing.log_odds["Thank you."] == pytest.approx(0.0, abs=0.5)  # its own reading, told
    assert weighing.log_odds["Stop."] < -6  # nothing like it
    # A reading that settles it is not weighed; nor is audio longer than the window.
    assert transcriber.weigh(said, ["Stop."], settled=lambda text: "thank" in text.lower()).log_odds == {}
    long = concat(*[utterance(piper_speech("Who wrote the novel Pride and Prejudice?"))] * 4)
    assert transcriber.weigh(long, ["Stop."], settled=lambda text: False).log_odds == {}


def test_whisper_base_weighs_words_starting_with_t_as_it_writes_them():
    """The base packages' tokenizer lacks the merge that makes " t", so "Tell me the time." was
    weighed as if written " ", "t…": its own reading scored ≈e⁻²⁷ too low, and "Stop." came out
    e¹⁶ likelier than what was said — a false stop with `SpeechToText.Model` base."""
    base = Transcriber(resolve_whisper("base").path)
    assert base._model.hf_tokenizer.encode(" time", add_special_tokens=False).ids == [565]
    weighing = base.weigh(utterance(piper_speech("Tell me the time.")), ["Stop.", "Tell me the time."],
                          settled=lambda text: False)
    assert weighing.transcript.text == "Tell me the time."
    assert weighing.log_odds["Tell me the time."] == pytest.approx(0.0, abs=0.5)
    assert weighing.log_odds["Stop."] < -6
    tiny = resolve_whisper("tiny.en").path / "tokenizer.json"
    assert complete_merges(tiny, tokenizers.Tokenizer.from_file(str(tiny))) is None  # it lacks none


def test_empty_audio_is_an_empty_or_phantom_transcript(transcriber):
    transcript = transcriber.transcribe(np.zeros(0, dtype=np.int16))
    assert transcriber.phantom_reason(transcript) is not None


def T(text: str, nsp: float = 0.05, logprob: float = -0.2) -> Transcript:
    return Transcript(text=text, no_speech_prob=nsp, avg_logprob=logprob, audio_seconds=1.0, seconds=0.1)


@pytest.mark.parametrize(
    ("transcript", "reason"),
    [
        (T(""), "empty"),
        (T("   "), "empty"),
        (T("."), "no words"),
        (T(". . . . . ."), "no words"),
        (T("♪"), "no words"),
        (T("[BLANK_AUDIO]"), "annotation"),
        (T("(music)"), "annotation"),
        (T("*upbeat music*"), "annotation"),
        (T("Thanks for watching!"), "known phantom"),
        (T("Thank you for watching."), "known phantom"),
        (T("you"), "known phantom"),
        (T("You."), "known phantom"),
        (T("Please subscribe to my channel."), "known phantom"),
        (T("I'm going to do it.", nsp=0.95, logprob=-0.23), "no speech"),
        (T("Turn it on.", nsp=0.7, logprob=-1.4), "no speech"),
        (T("Um."), "filler"),
        (T("Hmm..."), "filler"),
        (T("Thank you.", nsp=0.45), "likely phantom"),
        (T("Bye.", logprob=-0.9), "likely phantom"),
        (T("the the the the the the the the the the the the the"), "repetitive"),
    ],
)
def test_phantom_reasons(transcript, reason):
    found = phantom_reason(transcript)
    assert found is not None and reason in found


@pytest.mark.parametrize(
    "transcript",
    [
        T("Yes."),
        T("Stop."),
        T("No."),
        T("Yes.", nsp=0.6, logprob=-0.6),  # a quiet "yes": Whisper unsure, but not that unsure
        T("Thank you.", nsp=0.1),  # said clearly, it is meant
        T("Set a timer for 10 minutes."),
        T("What's 12 times 12?"),
        T("10."),
    ],
)
def test_real_speech_passes(transcript):
    assert phantom_reason(transcript) is None


def test_threshold_and_transcript_shape(transcriber):
    quiet_yes = T("Yes.", nsp=0.7, logprob=-0.5)
    assert phantom_reason(quiet_yes) is None
    assert phantom_reason(quiet_yes, no_speech_threshold=0.3) is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        quiet_yes.text = "No."  # type: ignore[misc]
    assert transcriber.window_seconds == 10.0 and transcriber.language == "en"


def test_a_directory_without_a_model_is_a_config_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="SpeechToText.Model"):
        Transcriber(tmp_path)
    assert resolve_whisper("tiny.en").path.is_dir()
