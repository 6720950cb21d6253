"""Deleting means deleted: after a retention pass or `elara history purge`, nothing of a deleted
turn can be retrieved (the index), exported (the store, `elara history export`) or found on disk
(every file decrypted with the key) — except the summaries Context.RetentionKeepSummaries keeps.
Real store, real Ollama client against the Ollama-protocol test server, injected clocks."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.config import load_settings
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.memory.manager import Memory
from elara.memory.records import EMBEDDING, FACT, SUMMARY, key_of, memory_record
from elara.memory.summaries import Summarizer, iso_millis, maybe_summarize
from elara.service.status import StatusServer
from elara.settings import Settings
from tests.spec_reader import read_all

KEY = "forgetting test passphrase"
MODEL = "nomic-embed-text"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
#: The words of the turns that must go; none of them is in the turns that stay.
SECRET = "sourdough"
OLD_EXCHANGE = ("How do I keep my sourdough starter alive while travelling?",
                "Feed the sourdough starter, then refrigerate it.")
RECENT_EXCHANGE = ("What is the capital of Australia?", "Canberra is the capital of Australia.")


def run(coro):
    """Run a coroutine with an upper bound, so a bug cannot hang the suite."""
    return asyncio.run(asyncio.wait_for(coro, 30))


def settings_for(root: Path, url: str, *, keep_summaries: bool) -> Settings:
    """Retrieval on, 30 days of retention."""
    return load_settings(env={
        "ELARA__Context__StorageRoot": str(root), "ELARA__Context__EncryptionKey": KEY,
        "ELARA__Context__RetentionDays": "30",
        "ELARA__Context__RetentionKeepSummaries": str(keep_summaries).lower(),
        "ELARA__Memory__Retrieval": "true", "ELARA__Memory__EmbeddingModel": MODEL,
        "ELARA__LanguageModel__Host": url, "ELARA__LanguageModel__Model": "test-model",
    })


def language_model(url: str) -> OllamaLanguageModel:
    """The adapter as the wiring builds it."""
    return OllamaLanguageModel(make_client(url, 5.0), model="test-model", host=url,
                               keep_alive=None, options={}, timeout_seconds=5.0)


def write_history(root: Path, now: datetime) -> ConversationStore:
    """An exchange 40 days before `now` with a fact and a summary of it, and one 2 days before."""
    store = ConversationStore(root, KEY)
    old = now - timedelta(days=40)
    store.append(ChatMessage(ChatRole.USER, OLD_EXCHANGE[0], old))
    store.append(ChatMessage(ChatRole.ASSISTANT, OLD_EXCHANGE[1], old + timedelta(seconds=3)))
    store.append(memory_record(FACT, "The user bakes bread.", old + timedelta(seconds=4),
                               id="0a1b2c3d", created=old.isoformat(), source="model"))
    store.append(memory_record(
        SUMMARY, f"The user asked how to keep a {SECRET} starter alive.", old + timedelta(days=1),
        covers_until=iso_millis(old + timedelta(seconds=3)), turns="2", model="test-model"))
    recent = now - timedelta(days=2)
    store.append(ChatMessage(ChatRole.USER, RECENT_EXCHANGE[0], recent))
    store.append(ChatMessage(ChatRole.ASSISTANT, RECENT_EXCHANGE[1], recent + timedelta(seconds=3)))
    return store


def old_keys(now: datetime) -> set[str]:
    """The keys of the 40-day-old turns."""
    old = now - timedelta(days=40)
    return {key_of(ChatMessage(ChatRole.USER, "", old)),
            key_of(ChatMessage(ChatRole.ASSISTANT, "", old + timedelta(seconds=3)))}


async def assert_forgotten(root: Path, store: ConversationStore, memory: Memory, now: datetime,
                           *, summary_kept: bool) -> None:
    """Nothing of the old exchange in the index, the store or any file on disk, but the kept
    summary (if kept)."""
    assert memory.index is not None
    assert SECRET not in json.dumps([m.content for m in memory.index.unindexed()])
    hits = await memory.index.search(OLD_EXCHANGE[0], 10, 0.0)
    assert hits and all(SECRET not in turn.content for _, turn in hits)  # the recent turns only
    assert {turn.content for _, turn in hits} == set(RECENT_EXCHANGE)
    exported = [s.message for s in store.iter_messages()]
    assert [m.content for m in exported if SECRET in m.content] == (
        [f"The user asked how to keep a {SECRET} starter alive."] if summary_kept else [])
    on_disk = read_all(root, KEY)
    mentions = [r for r in on_disk if SECRET in json.dumps(r)]
    assert [r["metadata"]["kind"] for r in mentions] == (["summary"] if summary_kept else [])
    vectors_of = {r["metadata"].get("of") for r in on_disk if r["metadata"].get("kind") == EMBEDDING}
    assert vectors_of == {key_of(m) for m in exported if m.role is not ChatRole.SYSTEM}
    assert not vectors_of & old_keys(now)


@pytest.fixture
def server(ollama_server):
    """The fake Ollama with the embedding model pulled."""
    ollama_server.models.add(MODEL)
    return ollama_server


@pytest.mark.parametrize("keep_summaries", [True, False])
def test_retention_deletes_turns_backfilled_today_with_their_embeddings(tmp_path, server,
                                                                         keep_summaries):
    root = tmp_path / "store"
    store = write_history(root, NOW)

    async def scenario():
        llm = language_model(server.url)
        try:
            memory = Memory(settings_for(root, server.url, keep_summaries=keep_summaries), store,
                            llm, clock=lambda: NOW)
            await memory.load()
            assert memory.index is not None and len(memory.index.unindexed()) == 4
            # The backfill embeds the old turns today: their vector records are new.
            assert await memory.index.add(memory.index.unindexed()) == 4
            before = await memory.index.search(OLD_EXCHANGE[0], 1, 0.0)
            assert before[0][1].content == OLD_EXCHANGE[0]  # retrievable until the pass
            stamps = {r["timestampUtc"] for r in read_all(root, KEY)
                      if r["metadata"].get("kind") == EMBEDDING}
            assert stamps == {iso_millis(NOW)}

            report = await memory.apply_retention()
            assert report.turns_deleted == 2 and report.embeddings_deleted == 2
            assert report.summaries_deleted == (0 if keep_summaries else 1)
            assert report.kept_facts == 1
            assert memory.status() == {"facts": 1, "summarized_turns": 2 if keep_summaries else 0,
                                       "indexed_turns": 2, "jobs_pending": 0, "jobs_done": 0,
                                       "jobs_failed": 0}
            await assert_forgotten(root, store, memory, NOW, summary_kept=keep_summaries)
            # A daemon started afterwards finds nothing of them either.
            reopened = ConversationStore(root, KEY)
            fresh = Memory(settings_for(root, server.url, keep_summaries=keep_summaries), reopened,
                           llm, clock=lambda: NOW)
            await fresh.load()
            await assert_forgotten(root, reopened, fresh, NOW, summary_kept=keep_summaries)
        finally:
            await llm.aclose()

    run(scenario())


class _RetentionMidway:
    """The real client, but one retention pass runs while the model is `during` a call ("embed"
    or "complete"): the daily pass landing in the middle of a memory worker's job."""

    def __init__(self, llm: OllamaLanguageModel, during: str) -> None:
        self._llm = llm
        self._during = during
        self.model = llm.model
        self.memory: Memory | None = None  # armed: the memory whose retention runs once

    async def arm(self, root: Path, store: ConversationStore, url: str) -> Memory:
        """A loaded Memory over `store` using this model, its retention pass due midway."""
        memory = Memory(settings_for(root, url, keep_summaries=False), store, self,
                        clock=lambda: NOW)
        await memory.load()
        self.memory = memory
        return memory

    async def _midway(self, call: str) -> None:
        if self.memory is not None and call == self._during:
            memory, self.memory = self.memory, None
            await memory.apply_retention()

    async def embed(self, texts: list[str], model: str) -> list[list[float]]:
        vectors = await self._llm.embed(texts, model)
        await self._midway("embed")
        return vectors

    async def complete(self, messages):
        reply = await self._llm.complete(messages)
        await self._midway("complete")
        return reply

    async def complete_json(self, messages, schema):
        return await self._llm.complete_json(messages, schema)


