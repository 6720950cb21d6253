"""Context providers, the prompt builder and both renderers: pure, tested with plain values."""

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from elara.conversation.context import (
    LastNContextProvider,
    TokenBudgetContextProvider,
    estimate_tokens,
    fit_to_budget,
)
from elara.conversation.messages import ChatMessage, ChatRole, Prompt
from elara.conversation.prompts import ConfigSystemPrompt, PromptBuilder
from elara.conversation.render import OllamaChatRenderer, TranscriptRenderer
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


def test_last_n_reads_n_per_call_and_leaves_out_the_current_turn(tmp_path):
    store = ConversationStore(tmp_path / "store", "test key")
    for m in conversation(4):
        store.append(m)
    store.append(msg(ChatRole.USER, "what now?", 10))  # stored before the prompt is built
    provider = LastNContextProvider(store)
    got = run(provider.get_context("what now?", 3))
    assert [m.content for m in got] == ["answer 2", "question 3", "answer 3"]
    assert [m.content for m in run(provider.get_context("what now?", 1))] == ["answer 3"]
    assert run(provider.get_context("what now?", 0)) == []
    # When the current turn was not stored (a failed write) nothing real is dropped.
    assert [m.content for m in run(provider.get_context("something else", 2))] == ["answer 3", "what now?"]


def test_budget_drops_oldest_whole_exchanges():
    history = conversation(5)
    cost = lambda text: 10  # noqa: E731 - every message costs 10 tokens
    assert fit_to_budget(history, None, cost) == history
    kept = fit_to_budget(history, 45, cost)
    assert [m.content for m in kept] == ["question 3", "answer 3", "question 4", "answer 4"]
    assert fit_to_budget(history, 5, cost) == []
    # An unanswered question is its own exchange; leading assistant/system text is one too.
    odd = [msg(ChatRole.SYSTEM, "summary"), msg(ChatRole.USER, "q1"), msg(ChatRole.USER, "q2"),
           msg(ChatRole.ASSISTANT, "a2")]
    assert [m.content for m in fit_to_budget(odd, 20, cost)] == ["q2", "a2"]
    assert [m.content for m in fit_to_budget(odd, 30, cost)] == ["q1", "q2", "a2"]


def test_budget_provider_wraps_another_and_estimates_four_chars_per_token():
    assert estimate_tokens("x" * 400) == 104
    long = [msg(ChatRole.USER, "x" * 400), msg(ChatRole.ASSISTANT, "y" * 400),
            msg(ChatRole.USER, "short"), msg(ChatRole.ASSISTANT, "reply")]
    provider = TokenBudgetContextProvider(ListProvider(long), max_tokens=100)
    assert [m.content for m in run(provider.get_context("now", 4))] == ["short", "reply"]


def test_builder_asks_every_provider_in_order_with_the_time():
    first, second = ListProvider([msg(ChatRole.SYSTEM, "retrieved")]), ListProvider(conversation(2))
    builder = PromptBuilder(ConfigSystemPrompt("Be brief."), [first, second], clock=lambda: T0,
                            local_zone=ZoneInfo("Europe/Paris"))
    prompt = run(builder.build("hello", 2))
    assert first.calls == [("hello", 2)] and second.calls == [("hello", 2)]
    assert [m.content for m in prompt.context] == ["retrieved", "question 1", "answer 1"]
    assert prompt.system == "Be brief." and prompt.user_input == "hello"
    assert prompt.now_utc == T0
    assert prompt.now_local.utcoffset() == timedelta(hours=1)
    bare = run(builder.build("hello", 2, with_context=False))
    assert bare.context == ()


def test_builder_reports_a_failing_provider_as_context_error():
    builder = PromptBuilder(ConfigSystemPrompt(""), [BrokenProvider()], clock=lambda: T0)
    with pytest.raises(ContextError, match="BrokenProvider failed: disk gone"):
        run(builder.build("hi", 6))


def sample_prompt() -> Prompt:
    return Prompt(system="Answer in one sentence.", context=tuple(conversation(1)),
                  user_input="and tomorrow?", now_utc=T0,
                  now_local=T0.astimezone(ZoneInfo("Europe/Paris")))


def test_chat_renderer_orders_system_context_user():
    request = OllamaChatRenderer().render(sample_prompt())
    roles = [m["role"] for m in request.messages]
    assert roles == ["system", "user", "assistant", "user"]
    system = request.messages[0]["content"]
    assert system.startswith("Answer in one sentence.")
    assert "Sunday 22 November 2026, 07:55 CET" in system
    assert "2026-11-22 06:55 UTC" in system
    assert request.messages[-1]["content"] == "and tomorrow?"


def test_transcript_renderer_ends_with_assistant():
    request = TranscriptRenderer().render(sample_prompt())
    assert request.prompt.splitlines() == [
        "Previous context:", "User: question 0", "Assistant: answer 0", "",
        "User: and tomorrow?", "Assistant:"]
    assert "07:55 CET" in request.system
    no_context = Prompt(system="", context=(), user_input="hi", now_utc=T0, now_local=T0)
    assert TranscriptRenderer().render(no_context).prompt == "User: hi\nAssistant:"
