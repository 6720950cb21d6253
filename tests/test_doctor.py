"""`elara doctor`: every check against the real parts — the virtual sound card, the real models, the
Ollama-protocol server, the real encrypted store on temporary directories."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from elara.cli import doctor as doctor_cli
from elara.config import load_settings
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.service import doctor
from tests.rig.ollama_server import closed_port

KEY = "doctor test passphrase"
UNITS_AVAILABLE = importlib.util.find_spec("elara.service.units") is not None

SETTINGS_CHECKS = [doctor.INPUT_DEVICE, doctor.OUTPUT_DEVICE, doctor.MODELS, doctor.LISTENING,
                   doctor.LANGUAGE_MODEL, doctor.TOOLS, doctor.ENCRYPTION_KEY, doctor.HISTORY]
MODEL_CHECKS = ["wake word hey_jarvis", "speech to text tiny.en", "text to speech en_US-joe-medium",
                "voice activity silero"]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A clean environment in this process: no user config, a temporary store, no inherited
    ELARA settings, a real key and the test model; returns the store's directory."""
    for name in list(os.environ):
        if name.startswith("ELARA"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("ELARA__Context__EncryptionKey", KEY)
    monkeypatch.setenv("ELARA__LanguageModel__Model", "test-model")
    monkeypatch.setenv("ELARA__LanguageModel__TimeoutSeconds", "5")
    return tmp_path / "cache" / "elara" / "Conversation"


@pytest.fixture(scope="session")
def load_once():
    """engines.check_loads, each model loaded for real once per session."""
    from elara.service.engines import check_loads

    seconds: dict = {}

    def load(record):
        if record not in seconds:
            seconds[record] = check_loads(record)
        return seconds[record]

    return load


def by_name(checks):
    return {check.name: check for check in checks}


def failures_besides_units(checks):
    """The failed checks other than the unit check, which passes when elara.service.units exists and
    otherwise fails as unavailable."""
    units = by_name(checks)[doctor.UNITS]
    if UNITS_AVAILABLE:
        assert units.ok, units
    else:
        assert not units.ok and "unavailable" in units.detail
    return [check for check in checks if not check.ok and check.name != doctor.UNITS]


def write_history(root: Path, key: str = KEY, turns: int = 2) -> list[Path]:
    store = ConversationStore(root, key)
    paths = []
    for i in range(turns):
        for role in (ChatRole.USER, ChatRole.ASSISTANT):
            paths.append(store.append(ChatMessage(role, f"message {i}", datetime.now(UTC))))
    return paths


def snapshot(root: Path) -> dict:
    """Every entry under root with its mode, size and mtime: doctor must change none of it."""
    return {p: (p.stat().st_mode, p.stat().st_size, p.stat().st_mtime_ns)
            for p in [root, *root.rglob("*")]}


def doctor_registered() -> bool:
    from elara.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return "doctor" in commands.choices


# --- whole runs ---------------------------------------------------------------------------------


def test_everything_passes_but_the_default_key(sound_card, ollama_server, env, monkeypatch,
                                               load_once, capsys):
    monkeypatch.delenv("ELARA__Context__EncryptionKey")
    monkeypatch.setenv("ELARA__LanguageModel__Host", ollama_server.url)
    seen = []
    checks = doctor.run_checks(report=seen.append, load_model=load_once)
    assert seen == checks  # reported as each finishes, in order
    names = [check.name for check in checks]
    assert names == [doctor.CONFIGURATION, doctor.INPUT_DEVICE, doctor.OUTPUT_DEVICE, *MODEL_CHECKS,
                     doctor.LISTENING, doctor.LANGUAGE_MODEL, doctor.TOOLS, doctor.ENCRYPTION_KEY, doctor.HISTORY,
                     doctor.UNITS]
    assert [check.name for check in failures_besides_units(checks)] == [doctor.ENCRYPTION_KEY]
    key = by_name(checks)[doctor.ENCRYPTION_KEY]
    assert "default passphrase" in key.detail
    assert "Context.EncryptionKey" in key.fix and "EncryptionKeyFile" in key.fix and "elara-key" in key.fix
    found = by_name(checks)
    assert "loads in" in found["speech to text tiny.en"].detail
    listening = found[doctor.LISTENING].detail
    assert "hey_jarvis at threshold" in listening and "Silero gate" in listening
    assert "pauses inside speech shortened" in listening
    assert ("Whisper checks scores from 0.005 (beam 5), those from 0.7 too, Whisper base reading again "
            "what it turns down;") in listening
    assert "no verifier" in listening and "elara wake enroll" in listening and "Whisper tiny.en" in listening
    assert "beam 1 (doubtful words read again by Whisper base with beam 5, the likeliest reading kept);" in listening
    # (no noise suppression by default)
    assert "test-model" in found[doctor.LANGUAGE_MODEL].detail
    assert "cannot call tools" in found[doctor.LANGUAGE_MODEL].detail
    assert "built in: current_time, set_timer," in found[doctor.TOOLS].detail
    assert "no history yet" in found[doctor.HISTORY].detail
    # doctor created no history: only the Whisper base model the wake check loads, joined once
    # from its two package parts into the cache, as the daemon's first start does
    assert not env.exists() and [p.name for p in env.parent.iterdir()] == ["models"]

    # The command's handler: each check on one line, the fix under a failure, exit status 1.
    capsys.readouterr()
    monkeypatch.setattr(doctor_cli, "run_checks",
                        lambda config, report: [report(c) or c for c in checks])
    assert doctor_cli._doctor(argparse.Namespace(config=None), None) == 1
    out = capsys.readouterr().out
    assert "✓ configuration: valid (packaged defaults only)" in out
    assert "✗ encryption key: Context.EncryptionKey is the default passphrase" in out
    assert "\n    fix: set Context.EncryptionKey" in out
    assert out.count("fix:") == len([c for c in checks if not c.ok])
    assert "checks failed: encryption key" in out


def test_doctor_command_passes_with_a_real_key_and_history(sound_card, ollama_server, env,
                                                           tmp_path):
    if not doctor_registered():
        pytest.skip("`elara doctor` is not registered in elara/cli/__init__.py yet "
                    "(doctor.add_commands(commands))")
    write_history(env)
    before = snapshot(env)
    process_env = {k: v for k, v in os.environ.items()}  # env's variables and the card's PULSE_*
    process_env["ELARA__LanguageModel__Host"] = ollama_server.url
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "elara", "doctor"], env=process_env,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stdout.splitlines() if line[:1] in "✓✗"]
    failed = [line for line in lines if line.startswith("✗")]
    if UNITS_AVAILABLE:
        assert done.returncode == 0, done.stdout + done.stderr
        assert failed == [] and done.stdout.rstrip().endswith(f"all {len(lines)} checks passed")
    else:
        assert done.returncode == 1
        assert len(failed) == 1 and failed[0].startswith("✗ systemd units: unit check unavailable")
    assert len(lines) == 14  # configuration, 2 devices, 4 models, listening, Ollama, tools, key, 2 history, units
    assert f"✓ history: all 4 messages decrypt ({env})" in done.stdout
    assert "✓ history permissions: directory 0700 and 4 message files 0600" in done.stdout
    assert "warning" not in done.stderr.lower()  # the store's default-key/skip warnings stay quiet
    assert snapshot(env) == before
    assert time.monotonic() - started < 60


