"""Retention: forget conversation turns (and the memory derived from them) older than
`Context.RetentionDays`. Facts stay: they are durable until the user asks to forget them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from elara.conversation.context import TURN_ROLES
from elara.conversation.messages import ChatRole
from elara.conversation.store import ConversationStore
from elara.memory.records import EMBEDDING, FACT, SUMMARY, kind_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionReport:
    """What one retention pass deleted, and how many old facts it kept."""

    turns_deleted: int = 0
    summaries_deleted: int = 0
    embeddings_deleted: int = 0
    #: Facts older than the cutoff, seen and kept.
    kept_facts: int = 0


def apply_retention(store: ConversationStore, *, days: int | None, keep_summaries: bool,
                    now: datetime) -> RetentionReport:
    """Delete turns older than now − days, with the summaries (unless kept) and embeddings of
    that age; facts and other System records stay. days None: nothing (blocking)."""
    if days is None:
        return RetentionReport()
    if days < 0:
        raise ValueError(f"retention days must not be negative, got {days}")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    cutoff = now - timedelta(days=days)
    turns = store.purge(cutoff, roles=TURN_ROLES)

    summaries: list[Path] = []
    embeddings: list[Path] = []
    facts = 0
    for stored in store.iter_messages((ChatRole.SYSTEM,)):
        if stored.message.timestamp_utc >= cutoff:
            continue
        kind = kind_of(stored.message)
        if kind == SUMMARY and not keep_summaries:
            summaries.append(stored.path)
        elif kind == EMBEDDING:
            # Embeddings index turns of their own age, which this pass forgets.
            embeddings.append(stored.path)
        elif kind == FACT:
            facts += 1
        # Anything else (kept summaries, plain system messages, kinds this version does not know) stays.

    report = RetentionReport(
        turns_deleted=turns,
        summaries_deleted=store.delete(summaries) if summaries else 0,
        embeddings_deleted=store.delete(embeddings) if embeddings else 0,
        kept_facts=facts,
    )
    log.info("retention (%d days, before %s): deleted %d turns, %d summaries, %d embeddings; "
             "kept %d facts", days, cutoff.isoformat(timespec="seconds"), report.turns_deleted,
             report.summaries_deleted, report.embeddings_deleted, report.kept_facts)
    return report
