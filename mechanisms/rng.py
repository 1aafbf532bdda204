"""Cryptographically secure uniform bits for the noise samplers.

`SecureRNG` turns a ChaCha20 keystream (from the ``cryptography`` package) into uniform
``uint64`` words. With no seed the 256-bit key comes from ``os.urandom`` and the generator is
suitable for differential privacy (``private=True``). With a seed the key is derived from the
seed by SHA-256, the stream is reproducible, and the generator reports ``private=False``: noise
drawn from it must never be released as private.

The keystream of a stream cipher under a uniformly random key is computationally
indistinguishable from uniform bits; that is the only property the samplers rely on. The key is
replaced every ``REKEY_BYTES`` bytes (fresh OS entropy, or the next SHA-256 derivation for seeded
streams) so the cipher's 32-bit block counter never wraps. An OS-keyed generator also re-keys when it
finds itself in a forked child process, so parent and child never share noise. Generators are
not thread-safe: give each thread its own mechanism object.
"""

from __future__ import annotations

import hashlib
import numbers
import os

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

__all__ = ["SecureRNG", "REKEY_BYTES"]

#: Bytes drawn under one key before the generator re-keys (1 GiB, far below the 256 GiB at which
#: a 32-bit ChaCha20 block counter would wrap).
REKEY_BYTES = 1 << 30

_DOMAIN = b"privirt.mechanisms.rng/v1\x00"
_CHUNK_WORDS = 1 << 16  # keystream generated in blocks of 512 KiB


def _seed_bytes(seed: object) -> bytes:
    if isinstance(seed, bool) or seed is None:
        raise ValueError(f"seed must be an int, str or bytes, got {seed!r}")
    if isinstance(seed, numbers.Integral):
        return b"int:" + str(int(seed)).encode()
    if isinstance(seed, str):
        return b"str:" + seed.encode("utf-8")
    if isinstance(seed, (bytes, bytearray, memoryview)):
        return b"bytes:" + bytes(seed)
    raise ValueError(
        f"seed must be an int, str or bytes, got {type(seed).__name__}; "
        "pass seed=None for private (OS-keyed) noise"
    )


class SecureRNG:
    """Uniform random words from a ChaCha20 keystream.

    Parameters
    ----------
    seed : int, str, bytes or None, default None
        ``None`` keys the cipher from ``os.urandom`` (private). Anything else derives the key
        with SHA-256 so the stream is reproducible; the generator then has ``private=False``.

    Attributes
    ----------
    private : bool
        True iff the key came from the operating system's entropy source.

    Examples
    --------
    >>> rng = SecureRNG(seed=1)
    >>> rng.random_uint64(3).dtype
    dtype('uint64')
    >>> rng.private
    False
    """

    def __init__(self, seed: object = None) -> None:
        self.private = seed is None
        self._seed_key = None if seed is None else hashlib.sha256(_DOMAIN + _seed_bytes(seed)).digest()
        self._epoch = 0
        self._rekey()

    @classmethod
    def seeded(cls, seed: object) -> "SecureRNG":
        """Reproducible (non-private) generator: ``SecureRNG.seeded(s)`` equals ``SecureRNG(seed=s)``."""
        if seed is None:
            raise ValueError("seeded() needs a seed; use SecureRNG() for private OS-keyed bits")
        return cls(seed)

    # -- keystream -----------------------------------------------------------------------
    def _rekey(self) -> None:
        if self._seed_key is None:
            key = os.urandom(32)
        else:
            key = hashlib.sha256(self._seed_key + self._epoch.to_bytes(8, "little")).digest()
        self._epoch += 1
        self._pid = os.getpid()
        # The key is unique per stream, so a fixed all-zero nonce/counter block is safe.
        self._enc = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor()
        self._used = 0

    def _fill(self, flat: np.ndarray, total: int) -> None:
        """Write ``total`` keystream bytes into the uint8 array ``flat`` (which has >= 64 spare)."""
        pos = 0
        if self._seed_key is None and os.getpid() != self._pid:
            self._rekey()  # a forked child must never replay its parent's keystream
        while pos < total:
            if self._used >= REKEY_BYTES:
                self._rekey()
            step = min(total - pos, 8 * _CHUNK_WORDS, REKEY_BYTES - self._used)
            n = self._enc.update_into(_zeros(step), flat[pos:pos + step + 64])
            pos += n
            self._used += n

    def random_uint64(self, n: int) -> np.ndarray:
        """Return ``n`` independent uniform ``uint64`` words."""
        n = _check_count(n)
        # 8 spare words: update_into needs slack after the written bytes.
        out = np.empty(n + 8, dtype=np.uint64)
        if n:
            self._fill(out.view(np.uint8), 8 * n)
        return out[:n]

    def word(self) -> int:
        """One uniform 64-bit word as a Python int (used by the exact slow paths)."""
        return int(self.random_uint64(1)[0])

    def random_bits(self, n: int) -> np.ndarray:
        """Return ``n`` independent fair bits as a ``uint8`` array of 0/1."""
        n = _check_count(n)
        words = self.random_uint64((n + 63) // 64)
        return np.unpackbits(words.view(np.uint8))[:n]

    def integers(self, high: int, size: int) -> np.ndarray:
        """Uniform integers in ``[0, high)`` without modulo bias (rejection on a bit mask)."""
        if isinstance(high, bool) or not isinstance(high, numbers.Integral):
            raise ValueError(f"high must be an integer in [1, 2**63], got {high!r}")
        high = int(high)
        if high < 1 or high > 2**63:
            raise ValueError(f"high must be in [1, 2**63], got {high}")
        size = _check_count(size)
        if high == 1:
            return np.zeros(size, dtype=np.int64)
        mask = np.uint64((1 << (high - 1).bit_length()) - 1)
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            need = size - filled
            cand = self.random_uint64(need + need // 2 + 16) & mask
            cand = cand[cand < np.uint64(high)][:need]
            out[filled:filled + cand.size] = cand.astype(np.int64)
            filled += cand.size
        return out

    def random(self, size: int) -> np.ndarray:
        """Uniform doubles in ``[0, 1)`` (53 random bits each).

        Not used by the privacy-critical samplers, which compare integers only.
        """
        return (self.random_uint64(size) >> np.uint64(11)).astype(np.float64) * 2.0**-53

    def __repr__(self) -> str:
        return f"SecureRNG(private={self.private})"


_ZEROS = b""


def _zeros(n: int) -> memoryview:
    global _ZEROS
    if len(_ZEROS) < n:
        _ZEROS = bytes(max(n, 8 * _CHUNK_WORDS))
    return memoryview(_ZEROS)[:n]


def _check_count(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 0:
        raise ValueError(f"count must be a non-negative integer, got {n!r}")
    return int(n)
