"""End to end: Elara as the hub for two real wyoming-satellite 1.0.0 processes ("kitchen" and
"bedroom", from their own virtual environment) whose microphones and speakers are pairs of null
sinks on the virtual sound card (`parec` / `pacat`). A question asked in the kitchen is answered
in the kitchen only and stored with `metadata.room`; a timer set there rings there; a satellite
killed is retried with backoff while the other room goes on, and is heard again once it is back."""

import json
import os
import re

import numpy as np

from elara.conversation.messages import ChatRole
from elara.conversation.store import ConversationStore
from tests.rig.daemon_process import DaemonProcess, daemon_env, daemon_status, spoken_question
from tests.rig.wyoming_services import start_satellite

REPLIES = {"france": "Paris is the capital of France.", "germany": "Berlin is the capital of Germany."}


def words(text):
    return " ".join(re.findall(r"[a-z']+", text.lower()))


def responder(endpoint, body):
    last = next(m["content"] for m in reversed(body.get("messages", [])) if m["role"] == "user")
    return next((reply for key, reply in REPLIES.items() if key in last.lower()), "I am not sure.")


def loud(samples, threshold=1_000):
    return int(np.count_nonzero(np.abs(samples.astype(np.int32)) > threshold))


def test_rooms_are_answered_where_they_asked(sound_card, ollama_server, tmp_path, transcriber):
    ollama_server.responder = responder
    rooms = {name: sound_card.add_room(f"{name}_{os.getpid()}") for name in ("kitchen", "bedroom")}
    card_env = {**os.environ, **sound_card.env}
    satellites = {name: start_satellite(name, card_env, f"{mic}.monitor", speaker)
                  for name, (mic, speaker) in rooms.items()}
    try:
        config = json.dumps([{"Name": name, "Uri": s.uri} for name, s in satellites.items()])
        env = daemon_env(sound_card.env, ollama_server.url, tmp_path, Listening__Mode="wake_word",
                         Satellites=config, Timers__RingSeconds="3")
        daemon = DaemonProcess(env)
        try:
            for name, satellite in satellites.items():
                daemon.wait_for(rf"satellite {name} at {satellite.uri}: streaming", timeout=90)
            shown = {s["name"]: s for s in daemon_status(env)["satellites"]}
            assert shown["kitchen"]["state"] == shown["bedroom"]["state"] == "connected"

            # Asked in the kitchen: answered in the kitchen, not in the bedroom nor by the hub.
            kitchen, bedroom = (sound_card.record_speaker(source=f"{rooms[n][1]}.monitor") for n in rooms)
            hub = sound_card.record_speaker()
            sound_card.play_into_mic(spoken_question(tmp_path / "france.wav", "What is the capital of France?"),
                                     sink=rooms["kitchen"][0])
            daemon.wait_for(r"turn timings", timeout=60)
            [turn] = ollama_server.turns()
            assert "capital of france" in words(turn["messages"][-1]["content"])
            daemon.wait_for(r"turn done", timeout=30)
            # a timer set in the kitchen rings in the kitchen
            sound_card.play_into_mic(spoken_question(tmp_path / "timer.wav", "Set a timer for two seconds."),
                                     sink=rooms["kitchen"][0])
            daemon.wait_for(r"local command: set_timer", timeout=60)
            daemon.wait_for(r"announcing \(timer\)", timeout=30)
            daemon.wait_for(r"announced \(timer\)", timeout=30)
            heard_kitchen = words(transcriber.transcribe(kitchen.samples()).text)
            assert "capital of france" in heard_kitchen, heard_kitchen
            assert re.search(r"your timer .*is done", heard_kitchen), heard_kitchen
            assert loud(bedroom.samples()) == 0 and loud(hub.samples()) == 0
            assert len(ollama_server.turns()) == 1  # the timer never asked the model

            # The bedroom's satellite dies: retried with backoff, the kitchen still answers.
            satellites["bedroom"].kill()
            daemon.wait_for(r"satellite bedroom at .*trying again in 1 s", timeout=30)
            assert daemon_status(env)["satellites"][1]["state"] in ("down", "connecting")
            sound_card.play_into_mic(spoken_question(tmp_path / "germany.wav", "What is the capital of Germany?"),
                                     sink=rooms["kitchen"][0])
            daemon.wait_for(r"turn timings", count=3, timeout=60)
            assert "capital of germany" in words(ollama_server.turns()[-1]["messages"][-1]["content"])

            # Back again: the hub reconnects by itself and the bedroom is answered in the bedroom.
            satellites["bedroom"].restart()
            daemon.wait_for(rf"satellite bedroom at {satellites['bedroom'].uri}: streaming", count=2, timeout=60)
            bedroom = sound_card.record_speaker(source=f"{rooms['bedroom'][1]}.monitor")
            sound_card.play_into_mic(spoken_question(tmp_path / "france2.wav", "What is the capital of France?"),
                                     sink=rooms["bedroom"][0])
            daemon.wait_for(r"turn timings", count=4, timeout=60)
            daemon.wait_for(r"turn done", count=3, timeout=30)
            assert "capital of france" in words(transcriber.transcribe(bedroom.samples()).text)

            code, _ = daemon.terminate()
            assert code == 0, daemon.log()
        finally:
            daemon.kill()
            (tmp_path / "daemon.log").write_text(daemon.log())
    finally:
        for satellite in satellites.values():
            satellite.stop()
    stored = ConversationStore(tmp_path / "store", "end-to-end key").read_tail(20)
    turns = [m for m in stored if m.role in (ChatRole.USER, ChatRole.ASSISTANT)]
    rooms_said = [m.metadata.get("room") for m in turns]
    assert rooms_said == ["kitchen"] * 6 + ["bedroom"] * 2, [(m.role, m.metadata) for m in turns]
