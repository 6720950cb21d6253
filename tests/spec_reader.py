"""The store's on-disk format implemented from its description alone, deliberately without
importing Elara's crypto: what anyone holding the passphrase could write to read the history."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def independent_open(passphrase: str, data: bytes) -> bytes:
    """Decrypt one message file's bytes: SHA-256 of the passphrase, AES-256-GCM, no AAD."""
    key = hashlib.sha256(passphrase.encode("utf-8")).digest()
    envelope = json.loads(data)
    assert envelope["alg"] == "AES-256-GCM"
    iv = base64.b64decode(envelope["iv"], validate=True)
    ciphertext = base64.b64decode(envelope["ciphertext"], validate=True)
    tag = base64.b64decode(envelope["tag"], validate=True)
    assert len(iv) == 12 and len(tag) == 16
    return AESGCM(key).decrypt(iv, ciphertext + tag, None)


def independent_seal(passphrase: str, plaintext: bytes) -> bytes:
    """Encrypt plaintext into an envelope the store must be able to read."""
    key = hashlib.sha256(passphrase.encode("utf-8")).digest()
    iv = os.urandom(12)
    sealed = AESGCM(key).encrypt(iv, plaintext, None)
    envelope = {
        "alg": "AES-256-GCM",
        "iv": base64.b64encode(iv).decode(),
        "ciphertext": base64.b64encode(sealed[:-16]).decode(),
        "tag": base64.b64encode(sealed[-16:]).decode(),
    }
    return json.dumps(envelope, indent=2).encode()


def read_record(path: Path, passphrase: str) -> dict:
    """One message file's plaintext JSON object."""
    return json.loads(independent_open(passphrase, Path(path).read_bytes()))


def read_all(root: Path, passphrase: str) -> list[dict]:
    """Every message file under root, in name order (which is append order)."""
    return [read_record(p, passphrase) for p in sorted(Path(root).glob("*_*.json"))]