def test_a_backfill_that_straddles_a_retention_pass_stores_no_vector_of_a_deleted_turn(tmp_path, server):
    root = tmp_path / "store"
    store = write_history(root, NOW)

    async def scenario():
        llm = language_model(server.url)
        try:
            model = _RetentionMidway(llm, "embed")
            memory = await model.arm(root, store, server.url)
            assert memory.index is not None
            added = await memory.index.add(memory.index.unindexed())
            assert model.memory is None  # the pass ran
            # The recent turns; the old ones were deleted while they were being embedded.
            assert added == 2
            await assert_forgotten(root, store, memory, NOW, summary_kept=False)
        finally:
            await llm.aclose()

    run(scenario())


def test_a_summary_written_across_a_retention_pass_is_dropped(tmp_path, server):
    root = tmp_path / "store"
    store = ConversationStore(root, KEY)
    for days, (question, answer) in ((40, OLD_EXCHANGE), (2, RECENT_EXCHANGE), (1, RECENT_EXCHANGE)):
        at = NOW - timedelta(days=days)
        store.append(ChatMessage(ChatRole.USER, question, at))
        store.append(ChatMessage(ChatRole.ASSISTANT, answer, at + timedelta(seconds=3)))

    async def scenario():
        llm = language_model(server.url)
        try:
            model = _RetentionMidway(llm, "complete")
            memory = await model.arm(root, store, server.url)
            assert memory.summaries is not None
            # The old exchange is due for folding; it is deleted while the model summarizes it.
            summary = await maybe_summarize(memory.summaries, Summarizer(model),
                                            max_history_tokens=10, threshold=0.1,
                                            model_name="test-model")
            assert model.memory is None  # the pass ran
            return summary, memory.summaries.latest
        finally:
            await llm.aclose()

    summary, latest = run(scenario())
    assert SECRET in json.dumps(server.bodies("/api/chat"))  # the model was asked about it
    assert summary is None and latest is None
    assert not [r for r in read_all(root, KEY) if r["metadata"].get("kind") == SUMMARY]
    assert SECRET not in json.dumps(read_all(root, KEY))


