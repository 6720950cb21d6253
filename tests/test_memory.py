"""Memory that lasts, end to end: 200 turns through the orchestrator with facts, summaries and the
token budget, against the Ollama-protocol server standing in for the model."""

import asyncio
import json
import re

import pytest

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.config import load_settings
from elara.conversation.context import estimate_tokens
from elara.conversation.messages import PromptReady
from elara.conversation.store import ConversationStore
from elara.memory.manager import Memory
from elara.service.answering import make_monitor, make_orchestrator
from tests.spec_reader import read_all

KEY = "memory key"
BUDGET = 400


def model(endpoint, body):
    """Stands in for the language model: fact extraction (JSON), summaries, and replies."""
    messages = body.get("messages", [])
    text = " ".join(m["content"] for m in messages)
    if body.get("format") is not None:
        facts = []
        user = messages[-1]["content"]
        if m := re.search(r"my name is (\w+)", user, re.I):
            facts.append(f"The user's name is {m.group(1)}.")
        if re.search(r"\bI am vegetarian\b", user, re.I):
            facts.append("The user is vegetarian.")
        return json.dumps({"facts": facts})
    if "summar" in messages[0]["content"].lower():
        topics = sorted(set(re.findall(r"topic (\d+)", text)), key=int)
        return f"The user asked about topics {', '.join(topics[:3])} to {topics[-1] if topics else '?'}."
    last = messages[-1]["content"]
    return f"Here is a fairly complete answer about {last} with a few more words to take room."


@pytest.fixture
def conversation(ollama_server, tmp_path):
    ollama_server.responder = model
    settings = load_settings(env={
        "ELARA__Context__StorageRoot": str(tmp_path / "store"), "ELARA__Context__EncryptionKey": KEY,
        "ELARA__Context__LastN": "50", "ELARA__Context__MaxHistoryTokens": str(BUDGET),
        "ELARA__LanguageModel__Host": ollama_server.url, "ELARA__LanguageModel__Model": "test-model",
    })
    runner = asyncio.Runner()

    class Sink:
        async def say(self, sentence):
            pass

    async def build():
        store = ConversationStore(tmp_path / "store", KEY)
        llm = OllamaLanguageModel(make_client(ollama_server.url, 10), model="test-model",
                                  host=ollama_server.url, keep_alive=None, options={},
                                  timeout_seconds=10)
        memory = Memory(settings, store, llm)
        await memory.load()
        memory.worker.start()
        monitor = make_monitor(settings)
        return store, memory, monitor, make_orchestrator(settings, store, llm, Sink(), memory, monitor)

    store, memory, monitor, orchestrator = runner.run(build())

    def turn(text):
        async def go():
            result = await orchestrator.on_prompt_ready(PromptReady(text))
            assert await memory.worker.drain(10), "memory work did not finish"
            return result
        return runner.run(go())

    yield turn, store, memory, monitor
    runner.run(memory.worker.stop())
    runner.close()


def test_two_hundred_turns_stay_in_budget_and_remember_a_fact(conversation, ollama_server, tmp_path):
    turn, store, memory, monitor = conversation
    for i in range(1, 201):
        if i == 3:
            text = "My name is Alice and I am vegetarian."
        elif i == 5:
            text = "Remember that my sister's birthday is on 3 May."
        else:
            text = f"Tell me something about topic {i}."
        assert turn(text).ok

    last = ollama_server.turns()[-1]["messages"]
    system, history = last[0]["content"], last[1:-1]
    assert "What you know about the user:" in system
    assert "The user's name is Alice." in system and "The user is vegetarian." in system
    assert "The user's sister's birthday is on 3 May." in system
    assert history[0]["role"] == "system" and history[0]["content"].startswith("Summary of the conversation")
    assert sum(estimate_tokens(m["content"]) for m in history) <= BUDGET
    assert memory.summaries.latest.turns > 150
    assert monitor.last.parts["facts"] > 0 and monitor.last.parts["summary"] > 0

    # "forget" removes it: from the next prompt and from the disk.
    assert turn("Forget my name.").ok
    assert turn("What do you know about me?").ok
    system = ollama_server.turns()[-1]["messages"][0]["content"]
    assert "Alice" not in system and "The user is vegetarian." in system

    records = read_all(tmp_path / "store", KEY)
    facts = [r for r in records if r["role"] == "System" and r["metadata"].get("kind") == "fact"]
    summaries = [r for r in records if r["role"] == "System" and r["metadata"].get("kind") == "summary"]
    assert sorted(f["content"] for f in facts) == [
        "The user is vegetarian.", "The user's sister's birthday is on 3 May."]
    assert summaries and summaries[-1]["content"].startswith("The user asked about topics")
    assert int(summaries[-1]["metadata"]["turns"]) == memory.summaries.latest.turns


def test_memory_failures_never_break_a_turn(conversation, ollama_server, tmp_path, caplog):
    turn, store, memory, _ = conversation
    assert turn("My name is Bob.").ok
    # The model breaks only for background work (JSON and summaries): replies still come.
    ollama_server.responder = lambda endpoint, body: (
        "not json" if body.get("format") is not None else model(endpoint, body))
    for i in range(30):
        assert turn(f"Tell me something about topic {i}.").ok
    assert memory.worker.counters.failed > 0
    assert "The user's name is Bob." in ollama_server.turns()[-1]["messages"][0]["content"]
    # A damaged fact record is skipped with a warning when the facts are read again.
    fact_file = memory.facts.facts()[0].path
    fact_file.write_bytes(fact_file.read_bytes()[:-30])
    asyncio.run(memory.reload())
    assert memory.facts.facts() == []
    assert turn("Still there?").ok


def test_each_turn_request_starts_with_the_last_one_but_across_summaries_and_dropped_blocks(
        conversation, ollama_server):
    turn, store, memory, monitor = conversation
    for i in range(1, 41):
        assert turn(f"Tell me something about topic {i}.").ok
    requests = [t["messages"] for t in ollama_server.turns()]
    assert len(requests) == 40

    def summary(messages):
        return next((m["content"] for m in messages[1:] if m["role"] == "system"), None)

    def first_turn(messages):
        return next((m for m in messages[1:-1] if m["role"] != "system"), None)

    shared = summaries = blocks = 0
    for before, now in zip(requests, requests[1:]):
        if summary(before) != summary(now):
            summaries += 1  # a summary point: the summary message changed
        elif first_turn(before) not in (None, first_turn(now)):
            blocks += 1  # the history passed its budget and dropped its oldest turns at once
        else:
            assert now[:len(before)] == before  # the whole last request, then what is new
            shared += 1
    # A budget of 400 tokens: summaries come often; still most turns only append.
    assert summaries >= 2 and shared >= 20 and blocks <= summaries, (shared, summaries, blocks)
