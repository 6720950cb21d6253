"""The prompt's layout keeps its start from turn to turn: a simulated 40-turn conversation with
summaries, facts that change and retrieval on, rendered for both endpoints. Pure."""

import asyncio
from datetime import UTC, datetime, timedelta
from os.path import commonprefix

from elara.conversation.context import LastNContextProvider, estimate_tokens
from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.prompts import PromptBuilder
from elara.conversation.render import OllamaChatRenderer, TranscriptRenderer

T0 = datetime(2026, 11, 22, 6, 55, tzinfo=UTC)
TURNS = 40
SUMMARY_AT = {14, 29}
FACT_AT = {22}


class Tail:
    """The store's tail, in memory."""

    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []

    def read_tail(self, n, roles=None):
        kept = [m for m in self.messages if roles is None or m.role in roles]
        return kept[-n:] if n > 0 else []


class Facts:
    """The system prompt with a facts block that changes when a fact is learned."""

    def __init__(self) -> None:
        self.facts = ["The user's name is Sam."]

    async def get_system_prompt(self) -> str:
        return "You are Elara.\n\nWhat you know about the user:\n" + "\n".join(self.facts)


class Summary:
    def __init__(self) -> None:
        self.text: str | None = None

    async def get_context(self, current_prompt, n):
        if self.text is None:
            return []
        return [ChatMessage(ChatRole.SYSTEM, self.text, T0, {"kind": "summary"})]


class Retrieved:
    async def get_context(self, current_prompt, n):
        if "boiler" not in current_prompt:
            return []
        return [ChatMessage(ChatRole.SYSTEM, "From an earlier conversation, the user said: the "
                            "boiler is in the loft.", T0, {"kind": "retrieved"})]


def conversation():
    """Each turn's chat request and transcript, and whether the summary or facts changed."""
    tail, facts, summary = Tail(), Facts(), Summary()
    clock = [T0]
    builder = PromptBuilder(facts, [LastNContextProvider(tail, 1500, pinned=[summary])],
                            clock=lambda: clock[0], recall=[Retrieved()])
    turns = []
    for i in range(TURNS):
        clock[0] = T0 + timedelta(seconds=37 * i)
        if i in SUMMARY_AT:
            summary.text = f"Summary of the conversation so far: {i} turns about the house."
        if i in FACT_AT:
            facts.facts.append("The user has a cat.")
        question = f"question {i} about the {'boiler' if i % 7 == 3 else 'garden'}?"
        tail.messages.append(ChatMessage(ChatRole.USER, question, clock[0]))
        prompt = asyncio.run(builder.build(question, 6, at=clock[0]))
        reply = f"Answer {i}: " + "the garden needs water. " * (1 + i % 3)
        tail.messages.append(ChatMessage(ChatRole.ASSISTANT, reply, clock[0] + timedelta(seconds=5)))
        turns.append((OllamaChatRenderer().render(prompt), TranscriptRenderer().render(prompt),
                      i in SUMMARY_AT or i in FACT_AT))
    return turns


def history(request):
    """The turns between the system text (and summary) and the question."""
    return [m for m in request.messages[1:-1] if m["role"] != "system"]


def appended(before, now) -> bool:
    """The history only grew: its first turn is the same as last time."""
    return not history(before) or (history(now) and history(now)[0] == history(before)[0])


def test_each_chat_request_starts_with_the_last_one_but_at_summaries_facts_and_blocks():
    turns = conversation()
    blocks = 0
    for i in range(2, TURNS):
        (before, _, _), (now, _, changed) = turns[i - 1], turns[i]
        if changed:
            continue
        if not appended(before, now):
            blocks += 1
            continue
        shared = next((k for k, (a, b) in enumerate(zip(before.messages, now.messages)) if a != b),
                      len(before.messages))
        last = len(before.messages) - 1
        if shared < len(before.messages):
            # What was recalled for the last question is not in the history: only the last
            # message may differ, and its stamped words stay.
            assert shared == last and before.messages[last]["content"].endswith(
                now.messages[last]["content"]), f"turn {i}"
    # LastN 6: the history grows to six messages, then two exchanges go at once.
    assert 10 <= blocks <= 14


def test_what_is_read_anew_is_the_new_turn_and_at_most_forty_tokens_more():
    turns = conversation()
    for i in range(2, TURNS):
        (chat_before, before, _), (chat_now, now, changed) = turns[i - 1], turns[i]
        if changed or not appended(chat_before, chat_now):
            continue
        text_before, text_now = before.system + before.prompt, now.system + now.prompt
        anew = text_now[len(commonprefix([text_before, text_now])):]
        # The new turn: the last reply and the new question (with what was recalled for it).
        new = text_now[len(text_before.removesuffix("Assistant:")):]
        assert estimate_tokens(anew) <= estimate_tokens(new) + 40, f"turn {i}"


def test_the_history_never_holds_more_than_last_n_turns_or_the_budget():
    for request, _, _ in conversation():
        assert len(history(request)) <= 6
        assert sum(estimate_tokens(m["content"]) for m in request.messages[1:-1]) <= 1500
