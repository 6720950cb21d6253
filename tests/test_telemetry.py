"""Context-window telemetry: parts, totals, the one-line report and the warning."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from elara.conversation.context import estimate_tokens
from elara.conversation.messages import ChatMessage, ChatRole, Prompt
from elara.conversation.records import SUMMARY, memory_record
from elara.conversation.telemetry import (
    PARTS,
    WARNING_FRACTION,
    ContextUsage,
    check,
    measure,
    report,
    split_system,
)

AT = datetime(2026, 11, 22, 6, 55, tzinfo=UTC)
SYSTEM = "You are Elara.\nSpeak briefly.\n"
FACTS = "What you know about the user:\n- lives in Leeds\n- has a dog called Rex"


def prompt(system: str = SYSTEM + FACTS, user_input: str = "what about tomorrow") -> Prompt:
    """A prompt with one of every kind of context message."""
    context = (
        memory_record(SUMMARY, "They talked about the weather in Leeds.", AT),
        ChatMessage(ChatRole.SYSTEM, "From an earlier conversation (2026-11-20), the user said: rain?",
                    AT, {"kind": "retrieved"}),
        ChatMessage(ChatRole.USER, "what's the weather", AT),
        ChatMessage(ChatRole.ASSISTANT, "Sunny, 20 degrees.", AT),
    )
    return Prompt(system=system, context=context, user_input=user_input, now_utc=AT, now_local=AT)


def test_parts_are_split_and_add_up():
    usage = measure(prompt(), 1000, estimate=len)
    assert list(usage.parts) == list(PARTS)
    assert usage.parts == {
        "system": len(SYSTEM),
        "facts": len(FACTS),
        "summary": len("They talked about the weather in Leeds."),
        "retrieved": len("From an earlier conversation (2026-11-20), the user said: rain?"),
        "history": len("what's the weather") + len("Sunny, 20 degrees."),
        "user": len("what about tomorrow"),
    }
    assert usage.total == sum(usage.parts.values())
    assert usage.num_ctx == 1000 and usage.fraction == usage.total / 1000


def test_default_estimate_and_absent_parts_cost_nothing():
    bare = Prompt(system="Be brief.", context=(), user_input="hi", now_utc=AT, now_local=AT)
    usage = measure(bare, 4096)
    assert usage.parts == {"system": estimate_tokens("Be brief."), "facts": 0, "summary": 0,
                           "retrieved": 0, "history": 0, "user": estimate_tokens("hi")}
    assert usage.total == estimate_tokens("Be brief.") + estimate_tokens("hi")


def test_facts_heading_only_counts_at_the_start_of_a_line():
    assert split_system(SYSTEM + FACTS) == (SYSTEM, FACTS)
    inline = "Say 'What you know about the user:' never."
    assert split_system(inline) == (inline, "")
    assert split_system(FACTS) == ("", FACTS)
    assert measure(prompt(system=FACTS), 100, estimate=len).parts["system"] == 0


def test_report_is_one_line():
    usage = ContextUsage(parts={"system": 210, "facts": 40, "summary": 0, "retrieved": 0,
                                "history": 350, "user": 12}, total=612, num_ctx=4096,
                         fraction=612 / 4096)
    assert report(usage) == ("system 210, facts 40, summary 0, retrieved 0, history 350, "
                             "user 12 = 612 of 4096 tokens (15 %)")


def test_no_warning_up_to_the_threshold(caplog):
    usage = measure(prompt(), 10_000, estimate=len)
    assert usage.fraction <= WARNING_FRACTION
    log = logging.getLogger("elara.test.telemetry")
    with caplog.at_level(logging.DEBUG, logger="elara.test.telemetry"):
        assert check(usage, log) is False
    [record] = caplog.records
    assert record.levelno == logging.DEBUG and report(usage) in record.getMessage()


@pytest.mark.parametrize("num_ctx, consequence", [(300, "little room left"),
                                                  (200, "cut the start of the prompt")])
def test_warning_above_eighty_percent_names_the_biggest_part_and_the_fix(caplog, num_ctx, consequence):
    usage = measure(prompt(), num_ctx, estimate=len)  # 256 characters in all
    assert usage.fraction > WARNING_FRACTION
    log = logging.getLogger("elara.test.telemetry")
    with caplog.at_level(logging.DEBUG, logger="elara.test.telemetry"):
        assert check(usage, log) is True
    [record] = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert usage.biggest == "facts"  # 69 of the 256
    assert "biggest part is facts (69 tokens)" in message
    assert "LanguageModel.Options.num_ctx" in message
    assert "Context.MaxHistoryTokens" in message and "Context.LastN" in message
    assert "Memory.MaxFacts" in message
    assert consequence in message


def test_num_ctx_must_be_positive():
    with pytest.raises(ValueError):
        measure(prompt(), 0)
