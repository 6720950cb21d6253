"""Faults inside the running daemon, each in the part it lives in with the real parts around it:
what the person meets when the store's folder goes, the disk fills, the key file goes, or a speech
service flaps. (Faults that need the whole daemon or the sound path are in test_faults_e2e.py.)"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime

import numpy as np
import pytest
from wyoming.asr import Transcript
from wyoming.audio import AudioStop
from wyoming.event import read_event, write_event

from elara.audio.frames import AudioClip
from elara.audio.playback import Speaker
from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.brain.orchestrator import Orchestrator
from elara.config import load_settings
from elara.conversation import store as store_module
from elara.conversation.context import LastNContextProvider
from elara.conversation.messages import ChatMessage, ChatRole, PromptReady
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer
from elara.conversation.store import ConversationStore
from elara.errors import AudioDeviceError, SpeechServiceError
from elara.memory.manager import Memory
from elara.memory.records import EMBEDDING, OF, key_of, kind_of
from elara.service import keys
from elara.service.answering import make_monitor, make_orchestrator
from elara.settings import parse_engine
from elara.voice.remote import (
    MAX_RETRY_SECONDS,
    FailoverTranscriber,
    ServiceHealth,
    WyomingTranscriber,
)
from elara.voice.speech import SpeechSink
from elara.voice.stt import Transcript as SttTranscript
from elara.voice.wyoming_client import WyomingClient
from tests.rig.ollama_server import last_user_text
from tests.rig.pulse import VirtualSoundCard, find_exact, match_report


class ListSink:
    """Collects the sentences she says."""

    def __init__(self):
        self.sentences = []

    async def say(self, sentence):
        self.sentences.append(sentence)


def orchestrator(store, url, sink):
    llm = OllamaLanguageModel(make_client(url, 5.0), model="test-model", host=url, keep_alive="5m",
                              options={}, timeout_seconds=5.0)
    builder = PromptBuilder(ConfigSystemPrompt("You are a test."), [LastNContextProvider(store)])
    return Orchestrator(store=store, builder=builder, renderer=OllamaChatRenderer(), llm=llm,
                        sink=sink, context_size=6)


def turns(store, url, steps):
    """Run `steps` — (question, before) pairs, `before` a callable run just before the question is
    asked, or None — on one loop, as the daemon does; the TurnResults and what she said."""
    sink = ListSink()

    async def run():
        answering = orchestrator(store, url, sink)
        results = []
        for question, before in steps:
            if before is not None:
                before()
            results.append(await asyncio.wait_for(answering.on_prompt_ready(PromptReady(question)), 10))
        return results

    return asyncio.run(run()), sink.sentences


def chats(server):
    return [body for path, body in server.requests if path == "/api/chat"]


# --- the store's folder removed, or made read-only, while running --------------------------------


def test_the_store_folder_removed_while_running(tmp_path, ollama_server, caplog):
    """The person is answered all along; while the folder is gone each turn logs an error that names
    it and the fix, and nothing is remembered; put back, the next turn is stored and reads the old
    history again."""
    root = tmp_path / "Conversation"
    store = ConversationStore(root, "k")
    aside = tmp_path / "Conversation.moved"
    with caplog.at_level(logging.WARNING):
        (first, gone, back), said = turns(store, ollama_server.url, [
            ("one", None), ("two", lambda: root.rename(aside)), ("three", lambda: aside.rename(root))])
    assert first.ok and first.user_stored and first.assistant_stored
    assert gone.ok and gone.reply and not gone.user_stored and not gone.assistant_stored
    assert back.ok and back.user_stored and back.assistant_stored
    assert said.count("Have a nice day!") == 3  # every question answered aloud
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [f"could not store the {role} turn: conversation folder {root} is missing "
                      "(removed or moved while Elara runs), so nothing is stored or remembered; "
                      "fix: put it back, or restart Elara to begin a new history there"
                      for role in ("user", "assistant")]
    assert [m.content for m in store.read_tail(10) if m.role is ChatRole.USER] == ["one", "three"]
    # The turn after the folder came back read the history from before it went.
    assert [m["role"] for m in chats(ollama_server)[-1]["messages"]] == [
        "system", "user", "assistant", "user"]


def test_the_store_folder_deleted_then_recreated(tmp_path, ollama_server):
    """Deleted (not moved): the turns meanwhile are answered; a new folder there is used at once."""
    root = tmp_path / "Conversation"
    store = ConversationStore(root, "k")
    results, _ = turns(store, ollama_server.url, [
        ("one", None), ("two", lambda: shutil.rmtree(root)), ("three", lambda: root.mkdir(0o700))])
    assert [(r.ok, r.user_stored) for r in results] == [(True, True), (True, False), (True, True)]
    assert [m.content for m in store.read_tail(10) if m.role is ChatRole.USER] == ["three"]


def test_the_store_folder_on_a_file_system_gone_read_only(tmp_path, ollama_server, caplog, monkeypatch):
    """A file system remounted read-only (a disk error): the reply is spoken and the history still
    read; each turn's error names the folder and says to remount it; writable again, it stores."""
    root = tmp_path / "Conversation"
    store = ConversationStore(root, "k")
    write_temp = store_module.write_temp

    def read_only(directory, prefix, data):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(directory / f"{prefix}x"))

    with caplog.at_level(logging.WARNING):
        results, said = turns(store, ollama_server.url, [
            ("one", None),
            ("two", lambda: monkeypatch.setattr(store_module, "write_temp", read_only)),
            ("three", lambda: monkeypatch.setattr(store_module, "write_temp", write_temp))])
    assert [(r.ok, r.user_stored, r.assistant_stored) for r in results] == [
        (True, True, True), (True, False, False), (True, True, True)]
    assert said.count("Have a nice day!") == 3
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2 and all(
        f"cannot write conversation file {root}/.tmp-x: Read-only file system; fix: remount the "
        f"file system holding {root} read-write, or set Context.StorageRoot" in e for e in errors)
    assert [m["role"] for m in chats(ollama_server)[1]["messages"]] == [
        "system", "user", "assistant", "user"]  # the read-only turn still read its history
    assert [m.content for m in store.read_tail(10) if m.role is ChatRole.USER] == ["one", "three"]
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]  # nothing half-written


