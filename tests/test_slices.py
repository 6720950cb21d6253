"""What a reload rebuilds: every setting key changed alone, to another valid value, rebuilds exactly
the slow or stateful parts whose slice holds it (and the parts made with those), and takes every
other one over. The decision is the one `build.build` makes (`slices.kept`); tests/test_runtime.py
shows it on real models and devices."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from elara import settings as schema
from elara.config import bind, load_settings, to_json
from elara.errors import ConfigError
from elara.service.slices import (
    PARTS,
    SpeechToTextSlice,
    WakeWordSlice,
    kept,
    restart_only_changes,
    setting_keys,
    setting_value,
)
from elara.settings import restart_only_keys

BASE = load_settings(env={})

#: Valid values to try for settings whose type and range alone don't give one.
OTHER = {
    "LanguageModel.Host": ["http://127.0.0.1:11435"],
    "LanguageModel.Model": ["qwen2.5:0.5b"],
    "LanguageModel.Personality": ["professional"],
    "LanguageModel.SystemPrompt": ["Answer in one sentence."],
    "LanguageModel.KeepAlive": ["1h"],
    "LanguageModel.Options": [{"num_ctx": 2048}],
    "LanguageModel.EmbeddedModel": ["/models/chat.gguf"],
    "Context.StorageRoot": ["/var/lib/elara/history"],
    "Context.EncryptionKey": ["another passphrase"],
    "Context.EncryptionKeyFile": ["/etc/elara/key"],
    "Context.Redact": [["card", "email"]],
    "Memory.EmbeddingModel": ["all-minilm"],
    "Personalities": [{"pirate": {"SystemPrompt": "Talk like a pirate."}}],
    "Audio.InputDevice": ["USB microphone"],
    "Audio.OutputDevice": ["USB speaker"],
    "WakeWord.Models": [["alexa"]],
    "WakeWord.ConfirmSecondModel": ["small"],
    "WakeWord.Verifiers": [["verifiers/hey_jarvis.npz"]],
    "Listening.UncertainPauseMs": [400],
    "SpeechToText.Model": ["base.en"],
    "SpeechToText.Language": ["de"],
    "SpeechToText.Engine": ["wyoming://127.0.0.1:10300"],
    "TextToSpeech.Voice": ["en_US-lessac-medium"],
    "TextToSpeech.Engine": ["wyoming://127.0.0.1:10200"],
    "TextToSpeech.RemoteVoice": ["en_GB-alan-low"],
    "Satellites": [[{"Name": "kitchen", "Uri": "tcp://127.0.0.1:10700"}]],
    "Tools.McpServers": [[{"Name": "home", "Command": "home-mcp"}]],
    "Tools.Allow": [["elara/*", "home/*"]],
    "Tools.Confirm": [["elara/set_timer"]],
}


def _field(key: str) -> tuple[dataclasses.Field[Any], Any]:
    """The settings field that holds `key`, and its type."""
    section_key, _, item_key = key.partition(".")
    top = next(f for f in dataclasses.fields(schema.Settings) if f.metadata["key"] == section_key)
    if not item_key:
        return top, typing.get_type_hints(schema.Settings)[top.name]
    section = typing.get_type_hints(schema.Settings)[top.name]
    item = next(f for f in dataclasses.fields(section) if f.metadata["key"] == item_key)
    return item, typing.get_type_hints(section)[item.name]


def candidates(key: str, current: Any) -> Iterator[Any]:
    """Values for `key` other than `current`, as JSON, likeliest valid first."""
    item, kind = _field(key)
    meta = item.metadata
    yield from OTHER.get(key, [])
    if "choices" in meta:
        yield from (c for c in meta["choices"] if c != current)
    args = typing.get_args(kind)
    if type(None) in args and current is not None:
        yield None
    if bool in (*args, kind):
        yield from (value for value in (True, False) if value != current)
    numbers = [a for a in (*args, kind) if a in (int, float)]
    if numbers:
        low, high = meta.get("min", 0), meta.get("max", 100)
        step = 1 if numbers[0] is int else 0.1
        for value in (low, high, (current or low) + step, (current or high) - step):
            if value != current and low <= value <= high:
                yield round(value, 3)


def changed(key: str) -> schema.Settings:
    """The packaged settings with `key` alone set to another valid value."""
    tree = to_json(BASE, redact=False)
    section_key, _, item_key = key.partition(".")
    current = setting_value(BASE, key)
    for value in candidates(key, current):
        edited = dict(tree)
        if item_key:
            edited[section_key] = {**tree[section_key], item_key: value}
        else:
            edited[section_key] = value
        try:
            settings = bind(edited)
        except ConfigError:
            continue
        if setting_value(settings, key) != current:
            assert [k for k in setting_keys() if setting_value(settings, k) != setting_value(BASE, k)] == [key]
            return settings
    raise AssertionError(f"no other valid value found for {key}: add one to OTHER")


def holding(key: str) -> set[str]:
    """The parts whose slice holds `key`, and those made with them."""
    parts = {name for name, part in PARTS.items() if key in part.slice.keys()}
    for name, part in PARTS.items():  # each part comes after those it needs
        if any(need in parts for need in part.needs):
            parts.add(name)
    return parts


def test_there_is_a_key_for_every_setting():
    keys = setting_keys()
    assert len(keys) == len(set(keys)) == 92
    assert "SpeechToText.NoiseSuppression" in keys and "Personalities" in keys and "Satellites" in keys
    assert set(restart_only_keys()) <= set(keys)


@pytest.mark.parametrize("key", setting_keys())
def test_a_reload_rebuilds_exactly_the_parts_whose_slice_holds_the_changed_key(key):
    new = changed(key)
    rebuilt = set(PARTS) - kept(BASE, new)
    assert rebuilt == holding(key)
    assert kept(new, new) == set(PARTS)  # and nothing when nothing changed
    assert restart_only_changes(BASE, new) == ([key] if key in restart_only_keys() else [])


def test_a_value_that_means_the_same_to_the_second_model_keeps_it():
    """The second Whisper reads only what the check and the re-reading ask of it: tuning
    `ConfirmFrom` or the re-read beam, or moving the speech service, keeps it (the wake word,
    whose slice holds the whole section, is built anew); turning the check off does not."""
    def with_values(**sections: dict[str, Any]) -> schema.Settings:
        tree = to_json(BASE, redact=False)
        return bind({**tree, **{name: {**tree[name], **values} for name, values in sections.items()}})

    tuned = with_values(WakeWord={"ConfirmFrom": 0.01}, SpeechToText={"ReadAgainBeamSize": 8})
    assert set(PARTS) - kept(BASE, tuned) == {"wake"}
    moved = with_values(SpeechToText={"Engine": "wyoming://127.0.0.1:10300"})
    assert "second_check" in kept(moved, with_values(SpeechToText={"Engine": "wyoming://10.0.0.5:10300"}))
    assert "second_check" not in kept(BASE, with_values(WakeWord={"ConfirmFrom": 0}))


def test_noise_suppression_rebuilds_the_transcriber_alone():
    """The setting the hand-kept table once missed: the reload kept the old transcriber."""
    assert holding("SpeechToText.NoiseSuppression") == {"transcriber"}
    new = changed("SpeechToText.NoiseSuppression")
    assert SpeechToTextSlice.of(new).noise_suppression != SpeechToTextSlice.of(BASE).noise_suppression


def test_parts_come_after_the_parts_they_are_made_with():
    order = list(PARTS)
    for name, part in PARTS.items():
        assert all(order.index(need) < order.index(name) for need in part.needs), name


def test_a_part_made_with_a_rebuilt_part_is_rebuilt_too():
    assert holding("LanguageModel.Model") == {"llm", "memory"}
    assert holding("Audio.InputDevice") == {"microphone", "echo"}
    assert holding("Audio.OutputLatencyMs") == {"speaker", "echo"}


def factories() -> dict[str, Any]:
    """Each part's factory, as the daemon, the doctor and the commands call it."""
    from elara.service import answering, build, engines

    return {"llm": answering.load_language_model, "memory": answering.open_memory,
            "timers": build.open_timers, "wake": engines.load_wake_word, "vad": engines.load_vad,
            "transcriber": engines.load_speech_to_text, "second_check": engines.load_second_check,
            "synthesizer": engines.load_text_to_speech, "microphone": build.open_microphone,
            "speaker": build.open_speaker, "echo": build.make_echo_filter,
            "tool_servers": build.open_tool_servers}


def test_each_factory_receives_its_slice_and_no_other_setting():
    made = factories()
    assert set(made) == set(PARTS)
    for name, factory in made.items():
        annotations = [str(p.annotation) for p in inspect.signature(factory).parameters.values()]
        assert not any("Settings" in a for a in annotations), (name, annotations)
        if dataclasses.fields(PARTS[name].slice):  # the timers are built from no setting at all
            assert annotations[0] == PARTS[name].slice.__name__, (name, annotations)


def test_a_slice_holds_only_what_it_reads():
    slice_ = WakeWordSlice.of(BASE)
    assert slice_.wake_word is BASE.wake_word
    assert slice_.without_verifiers().wake_word.verifiers == ()
    assert {f.name for f in dataclasses.fields(SpeechToTextSlice)} == {
        "model", "language", "beam_size", "noise_suppression", "window_seconds", "no_speech_threshold",
        "engine", "fallback_to_local", "timeout_seconds"}
    assert isinstance(SpeechToTextSlice.of(BASE).window_seconds, float)
    assert isinstance(BASE.personalities, Mapping)
