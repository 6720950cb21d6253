"""The composition root with the real models and devices (the virtual sound card): what a reload
reuses, what it builds anew, and that a broken configuration leaves nothing open."""

import asyncio

import pytest

from elara.config import load_settings
from elara.conversation.store import ConversationStore
from elara.errors import ElaraError
from elara.service import runtime


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
        first = await runtime.build(settings_for(), store)
        try:
            same = await runtime.build(settings_for(), store, previous=first)
            for part in runtime.SOURCES:
                assert getattr(same, part) is getattr(first, part), part
            # Whisper base, loaded once for the wake check, also reads the doubtful words again.
            assert first.second_check is not None and first.voice.read_again is not None
            assert first.voice.read_again.again._model is first.second_check._model
            # The cheap parts are always new: a swap never shares a speech sink or a dialogue.
            assert same.voice.speech is not first.voice.speech
            assert same.voice.dialogue is not first.voice.dialogue

            changed = await runtime.build(
                settings_for(TextToSpeech__LengthScale="1.2", Context__LastN="2",
                             LanguageModel__Personality="professional"), store, previous=same)
            assert changed.synthesizer is not same.synthesizer
            assert changed.llm is not same.llm and changed.memory is not same.memory
            for part in ("wake", "transcriber", "vad", "microphone", "speaker"):
                assert getattr(changed, part) is getattr(same, part), part
            assert changed.voice.orchestrator.context_size == 2
            await runtime.close_replaced(same, changed)
            assert changed.microphone.is_open  # shared: not closed with the old runtime
            assert same.llm is not changed.llm
        finally:
            await runtime.close_replaced(first, None)
        return changed

    changed = asyncio.run(scenario())
    assert not changed.microphone.is_open


@pytest.mark.parametrize("override", [
    {"SpeechToText__Model": "/nonexistent/whisper"},
    {"Audio__InputDevice": "a microphone that is not there"},
])
def test_a_broken_reload_fails_before_anything_is_swapped_and_leaks_nothing(settings_for, tmp_path,
                                                                            override):
    store = ConversationStore(tmp_path / "store", "runtime key")

    async def scenario():
        running = await runtime.build(settings_for(), store)
        try:
            with pytest.raises(ElaraError):
                await runtime.build(settings_for(**override), store, previous=running)
            assert running.microphone.is_open
        finally:
            await runtime.close_replaced(running, None)

    asyncio.run(scenario())
