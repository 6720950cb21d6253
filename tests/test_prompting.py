"""Context providers, the prompt builder and both renderers: pure, tested with plain values."""

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from elara.conversation.context import (
    LastNContextProvider,
    estimate_tokens,
    history_window,
    newest_exchanges,
)
from elara.conversation.messages import ChatMessage, ChatRole, Prompt
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import STAMP_RULE, OllamaChatRenderer, TranscriptRenderer
from elara.conversation.store import ConversationStore
from elara.errors import ContextError

T0 = datetime(2026, 11, 22, 6, 55, 11, 123000, tzinfo=UTC)


def msg(role: ChatRole, text: str, minutes: int = 0) -> ChatMessage:
    return ChatMessage(role, text, T0 + timedelta(minutes=minutes))


def conversation(pairs: int) -> list[ChatMessage]:
    out = []
    for i in range(pairs):
        out.append(msg(ChatRole.USER, f"question {i}", 2 * i))
        out.append(msg(ChatRole.ASSISTANT, f"answer {i}", 2 * i + 1))
    return out


class ListProvider:
    """A context provider over a fixed list: the builder's composition is what is under test."""

    def __init__(self, messages):
        self.messages = list(messages)
        self.calls = []

    async def get_context(self, current_prompt, n):
        self.calls.append((current_prompt, n))
        return self.messages[-n:] if n else []


class BrokenProvider:
    async def get_context(self, current_prompt, n):
        raise OSError("disk gone")


def run(coro):
    return asyncio.run(coro)


def test_last_n_leaves_out_the_current_turn_and_starts_with_the_newest_exchanges(tmp_path):
    store = ConversationStore(tmp_path / "store", "test key")
    for m in conversation(4):
        store.append(m)
    store.append(msg(ChatRole.USER, "what now?", 10))  # stored before the prompt is built
    # A new window holds the newest whole exchanges that fill half of it.
    got = run(LastNContextProvider(store).get_context("what now?", 8))
    assert [m.content for m in got] == ["question 2", "answer 2", "question 3", "answer 3"]
    assert [m.content for m in run(LastNContextProvider(store).get_context("what now?", 4))] == [
        "question 3", "answer 3"]
    assert [m.content for m in run(LastNContextProvider(store).get_context("what now?", 1))] == ["answer 3"]
    assert run(LastNContextProvider(store).get_context("what now?", 0)) == []
    # The questions after her last reply are left out even when the current turn was not stored
    # (a failed write): one she never answered, or one the person went on with.
    got = run(LastNContextProvider(store).get_context("something else", 8))
    assert [m.content for m in got] == ["question 2", "answer 2", "question 3", "answer 3"]


def test_the_window_grows_by_appending_and_drops_old_turns_in_a_block(tmp_path):
    store = ConversationStore(tmp_path / "store", "test key")
    provider = LastNContextProvider(store)
    windows = []
    for i in range(8):
        windows.append([m.content for m in run(provider.get_context(f"question {i}", 6))])
        store.append(msg(ChatRole.USER, f"question {i}", 2 * i))
        store.append(msg(ChatRole.ASSISTANT, f"answer {i}", 2 * i + 1))
    assert [len(w) for w in windows] == [0, 2, 4, 6, 2, 4, 6, 2]
    assert windows[3] == ["question 0", "answer 0", "question 1", "answer 1", "question 2", "answer 2"]
    assert windows[4] == ["question 3", "answer 3"]  # a block of two exchanges went at once
    assert windows[5][:2] == windows[4]  # and then it grows by appending again


def test_over_the_budget_the_window_starts_again_within_half_of_it():
    history = conversation(5)
    cost = lambda text: 10  # noqa: E731 - every message costs 10 tokens
    assert history_window(history, history[4], 10, None, cost) == history[4:]
    assert history_window(history, history[4], 10, 60, cost) == history[4:]
    # 70 tokens from the first message on pass a budget of 60: newest exchanges within 30.
    assert [m.content for m in history_window(history, history[2], 10, 60, cost)] == [
        "question 4", "answer 4"]
    assert newest_exchanges(history, 10, 5, cost) == []
    # An unanswered question is its own exchange; leading assistant/system text is one too.
    odd = [msg(ChatRole.SYSTEM, "summary"), msg(ChatRole.USER, "q1"), msg(ChatRole.USER, "q2"),
           msg(ChatRole.ASSISTANT, "a2")]
    assert [m.content for m in newest_exchanges(odd, 10, 20, cost)] == ["q2", "a2"]
    assert [m.content for m in newest_exchanges(odd, 10, 30, cost)] == ["q1", "q2", "a2"]
    assert [m.content for m in newest_exchanges(odd, 1, None, cost)] == ["a2"]


