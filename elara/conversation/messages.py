"""The conversation's data types: who said what and when, and the prompt built from it."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime


class ChatRole(enum.Enum):
    """Who said a message."""

    USER = "User"
    ASSISTANT = "Assistant"
    SYSTEM = "System"

    @property
    def slug(self) -> str:
        """Lower-case name used in file names and Ollama's `role` field."""
        return self.value.lower()


@dataclass(frozen=True)
class ChatMessage:
    """One complete message of the conversation, with its UTC timestamp."""

    role: ChatRole
    content: str
    timestamp_utc: datetime
    metadata: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.timestamp_utc.tzinfo is None:
            raise ValueError("ChatMessage.timestamp_utc must be timezone-aware")
        if self.timestamp_utc.utcoffset():
            object.__setattr__(self, "timestamp_utc", self.timestamp_utc.astimezone(UTC))


@dataclass(frozen=True)
class Prompt:
    """Everything the model is told for one turn: instructions, the context that changes rarely (the
    summary, the recent turns), the user's words, the time, and what was recalled for them."""

    system: str
    context: tuple[ChatMessage, ...]
    user_input: str
    now_utc: datetime
    now_local: datetime
    #: older turns found for this question (retrieval): they change every turn, so they go last
    recalled: tuple[ChatMessage, ...] = ()


@dataclass(frozen=True)
class PromptReady:
    """The user finished speaking (or typing): this text is the user's turn."""

    text: str
    source: str = "text"
    #: the person went on with the question stored last (their reply was dropped): this text is
    #: the whole of it, and that record is marked superseded once this one is stored
    continues: bool = False
