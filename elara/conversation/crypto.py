"""The AES-256-GCM envelope every stored message is sealed in; the key is SHA-256 of a passphrase."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# EnvelopeError is re-exported for the store, which catches both kinds at once.
from elara.errors import AuthenticationError, MalformedEnvelopeError
from elara.errors import EnvelopeError as EnvelopeError

DEFAULT_PASSPHRASE = "replace-me-before-deployment"
ALGORITHM = "AES-256-GCM"
NONCE_BYTES = 12
TAG_BYTES = 16


def derive_key(passphrase: str) -> bytes:
    """The 32-byte AES key for a passphrase: SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(passphrase.encode("utf-8")).digest()


def seal(key: bytes, plaintext: bytes) -> bytes:
    """Encrypt plaintext under key with a fresh random nonce; returns the envelope as JSON bytes."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, plaintext, None)
    # cryptography appends the tag to the ciphertext; the envelope keeps them apart.
    envelope = {
        "alg": ALGORITHM,
        "iv": _b64(nonce),
        "ciphertext": _b64(sealed[:-TAG_BYTES]),
        "tag": _b64(sealed[-TAG_BYTES:]),
    }
    return json.dumps(envelope, separators=(",", ":")).encode("ascii")


def parse_envelope(data: bytes) -> tuple[bytes, bytes, bytes]:
    """Check that data is a well-formed envelope; returns (nonce, ciphertext, tag) or raises MalformedEnvelopeError."""
    try:
        envelope = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedEnvelopeError(f"not a JSON envelope: {exc}") from None
    if not isinstance(envelope, dict):
        raise MalformedEnvelopeError("not a JSON envelope: top level is not an object")
    if envelope.get("alg") != ALGORITHM:
        raise MalformedEnvelopeError(f"unsupported envelope algorithm {envelope.get('alg')!r}")
    nonce = _unb64(envelope, "iv")
    ciphertext = _unb64(envelope, "ciphertext")
    tag = _unb64(envelope, "tag")
    if len(nonce) != NONCE_BYTES or len(tag) != TAG_BYTES:
        raise MalformedEnvelopeError(
            f"envelope iv must be {NONCE_BYTES} bytes and tag {TAG_BYTES} bytes, got {len(nonce)} and {len(tag)}"
        )
    return nonce, ciphertext, tag


def open_envelope(key: bytes, data: bytes) -> bytes:
    """Decrypt an envelope; raises MalformedEnvelopeError or AuthenticationError."""
    nonce, ciphertext, tag = parse_envelope(data)
    try:
        return AESGCM(key).decrypt(nonce, ciphertext + tag, None)
    except InvalidTag:
        raise AuthenticationError("envelope does not authenticate: wrong key or tampered data") from None


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(envelope: dict, field: str) -> bytes:
    value = envelope.get(field)
    if not isinstance(value, str):
        raise MalformedEnvelopeError(f"envelope field {field!r} is missing or not a string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedEnvelopeError(f"envelope field {field!r} is not valid base64") from None