def test_invalid_configuration_is_a_finding_not_a_refusal(env, monkeypatch, capsys):
    monkeypatch.setenv("ELARA__Context__LastN", "six")
    checks = doctor.run_checks()
    found = by_name(checks)
    config = found[doctor.CONFIGURATION]
    assert not config.ok
    assert 'Context.LastN: expected an integer from 0 to 1000, got "six"' in config.detail
    assert "elara config check" in config.fix
    for name in SETTINGS_CHECKS:
        assert not found[name].ok and found[name].detail == doctor.NEEDS_CONFIG
    assert doctor.UNITS in found  # needs no settings, so it still runs

    # Through the real `main`: exit 1, not 78 — doctor reports, it doesn't refuse.
    import elara.cli as cli

    if not doctor_registered():
        real = cli.build_parser

        def with_doctor():
            parser = real()
            commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            doctor_cli.add_commands(commands)
            return parser

        monkeypatch.setattr(cli, "build_parser", with_doctor)
    capsys.readouterr()
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert '✗ configuration: Context.LastN: expected an integer from 0 to 1000, got "six"' in out
    assert f"✗ {doctor.LANGUAGE_MODEL}: {doctor.NEEDS_CONFIG}" in out


# --- one check at a time ------------------------------------------------------------------------


