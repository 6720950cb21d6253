"""Retrieval: a real encrypted store, the real Ollama client and the fake server's /api/embed."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.store import ConversationStore
from elara.errors import ContextError, LanguageModelError
from elara.memory.records import EMBEDDING, KIND
from elara.memory.retrieval import (
    RETRIEVED,
    EmbeddingIndex,
    RetrievalContextProvider,
    key_of,
    same_model,
    task_prefixes,
)
from tests.rig.ollama_server import embed_text
from tests.spec_reader import independent_open

PASSPHRASE = "retrieval test passphrase"
MODEL = "nomic-embed-text"
DOC, QUERY = "search_document: ", "search_query: "
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)

#: 15 exchanges, one a day; the first and the last are about the same thing.
EXCHANGES = [
    ("How do I keep my sourdough starter alive while travelling?",
     "Feed the sourdough starter, then refrigerate it; it keeps for two weeks."),
    ("What is the capital of Australia?", "Canberra is the capital of Australia."),
    ("Remind me how tall Mount Everest is.", "Mount Everest is 8849 metres tall."),
    ("Which planet has the most moons?", "Saturn has the most known moons."),
    ("How many cups of rice for four people?", "Two cups of uncooked rice feed four people."),
    ("What does a dolphin eat?", "Dolphins eat fish and squid."),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci painted the Mona Lisa."),
    ("How do I fix a flat bicycle tyre?", "Remove the wheel, patch the inner tube, pump it up."),
    ("What year did the Berlin Wall fall?", "The Berlin Wall fell in 1989."),
    ("How long should I boil an egg?", "Boil an egg for seven minutes for a jammy yolk."),
    ("Tell me a fact about octopuses.", "Octopuses have three hearts."),
    ("What is the speed of light?", "Light travels at about 300000 kilometres per second."),
    ("Which chess opening starts with e4 e5 Nf3 Nc6 Bb5?", "That is the Ruy Lopez."),
    ("How warm is the Mediterranean sea in August?", "Around 26 degrees in August."),
    ("Can I keep a sourdough starter alive while travelling by plane?",
     "Yes, dry a little of it and take the flakes with you."),
]
SOURDOUGH = "keep sourdough starter alive travelling"


def run(coro):
    """Run a coroutine with an upper bound, so a bug cannot hang the suite."""
    return asyncio.run(asyncio.wait_for(coro, 10))


def language_model(url: str) -> OllamaLanguageModel:
    """The adapter as the wiring builds it (the chat model doesn't matter for embeddings)."""
    return OllamaLanguageModel(make_client(url, 5.0), model="test-model", host=url,
                               keep_alive="30m", options={}, timeout_seconds=5.0)


def turns() -> list[ChatMessage]:
    """The 30 turns, a user turn and its answer a minute apart, one exchange a day."""
    messages = []
    for day, (question, answer) in enumerate(EXCHANGES):
        at = START + timedelta(days=day)
        messages.append(ChatMessage(ChatRole.USER, question, at))
        answered = at + timedelta(minutes=1, milliseconds=7)
        messages.append(ChatMessage(ChatRole.ASSISTANT, answer, answered))
    return messages


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    """An encrypted store holding the 30 turns."""
    store = ConversationStore(tmp_path / "Conversation", PASSPHRASE)
    for message in turns():
        store.append(message)
    return store


@pytest.fixture
def server(ollama_server):
    """The fake Ollama with the embedding model pulled."""
    ollama_server.models.add(MODEL)
    return ollama_server


async def indexed(store, llm, model: str = MODEL) -> EmbeddingIndex:
    """An index loaded from the store, with every unindexed turn added."""
    index = EmbeddingIndex(store, llm, model)
    await index.load()
    await index.add(index.unindexed())
    return index


def test_key_of_is_the_stored_timestamp_and_role():
    at = datetime(2026, 11, 22, 7, 55, 11, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert key_of(ChatMessage(ChatRole.USER, "hi", at)) == "2026-11-22T06:55:11.123Z/user"
    assert key_of(ChatMessage(ChatRole.ASSISTANT, "hi", at)) == "2026-11-22T06:55:11.123Z/assistant"


def test_model_names_and_prefixes():
    assert same_model("nomic-embed-text", "nomic-embed-text:latest")
    assert not same_model("nomic-embed-text", "nomic-embed-text:v1.5")
    assert task_prefixes("nomic-embed-text:latest") == (DOC, QUERY)
    assert task_prefixes("all-minilm") == ("", "")


def test_older_relevant_turn_comes_back_as_system_context(store, server):
    async def scenario():
        llm = language_model(server.url)
        try:
            index = EmbeddingIndex(store, llm, MODEL)
            assert await index.load() == 0
            assert len(index.unindexed()) == 30
            assert await index.add(index.unindexed()) == 30
            assert await index.add(turns()) == 0  # already indexed: no second request
            provider = RetrievalContextProvider(index, top_k=3, min_score=0.6, store=store,
                                                local_zone=UTC)
            # Last-N with n=2 shows the last three turns (the plane question among them).
            recent = await provider.get_context(SOURDOUGH, 2)
            fewer_excluded = await provider.get_context(SOURDOUGH, 0)
            unrelated = await provider.get_context("quantum chromodynamics lattice gauge theory", 2)
            return recent, fewer_excluded, unrelated
        finally:
            await llm.aclose()

    recent, fewer_excluded, unrelated = run(scenario())

    bodies = server.bodies("/api/embed")
    assert len(bodies) == 1 + 3  # the 30 turns in one request, then one per query
    assert bodies[0]["model"] == MODEL
    assert bodies[0]["input"] == [DOC + m.content for m in turns()]
    assert bodies[1] == {**bodies[1], "model": MODEL, "input": [QUERY + SOURDOUGH]}

    assert [(m.role, m.content) for m in recent] == [(
        ChatRole.SYSTEM, "From an earlier conversation (2026-11-01), the user said: "
        "How do I keep my sourdough starter alive while travelling?")]
    assert recent[0].metadata["kind"] == RETRIEVED
    assert recent[0].metadata["of"] == "2026-11-01T09:00:00.000Z/user"
    assert recent[0].timestamp_utc == START

    # With n=0 only the newest turn is on show, so the plane question (day 15) is fair game too.
    assert [m.content.split(": ", 1)[1] for m in fewer_excluded][-1] == EXCHANGES[-1][0]
    assert fewer_excluded[0].content.startswith("From an earlier conversation (2026-11-01)")
    assert unrelated == []


def test_answers_are_rendered_and_results_are_oldest_first(store, server):
    async def scenario():
        llm = language_model(server.url)
        try:
            index = await indexed(store, llm)
            ranked = await index.search("what is the capital of australia", 5, 0.75, set())
            provider = RetrievalContextProvider(index, top_k=5, min_score=0.75, store=store,
                                                local_zone=timezone(timedelta(hours=-10)))
            return ranked, await provider.get_context("what is the capital of australia", 2)
        finally:
            await llm.aclose()

    ranked, context = run(scenario())
    assert [m.content for _, m in ranked] == list(EXCHANGES[1])
    assert ranked[0][0] > ranked[1][0] >= 0.75
    # Oldest first; dates in the local zone (09:00 UTC is the evening before at UTC-10).
    assert [m.content for m in context] == [
        "From an earlier conversation (2026-11-01), the user said: What is the capital of Australia?",
        "From an earlier conversation (2026-11-01), you answered: Canberra is the capital of Australia.",
    ]


def test_top_k_and_exclude(store, server):
    async def scenario():
        llm = language_model(server.url)
        try:
            index = await indexed(store, llm)
            everything = await index.search("what is the capital of australia", 30, 0.0, set())
            top2 = await index.search("what is the capital of australia", 2, 0.0, set())
            first = key_of(turns()[2])
            without = await index.search("what is the capital of australia", 2, 0.0, {first})
            return everything, top2, without
        finally:
            await llm.aclose()

    everything, top2, without = run(scenario())
    assert len(everything) == 30
    assert [s for s, _ in everything] == sorted((s for s, _ in everything), reverse=True)
    assert top2 == everything[:2]
    assert [m.content for _, m in without] == [EXCHANGES[1][1], everything[2][1].content]


def test_index_reloads_from_disk_without_embedding_again(store, server, tmp_path):
    async def scenario():
        llm = language_model(server.url)
        try:
            first = await indexed(store, llm)
            before = await first.search(SOURDOUGH, 3, 0.5, set())
            reopened = ConversationStore(tmp_path / "Conversation", PASSPHRASE)
            second = EmbeddingIndex(reopened, llm, MODEL)
            loaded = await second.load()
            requests_before_search = len(server.bodies("/api/embed"))
            after = await second.search(SOURDOUGH, 3, 0.5, set())
            return before, loaded, second.unindexed(), requests_before_search, after
        finally:
            await llm.aclose()

    before, loaded, unindexed, requests, after = run(scenario())
    assert loaded == 30 and unindexed == []
    assert requests == 2  # the first index's turns and its query; loading asked nothing
    assert [(round(s, 5), m) for s, m in after] == [(round(s, 5), m) for s, m in before]
    assert after  # the comparison above is not vacuous


def test_records_of_another_model_are_ignored(store, server, caplog):
    server.models.add("all-minilm")

    async def scenario():
        llm = language_model(server.url)
        try:
            other = await indexed(store, llm, "all-minilm")
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="elara.memory.retrieval"):
                mine = EmbeddingIndex(store, llm, MODEL)
                loaded = await mine.load()
            unindexed = mine.unindexed()
            await mine.add(unindexed)
            other_again = EmbeddingIndex(store, llm, "all-minilm:latest")
            return len(other), loaded, unindexed, len(mine), await other_again.load()
        finally:
            await llm.aclose()

    other, loaded, unindexed, mine, other_again = run(scenario())
    assert other == 30
    assert loaded == 0 and unindexed == turns()
    assert "ignoring 30 stored embeddings made with all-minilm" in caplog.text
    assert "need embedding again" in caplog.text
    assert mine == 30
    assert other_again == 30  # the other model's records are still there, and still its own
    assert [b["model"] for b in server.bodies("/api/embed")] == ["all-minilm", MODEL]


def test_missing_embedding_model_raises_model_missing(store, ollama_server):
    async def add_turns():
        llm = language_model(ollama_server.url)
        try:
            await EmbeddingIndex(store, llm, MODEL).add(turns())
        finally:
            await llm.aclose()

    with pytest.raises(LanguageModelError) as caught:
        run(add_turns())
    assert caught.value.code == "model_missing"
    assert f"ollama pull {MODEL}" in str(caught.value)
    assert not [p for p in store.root.iterdir() if p.name.endswith("_system.json")]


def test_provider_failures_propagate_and_become_context_errors(store, server):
    async def scenario():
        llm = language_model(server.url)
        try:
            index = await indexed(store, llm)
            provider = RetrievalContextProvider(index, top_k=3, min_score=0.5, store=store)
            server.models.discard(MODEL)  # someone ran `ollama rm`
            with pytest.raises(LanguageModelError) as missing:
                await provider.get_context(SOURDOUGH, 2)
            builder = PromptBuilder(ConfigSystemPrompt("Be brief."), [provider])
            with pytest.raises(ContextError):
                await builder.build(SOURDOUGH, 2)
            server.stop()  # Ollama down
            with pytest.raises(LanguageModelError) as down:
                await provider.get_context(SOURDOUGH, 2)
            return missing.value.code, down.value.code
        finally:
            await llm.aclose()

    assert run(scenario()) == ("model_missing", "unreachable")


def test_vectors_in_the_store_decrypt_independently(store, server):
    async def scenario():
        llm = language_model(server.url)
        try:
            await indexed(store, llm)
        finally:
            await llm.aclose()

    run(scenario())
    by_key = {key_of(m): m for m in turns()}
    records = 0
    for path in sorted(store.root.glob("*_system.json")):
        data = path.read_bytes()
        assert b"sourdough" not in data and b"embedding" not in data  # encrypted, metadata too
        body = json.loads(independent_open(PASSPHRASE, data))
        assert body["role"] == "System"
        assert body["metadata"][KIND] == EMBEDDING
        assert body["metadata"]["model"] == MODEL
        turn = by_key[body["metadata"]["of"]]
        assert body["metadata"]["role"] == turn.role.slug
        vector = np.frombuffer(base64.b64decode(body["content"]), dtype="<f4")
        assert vector.tolist() == np.asarray(embed_text(DOC + turn.content), dtype=np.float32).tolist()
        records += 1
    assert records == 30
