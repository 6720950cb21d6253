"""The composition root with the real models and devices (the virtual sound card): what a reload
reuses, what it builds anew — through `build` and through the daemon's own SIGHUP path — and that
a broken configuration leaves nothing open. tests/test_slices.py checks the reuse decision for
every setting key."""

import asyncio
import json
import os
import signal

import pytest

from elara.config import load_settings
from elara.conversation.store import ConversationStore
from elara.errors import ElaraError
from elara.service import daemon as daemon_module
from elara.service.build import build, close_replaced
from elara.service.slices import PARTS
from tests.rig.daemon_process import daemon_env


@pytest.fixture
def settings_for(sound_card, ollama_server, tmp_path):
    def make(**overrides: str):
        env = {"ELARA__Context__StorageRoot": str(tmp_path / "store"),
               "ELARA__Context__EncryptionKey": "runtime key",
               "ELARA__LanguageModel__Host": ollama_server.url,
               "ELARA__LanguageModel__Model": "test-model"}
        env.update({f"ELARA__{key}": value for key, value in overrides.items()})
        return load_settings(env=env)
    return make


def test_a_reload_reuses_unchanged_parts_and_builds_the_rest(settings_for, tmp_path):
    store = ConversationStore(tmp_path / "store", "runtime key")

    async def scenario():
        first = await build(settings_for(), store)
        try:
            same = await build(settings_for(), store, previous=first)
            for part in PARTS:
                assert getattr(same, part) is getattr(first, part), part
            # Whisper base, loaded once for the wake check, also reads the doubtful words again.
            assert first.second_check is not None and first.voice.read_again is not None
            assert first.voice.read_again.again._model is first.second_check._model
            # The cheap parts are always new: a swap never shares a speech sink or a dialogue.
            assert same.voice.speech is not first.voice.speech
            assert same.voice.dialogue is not first.voice.dialogue

            changed = await build(
                settings_for(TextToSpeech__LengthScale="1.2", Context__LastN="2",
                             LanguageModel__Personality="professional"), store, previous=same)
            assert changed.synthesizer is not same.synthesizer
            assert changed.llm is not same.llm and changed.memory is not same.memory
            for part in ("wake", "transcriber", "vad", "microphone", "speaker"):
                assert getattr(changed, part) is getattr(same, part), part
            assert changed.voice.orchestrator.context_size == 2
            await close_replaced(same, changed)
            assert changed.microphone.is_open  # shared: not closed with the old runtime
            assert same.llm is not changed.llm
        finally:
            await close_replaced(first, None)
        return changed

    changed = asyncio.run(scenario())
    assert not changed.microphone.is_open


def test_noise_suppression_alone_rebuilds_the_transcriber(settings_for, tmp_path):
    """The setting the hand-kept table once missed: a reload kept the old transcriber, unclean."""
    store = ConversationStore(tmp_path / "store", "runtime key")

    async def scenario():
        first = await build(settings_for(), store)
        try:
            cleaned = await build(settings_for(SpeechToText__NoiseSuppression="2"), store, previous=first)
            assert first.transcriber.clean is None and cleaned.transcriber.clean is not None
            assert [part for part in PARTS if getattr(cleaned, part) is not getattr(first, part)] == ["transcriber"]
            # the question's second reading, by the same second model, cleans as the new one does
            assert cleaned.voice.transcriber is cleaned.transcriber
            assert cleaned.voice.read_again.first is cleaned.transcriber
            assert cleaned.voice.read_again.again.clean is cleaned.transcriber.clean
            assert cleaned.voice.read_again.again._model is first.second_check._model
            await close_replaced(first, cleaned)
        finally:
            await close_replaced(first, None)

    asyncio.run(scenario())


@pytest.mark.parametrize("override", [
    {"SpeechToText__Model": "/nonexistent/whisper"},
    {"Audio__InputDevice": "a microphone that is not there"},
])
def test_a_broken_reload_fails_before_anything_is_swapped_and_leaks_nothing(settings_for, tmp_path,
                                                                            override):
    store = ConversationStore(tmp_path / "store", "runtime key")

    async def scenario():
        running = await build(settings_for(), store)
        try:
            with pytest.raises(ElaraError):
                await build(settings_for(**override), store, previous=running)
            assert running.microphone.is_open
        finally:
            await close_replaced(running, None)

    asyncio.run(scenario())


def test_sighup_rebuilds_a_changed_slice_and_takes_the_rest_over(sound_card, ollama_server, tmp_path,
                                                                  monkeypatch):
    """The daemon in this process: SIGHUP after the Whisper settings changed builds a new
    transcriber, takes every other slow part over, and the loop runs the new parts."""
    for name in [n for n in os.environ if n.startswith("ELARA")]:
        monkeypatch.delenv(name)
    for name, value in daemon_env(sound_card.env, ollama_server.url, tmp_path).items():
        monkeypatch.setenv(name, value)
    levels = []
    monkeypatch.setattr(daemon_module, "configure_logging", levels.append)  # this process's logging stays
    config = tmp_path / "appsettings.json"
    config.write_text(json.dumps({"Listening": {"Mode": "wake_word"}}))
    daemon = daemon_module.Daemon(load_settings(config), str(config))

    async def until(ready, seconds: float = 60.0) -> None:
        async with asyncio.timeout(seconds):
            while not ready():
                await asyncio.sleep(0.05)

    async def scenario():
        running = asyncio.create_task(daemon.run())
        try:
            await until(lambda: any(task.get_name() == "reloads" for task in daemon._tasks))
            first = daemon.runtime
            config.write_text(json.dumps({"Listening": {"Mode": "wake_word"},
                                          "SpeechToText": {"NoiseSuppression": 2, "BeamSize": 2}}))
            os.kill(os.getpid(), signal.SIGHUP)
            await until(lambda: daemon.counters.reloads == 1)
            new = daemon.runtime
            assert new is not first and new.transcriber is not first.transcriber
            assert (new.transcriber.beam_size, first.transcriber.beam_size) == (2, 1)
            assert new.transcriber.clean is not None
            for part in set(PARTS) - {"transcriber"}:
                assert getattr(new, part) is getattr(first, part), part
            assert daemon.loop.parts is new.voice and new.microphone.is_open
            config.write_text('{"SpeechToText": {"BeamSize": "two"}}')  # refused: nothing changes
            os.kill(os.getpid(), signal.SIGHUP)
            await until(lambda: daemon.counters.rejected_reloads == 1)
            assert daemon.runtime is new and daemon.loop.parts is new.voice
        finally:
            daemon.request_stop()
            assert await running == 0
        return new

    new = asyncio.run(scenario())
    assert levels == ["INFO"] and not new.microphone.is_open
