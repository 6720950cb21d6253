"""Elara hearing herself, as in a room: on the virtual sound card the speaker is routed back into
the microphone (module-loopback, 60 ms late, at half volume).

Her replies say "Jarvis" and "Hey Jarvis" themselves: she must not wake to them, hear them as a
question, or send anything for them. Over a long reply, "Stop." (no wake word) silences her and
asks the model nothing; "Hey Jarvis, what is the capital of Germany?" stops her and is answered.
That she falls silent at once is checked on one timeline (the figure is `bench/echo.py
--live`'s): what the microphone hears (the clip
played into it, plus her echo) is recorded, the clip is found in it and taken out, and what is
left is her voice coming back through the echo path."""

import re
import time

import pytest

from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, asking_status, daemon_env, daemon_status, status_answer
from tests.rig.ollama_server import last_user_text
from tests.rig.recording import reaction, voiced_end
from tests.spec_reader import read_all

ECHO_MS = 60
SAYS_JARVIS = ("Hey Jarvis, you might say, and I would answer. Jarvis is a name from the stories. "
               "Hey Jarvis, what is the weather?")
LONG = " ".join(f"Here is the {n} part of a long story about a lighthouse keeper and the sea."
                for n in ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"))


def responder(endpoint, body):
    last = next(m["content"] for m in reversed(body.get("messages", [])) if m["role"] == "user")
    if "germany" in last.lower():
        return "Berlin is the capital of Germany."
    return LONG if "story" in last.lower() else SAYS_JARVIS


class EchoPath:
    """The speaker routed back into the microphone, `ECHO_MS` late at half volume, until moved."""

    def __init__(self, card):
        self.card = card
        self.module = card.add_echo(latency_ms=ECHO_MS, volume=0.5)

    def move(self, latency_ms):
        """The path now `latency_ms` late: what a stall of the sound server leaves behind."""
        self.module = self.card.move_echo(self.module, latency_ms, volume=0.5)

    def remove(self):
        """No echo path any more."""
        self.card.remove_echo(self.module)


@pytest.fixture
def echo_daemon(sound_card, ollama_server, tmp_path, request):
    ollama_server.responder = responder
    echo = EchoPath(sound_card)
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path, **request.param)
    daemon = DaemonProcess(env)
    try:
        daemon.wait_for("waiting for the wake word", timeout=90)
        yield daemon, env, echo
    finally:
        daemon.kill()
        echo.remove()
        (tmp_path / "daemon.log").write_text(daemon.log())


def clip(tmp_path, name, *parts):
    return voice_clips.write_wav(tmp_path / f"{name}.wav", voice_clips.concat(*parts))


def wake_then(text, lead=0.5):
    return (voice_clips.silence(lead), voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.5),
            voice_clips.piper_speech(text), voice_clips.silence(1.0))


def words(text):
    """Lower-case words, no punctuation: how Whisper writes a question varies ("And then...")."""
    return " ".join(re.findall(r"[a-z']+", text.lower()))


def asked(server):
    """The user's words of each turn the model was asked to answer."""
    return [words(last_user_text("chat", t)) for t in server.turns()]


def stored_questions(tmp_path):
    """The words of each question in the store that a longer one did not supersede."""
    return [words(r["content"]) for r in read_all(tmp_path / "store", "end-to-end key")
            if r["role"] == "User" and not r["metadata"].get("superseded")]


@pytest.mark.parametrize("echo_daemon", [{"Listening__Mode": "continued", "Listening__FollowUpSeconds": "3",
                                          "Logging__Level": "DEBUG"}], indirect=True)
def test_she_never_wakes_to_her_own_voice(echo_daemon, sound_card, ollama_server, tmp_path):
    daemon, env, echo = echo_daemon
    questions = ["Tell me something.", "And then?", "What else?", "Go on.", "Why is that?",
                 "What happened next?"]
    sound_card.play_into_mic(clip(tmp_path, "q0", *wake_then("Say something about Jarvis.")))
    for turn, question in enumerate(questions, start=1):
        # In the follow-up window after each reply, no wake word: the next question.
        daemon.wait_for(r"turn timings", count=turn, timeout=60)
        if turn == 3:
            # What the canceller takes away of her echo, as learnt over three replies on a path
            # that held still (after the moves below it depends on where each new loopback
            # happens to settle, and on how much of her last reply was left to learn it again).
            # Asked alongside the next question, not before it: the follow-up window is short, and
            # no frame of hers moves the figure until her next reply.
            asked_learnt = asking_status(env)
            # Her echo comes 60 ms later from here on, as after a CI run's stall: until the filter
            # measured it again, what was left of her next reply passed for the person going on
            # after "What else?", four times, each reply dropped and the question asked again.
            echo.move(ECHO_MS + 60)
        elif turn == 5:
            echo.move(ECHO_MS)  # and back: ahead of where the reference is now read
        sound_card.play_into_mic(clip(tmp_path, f"q{turn}", voice_clips.silence(0.3),
                                      voice_clips.piper_speech(question), voice_clips.silence(0.8)))
    daemon.wait_for(r"turn timings", count=len(questions) + 1, timeout=60)
    daemon.wait_for(r"waiting for the wake word", count=2, timeout=30)  # the window closed
    # Seven replies saying "Hey Jarvis" and "Jarvis" 21 times in all, each heard back through the
    # echo path, and seven follow-up windows open right after her voice: no wake, no phantom turn,
    # nothing sent for them, no "stop" heard in her words.
    assert daemon.count(r"wake word hey_jarvis \(") == 1, (
        daemon.log_before(r"wake word hey_jarvis \(", 4.0, skip=1) + "\n\n" + daemon.log())
    # A pause inside a question ("What happened … next?") may start a reply ahead on the words so
    # far, asked for and dropped when the person goes on: each such request is the start of the
    # next one. Every other request is one of the questions, and the store holds them whole.
    expected = [words(q) for q in ["Say something about Jarvis.", *questions]]
    requests = asked(ollama_server)
    ahead = [q for q, then in zip(requests, requests[1:]) if q not in expected and then.startswith(q + " ")]
    assert [q for q in requests if q not in ahead] == expected, requests
    assert len(ahead) <= daemon.count("dropped the reply started ahead"), requests
    assert stored_questions(tmp_path) == expected
    assert daemon.count("dropped an utterance") == 0
    shown, learnt = daemon_status(env), status_answer(asked_learnt)["echo"]
    assert learnt["erle_db"] > 10, learnt
    # The delay is the whole speaker → microphone path (output latency, the 60 ms loop, the sound
    # server's buffers), which grows when the machine is busy (255 ms seen with the other test
    # worker loaded): checked for sense, not for a figure.
    assert 20 <= shown["echo"]["delay_ms"] <= 500, (learnt, shown["echo"])
    assert shown["counters"]["stops"] == 0
    status_code, _ = daemon.terminate()
    assert status_code == 0