def test_cli_purge_while_the_daemon_runs(tmp_path, server):
    # The command uses the system clock, so the history is dated relative to it.
    now = datetime.now(UTC)
    root = tmp_path / "store"
    store = write_history(root, now)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELARA")}
    env.update({
        "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "RUNTIME_DIRECTORY": str(tmp_path / "run"),
        "ELARA__Context__StorageRoot": str(root), "ELARA__Context__EncryptionKey": KEY,
        "ELARA__Context__RetentionKeepSummaries": "false",
    })

    async def elara(*args: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "elara", *args, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        return process.returncode, out.decode()

    async def scenario():
        llm = language_model(server.url)
        memory = Memory(settings_for(root, server.url, keep_summaries=False), store, llm,
                        clock=lambda: now)
        # The daemon's status socket, answering `reload-memory` as the daemon does.
        status = StatusServer(tmp_path / "run" / "status.sock", memory.status,
                              {"reload-memory": memory.reload})
        try:
            await memory.load()
            assert memory.index is not None
            await memory.index.add(memory.index.unindexed())
            await status.start()
            _, purged = await elara("history", "purge", "--older-than", "30d")
            assert purged.startswith("deleted 6 messages older than ")
            assert "(2 turns, 1 summaries, 2 embeddings, 1 facts, 0 other)" in purged
            _, exported = await elara("history", "export")
            rows = [json.loads(line) for line in exported.splitlines()]
            assert [r["content"] for r in rows if r["role"] != "System"] == list(RECENT_EXCHANGE)
            assert [r["metadata"]["kind"] for r in rows if r["role"] == "System"] == [EMBEDDING] * 2
            assert SECRET not in exported
            # The daemon read everything again: the purged fact, summary and turns are out of memory.
            assert memory.status()["facts"] == 0 and memory.status()["summarized_turns"] == 0
            assert memory.status()["indexed_turns"] == 2
            await assert_forgotten(root, store, memory, now, summary_kept=False)
        finally:
            await status.stop()
            await llm.aclose()

    run(scenario())
