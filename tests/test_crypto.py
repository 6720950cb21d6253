"""The AES-256-GCM envelope: key derivation, round trip, and the two kinds of failure kept apart."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from elara.conversation.crypto import (
    DEFAULT_PASSPHRASE,
    derive_key,
    open_envelope,
    parse_envelope,
    seal,
)
from elara.errors import AuthenticationError, MalformedEnvelopeError, StoreError

KEY = derive_key("correct horse battery staple")


def test_key_is_sha256_of_utf8_passphrase():
    assert derive_key("pässwörd") == hashlib.sha256("pässwörd".encode()).digest()
    assert len(derive_key(DEFAULT_PASSPHRASE)) == 32
    assert DEFAULT_PASSPHRASE == "replace-me-before-deployment"


@pytest.mark.parametrize("plaintext", [b"", b"hello", "ünïcode ✓".encode(), bytes(range(256)) * 64])
def test_round_trip(plaintext):
    assert open_envelope(KEY, seal(KEY, plaintext)) == plaintext


def test_envelope_shape():
    envelope = json.loads(seal(KEY, b"hello"))
    assert set(envelope) == {"alg", "iv", "ciphertext", "tag"}
    assert envelope["alg"] == "AES-256-GCM"
    assert len(base64.b64decode(envelope["iv"], validate=True)) == 12
    assert len(base64.b64decode(envelope["tag"], validate=True)) == 16
    assert len(base64.b64decode(envelope["ciphertext"], validate=True)) == 5
    assert envelope["tag"].endswith("==")  # standard base64 keeps its padding


def test_every_seal_uses_a_fresh_nonce():
    first, second = (json.loads(seal(KEY, b"same")) for _ in range(2))
    assert first["iv"] != second["iv"]
    assert first["ciphertext"] != second["ciphertext"]


def test_wrong_key_is_an_authentication_failure():
    with pytest.raises(AuthenticationError):
        open_envelope(derive_key("other"), seal(KEY, b"secret"))


@pytest.mark.parametrize("field", ["ciphertext", "tag", "iv"])
def test_tampering_is_an_authentication_failure(field):
    envelope = json.loads(seal(KEY, b"secret message"))
    raw = bytearray(base64.b64decode(envelope[field]))
    raw[0] ^= 0x01
    envelope[field] = base64.b64encode(bytes(raw)).decode()
    with pytest.raises(AuthenticationError):
        open_envelope(KEY, json.dumps(envelope).encode())


def _envelope(**changes) -> bytes:
    envelope = json.loads(seal(KEY, b"x"))
    envelope.update(changes)
    return json.dumps({k: v for k, v in envelope.items() if v is not None}).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00garbage",
        b"[1, 2, 3]",
        b'{"role": "User", "content": "plain"}',
        _envelope(alg="AES-128-CBC"),
        _envelope(iv=None),
        _envelope(tag=123),
        _envelope(ciphertext="***not base64***"),
        _envelope(iv=base64.b64encode(b"short").decode()),
        _envelope(tag=base64.b64encode(b"\x00" * 12).decode()),
    ],
    ids=["empty", "not-json", "binary", "a-list", "plaintext", "other-alg", "no-iv", "tag-not-text",
         "ciphertext-not-base64", "short-iv", "short-tag"],  # the sealed ones differ every run
)
def test_malformed_is_not_an_authentication_failure(data):
    with pytest.raises(MalformedEnvelopeError):
        parse_envelope(data)
    with pytest.raises(MalformedEnvelopeError):
        open_envelope(KEY, data)


def test_errors_are_store_errors_and_distinct():
    assert issubclass(MalformedEnvelopeError, StoreError)
    assert issubclass(AuthenticationError, StoreError)
    assert not issubclass(MalformedEnvelopeError, AuthenticationError)
    assert not issubclass(AuthenticationError, MalformedEnvelopeError)