@pytest.mark.parametrize("echo_daemon", [{"Listening__Mode": "wake_word", "Logging__Level": "DEBUG"}], indirect=True)
def test_the_wake_word_and_stop_over_her_reply_silence_her_at_once(echo_daemon, sound_card, ollama_server,
                                                                   tmp_path):
    daemon, env, _ = echo_daemon
    # "Stop." in another voice than hers, no wake word, over a long reply once she has spoken long
    # enough to have learnt the room (a few seconds; an always-on assistant does that once).
    # (Someone talking over her unsettles speexdsp for a while, which makes a "stop" just after
    # that less sure to be heard - bench/echo.py measures it - so it comes first here.)
    sound_card.play_into_mic(clip(tmp_path, "story", *wake_then("Tell me a story.")))
    daemon.wait_for(r"speexdsp has learnt the room", timeout=30)
    time.sleep(1.0)
    stop = voice_clips.concat(voice_clips.silence(0.3), voice_clips.espeak_speech("Stop.", voice="en-gb"))
    room = sound_card.record_speaker(tmp_path / "heard-stop.wav", source=sound_card.mic_monitor)
    sound_card.play_into_mic(clip(tmp_path, "stop", stop, voice_clips.silence(1.5)))
    daemon.wait_for(r'heard "stop" while speaking', timeout=10)
    # The recording is stopped once she is idle again, not at the log line: parecord may still
    # hold the end of "Stop." in its buffer (on a busy machine it did).
    daemon.wait_for(r"waiting for the wake word", count=2, timeout=10)
    stop_reaction = reaction(room.samples(), stop, voiced_end(stop))

    # The wake word and a new question over the next long reply: she stops, and the question is
    # answered.
    sound_card.play_into_mic(clip(tmp_path, "story2", *wake_then("Tell me another story.")))
    time.sleep(3.5)
    wake = voice_clips.concat(voice_clips.silence(0.3), voice_clips.piper_speech("Hey Jarvis."),
                              voice_clips.silence(0.8))
    room = sound_card.record_speaker(tmp_path / "heard-wake.wav", source=sound_card.mic_monitor)
    sound_card.play_into_mic(clip(tmp_path, "wake", wake))
    sound_card.play_into_mic(clip(tmp_path, "germany", voice_clips.piper_speech("What is the capital of Germany?"),
                                  voice_clips.silence(1.5)))
    daemon.wait_for(r"turn timings", timeout=30)  # the Germany turn (the stories' were cut)
    wake_reaction = reaction(room.samples(), wake, voiced_end(wake))
    daemon.wait_for(r"waiting for the wake word", count=3, timeout=10)

    # A reply to a fragment may be asked for and dropped when the question goes on, whether it was
    # started ahead or had begun: what is left of her voice as she falls silent, or the wake phrase
    # itself, read as words once the "stop" reader heard it late ("Hey, Jorbs."). Every other
    # request is one of the three. (One dropped before its request went out asks nothing.)
    expected = ["tell me a story", "tell me another story", "what is the capital of germany"]
    questions = asked(ollama_server)
    assert [q for q in questions if q in expected] == expected, questions
    dropped = daemon.count("dropped the reply started ahead") + daemon.count("dropping the reply begun")
    assert len(questions) - len(expected) <= dropped, questions
    counters = daemon_status(env)["counters"]
    assert counters["stops"] == 1 and counters["barge_ins"] == 1, counters
    # Heard at the microphone, through the echo path: she fell silent at once, not at the end of
    # a sentence (each takes about 4 s). How fast, measured: bench/echo.py --live.
    assert wake_reaction < 1.0 and stop_reaction < 1.0, (wake_reaction, stop_reaction)
    status_code, _ = daemon.terminate()
    assert status_code == 0
    # A question the person went on with is stored too, and marked superseded by the whole one.
    stored = [(r["role"], r["content"], r["metadata"].get("interrupted"))
              for r in read_all(tmp_path / "store", "end-to-end key")
              if r["role"] != "System" and not r["metadata"].get("superseded")]
    assert [words(content) for role, content, _ in stored if role == "User"] == expected
    assert [(role, interrupted) for role, _, interrupted in stored] == [
        ("User", None), ("Assistant", "true"), ("User", None), ("Assistant", "true"), ("User", None),
        ("Assistant", None)]
    for _, content, interrupted in stored:
        if interrupted:  # only what was heard of a story: its start, never the whole
            assert 0 < len(content) < len(LONG) and LONG.startswith(content.rstrip(" …")), content

