"""Forgetting: conversation turns older than a cutoff go, and with them every record derived from
them. `apply_retention` is `Context.RetentionDays` (facts and other System records stay: facts are
durable until the user asks to forget them); `elara history purge` uses the same `forget_before`
and also deletes the other records older than its cutoff.

What "derived" means:

- **Embeddings** go with the turn they embed (their `of` key), whatever their own age: a turn
  embedded in a backfill today is 40 days old although its vector record is new. One that names
  no turn goes by its own age.
- **Summaries** go unless `keep_summaries`: each summary folds in the one before it, so the text
  of a deleted turn lives on in every later summary. Once a pass deletes turns (or finds a summary
  that ends before the cutoff), every summary goes; the memory worker summarizes what remains.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from elara.conversation.context import TURN_ROLES
from elara.conversation.store import ConversationStore, StoredMessage
from elara.memory.records import EMBEDDING, FACT, OF, SUMMARY, key_of, kind_of
from elara.memory.summaries import COVERS_UNTIL

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionReport:
    """What one pass deleted, and how many old facts it kept."""

    turns_deleted: int = 0
    summaries_deleted: int = 0
    embeddings_deleted: int = 0
    #: Facts older than the cutoff, seen and kept.
    kept_facts: int = 0
    #: Facts older than the cutoff, deleted (only `history purge` deletes facts).
    facts_deleted: int = 0
    #: Plain System messages and records of unknown kinds older than the cutoff (purge only).
    others_deleted: int = 0

    @property
    def deleted(self) -> int:
        """How many records were deleted in all."""
        return (self.turns_deleted + self.summaries_deleted + self.embeddings_deleted
                + self.facts_deleted + self.others_deleted)


def retention_cutoff(days: int, now: datetime) -> datetime:
    """now − days: turns before it are too old for `Context.RetentionDays`."""
    if days < 0:
        raise ValueError(f"retention days must not be negative, got {days}")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now - timedelta(days=days)


def apply_retention(store: ConversationStore, *, days: int | None, keep_summaries: bool,
                    now: datetime) -> RetentionReport:
    """Delete turns older than now − days and every record derived from them (summaries only
    when not keep_summaries); facts and other System records stay. days None: nothing (blocking)."""
    if days is None:
        return RetentionReport()
    cutoff = retention_cutoff(days, now)
    report = forget_before(store, cutoff, keep_summaries=keep_summaries)
    log.info("retention (%d days, before %s): deleted %d turns, %d summaries, %d embeddings; "
             "kept %d facts", days, cutoff.isoformat(timespec="seconds"), report.turns_deleted,
             report.summaries_deleted, report.embeddings_deleted, report.kept_facts)
    return report


def forget_before(store: ConversationStore, cutoff: datetime, *, keep_summaries: bool,
                  turns_only: bool = True) -> RetentionReport:
    """Delete the turns from before `cutoff` and every record derived from a deleted turn (see
    the module); turns_only False (`history purge`) also deletes every other record from before
    the cutoff, facts included. Blocking."""
    if cutoff.tzinfo is None:
        raise ValueError("the cutoff must be timezone-aware")
    turns = store.purge(cutoff, roles=TURN_ROLES)

    # One listing of what is left. An embedding is written after its turn, so a listing that
    # holds an embedding holds its turn too, unless the turn is gone.
    kept_turns: set[str] = set()
    embeddings: list[StoredMessage] = []
    summaries: list[StoredMessage] = []
    facts: list[StoredMessage] = []
    others: list[StoredMessage] = []
    for stored in store.iter_messages():
        message = stored.message
        if message.role in TURN_ROLES:
            kept_turns.add(key_of(message))
            continue
        kind = kind_of(message)
        if kind == EMBEDDING:
            embeddings.append(stored)
        elif kind == SUMMARY:
            summaries.append(stored)
        elif message.timestamp_utc >= cutoff:
            continue
        elif kind == FACT:
            facts.append(stored)
        else:
            others.append(stored)  # plain system messages, kinds this version does not know

    def older(stored: StoredMessage) -> bool:
        return stored.message.timestamp_utc < cutoff

    def embeds_a_deleted_turn(stored: StoredMessage) -> bool:
        of = stored.message.metadata.get(OF)
        return of not in kept_turns if of else older(stored)

    doomed_embeddings = [s for s in embeddings if embeds_a_deleted_turn(s) or (not turns_only and older(s))]
    if not keep_summaries and (turns or any(_ends_before(s, cutoff) for s in summaries)):
        doomed_summaries = summaries
    else:
        doomed_summaries = [s for s in summaries if not turns_only and older(s)]
    return RetentionReport(
        turns_deleted=turns,
        summaries_deleted=_delete(store, doomed_summaries),
        embeddings_deleted=_delete(store, doomed_embeddings),
        kept_facts=len(facts) if turns_only else 0,
        facts_deleted=0 if turns_only else _delete(store, facts),
        others_deleted=0 if turns_only else _delete(store, others),
    )


def _ends_before(stored: StoredMessage, cutoff: datetime) -> bool:
    """Whether the summary covers only turns from before the cutoff (by its own age when its
    metadata is broken)."""
    try:
        covers_until = datetime.fromisoformat(stored.message.metadata[COVERS_UNTIL])
        if covers_until.tzinfo is None:
            raise ValueError("covers_until has no UTC offset")
    except (KeyError, ValueError):
        return stored.message.timestamp_utc < cutoff
    return covers_until < cutoff


def _delete(store: ConversationStore, records: list[StoredMessage]) -> int:
    return store.delete(s.path for s in records) if records else 0