# --- the key file removed while running ------------------------------------------------------------


def test_the_key_file_removed_while_running_warns_once_and_the_key_is_kept(tmp_path, caplog):
    """The daemon keeps the passphrase it loaded (the store goes on writing and reading); the
    journal gets one warning naming the file and the fix, and a line when it is back."""
    home = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    root = tmp_path / "Conversation"
    key = keys.resolve(load_settings(env=home), home, generate_for=root)
    store = ConversationStore(root, key.passphrase)
    watch = keys.KeyFileWatch(key.source)
    path = key.source.path
    saved = path.read_bytes()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="elara.service.keys"):
        assert watch.check()
        path.unlink()
        assert not watch.check() and not watch.check()
        store.append(ChatMessage(ChatRole.USER, "still stored", datetime.now(UTC)))
        path.write_bytes(saved)
        assert watch.check()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == [
        f"the history's key file {path} was removed: Elara keeps the key it loaded, but will not "
        "start again without it; fix: put the file back from your copy now",
        f"the history's key file {path} is back"]
    assert [m.content for m in store.read_tail(5)] == ["still stored"]


def test_without_its_key_file_the_daemon_refuses_to_start_with_the_fix(tmp_path):
    """`elara run` after the generated key file is gone: exit 78 before anything loads, naming the
    missing file and how to put it right (not only "wrong key")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELARA") and k != "CREDENTIALS_DIRECTORY"}
    env.update({"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_RUNTIME_DIR": str(tmp_path / "run")})
    root = tmp_path / "cache" / "elara" / "Conversation"
    key = keys.resolve(load_settings(env=env), env, generate_for=root)
    ConversationStore(root, key.passphrase).append(ChatMessage(ChatRole.USER, "hello", datetime.now(UTC)))
    key.source.path.unlink()
    done = subprocess.run([sys.executable, "-m", "elara", "run"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 78, done.stderr
    assert (f"elara: the history in {root} does not open with the default passphrase, and the "
            f"generated key file {key.source.path} it was most likely written with is missing; fix: "
            "put that file back from your copy") in done.stderr
    assert not key.source.path.exists()  # no new key made over a history written with the old one


# --- the disk full while memory jobs write -------------------------------------------------------


def memory_model(endpoint, body):
    """Fact extraction (JSON), summaries, and plain replies, as test_memory's stand-in does."""
    messages = body.get("messages", [])
    if body.get("format") is not None:
        found = re.search(r"my name is (\w+)", messages[-1]["content"], re.I)
        return json.dumps({"facts": [f"The user's name is {found.group(1)}."] if found else []})
    if "summar" in messages[0]["content"].lower():
        return "The user talked about several topics."
    return f"Here is a fairly complete answer about {messages[-1]['content']} with some more words."


