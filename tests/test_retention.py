"""Retention and purge on a real store: old turns go, and with them their embeddings (by the turn
they embed) and summaries (per the flag); facts stay under retention, go under purge."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.memory.records import EMBEDDING, FACT, SUMMARY, key_of, kind_of, memory_record
from elara.memory.retention import RetentionReport, apply_retention, forget_before
from elara.memory.summaries import SummaryBook, iso_millis

PASSPHRASE = "retention test passphrase"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(days=40)
RECENT = NOW - timedelta(days=10)


def history(root: Path) -> ConversationStore:
    """A store with the same records 40 days and 10 days ago, written in time order (the file
    name follows the message's timestamp): each summary covers the turns before it, each
    embedding is of the question before it."""
    store = ConversationStore(root, PASSPHRASE)
    for label, at in (("old", OLD), ("recent", RECENT)):
        question = ChatMessage(ChatRole.USER, f"{label} question", at)
        answer = ChatMessage(ChatRole.ASSISTANT, f"{label} answer", at + timedelta(seconds=5))
        store.append(question)
        store.append(answer)
        store.append(memory_record(SUMMARY, f"{label} summary", at + timedelta(seconds=6),
                                   covers_until=iso_millis(answer.timestamp_utc), turns="2", model="m"))
        store.append(memory_record(EMBEDDING, f"{label} vector", at + timedelta(seconds=7),
                                   of=key_of(question)))
        store.append(memory_record(FACT, f"{label} fact", at + timedelta(seconds=8)))
        store.append(ChatMessage(ChatRole.SYSTEM, f"{label} plain system note",
                                 at + timedelta(seconds=9)))
        store.append(memory_record("future-kind", f"{label} unknown kind", at + timedelta(seconds=10)))
    return store


def contents(store: ConversationStore) -> list[str]:
    """Every stored message's text, oldest first."""
    return [s.message.content for s in store.iter_messages()]


def test_no_retention_keeps_everything(tmp_path: Path):
    store = history(tmp_path / "c")
    before = contents(store)
    assert apply_retention(store, days=None, keep_summaries=False, now=NOW) == RetentionReport(0, 0, 0, 0)
    assert contents(store) == before


def test_old_turns_and_embeddings_go_facts_and_summaries_stay(tmp_path: Path, caplog):
    store = history(tmp_path / "c")
    with caplog.at_level(logging.INFO, logger="elara.memory.retention"):
        report = apply_retention(store, days=30, keep_summaries=True, now=NOW)
    assert report == RetentionReport(turns_deleted=2, summaries_deleted=0, embeddings_deleted=1,
                                     kept_facts=1)
    assert contents(store) == [
        "old summary", "old fact", "old plain system note", "old unknown kind",
        "recent question", "recent answer", "recent summary", "recent vector", "recent fact",
        "recent plain system note", "recent unknown kind",
    ]
    [line] = [r for r in caplog.records if r.name == "elara.memory.retention"]
    assert line.levelno == logging.INFO
    assert line.getMessage() == ("retention (30 days, before 2026-01-30T12:00:00+00:00): deleted "
                                 "2 turns, 0 summaries, 1 embeddings; kept 1 facts")
    # Nothing of the conversation's words reaches INFO.
    assert "question" not in line.getMessage()


def test_summaries_go_with_the_turns_when_not_kept(tmp_path: Path):
    store = history(tmp_path / "c")
    report = apply_retention(store, days=30, keep_summaries=False, now=NOW)
    # Each summary folds in the one before it, so the recent summary holds the old turns too.
    assert report == RetentionReport(2, 2, 1, 1)
    kinds = {(s.message.content, kind_of(s.message)) for s in store.iter_messages((ChatRole.SYSTEM,))}
    assert not {kind for _, kind in kinds} & {SUMMARY}
    assert ("old fact", FACT) in kinds and ("recent vector", EMBEDDING) in kinds
    # A book opened afterwards starts again from the turns that are left.
    assert SummaryBook(store).load() is None


def test_a_summary_that_ends_before_the_cutoff_goes_even_when_its_turns_went_earlier(tmp_path: Path):
    store = history(tmp_path / "c")
    # Retention with the summaries kept, then switched to not keeping them: no turn is left to
    # delete, but the summaries still hold the deleted turns.
    assert apply_retention(store, days=30, keep_summaries=True, now=NOW).summaries_deleted == 0
    later = apply_retention(store, days=30, keep_summaries=False, now=NOW)
    assert later == RetentionReport(turns_deleted=0, summaries_deleted=2, kept_facts=1)


def test_embeddings_go_with_the_turn_they_embed_not_by_their_own_age(tmp_path: Path):
    store = history(tmp_path / "c")
    old_question = ChatMessage(ChatRole.USER, "old question", OLD)
    # Backfilled today: the records are new, the turns they embed are 40 days old.
    store.append(memory_record(EMBEDDING, "old vector, backfilled", NOW, of=key_of(old_question)))
    store.append(memory_record(EMBEDDING, "old answer vector, backfilled", NOW,
                               of=key_of(ChatMessage(ChatRole.ASSISTANT, "", OLD + timedelta(seconds=5)))))
    # Naming no turn, a vector goes by its own age.
    store.append(memory_record(EMBEDDING, "nameless recent vector", NOW))
    store.append(memory_record(EMBEDDING, "nameless old vector", OLD))
    report = apply_retention(store, days=30, keep_summaries=True, now=NOW)
    assert report.turns_deleted == 2 and report.embeddings_deleted == 4
    vectors = [s.message.content for s in store.iter_messages() if kind_of(s.message) == EMBEDDING]
    assert vectors == ["recent vector", "nameless recent vector"]


def test_purge_deletes_every_old_record_and_what_derives_from_deleted_turns(tmp_path: Path):
    store = history(tmp_path / "c")
    store.append(memory_record(EMBEDDING, "old vector, backfilled", NOW,
                               of=key_of(ChatMessage(ChatRole.USER, "old question", OLD))))
    report = forget_before(store, NOW - timedelta(days=30), keep_summaries=True, turns_only=False)
    assert report == RetentionReport(turns_deleted=2, summaries_deleted=1, embeddings_deleted=2,
                                     facts_deleted=1, others_deleted=2)
    assert report.deleted == 8
    # Summaries newer than the cutoff stay, as Context.RetentionKeepSummaries says.
    assert contents(store) == [
        "recent question", "recent answer", "recent summary", "recent vector", "recent fact",
        "recent plain system note", "recent unknown kind"]
    assert forget_before(store, NOW, keep_summaries=False, turns_only=False).deleted == 7
    assert contents(store) == []


def test_the_cutoff_must_be_aware(tmp_path: Path):
    store = history(tmp_path / "c")
    with pytest.raises(ValueError):
        forget_before(store, NOW.replace(tzinfo=None), keep_summaries=True)


def test_a_longer_window_deletes_nothing_and_a_second_pass_is_idempotent(tmp_path: Path):
    store = history(tmp_path / "c")
    assert apply_retention(store, days=60, keep_summaries=False, now=NOW) == RetentionReport(0, 0, 0, 0)
    first = apply_retention(store, days=5, keep_summaries=False, now=NOW)
    assert first == RetentionReport(turns_deleted=4, summaries_deleted=2, embeddings_deleted=2,
                                    kept_facts=2)
    assert apply_retention(store, days=5, keep_summaries=False, now=NOW) == RetentionReport(0, 0, 0, 2)
    assert contents(store) == ["old fact", "old plain system note", "old unknown kind",
                               "recent fact", "recent plain system note", "recent unknown kind"]
    # The files are gone from disk, not just from the index.
    reopened = ConversationStore(tmp_path / "c", PASSPHRASE)
    assert len(list(reopened.iter_messages())) == 6


def test_now_must_be_aware(tmp_path: Path):
    store = history(tmp_path / "c")
    with pytest.raises(ValueError):
        apply_retention(store, days=30, keep_summaries=True, now=NOW.replace(tzinfo=None))
