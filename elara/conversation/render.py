"""Renderers turn a provider-neutral Prompt into the request shape one Ollama endpoint takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any, Protocol

from elara.conversation.messages import ChatMessage, ChatRole, Prompt


@dataclass(frozen=True)
class ChatRequest:
    """A request for Ollama's /api/chat: role/content messages, the user's turn last (then any
    tool calls and results of this turn), and the tools the model may call (function shapes)."""

    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class GenerateRequest:
    """A request for Ollama's /api/generate: one transcript prompt and a system text."""

    prompt: str
    system: str


class PromptRenderer(Protocol):
    """Turns a Prompt into a request for one endpoint."""

    def render(self, prompt: Prompt) -> ChatRequest | GenerateRequest:
        """Render the prompt."""


#: Part of the system text: how to read the time each of the user's messages starts with.
STAMP_RULE = ("Each message from the user begins with the date and time it was said, in square "
              "brackets; the last one is the current date and time.")


def stamp(when_utc: datetime, zone: tzinfo | None) -> str:
    """When a message was said, to the minute, in the local zone (and UTC where they differ):
    "[Sunday 22 November 2026, 07:55 CET (06:55 UTC)]"."""
    local = when_utc.astimezone(zone)
    name = local.tzname() or local.strftime("%z")
    text = f"{local:%A %-d %B %Y, %H:%M} {name}"
    if local.utcoffset():
        text += f" ({when_utc.astimezone(UTC):%H:%M} UTC)"
    return f"[{text}]"


def system_text(prompt: Prompt) -> str:
    """The system prompt followed by the rule of the stamps: the same every turn."""
    parts = [prompt.system.strip(), STAMP_RULE]
    return "\n\n".join(p for p in parts if p)


def said(message: ChatMessage, zone: tzinfo | None) -> str:
    """A message as the model reads it: the user's words behind their stamp, the rest as they are."""
    if message.role is ChatRole.USER:
        return f"{stamp(message.timestamp_utc, zone)} {message.content}"
    return message.content


def question(prompt: Prompt) -> str:
    """The user's message of this turn: what was recalled for it, then the stamped words."""
    zone = prompt.now_local.tzinfo
    now = f"{stamp(prompt.now_utc, zone)} {prompt.user_input}".rstrip()
    return "\n\n".join([*(m.content for m in prompt.recalled), now])


class OllamaChatRenderer:
    """Structured messages, laid out so each turn's request starts with the last one's: system
    first, then the context turns with their roles, the user's stamped question last."""

    def render(self, prompt: Prompt) -> ChatRequest:
        """Render the prompt as chat messages."""
        zone = prompt.now_local.tzinfo
        messages: list[Mapping[str, Any]] = [{"role": "system", "content": system_text(prompt)}]
        messages.extend({"role": m.role.slug, "content": said(m, zone)} for m in prompt.context)
        messages.append({"role": "user", "content": question(prompt)})
        return ChatRequest(messages=tuple(messages))


class TranscriptRenderer:
    """A plain transcript for /api/generate: `User:`/`Assistant:` lines ending in `Assistant:`,
    each turn's transcript starting with the last one's."""

    def render(self, prompt: Prompt) -> GenerateRequest:
        """Render the prompt as one transcript string."""
        zone = prompt.now_local.tzinfo
        lines = [f"{m.role.value}: {said(m, zone)}" for m in prompt.context]
        lines.append(f"{ChatRole.USER.value}: {question(prompt)}")
        lines.append(f"{ChatRole.ASSISTANT.value}:")
        return GenerateRequest(prompt="\n".join(lines), system=system_text(prompt))


def plain_messages(messages: tuple[Mapping[str, Any], ...]) -> list[dict[str, str]]:
    """A chat request's messages for a model that cannot call tools: a turn's tool calls and their
    results as plain words, every message only a role and its text."""
    plain = []
    for message in messages:
        content = str(message.get("content") or "")
        if message["role"] == "tool":
            plain.append({"role": "user",
                          "content": f"(The tool {message.get('tool_name', '')} answered: {content})"})
            continue
        calls = [c["function"]["name"] for c in message.get("tool_calls") or ()]
        if calls:
            content = f"{content} (I called {', '.join(calls)}.)".strip()
        plain.append({"role": str(message["role"]), "content": content})
    return plain
