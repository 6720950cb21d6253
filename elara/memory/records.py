"""The memory records' shape in the store, defined in `elara.conversation.records` (re-exported),
and how a record names the turn it was derived from."""

from __future__ import annotations

from datetime import UTC

from elara.conversation.messages import ChatMessage
from elara.conversation.records import EMBEDDING, FACT, FACTS_HEADING, KIND, SUMMARY, kind_of, memory_record

#: The metadata key of an EMBEDDING record naming the turn it embeds (its `key_of`).
OF = "of"

__all__ = ["EMBEDDING", "FACT", "FACTS_HEADING", "KIND", "OF", "SUMMARY", "key_of", "kind_of",
           "memory_record"]


def key_of(message: ChatMessage) -> str:
    """The turn's key: its UTC timestamp to the millisecond (as stored) and its role."""
    utc = message.timestamp_utc.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z/{message.role.slug}"
