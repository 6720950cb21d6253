"""Tool calls end to end: `elara run` on the virtual sound card with a model that calls tools.

A reminder phrased so the intent matcher misses it is set by the model's call and rings on time
with its text; a tool in `Tools.Confirm` is asked about aloud, runs on a spoken "yes" in the
follow-up window and does not run on "no". The records decrypt with the independent reader.
"""

import re
from datetime import UTC, datetime

import pytest

from tests.rig import voice_clips
from tests.rig.daemon_process import DaemonProcess, daemon_env, daemon_status
from tests.rig.ollama_server import ToolCalls, last_user_text, pending_tool_results
from tests.spec_reader import read_all

KEY = "end-to-end key"
ASK = "Shall I set a five minute timer for the eggs?"


def respond(endpoint, body):
    """A model with tools: a nudge is a reminder, the eggs a timer; it answers from the results."""
    results = pending_tool_results(body)
    if results and results[-1]["content"].startswith("Not done yet"):
        return ASK
    if results:
        return "Done."
    said = re.sub(r"[^a-z ]", "", last_user_text(endpoint, body).lower())
    if "nudge" in said or "pasta" in said:
        return ToolCalls([("set_reminder", {"text": "take the pasta off", "in_seconds": 6})])
    if "eggs" in said:
        return ToolCalls([("set_timer", {"seconds": 300, "name": "eggs"})])
    return "I am not sure."


@pytest.fixture
def daemon(sound_card, ollama_server, tmp_path):
    ollama_server.responder = respond
    ollama_server.model_capabilities = {"test-model": ["completion", "tools"]}
    env = daemon_env(sound_card.env, ollama_server.url, tmp_path, Listening__Mode="wake_word",
                     Timers__RingSeconds="2", Tools__Confirm='["elara/set_timer"]')
    process = DaemonProcess(env)
    try:
        process.wait_for("waiting for the wake word", timeout=90)
        yield process, env
    finally:
        (tmp_path / "daemon.log").write_text(process.log())
        process.kill()


def said(tmp_path, name, text, *, wake=True):
    parts = [voice_clips.silence(0.5)]
    if wake:
        parts += [voice_clips.piper_speech("Hey Jarvis."), voice_clips.silence(0.5)]
    parts += [voice_clips.piper_speech(text), voice_clips.silence(1.5)]
    return voice_clips.write_wav(tmp_path / f"{name}.wav", voice_clips.concat(*parts))


def records(tmp_path):
    return read_all(tmp_path / "store", KEY)


def timers(tmp_path):
    found = {}
    for record in records(tmp_path):
        if record["metadata"].get("kind") == "timer":
            found[record["metadata"]["id"]] = record["metadata"]
    return found


def test_a_reminder_set_by_the_model_rings_on_time_and_a_confirmed_tool_waits_for_yes(
        daemon, sound_card, tmp_path, transcriber):
    daemon, env = daemon
    recording = sound_card.record_speaker().wait_started()
    sound_card.play_into_mic(said(tmp_path, "nudge", "Could you give me a nudge in six seconds to "
                                                     "take the pasta off?"))
    daemon.wait_for(r"calling tool elara/set_reminder", timeout=60)
    daemon.wait_for(r"timer \w+ set for 6 s", timeout=10)
    [reminder] = timers(tmp_path).values()
    assert reminder["reminder"] == "take the pasta off"
    due = datetime.fromisoformat(reminder["due"])
    daemon.wait_for(r"announcing \(timer\)", timeout=max(5.0, (due - datetime.now(UTC)).total_seconds() + 5))
    late = (datetime.now(UTC) - due).total_seconds()
    assert -0.2 < late < 1.0, daemon.log()
    daemon.wait_for(r"announced \(timer\)", timeout=15)
    heard = transcriber.transcribe(recording.samples()).text.lower()
    assert "pasta" in heard, heard

    # A confirmed tool: asked aloud, run on "yes" in the follow-up window.
    daemon.wait_for(r"timer \w+ done", timeout=15)
    sound_card.play_into_mic(said(tmp_path, "eggs", "Please watch the eggs for five minutes."))
    daemon.wait_for(r"tool elara/set_timer waits for the person's yes", timeout=60)
    daemon.wait_for(r"turn timings", count=2, timeout=60)
    assert not [t for t in timers(tmp_path).values() if t["name"] == "eggs"]
    sound_card.play_into_mic(said(tmp_path, "yes", "Yes, please.", wake=False))
    daemon.wait_for(r"tool elara/set_timer done", timeout=60)
    [eggs] = [t for t in timers(tmp_path).values() if t["name"] == "eggs"]
    assert eggs["seconds"] == "300" and eggs["state"] == "pending"

    # And not run on "no".
    daemon.wait_for(r"turn timings", count=3, timeout=60)
    sound_card.play_into_mic(said(tmp_path, "eggs-again", "Please watch the eggs for five minutes."))
    daemon.wait_for(r"tool elara/set_timer waits for the person's yes", count=2, timeout=60)
    daemon.wait_for(r"turn timings", count=4, timeout=60)
    sound_card.play_into_mic(said(tmp_path, "no", "No, thank you.", wake=False))
    daemon.wait_for(r"tool elara/set_timer not run: the person said no", timeout=60)
    daemon.wait_for(r"turn timings", count=5, timeout=60)
    assert len([t for t in timers(tmp_path).values() if t["name"] == "eggs"]) == 1

    kinds = [(r["metadata"].get("kind"), r["metadata"].get("tool")) for r in records(tmp_path)
             if r["metadata"].get("kind", "").startswith("tool_")]
    assert kinds == [("tool_call", "elara/set_reminder"), ("tool_result", "elara/set_reminder"),
                     ("tool_call", "elara/set_timer"), ("tool_result", "elara/set_timer"),
                     ("tool_result", "elara/set_timer"),
                     ("tool_call", "elara/set_timer"), ("tool_result", "elara/set_timer"),
                     ("tool_result", "elara/set_timer")]
    tools = daemon_status(env)["tools"]
    assert tools["offered_to_model"] and tools["calls"] == 2 and tools["failures"] == 0
    assert tools["sources"]["elara"]["calls"] == 2
    status, _ = daemon.terminate()
    assert status == 0, daemon.log()
