"""The memory records' shape in the store: System-role messages with a `kind` in their metadata.

It lives with the conversation, below memory: the store's readers (context telemetry) tell memory
records apart without importing the memory package, and memory builds on this shape.
"""

from __future__ import annotations

from datetime import datetime

from elara.conversation.messages import ChatMessage, ChatRole

KIND = "kind"
SUMMARY = "summary"
FACT = "fact"
EMBEDDING = "embedding"
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
#: a user record's metadata key, "true" when the person went on with the question and a later
#: record holds the whole of it: kept on disk, left out of context and memory
SUPERSEDED = "superseded"

#: The line the system prompt puts before the remembered facts (memory writes it, telemetry finds it).
FACTS_HEADING = "What you know about the user:"


def memory_record(kind: str, content: str, timestamp: datetime, **metadata: str) -> ChatMessage:
    """A System-role message of this kind; metadata values must be strings."""
    return ChatMessage(ChatRole.SYSTEM, content, timestamp, {KIND: kind, **metadata})


def parse_time(value: str | None) -> datetime | None:
    """A record's ISO 8601 metadata time; None when missing, malformed or without a UTC offset."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def kind_of(message: ChatMessage) -> str | None:
    """The record's kind, or None for a conversation turn or a plain system message."""
    if message.role is not ChatRole.SYSTEM:
        return None
    return message.metadata.get(KIND)


def superseded(message: ChatMessage) -> bool:
    """Is this a question the person went on with, stored again whole in a later record?"""
    return message.metadata.get(SUPERSEDED) == "true"
