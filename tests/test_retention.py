"""Retention on a real store: old turns, summaries (per the flag) and embeddings go; facts stay."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from elara.memory.records import EMBEDDING, FACT, SUMMARY, kind_of, memory_record
from elara.memory.retention import RetentionReport, apply_retention
from elara.memory.summaries import SummaryBook

PASSPHRASE = "retention test passphrase"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
OLD = NOW - timedelta(days=40)
RECENT = NOW - timedelta(days=10)


def history(root: Path) -> ConversationStore:
    """A store with the same records 40 days and 10 days ago, written in time order (the file
    name follows the message's timestamp)."""
    store = ConversationStore(root, PASSPHRASE)
    for label, at in (("old", OLD), ("recent", RECENT)):
        store.append(ChatMessage(ChatRole.USER, f"{label} question", at))
        store.append(ChatMessage(ChatRole.ASSISTANT, f"{label} answer", at + timedelta(seconds=5)))
        store.append(memory_record(SUMMARY, f"{label} summary", at + timedelta(seconds=6),
                                   covers_until="2026-01-01T00:00:00.000Z", turns="2", model="m"))
        store.append(memory_record(EMBEDDING, f"{label} vector", at + timedelta(seconds=7)))
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


def test_old_summaries_go_when_not_kept(tmp_path: Path):
    store = history(tmp_path / "c")
    report = apply_retention(store, days=30, keep_summaries=False, now=NOW)
    assert report == RetentionReport(2, 1, 1, 1)
    kinds = {(s.message.content, kind_of(s.message)) for s in store.iter_messages((ChatRole.SYSTEM,))}
    assert ("old summary", SUMMARY) not in kinds
    assert ("recent summary", SUMMARY) in kinds and ("old fact", FACT) in kinds
    # A book opened afterwards finds the newest surviving summary.
    assert SummaryBook(store).load().text == "recent summary"


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
