"""Faults inside the running daemon, each in the part it lives in with the real parts around it:
what the person meets when the store's folder goes, the disk fills, the key file goes, or a speech
service flaps. (Faults that need the whole daemon or the sound path are in test_faults_e2e.py.)"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.brain.orchestrator import Orchestrator
from elara.config import load_settings
from elara.conversation import store as store_module
from elara.conversation.context import LastNContextProvider
from elara.conversation.messages import ChatMessage, ChatRole, PromptReady
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer
from elara.conversation.store import ConversationStore
from elara.service import keys


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