class FullDisk:
    """The store's writes fail with ENOSPC once `room` more have gone through (None: never), as on
    a filling file system: the temporary file cannot be written, so nothing is put in place."""

    def __init__(self, monkeypatch):
        self.room: int | None = None
        self.refused = 0
        write_temp = store_module.write_temp

        def write(directory, prefix, data):
            if self.room is not None:
                if self.room <= 0:
                    self.refused += 1
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory / f"{prefix}x"))
                self.room -= 1
            return write_temp(directory, prefix, data)

        monkeypatch.setattr(store_module, "write_temp", write)


def embeddings_by_turn(store):
    counts = {}
    for stored in store.iter_messages([ChatRole.SYSTEM]):
        if kind_of(stored.message) == EMBEDDING:
            key = stored.message.metadata[OF]
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_the_disk_full_while_memory_jobs_write(tmp_path, ollama_server, monkeypatch, caplog):
    """The disk fills while a turn's memory work (facts, one asked for, the embeddings, a summary)
    writes, and stays full over more tries than a failing job gets: every question is answered;
    no record is half-written or written twice; once space is back all that work is done after all,
    without the person repeating anything."""
    ollama_server.responder = memory_model
    root = tmp_path / "Conversation"
    settings = load_settings(env={
        "ELARA__Context__StorageRoot": str(root), "ELARA__Context__EncryptionKey": "k",
        "ELARA__Context__MaxHistoryTokens": "60", "ELARA__Memory__Facts": "model",
        "ELARA__Memory__Retrieval": "true", "ELARA__Memory__EmbeddingModel": "test-model",
        "ELARA__LanguageModel__Host": ollama_server.url, "ELARA__LanguageModel__Model": "test-model"})
    disk = FullDisk(monkeypatch)

    async def scenario():
        store = ConversationStore(root, "k")
        llm = OllamaLanguageModel(make_client(ollama_server.url, 5.0), model="test-model",
                                  host=ollama_server.url, keep_alive=None, options={}, timeout_seconds=5.0)
        memory = Memory(settings, store, llm)
        await memory.load()
        worker = memory.worker
        worker.retry_seconds = worker.store_retry_cap = 0.01  # the same retries, sooner
        worker.start()
        answering = make_orchestrator(settings, store, llm, ListSink(), memory, make_monitor(settings))
        try:
            worker.pause()  # she is speaking: the turns' work waits for a gap
            before = [await answering.on_prompt_ready(PromptReady(text)) for text in (
                "My name is Bob.", "Remember that my sister is called Ann.",
                "Tell me about topic 1.", "Tell me about topic 2.")]
            disk.room = 2  # Bob's fact and the first vector fit, then the disk is full
            jobs = worker.pending
            worker.resume()
            # Full for more tries than a job that fails on its own gets, all of them together.
            while worker.counters.errors.get("store", 0) <= worker.max_attempts * jobs:
                await asyncio.sleep(0.01)
            during = [await answering.on_prompt_ready(PromptReady(f"Tell me about topic {i}."))
                      for i in (3, 4)]
            disk.room = None
            assert await worker.drain(10), "memory work did not finish once space was back"
            return before, during, store, memory
        finally:
            await worker.stop()

    with caplog.at_level(logging.INFO):
        before, during, store, memory = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert all(r.ok and r.user_stored and r.assistant_stored for r in before)
    assert all(r.ok and r.reply and not r.user_stored for r in during)  # answered on a full disk
    assert [f.text for f in memory.facts.facts()] == [
        "The user's name is Bob.", "The user's sister is called Ann."]
    assert memory.summaries.latest is not None
    turns = [key_of(m) for m in store.read_tail(100, [ChatRole.USER, ChatRole.ASSISTANT])]
    assert len(turns) == 8
    counts = embeddings_by_turn(store)
    assert all(counts.get(key) == 1 for key in turns), counts  # each stored turn once
    assert set(counts.values()) == {1}
    assert store.verify().unreadable == ()
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    warnings = [r.getMessage() for r in caplog.records if r.name == "elara.memory.worker"]
    assert f"No space left on device; fix: free disk space and make {root} writable" in warnings[0]
    assert warnings[-1] == "memory work goes on: the store takes writes again"


