"""Renderers turn a provider-neutral Prompt into the request shape one Ollama endpoint takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from elara.conversation.messages import ChatRole, Prompt


@dataclass(frozen=True)
class ChatRequest:
    """A request for Ollama's /api/chat: role/content messages, the user's turn last."""

    messages: tuple[Mapping[str, str], ...]


@dataclass(frozen=True)
class GenerateRequest:
    """A request for Ollama's /api/generate: one transcript prompt and a system text."""

    prompt: str
    system: str


class PromptRenderer(Protocol):
    """Turns a Prompt into a request for one endpoint."""

    def render(self, prompt: Prompt) -> ChatRequest | GenerateRequest:
        """Render the prompt."""


def time_line(prompt: Prompt) -> str:
    """The sentence that tells the model the current date and time, local with its zone and UTC."""
    local = prompt.now_local
    zone = local.tzname() or local.strftime("%z")
    return (
        f"The current date and time is {local:%A %-d %B %Y, %H:%M} {zone}"
        f" ({prompt.now_utc:%Y-%m-%d %H:%M} UTC)."
    )


def system_text(prompt: Prompt) -> str:
    """The system prompt followed by the time line."""
    parts = [prompt.system.strip(), time_line(prompt)]
    return "\n\n".join(p for p in parts if p)


class OllamaChatRenderer:
    """Structured messages: system first, then the context turns with their roles, the user last."""

    def render(self, prompt: Prompt) -> ChatRequest:
        """Render the prompt as chat messages."""
        messages: list[Mapping[str, str]] = [{"role": "system", "content": system_text(prompt)}]
        messages.extend({"role": m.role.slug, "content": m.content} for m in prompt.context)
        messages.append({"role": "user", "content": prompt.user_input})
        return ChatRequest(messages=tuple(messages))


class TranscriptRenderer:
    """A plain transcript for /api/generate: `User:`/`Assistant:` lines ending in `Assistant:`."""

    def render(self, prompt: Prompt) -> GenerateRequest:
        """Render the prompt as one transcript string."""
        lines: list[str] = []
        if prompt.context:
            lines.append("Previous context:")
            lines.extend(f"{m.role.value}: {m.content}" for m in prompt.context)
            lines.append("")
        lines.append(f"{ChatRole.USER.value}: {prompt.user_input}")
        lines.append(f"{ChatRole.ASSISTANT.value}:")
        return GenerateRequest(prompt="\n".join(lines), system=system_text(prompt))
