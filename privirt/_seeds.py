"""The one seed contract of the package.

Every public function takes ``seed: int | numpy.random.SeedSequence | None``.
:func:`seed_sequence` validates it once; :func:`child` derives a named child stream by a
``SeedSequence`` spawn key (never by adding magic numbers to the seed); :func:`secure_rng`
gives the noise generator for a private release: OS-keyed (private) without a seed, a
reproducible ChaCha20 stream keyed by the child sequence's state with one (not private).
"""

from __future__ import annotations

import hashlib
from typing import Any, Union

import numpy as np

SeedLike = Union[int, np.integer, np.random.SeedSequence, None]

__all__ = ["SeedLike", "seed_sequence", "child", "estimate_stream", "stream_key", "numpy_rng", "secure_rng",
           "describe_seed"]


def seed_sequence(seed: Any, *, name: str = "seed") -> np.random.SeedSequence | None:
    """Validate ``seed``: ``None`` stays ``None``; an int ≥ 0 or a ``SeedSequence`` becomes one.

    Raises
    ------
    ValueError
        For anything else (bools, negative ints, floats, strings, ``numpy.random.Generator``).
    """
    if seed is None:
        return None
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        raise ValueError(f"{name} must be an int, a numpy SeedSequence or None (not a Generator)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, a numpy SeedSequence or None, got {seed!r}")
    return np.random.SeedSequence(int(seed))


def _key_of(label: int | str) -> int:
    if isinstance(label, str):
        return int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:4], "little")
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or label < 0:
        raise ValueError(f"a child-stream key must be a non-negative int or a str, got {label!r}")
    return int(label)


def child(ss: np.random.SeedSequence, *keys: int | str) -> np.random.SeedSequence:
    """The child stream ``spawn_key + keys`` of ``ss`` (string keys are hashed to 32 bits).

    ``child(SeedSequence(s), r)`` equals ``SeedSequence(s).spawn(R)[r]`` for an int key ``r``.
    """
    return np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + tuple(_key_of(k) for k in keys))


def estimate_stream(seed: Any) -> np.random.SeedSequence | None:
    """The bootstrap's seed sequence: child stream ``"estimate"`` of ``seed`` (``None`` stays
    ``None``: fresh OS entropy).

    A one-call private estimate and the estimate from its release (``*_from_release``) both
    derive it from the seed they are given, so the release's seed given to the second
    reproduces the first exactly.
    """
    ss = seed_sequence(seed)
    return None if ss is None else child(ss, "estimate")


def stream_key(ss: np.random.SeedSequence) -> bytes:
    """256 bits derived from a sequence's state (used to key a reproducible secure stream)."""
    return ss.generate_state(8, dtype=np.uint32).tobytes()


def numpy_rng(seed: Any, *keys: int | str) -> np.random.Generator:
    """A numpy ``Generator`` for non-noise randomness (simulation, MCMC, graph sampling).

    With ``seed=None`` it is seeded from fresh OS entropy.
    """
    ss = seed_sequence(seed)
    if ss is None:
        ss = np.random.SeedSequence()
    return np.random.default_rng(child(ss, *keys) if keys else ss)


def secure_rng(seed: Any, *keys: int | str):
    """The generator privacy noise is drawn from.

    ``seed=None``: an OS-keyed :class:`mechanisms.SecureRNG` (``private=True``).  A seed: a
    reproducible ChaCha20 stream keyed by the child sequence (``private=False``; results drawn
    from it must say they are not private).
    """
    from mechanisms.rng import SecureRNG

    ss = seed_sequence(seed)
    if ss is None:
        return SecureRNG()
    return SecureRNG(seed=stream_key(child(ss, *keys) if keys else ss))


def describe_seed(ss: np.random.SeedSequence | None) -> dict[str, Any]:
    """JSON-friendly record of a seed (for ``info`` dictionaries)."""
    if ss is None:
        return {"entropy": None, "spawn_key": []}
    entropy = ss.entropy
    return {"entropy": int(entropy) if isinstance(entropy, (int, np.integer)) else entropy,
            "spawn_key": [int(k) for k in ss.spawn_key]}
