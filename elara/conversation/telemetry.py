"""Context-window telemetry: how much of the model's context window each part of a prompt takes.

Pure, apart from check() writing one log line. Ollama silently drops the start of a prompt that
doesn't fit `num_ctx`, so a prompt near the limit is worth a warning before answers get worse.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from elara.conversation.context import estimate_tokens
from elara.conversation.messages import ChatRole, Prompt
from elara.conversation.records import FACTS_HEADING, KIND, SUMMARY

#: The parts of a prompt, in the order they are reported.
PARTS = ("system", "facts", "summary", "retrieved", "history", "user")
#: Above this fraction of num_ctx, check() warns.
WARNING_FRACTION = 0.8
_FACTS_LINE = re.compile(rf"^{re.escape(FACTS_HEADING)}", re.MULTILINE)

#: For the warning: besides num_ctx and the history budget, what shrinks each part.
_PART_FIXES = {
    "system": "shorten LanguageModel.SystemPrompt",
    "facts": "lower Memory.MaxFacts",
    "summary": "lower Memory.SummaryThreshold",
    "retrieved": "lower Memory.RetrievalTopK",
    "history": "lower Context.MaxHistoryTokens / Context.LastN",
    "user": "ask shorter questions",
}


@dataclass(frozen=True)
class ContextUsage:
    """Estimated tokens per prompt part, their total, and the share of the context window used."""

    parts: dict[str, int]
    total: int
    num_ctx: int
    fraction: float  # total / num_ctx; above 1 Ollama cuts the prompt

    @property
    def biggest(self) -> str:
        """The name of the part with the most tokens (the first in PARTS on a tie)."""
        return max(PARTS, key=lambda name: self.parts.get(name, 0))


def split_system(system: str) -> tuple[str, str]:
    """The system text before the facts heading line, and the facts from that line on."""
    match = _FACTS_LINE.search(system)
    if match is None:
        return system, ""
    return system[:match.start()], system[match.start():]


def measure(prompt: Prompt, num_ctx: int,
            estimate: Callable[[str], int] = estimate_tokens) -> ContextUsage:
    """How many tokens each part of `prompt` takes, against a context window of num_ctx."""
    if num_ctx <= 0:
        raise ValueError(f"num_ctx must be positive, got {num_ctx}")

    def cost(text: str) -> int:
        # An absent part costs nothing, not the per-message framing the estimate adds.
        return estimate(text) if text.strip() else 0

    parts = dict.fromkeys(PARTS, 0)
    system, facts = split_system(prompt.system)
    parts["system"] = cost(system)
    parts["facts"] = cost(facts)
    for message in prompt.context:
        if message.role is ChatRole.SYSTEM:
            part = "summary" if message.metadata.get(KIND) == SUMMARY else "retrieved"
        else:
            part = "history"
        parts[part] += cost(message.content)
    for message in prompt.recalled:
        parts["retrieved"] += cost(message.content)
    parts["user"] = cost(prompt.user_input)
    total = sum(parts.values())
    return ContextUsage(parts=parts, total=total, num_ctx=num_ctx, fraction=total / num_ctx)


def report(usage: ContextUsage) -> str:
    """One line: "system 210, facts 40, … = 612 of 4096 tokens (15 %)"."""
    parts = ", ".join(f"{name} {usage.parts.get(name, 0)}" for name in PARTS)
    return (f"{parts} = {usage.total} of {usage.num_ctx} tokens "
            f"({round(usage.fraction * 100)} %)")


def check(usage: ContextUsage, logger: logging.Logger) -> bool:
    """Log the usage: a WARNING naming the biggest part and the fix above WARNING_FRACTION,
    else DEBUG; returns whether it warned."""
    if usage.fraction <= WARNING_FRACTION:
        logger.debug("context window: %s", report(usage))
        return False
    biggest = usage.biggest
    consequence = ("Ollama will cut the start of the prompt" if usage.fraction > 1
                   else "the reply has little room left")
    logger.warning(
        "the prompt fills %d %% of the model's context window (%s); %s. The biggest part is %s "
        "(%d tokens): raise LanguageModel.Options.num_ctx, lower Context.MaxHistoryTokens / "
        "Context.LastN%s", round(usage.fraction * 100), report(usage), consequence, biggest,
        usage.parts.get(biggest, 0),
        "" if biggest == "history" else f", or {_PART_FIXES[biggest]}")
    return True