# --- a Wyoming service flapping ------------------------------------------------------------------


class FlappingWhisper:
    """A Wyoming speech-to-text service on loopback that the test turns `up` (it answers a
    transcript), `down` (nothing listens: connections are refused) or `dying` (it takes the audio
    and the connection breaks before it answers, as when the process is killed mid-request)."""

    TEXT = "what time is it"

    def __init__(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.uri = f"wyoming://127.0.0.1:{self.port}"
        self.state = "down"
        self.requests = 0
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def set(self, state):
        if state == "down":
            self._close()
        elif self._listener is None:
            self._listen()
        self.state = state

    def _listen(self):
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._listener = listener
        self._thread = threading.Thread(target=self._serve, args=(listener,), daemon=True)
        self._thread.start()

    def _close(self):
        if self._listener is not None:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not)
            self._listener.close()
            self._thread.join(timeout=5)
            self._listener = self._thread = None

    def _serve(self, listener):
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # closed: down
            with connection, connection.makefile("rwb") as stream:
                connection.settimeout(5)
                while (event := read_event(stream)) is not None and not AudioStop.is_type(event.type):
                    pass
                self.requests += 1
                if self.state == "up":
                    write_event(Transcript(text=self.TEXT).event(), stream)
                    stream.flush()
                # dying: the connection closes with no answer

    def stop(self):
        self._close()


class LocalWhisper:
    """The local engine standing by (what it hears is not the point here)."""

    TEXT = "what time is it (local)"
    load_seconds = 0.0

    def __init__(self):
        self.calls = 0

    def transcribe(self, samples):
        self.calls += 1
        return SttTranscript(text=self.TEXT, no_speech_prob=0.0, avg_logprob=0.0,
                             audio_seconds=len(samples) / 16_000, seconds=0.0)


#: The service's state at each question, asked every 3 s: it restarts every few seconds, now and
#: then while it is working on a question.
FLAPS = ["up", "down", "up", "dying", "down", "up", "up", "down", "down", "dying", "up", "down", "up",
         "up", "up"]


@pytest.fixture
def flapping():
    service = FlappingWhisper()
    try:
        yield service
    finally:
        service.stop()


def flapping_transcriber(service, local, now):
    client = WyomingClient(parse_engine(service.uri), "speech-to-text", timeout=5.0,
                           setting="SpeechToText.Engine")
    return FailoverTranscriber(WyomingTranscriber(client), local, ServiceHealth(monotonic=lambda: now[0]),
                               engine=service.uri, service="speech-to-text")


def test_a_flapping_speech_service_with_the_local_engine_loses_no_turn(flapping):
    """Every question is heard: by the service while it answers, else by the local Whisper at
    once; after failures in a row the service is left alone for a wait that doubles but stays
    under a minute, then tried again, and used once it answers."""
    now = [0.0]
    local = LocalWhisper()
    engine = flapping_transcriber(flapping, local, now)
    heard, delays = [], []
    for state in FLAPS:
        flapping.set(state)
        heard.append(engine.transcribe(np.zeros(8_000, dtype=np.int16)).text)
        retry = engine.status()["retry_in_seconds"]
        delays.append(retry)
        now[0] += 3.0
    assert all(text in (FlappingWhisper.TEXT, LocalWhisper.TEXT) for text in heard)  # none lost
    assert [text == FlappingWhisper.TEXT for text in heard][:3] == [True, False, True]
    assert max(d for d in delays if d is not None) <= MAX_RETRY_SECONDS
    assert local.calls == sum(text == LocalWhisper.TEXT for text in heard)
    # The service answers every question asked while it is up and its wait is over, and only those.
    due = [True] + [before is None or before <= 3.0 for before in delays[:-1]]
    assert [text == FlappingWhisper.TEXT for text in heard] == [
        state == "up" and tried for state, tried in zip(FLAPS, due)]
    assert heard[-1] == FlappingWhisper.TEXT  # and it is back in use at the end


