"""API keys: ``pva.<id>.<secret>`` (analysts) and ``pvc.<id>.<secret>`` (the curator).

The secret is 256 random bits (:func:`secrets.token_urlsafe`); the state stores the public
``<id>`` and the SHA-256 of the secret only, so a stolen state file yields no working key.
A key is checked by looking its ``<id>`` up and comparing the hash of the presented secret
with :func:`hmac.compare_digest` (constant time).  An unknown, revoked or malformed ``<id>`` takes
the same steps: its secret is hashed and compared against a dummy hash.  A wrong key therefore
costs comparable time whether or not its ``<id>`` exists, though not exactly the same (fetching
an existing row takes a little longer, under a microsecond); that reveals at most whether an
``<id>`` exists, and ids are 64 random bits that cannot be enumerated.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["new_key", "parse_key", "hash_secret", "secret_matches", "ANALYST", "CURATOR"]

ANALYST = "pva"
CURATOR = "pvc"
_DUMMY = hashlib.sha256(b"privirt-dummy").hexdigest()
#: longest key accepted (longer headers are refused before any hashing)
MAX_KEY_LENGTH = 128


def new_key(role: str) -> tuple[str, str, str]:
    """A fresh key: ``(key, key_id, secret_hash)``; only the last two are stored."""
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return f"{role}.{key_id}.{secret}", key_id, hash_secret(secret)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def parse_key(key: str | None, role: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a well-formed key of ``role``, else ``None``."""
    if not key or len(key) > MAX_KEY_LENGTH:
        return None
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != role or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def secret_matches(secret: str, stored_hash: str | None) -> bool:
    """Constant-time comparison of a presented secret with a stored hash (or a dummy)."""
    ok = hmac.compare_digest(hash_secret(secret), stored_hash or _DUMMY)
    return ok and stored_hash is not None