def test_ollama_down(env, monkeypatch):
    monkeypatch.setenv("ELARA__LanguageModel__Provider", "ollama")
    monkeypatch.setenv("ELARA__LanguageModel__Host", f"http://127.0.0.1:{closed_port()}")
    check = doctor.check_language_model(load_settings())
    assert not check.ok and "can't reach Ollama" in check.detail
    assert "ollama serve" in check.fix and "LanguageModel.Host" in check.fix


def test_auto_with_ollama_down_passes_on_the_built_in_model(env, monkeypatch):
    monkeypatch.setenv("ELARA__LanguageModel__Host", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("ELARA__Memory__Retrieval", "true")
    check = doctor.check_language_model(load_settings())
    assert check.ok, check
    assert "the built-in model SmolLM2-135M-Instruct" in check.detail
    assert "can't reach Ollama" in check.detail and "ollama serve" in check.detail
    assert "Memory.Retrieval needs Ollama's embeddings" in check.detail


def test_the_embedded_provider_and_a_bad_model_file(env, monkeypatch, tmp_path):
    monkeypatch.setenv("ELARA__LanguageModel__Provider", "embedded")
    check = doctor.check_language_model(load_settings())
    assert check.ok and "LanguageModel.Provider is embedded" in check.detail
    (tmp_path / "broken.gguf").write_bytes(b"not a model at all")
    monkeypatch.setenv("ELARA__LanguageModel__EmbeddedModel", str(tmp_path / "broken.gguf"))
    check = doctor.check_language_model(load_settings())
    assert not check.ok and "LanguageModel.EmbeddedModel" in check.detail
    assert "GGUF" in check.fix


def test_model_not_pulled(env, monkeypatch, ollama_server):
    monkeypatch.setenv("ELARA__LanguageModel__Provider", "ollama")
    monkeypatch.setenv("ELARA__LanguageModel__Host", ollama_server.url)
    monkeypatch.setenv("ELARA__LanguageModel__Model", "qwen2.5:1.5b")
    check = doctor.check_language_model(load_settings())
    assert not check.ok and "does not have the model qwen2.5:1.5b" in check.detail
    assert "`ollama pull qwen2.5:1.5b`" in check.fix


def test_a_hung_ollama_fails_within_the_short_timeout(env, monkeypatch, ollama_server):
    monkeypatch.setenv("ELARA__LanguageModel__Provider", "ollama")
    ollama_server.fault = "hang"
    monkeypatch.setenv("ELARA__LanguageModel__Host", ollama_server.url)
    monkeypatch.setenv("ELARA__LanguageModel__TimeoutSeconds", "1")
    settings = load_settings()
    assert doctor.ollama_timeout(settings) == 1
    started = time.monotonic()
    check = doctor.check_language_model(settings)
    assert time.monotonic() - started < 5
    assert not check.ok and "sent nothing for 1 s" in check.detail
    assert "LanguageModel.TimeoutSeconds" in check.fix


def test_every_check_is_time_bounded():
    started = time.monotonic()
    result = doctor.bounded(0.2, lambda: time.sleep(30), lambda: "timed out", lambda exc: exc)
    assert result == "timed out" and time.monotonic() - started < 2
    assert doctor.bounded(1, lambda: 1 / 0, lambda: None, lambda exc: type(exc)) is ZeroDivisionError
    checks = doctor._bounded_checks(["x"], 0.1, lambda: time.sleep(30), "fix it")
    assert checks == [doctor.Check("x", False, "no answer within 0.1 s", "fix it")]


def test_default_and_real_key(env, monkeypatch):
    from dataclasses import replace

    from elara.conversation.crypto import DEFAULT_PASSPHRASE

    monkeypatch.delenv("ELARA__Context__EncryptionKey")
    settings = load_settings()
    assert settings.context.encryption_key == DEFAULT_PASSPHRASE
    assert not doctor.check_encryption_key(settings).ok
    real = replace(settings, context=replace(settings.context, encryption_key=KEY))
    assert doctor.check_encryption_key(real).ok


def test_wrong_key_with_history(env, monkeypatch):
    write_history(env)
    before = snapshot(env)
    monkeypatch.setenv("ELARA__Context__EncryptionKey", "not the key")
    checks = by_name(doctor.check_store(load_settings()))
    history = checks[doctor.HISTORY]
    assert not history.ok and f"wrong encryption key for {env}" in history.detail
    assert "Context.EncryptionKey" in history.fix
    assert checks[doctor.HISTORY_PERMISSIONS].ok
    assert snapshot(env) == before


def test_open_permissions_get_a_chmod_fix(env):
    paths = write_history(env)
    env.chmod(0o755)
    paths[1].chmod(0o644)
    checks = by_name(doctor.check_store(load_settings()))
    assert checks[doctor.HISTORY].ok  # it still decrypts
    perms = checks[doctor.HISTORY_PERMISSIONS]
    assert not perms.ok
    assert f"{env} has mode 0755, not 0700" in perms.detail
    assert f"1 message files are not mode 0600 (e.g. {paths[1].name} is 0644)" in perms.detail
    assert perms.fix == f"chmod 700 {env} && chmod 600 {env}/*.json"
    assert env.stat().st_mode & 0o777 == 0o755  # reported, not repaired


def test_a_tampered_file_is_unreadable(env):
    paths = write_history(env)
    paths[0].write_bytes(paths[0].read_bytes()[:-20])
    checks = by_name(doctor.check_store(load_settings()))
    history = checks[doctor.HISTORY]
    assert not history.ok and "1 of 4 message files" in history.detail
    assert "elara history verify" in history.fix
    assert checks[doctor.HISTORY_PERMISSIONS].ok


def test_the_store_is_only_read(env):
    assert [c.detail for c in doctor.check_store(load_settings())] == [
        f"no history yet ({env} does not exist; Elara creates it on first use)"]
    assert not env.exists()
    write_history(env)
    stale = env / ".tmp-0123456789abcdef"  # a crashed writer's leftover: the store's open deletes it
    stale.write_bytes(b"x")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    before = snapshot(env)
    assert all(check.ok for check in doctor.check_store(load_settings()))
    assert snapshot(env) == before


def test_a_missing_or_damaged_model(env, monkeypatch, tmp_path, load_once):
    monkeypatch.setenv("ELARA__WakeWord__Models", '["no_such_word"]')
    monkeypatch.setenv("ELARA__Listening__Vad", "energy")
    found = doctor.resolve_models(load_settings())
    missing = found[0]
    assert missing.name == "wake word no_such_word" and not missing.ok
    assert "no wake-word model 'no_such_word'" in missing.detail
    assert "WakeWord.Models" in missing.fix and "elara models" in missing.fix
    energy = found[-1]
    assert energy.name == "voice activity energy" and energy.ok

    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    monkeypatch.setenv("ELARA__WakeWord__Models", f'["{bad}"]')
    check = doctor.check_models(load_settings(), load=load_once)[0]
    assert check.name == f"wake word {bad}" and not check.ok
    assert "does not load" in check.detail and "WakeWord.Models" in check.fix


def test_a_device_that_is_not_there(sound_card, env, monkeypatch):
    monkeypatch.setenv("ELARA__Audio__InputDevice", "no such microphone")
    inp, out = doctor.check_devices(load_settings())
    assert not inp.ok and 'no input device matches "no such microphone"' in inp.detail
    assert "Audio.InputDevice" in inp.fix
    assert out.ok and "default" in out.detail


def test_units_unavailable_or_verified():
    check = doctor.check_units()
    if UNITS_AVAILABLE:
        assert check.ok, check
    else:
        assert not check.ok and "unit check unavailable" in check.detail


def test_the_listening_check_names_a_verifier_and_a_broken_one(env, tmp_path, monkeypatch):
    import numpy as np

    from elara.voice.verifier import train

    rng = np.random.default_rng(0)
    good = tmp_path / "hey_jarvis.npz"
    train("hey_jarvis", rng.normal(1, 1, (20, 16, 96)), rng.normal(0, 1, (40, 16, 96))).save(good)
    monkeypatch.setenv("ELARA__WakeWord__Verifiers", f'["{good}"]')
    check = doctor.check_listening(load_settings())
    assert check.ok and f"verifier for hey_jarvis ({good})" in check.detail
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"junk")
    monkeypatch.setenv("ELARA__WakeWord__Verifiers", f'["{broken}"]')
    check = doctor.check_listening(load_settings())
    assert not check.ok and "broken.npz" in check.detail and "elara wake enroll" in check.fix
