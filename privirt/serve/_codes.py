"""The stored form of a data set's validated codes (:mod:`privirt.serve.store`): an uncompressed
``.npy`` blob of int8, whose size (hence the time to read, hash and decode it) depends only on
n × m; blobs of older states are compressed ``.npz`` and still decode."""

from __future__ import annotations

import io

__all__ = ["encode_codes", "decode_codes"]


def encode_codes(codes) -> bytes:
    """The codes as an uncompressed ``.npy`` (int8): its size depends only on the shape."""
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(codes, dtype=np.int8), allow_pickle=False)
    return buf.getvalue()


def decode_codes(blob: bytes):
    """The codes of a blob: ``.npy`` (:func:`encode_codes`) or, from older states, ``.npz``."""
    import numpy as np

    loaded = np.load(io.BytesIO(bytes(blob)), allow_pickle=False)
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded as z:  # a compressed .npz written before
        return z["codes"]