def test_pinned_messages_come_first_and_count_against_the_budget(tmp_path):
    assert estimate_tokens("x" * 400) == 104
    store = ConversationStore(tmp_path / "store", "test key")
    for i, text in enumerate(["x" * 400, "y" * 400, "short", "reply"]):
        store.append(msg(ChatRole.USER if i % 2 == 0 else ChatRole.ASSISTANT, text, i))
    summary = ListProvider([msg(ChatRole.SYSTEM, "s" * 100)])
    provider = LastNContextProvider(store, 260, pinned=[summary])
    got = run(provider.get_context("now", 4))
    assert [m.content[:5] for m in got] == ["s" * 5, "short", "reply"]


def test_builder_asks_every_provider_in_order_with_the_time():
    first, second = ListProvider([msg(ChatRole.SYSTEM, "summary")]), ListProvider(conversation(2))
    recall = ListProvider([msg(ChatRole.SYSTEM, "retrieved")])
    builder = PromptBuilder(ConfigSystemPrompt("Be brief."), [first, second], clock=lambda: T0,
                            local_zone=ZoneInfo("Europe/Paris"), recall=[recall])
    prompt = run(builder.build("hello", 2))
    assert first.calls == [("hello", 2)] and second.calls == [("hello", 2)]
    assert recall.calls == [("hello", 2)]
    assert [m.content for m in prompt.context] == ["summary", "question 1", "answer 1"]
    assert [m.content for m in prompt.recalled] == ["retrieved"]
    assert prompt.system == "Be brief." and prompt.user_input == "hello"
    assert prompt.now_utc == T0
    assert prompt.now_local.utcoffset() == timedelta(hours=1)
    assert run(builder.build("hello", 2, at=T0 + timedelta(hours=1))).now_utc == T0 + timedelta(hours=1)
    bare = run(builder.build("hello", 2, with_context=False))
    assert bare.context == () and bare.recalled == ()


def test_builder_reports_a_failing_provider_as_context_error():
    builder = PromptBuilder(ConfigSystemPrompt(""), [BrokenProvider()], clock=lambda: T0)
    with pytest.raises(ContextError, match="BrokenProvider failed: disk gone"):
        run(builder.build("hi", 6))


def sample_prompt() -> Prompt:
    return Prompt(system="Answer in one sentence.", context=tuple(conversation(1)),
                  user_input="and tomorrow?", now_utc=T0,
                  now_local=T0.astimezone(ZoneInfo("Europe/Paris")),
                  recalled=(msg(ChatRole.SYSTEM, "From an earlier conversation: rain."),))


def test_chat_renderer_puts_what_changes_each_turn_last():
    request = OllamaChatRenderer().render(sample_prompt())
    roles = [m["role"] for m in request.messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert request.messages[0]["content"] == f"Answer in one sentence.\n\n{STAMP_RULE}"
    # Every user message carries the time it was said: the history's as the question's was.
    assert request.messages[1]["content"] == (
        "[Sunday 22 November 2026, 07:55 CET (06:55 UTC)] question 0")
    assert request.messages[2]["content"] == "answer 0"
    assert request.messages[-1]["content"] == (
        "From an earlier conversation: rain.\n\n"
        "[Sunday 22 November 2026, 07:55 CET (06:55 UTC)] and tomorrow?")


def test_transcript_renderer_ends_with_assistant():
    request = TranscriptRenderer().render(sample_prompt())
    assert request.prompt.splitlines() == [
        "User: [Sunday 22 November 2026, 07:55 CET (06:55 UTC)] question 0", "Assistant: answer 0",
        "User: From an earlier conversation: rain.", "",
        "[Sunday 22 November 2026, 07:55 CET (06:55 UTC)] and tomorrow?", "Assistant:"]
    assert request.system == f"Answer in one sentence.\n\n{STAMP_RULE}"
    no_context = Prompt(system="", context=(), user_input="hi", now_utc=T0, now_local=T0)
    assert TranscriptRenderer().render(no_context).prompt == (
        "User: [Sunday 22 November 2026, 06:55 UTC] hi\nAssistant:")