def test_a_flapping_speech_service_without_the_local_engine(flapping):
    """With FallbackToLocal false: a question asked while the service is down or dying gets the
    spoken apology (there is nobody else to hear it); every question asked while it is up is
    answered, even one right after a failure, inside the backoff."""
    now = [0.0]
    engine = flapping_transcriber(flapping, None, now)
    outcomes = []
    for state in FLAPS:
        flapping.set(state)
        try:
            outcomes.append(engine.transcribe(np.zeros(8_000, dtype=np.int16)).text)
        except SpeechServiceError as exc:
            assert exc.apology in ("I can't reach the speech service right now.",
                                   "I lost the connection to the speech service.")
            outcomes.append(None)
        now[0] += 0.5  # asked again soon after: inside the backoff
    assert [text is not None for text in outcomes] == [state == "up" for state in FLAPS]


# --- the output device removed mid-reply, and back -----------------------------------------------


class NoiseVoice:
    """A voice that says each sentence as 0.6 s of noise of its own (what is heard can be found)."""

    sample_rate = 16_000

    def synthesize(self, text):
        rng = np.random.default_rng(abs(hash(text)) % 2**32)
        samples = np.clip(rng.standard_normal(9_600) * 3000, -32768, 32767).astype(np.int16)
        return AudioClip(samples, self.sample_rate)


def unplug_speaker(card):
    """The speaker goes, and nothing is left to move her stream to (the card's other sink, the
    microphone's, goes too): the sound server ends the stream, as when a lone USB speaker is
    pulled out."""
    modules = card.pactl("list", "short", "modules").splitlines()
    for kind in ("module-remap-source", "module-null-sink"):
        for line in modules:
            if kind in line:
                card.pactl("unload-module", line.split()[0])


def plug_speaker_back(card):
    card.pactl("load-module", "module-null-sink", f"sink_name={card.speaker_sink}", "rate=16000",
               "channels=1", "format=s16le", "norewinds=1")
    card.pactl("set-default-sink", card.speaker_sink)


def test_the_speaker_removed_mid_reply_and_back(sound_card, ollama_server, tmp_path, monkeypatch, caplog):
    """The person hears the first sentence, then silence: the reply is dropped (not left to hang),
    the history keeps what was heard marked interrupted, not the unheard rest; with the speaker
    back the next reply plays."""
    card = VirtualSoundCard().start()  # its own card: this one loses its devices
    try:
        for name, value in card.env.items():
            monkeypatch.setenv(name, value)  # PortAudio's ALSA `pulse` device connects at open
        ollama_server.responder = lambda endpoint, body: (
            "Once upon a time. There was a fox. It ran far away." if "story" in last_user_text(endpoint, body)
            else "Yes, I am back.")
        root = tmp_path / "Conversation"

        async def scenario():
            store = ConversationStore(root, "k")
            speaker = Speaker(None)
            sink = SpeechSink(NoiseVoice(), speaker)
            answering = orchestrator(store, ollama_server.url, sink)
            story = asyncio.create_task(answering.on_prompt_ready(PromptReady("Tell me a story.")))
            async with asyncio.timeout(10):
                while not sink.heard_text().startswith("Once upon a time."):
                    await asyncio.sleep(0.01)
            await asyncio.to_thread(unplug_speaker, card)
            cut = await asyncio.wait_for(story, 10)
            failure = sink.failure
            await asyncio.to_thread(plug_speaker_back, card)
            recording = await asyncio.to_thread(card.record_speaker)
            back = await asyncio.wait_for(answering.on_prompt_ready(PromptReady("Are you there?")), 10)
            await speaker.close()
            return store, cut, failure, back, await asyncio.to_thread(recording.samples)

        with caplog.at_level(logging.WARNING):
            store, cut, failure, back, recorded = asyncio.run(scenario())
    finally:
        card.stop()
    assert isinstance(failure, AudioDeviceError) and "Audio.OutputDevice" in str(failure)
    assert cut.user_stored and cut.assistant_stored
    assert back.ok and back.assistant_stored
    stored = [(m.role, m.content, dict(m.metadata).get("interrupted")) for m in store.read_tail(10)]
    assert stored[0] == (ChatRole.USER, "Tell me a story.", None)
    role, heard, interrupted = stored[1]
    assert role is ChatRole.ASSISTANT and interrupted == "true"
    assert heard.startswith("Once upon a time.") and "far away" not in heard
    assert stored[2:] == [(ChatRole.USER, "Are you there?", None),
                          (ChatRole.ASSISTANT, "Yes, I am back.", None)]
    said = NoiseVoice().synthesize("Yes, I am back.").samples
    assert find_exact(recorded, said) is not None, match_report(recorded, said)
    assert "stopped unexpectedly" in caplog.text
