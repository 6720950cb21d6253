"""`elara status` as text: the remote speech services and the satellites get a line each."""

import argparse

from elara.cli import service


def test_remote_engines_and_satellites_are_shown(monkeypatch, capsys):
    snapshot = {
        "version": "0.1.0", "pid": 42, "state": "idle", "uptime_seconds": 3725.0,
        "models": {"wake_word": ["hey_jarvis"], "speech_to_text": "wyoming://gpu:10300", "voice": "local",
                   "language_model": "m", "ollama": "http://127.0.0.1:11434",
                   "remote_engines": {"speech_to_text": {
                       "engine": "wyoming://gpu:10300", "state": "down", "failures": 3, "fallbacks": 2,
                       "retry_in_seconds": 4.0, "last_error": "unreachable", "info": None, "fallback": "local"}}},
        "counters": {"turns": 1},
        "satellites": [
            {"name": "kitchen", "uri": "tcp://pi:10700", "state": "connected", "last_error": None,
             "counters": {"turns": 5}},
            {"name": "attic", "uri": "tcp://attic:10700", "state": "down", "last_error": "TimeoutError",
             "counters": {"turns": 0}}],
    }
    monkeypatch.setattr(service, "query_status", lambda path: snapshot)
    assert service._status(argparse.Namespace(json=False), None) == 0
    out = capsys.readouterr().out
    assert "speech-to-text service wyoming://gpu:10300: down, 3 failures, 2 answered locally, " \
           "tried again in 4 s" in out
    assert "satellite kitchen at tcp://pi:10700: connected, 5 turns" in out
    assert "satellite attic at tcp://attic:10700: down (TimeoutError), 0 turns" in out
