"""The on-disk format, checked with independent code written from the format description alone."""

from __future__ import annotations

import json
import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path

from elara.conversation.messages import ChatMessage, ChatRole
from elara.conversation.store import ConversationStore
from tests.spec_reader import independent_open, independent_seal

PASSPHRASE = "interop passphrase ✓"
NAME = re.compile(r"^\d{8}T\d{9}Z_\d{4,}_(user|assistant|system)\.json$")


# -- tests ---------------------------------------------------------------------


def test_store_files_decrypt_with_independent_code(tmp_path: Path):
    root = tmp_path / "Conversation"
    store = ConversationStore(root, PASSPHRASE)
    at = datetime(2026, 11, 22, 6, 55, 11, 123456, tzinfo=UTC)
    store.append(ChatMessage(ChatRole.USER, "What's the weather like tomorrow?", at, {"source": "voice", "lang": "en"}))
    store.append(ChatMessage(ChatRole.ASSISTANT, "Sonnig, 20 °C.", at))

    names = sorted(os.listdir(root))
    assert names == ["20261122T065511123Z_0001_user.json", "20261122T065511123Z_0002_assistant.json"]
    plaintexts = [independent_open(PASSPHRASE, (root / n).read_bytes()) for n in names]
    assert plaintexts[0] == (
        b'{"role":"User","content":"What\'s the weather like tomorrow?",'
        b'"timestampUtc":"2026-11-22T06:55:11.123Z","metadata":{"source":"voice","lang":"en"}}'
    )
    assert plaintexts[1] == (
        '{"role":"Assistant","content":"Sonnig, 20 °C.","timestampUtc":"2026-11-22T06:55:11.123Z","metadata":{}}'
    ).encode()
    for name in names:
        envelope = json.loads((root / name).read_bytes())
        assert set(envelope) == {"alg", "iv", "ciphertext", "tag"}
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o600


def test_hand_written_files_are_read_in_name_order(tmp_path: Path):
    root = tmp_path / "Conversation"
    root.mkdir(mode=0o700)
    written = [
        ("20251230T235959000Z_0007_system.json", {"role": "System", "content": "boot", "timestampUtc": "2025-12-30T23:59:59Z"}),
        ("20251231T000000500Z_0008_user.json", {"role": "User", "content": "héllo", "timestampUtc": "2025-12-31T00:00:00.5000000+00:00", "metadata": None}),
        ("20251231T000001123Z_0009_assistant.json", {"role": "Assistant", "content": "hi", "timestampUtc": "2025-12-31T00:00:01.1234567Z", "metadata": {"model": "llama3.2:3b"}}),
    ]
    for name, body in reversed(written):  # creation order must not matter, only names
        (root / name).write_bytes(independent_seal(PASSPHRASE, json.dumps(body).encode("utf-8")))

    store = ConversationStore(root, PASSPHRASE)
    tail = store.read_tail(6)
    assert [(m.role, m.content) for m in tail] == [
        (ChatRole.SYSTEM, "boot"),
        (ChatRole.USER, "héllo"),
        (ChatRole.ASSISTANT, "hi"),
    ]
    assert [m.timestamp_utc for m in tail] == [
        datetime(2025, 12, 30, 23, 59, 59, tzinfo=UTC),
        datetime(2025, 12, 31, 0, 0, 0, 500000, tzinfo=UTC),
        datetime(2025, 12, 31, 0, 0, 1, 123456, tzinfo=UTC),
    ]
    assert tail[1].metadata == {} and tail[2].metadata == {"model": "llama3.2:3b"}

    # The store continues after the hand-written history, even with an older clock.
    path = store.append(ChatMessage(ChatRole.USER, "again", datetime(2020, 1, 1, tzinfo=UTC)))
    assert path.name == "20251231T000001123Z_0010_user.json"
    assert NAME.match(path.name)
    body = json.loads(independent_open(PASSPHRASE, path.read_bytes()))
    assert body == {"role": "User", "content": "again", "timestampUtc": "2020-01-01T00:00:00.000Z", "metadata": {}}
