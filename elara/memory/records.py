"""The memory records' shape in the store, defined in `elara.conversation.records` (re-exported)."""

from __future__ import annotations

from elara.conversation.records import EMBEDDING, FACT, FACTS_HEADING, KIND, SUMMARY, kind_of, memory_record

__all__ = ["EMBEDDING", "FACT", "FACTS_HEADING", "KIND", "SUMMARY", "kind_of", "memory_record"]
