"""Progressive summaries: the pure policy with plain values, the book on a real store, the
summarizer through the real Ollama client against the fake server, and the whole step."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from elara.brain.ollama import OllamaLanguageModel, make_client
from elara.conversation.context import estimate_tokens
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.errors import LanguageModelError
from elara.memory.records import FACT, KIND, SUMMARY, memory_record
from elara.memory.summaries import (
    SUMMARY_PREFIX,
    Summarizer,
    Summary,
    SummaryBook,
    SummaryContextProvider,
    iso_millis,
    maybe_summarize,
    turns_to_summarize,
)
from tests.spec_reader import independent_open

PASSPHRASE = "summaries test passphrase"
T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=1)


def run(coro):
    """Run a coroutine with an upper bound, so a bug cannot hang the suite."""
    return asyncio.run(asyncio.wait_for(coro, 10))


def language_model(url: str) -> OllamaLanguageModel:
    """The adapter as the wiring builds it."""
    return OllamaLanguageModel(make_client(url, 5.0), model="test-model", host=url,
                               keep_alive="30m", options={"temperature": 0.2},
                               timeout_seconds=5.0)


def summarize_once(book: SummaryBook, url: str, budget: int | None = 400):
    """One maybe_summarize step with a fresh client, as the memory worker runs it."""
    async def step():
        llm = language_model(url)
        try:
            return await maybe_summarize(book, Summarizer(llm), max_history_tokens=budget,
                                         threshold=0.7, model_name="test-model")
        finally:
            await llm.aclose()

    return run(step())


def user(text: str, at: datetime = T0) -> ChatMessage:
    """A user turn."""
    return ChatMessage(ChatRole.USER, text, at)


def assistant(text: str, at: datetime = T0) -> ChatMessage:
    """An assistant turn."""
    return ChatMessage(ChatRole.ASSISTANT, text, at)


def conversation(exchanges: int, start: datetime = T0) -> list[ChatMessage]:
    """`exchanges` question/answer pairs, 10 s apart, about 100 characters each."""
    turns = []
    for i in range(exchanges):
        at = start + timedelta(seconds=20 * i)
        turns.append(user(f"Question {i:02d}: please tell me something about topic {i:02d} "
                          f"and why it matters to me today.", at))
        turns.append(assistant(f"Answer {i:02d}: topic {i:02d} is interesting because of "
                               f"reasons, and it matters for your plans this week.",
                               at + timedelta(seconds=10)))
    return turns


def by_length(text: str) -> int:
    """A plain estimate for policy tests: one token per character."""
    return len(text)


# -- policy --------------------------------------------------------------------------------------


def test_no_budget_means_no_summary():
    turns = conversation(30)
    assert turns_to_summarize(turns, None, 0.5) == []


def test_below_the_threshold_nothing_is_folded():
    turns = [user("a" * 10), assistant("b" * 10)] * 5  # 100 tokens
    assert turns_to_summarize(turns, 200, 0.5, by_length) == []  # exactly at the threshold
    assert turns_to_summarize(turns, 200, 0.49, by_length) != []


def test_folds_the_oldest_whole_exchanges_about_half_the_tokens():
    turns = []
    for i in range(10):
        turns += [user(f"u{i}" + "x" * 8), assistant(f"a{i}" + "y" * 8)]  # 20 tokens an exchange
    chosen = turns_to_summarize(turns, 200, 0.7, by_length)  # 200 tokens > 140
    assert chosen == turns[:10]  # 5 exchanges = 100 tokens = half
    assert chosen[-1].role is ChatRole.ASSISTANT


def test_an_exchange_with_several_replies_stays_whole():
    turns = [user("u0" + "x" * 38), assistant("a0"), assistant("a0 more" + "y" * 50),
             user("u1" + "x" * 8), assistant("a1" + "y" * 8),
             user("u2" + "x" * 8), assistant("a2" + "y" * 8),
             user("u3" + "x" * 8), assistant("a3" + "y" * 8)]
    chosen = turns_to_summarize(turns, 100, 0.5, by_length)
    assert chosen == turns[:3]


def test_the_newest_two_exchanges_are_never_folded():
    # Two huge exchanges: over the threshold, but Last-N shows them anyway.
    turns = [user("u" * 500), assistant("a" * 500), user("v" * 500), assistant("b" * 500)]
    assert turns_to_summarize(turns, 100, 0.5, by_length) == []
    # A third, older one is all that may go, even though it is far less than half.
    older = [user("old question"), assistant("old answer")]
    assert turns_to_summarize(older + turns, 100, 0.5, by_length) == older
    assert turns_to_summarize(older + turns, 100, 0.5, by_length, keep_exchanges=0) == \
        older + turns[:2]


def test_at_least_one_exchange_and_at_most_one_budget_at_once():
    turns = []
    for _ in range(40):
        turns += [user("q" * 10), assistant("r" * 10)]  # 800 tokens in all
    chosen = turns_to_summarize(turns, 100, 0.5, by_length)
    assert sum(len(m.content) for m in chosen) == 100  # the budget, not half (400)
    big_first = [user("z" * 300), assistant("w" * 300)] + turns[:6]
    assert turns_to_summarize(big_first, 100, 0.5, by_length) == big_first[:2]


def test_a_leading_reply_without_its_question_is_folded_first():
    turns = [assistant("dangling reply" + "d" * 16)] + [user("q" * 10), assistant("r" * 10)] * 4
    chosen = turns_to_summarize(turns, 100, 0.5, by_length)
    assert chosen[0] is turns[0] and chosen[-1].role is ChatRole.ASSISTANT


def test_the_default_estimate_is_the_context_budget_estimate():
    turns = conversation(20)
    total = sum(estimate_tokens(m.content) for m in turns)
    assert turns_to_summarize(turns, int(total / 0.7) + 1, 0.7) == []
    assert turns_to_summarize(turns, int(total / 0.7) - 1, 0.7) != []


# -- the book ------------------------------------------------------------------------------------


def fill(store: ConversationStore, turns: list[ChatMessage]) -> None:
    """Append the turns in order."""
    for message in turns:
        store.append(message)


def test_book_save_load_latest_and_uncovered_across_a_reopen(tmp_path: Path):
    store = ConversationStore(tmp_path / "Conversation", PASSPHRASE)
    turns = conversation(6)
    fill(store, turns)
    book = SummaryBook(store, clock=lambda: LATER)
    assert book.latest is None
    assert book.load() is None
    assert book.uncovered_turns() == turns

    first = book.save("The user asked about topics 0 and 1.", turns[:4], "test-model")
    assert first == book.latest
    assert first.covers_until == iso_millis(turns[3].timestamp_utc) == "2026-01-05T09:00:30.000Z"
    assert first.turns == 4 and first.model == "test-model" and first.created == LATER
    assert book.uncovered_turns() == turns[4:]

    second = book.save("The user asked about topics 0 to 3.", turns[4:8], "other-model")
    assert second.turns == 8 and book.latest == second
    assert book.uncovered_turns() == turns[8:]
    assert book.uncovered_turns(limit=3) == turns[-3:]

    # A fact record in between is not a summary; the older summary stays on disk as history.
    store.append(memory_record(FACT, "The user's name is Ada.", LATER))
    reopened = SummaryBook(ConversationStore(tmp_path / "Conversation", PASSPHRASE))
    assert reopened.latest is None
    assert reopened.load() == second
    assert reopened.uncovered_turns() == turns[8:]
    kinds = [s.message.metadata.get(KIND) for s in store.iter_messages((ChatRole.SYSTEM,))]
    assert kinds == [SUMMARY, SUMMARY, FACT]


def test_uncovered_turns_loads_on_first_use_and_skips_a_broken_summary(tmp_path: Path):
    store = ConversationStore(tmp_path / "c", PASSPHRASE)
    turns = conversation(3)
    fill(store, turns)
    SummaryBook(store, clock=lambda: LATER).save("Topics 0.", turns[:2], "m")
    store.append(memory_record(SUMMARY, "broken", LATER, covers_until="yesterday", turns="x"))
    book = SummaryBook(store)
    assert book.uncovered_turns() == turns[2:]  # loaded; the broken newer record was skipped
    assert book.latest.text == "Topics 0."


def test_save_refuses_an_empty_or_stale_cover(tmp_path: Path):
    store = ConversationStore(tmp_path / "c", PASSPHRASE)
    turns = conversation(3)
    fill(store, turns)
    book = SummaryBook(store, clock=lambda: LATER)
    with pytest.raises(ValueError):
        book.save("nothing", [], "m")
    book.save("Topics 0 and 1.", turns[:4], "m")
    with pytest.raises(ValueError):
        book.save("Topic 0 again.", turns[:2], "m")
    assert book.latest.turns == 4


# -- the summarizer ------------------------------------------------------------------------------


def test_summarizer_asks_for_a_non_streamed_chat_with_the_previous_summary_and_turns(ollama_server):
    ollama_server.responder = lambda endpoint, body: "  The user planned a trip to Lisbon.  \n"
    previous = Summary(text="The user likes trains.", covers_until="2026-01-05T08:00:00.000Z",
                       turns=6, created=T0, path=Path("x"))
    turns = [user("Can you plan a trip to Lisbon?"), assistant("Sure, by train or plane?")]

    async def go():
        llm = language_model(ollama_server.url)
        try:
            return await Summarizer(llm, max_words=80).summarize(previous, turns)
        finally:
            await llm.aclose()

    assert run(go()) == "The user planned a trip to Lisbon."
    [body] = ollama_server.bodies("/api/chat")
    assert body["stream"] is False and body["model"] == "test-model"
    text = "\n".join(m["content"] for m in body["messages"])
    assert body["messages"][0]["role"] == "system"
    assert "80 words" in body["messages"][0]["content"]
    assert "third person" in body["messages"][0]["content"]
    for needle in ("The user likes trains.", "User: Can you plan a trip to Lisbon?",
                   "Assistant: Sure, by train or plane?"):
        assert needle in text


def test_summarizer_without_a_previous_summary(ollama_server):
    ollama_server.responder = lambda endpoint, body: "Summary: The user said hello."

    async def go():
        llm = language_model(ollama_server.url)
        try:
            return await Summarizer(llm).summarize(None, [user("hello")])
        finally:
            await llm.aclose()

    assert run(go()) == "The user said hello."  # the label is dropped
    [body] = ollama_server.bodies("/api/chat")
    assert "(none yet)" in body["messages"][-1]["content"]


def test_an_overlong_summary_is_clipped_at_a_sentence(ollama_server):
    ollama_server.responder = lambda endpoint, body: " ".join(
        f"The user asked question number {i} about the garden." for i in range(40))

    async def go():
        llm = language_model(ollama_server.url)
        try:
            return await Summarizer(llm, max_words=50).summarize(None, [user("garden")])
        finally:
            await llm.aclose()

    text = run(go())
    assert len(text.split()) <= 50 and text.endswith("garden.")


def test_an_empty_summary_is_a_model_error(ollama_server):
    ollama_server.responder = lambda endpoint, body: "   \n"

    async def go():
        llm = language_model(ollama_server.url)
        try:
            await Summarizer(llm).summarize(None, [user("hello")])
        finally:
            await llm.aclose()

    with pytest.raises(LanguageModelError) as caught:
        run(go())
    assert caught.value.code == "model_error"


# -- the whole step ------------------------------------------------------------------------------


def test_maybe_summarize_end_to_end(tmp_path: Path, ollama_server):
    calls = []

    def responder(endpoint, body):
        calls.append(body)
        return f"The user asked about many topics (summary {len(calls)})."

    ollama_server.responder = responder
    store = ConversationStore(tmp_path / "Conversation", PASSPHRASE)
    turns = conversation(20)  # 40 turns, about 1 160 tokens
    fill(store, turns)
    book = SummaryBook(store, clock=lambda: LATER)

    first = summarize_once(book, ollama_server.url)
    expected = turns_to_summarize(turns, 400, 0.7)
    assert len(expected) % 2 == 0 and 0 < len(expected) <= len(turns) - 4
    assert first.turns == len(expected)
    assert first.covers_until == iso_millis(expected[-1].timestamp_utc)
    assert first.text == "The user asked about many topics (summary 1)."
    prompt = calls[0]["messages"][-1]["content"]
    assert "(none yet)" in prompt and "Question 00" in prompt
    assert f"Question {len(expected) // 2:02d}" not in prompt

    second = summarize_once(book, ollama_server.url)
    assert second.turns > first.turns
    assert second.covers_until > first.covers_until
    prompt = calls[1]["messages"][-1]["content"]
    assert first.text in prompt  # folded into the next summary
    assert "Question 00" not in prompt and f"Question {first.turns // 2:02d}" in prompt

    summaries = [second]
    while (summary := summarize_once(book, ollama_server.url)) is not None:
        summaries.append(summary)
    assert [s.turns for s in summaries] == sorted(s.turns for s in summaries)
    # The newest two exchanges are never covered.
    assert summaries[-1].covers_until < iso_millis(turns[-4].timestamp_utc)
    assert len(calls) == len(summaries) + 1
    records = [s for s in store.iter_messages((ChatRole.SYSTEM,))]
    assert len(records) == len(calls)  # every summary stays on disk; the latest is used

    reopened = SummaryBook(ConversationStore(tmp_path / "Conversation", PASSPHRASE))
    assert reopened.load() == summaries[-1]


def test_nothing_to_do_without_a_budget_or_below_the_threshold(tmp_path: Path, ollama_server):
    store = ConversationStore(tmp_path / "c", PASSPHRASE)
    fill(store, conversation(20))
    book = SummaryBook(store)

    assert summarize_once(book, ollama_server.url, None) is None
    assert summarize_once(book, ollama_server.url, 100_000) is None
    assert ollama_server.bodies("/api/chat") == []


def test_a_failing_model_writes_nothing(tmp_path: Path, ollama_server):
    ollama_server.fault = "http_500"
    store = ConversationStore(tmp_path / "c", PASSPHRASE)
    fill(store, conversation(20))
    book = SummaryBook(store)

    with pytest.raises(LanguageModelError) as caught:
        summarize_once(book, ollama_server.url)
    assert caught.value.code == "model_error"
    assert list(store.iter_messages((ChatRole.SYSTEM,))) == []
    assert book.latest is None
    assert len(book.uncovered_turns()) == 40


# -- in the prompt -------------------------------------------------------------------------------


def test_summary_context_provider(tmp_path: Path):
    store = ConversationStore(tmp_path / "c", PASSPHRASE)
    turns = conversation(3)
    fill(store, turns)
    book = SummaryBook(store, clock=lambda: LATER)
    provider = SummaryContextProvider(book)
    assert run(provider.get_context("anything", 10)) == []
    book.save("The user asked about topic 0.", turns[:2], "test-model")
    [message] = run(provider.get_context("anything", 10))
    assert message.role is ChatRole.SYSTEM
    assert message.content == SUMMARY_PREFIX + "The user asked about topic 0."
    assert message.content.startswith("Summary of the conversation so far: ")
    assert message.timestamp_utc == LATER and message.metadata[KIND] == SUMMARY
    # Only memory is read per prompt: the store is not touched.
    store.read_tail = store.iter_messages = None
    assert len(run(provider.get_context("anything", 0))) == 1


# -- on disk -------------------------------------------------------------------------------------


def test_a_summary_record_decrypts_with_an_independent_reader(tmp_path: Path):
    store = ConversationStore(tmp_path / "c", PASSPHRASE)
    turns = conversation(2)
    fill(store, turns)
    saved = SummaryBook(store, clock=lambda: LATER).save("The user asked twice.", turns,
                                                         "llama3.2:3b")
    assert saved.path.name.endswith("_system.json")
    body = json.loads(independent_open(PASSPHRASE, saved.path.read_bytes()))
    assert body == {
        "role": "System",
        "content": "The user asked twice.",
        "timestampUtc": "2026-01-06T09:00:00.000Z",
        "metadata": {"kind": "summary", "covers_until": "2026-01-05T09:00:30.000Z",
                     "turns": "4", "model": "llama3.2:3b"},
    }
