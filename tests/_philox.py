"""numpy port of the device random-number code of privirt/bayes/gibbs_2pno.cu (Philox4x32-10
and the two-uniforms draw), shared by the Gibbs and GPU-static tests."""

from __future__ import annotations

import numpy as np

_M32 = np.uint64(0xFFFFFFFF)

#: Random123's known-answer vectors for Philox4x32-10: (counter, key, output).
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """numpy port of ``philox4x32_10`` in privirt/bayes/gibbs_2pno.cu (uint64 lanes)."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(x, dtype=np.uint64) & _M32 for x in (c0, c1, c2, c3, k0, k1))
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & _M32
        hi1, lo1 = p1 >> np.uint64(32), p1 & _M32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + np.uint64(0x9E3779B9)) & _M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & _M32
    return c0, c1, c2, c3


def uniform2(c0, c1, c2, c3, k0, k1):
    o = philox4x32_10(c0, c1, c2, c3, k0, k1)
    six, sh = np.uint64(6), np.uint64(26)
    u0 = (((o[0] >> six) << sh) + (o[1] >> six)).astype(np.float64)
    u1 = (((o[2] >> six) << sh) + (o[3] >> six)).astype(np.float64)
    return (u0 + 0.5) * 2.0**-52, (u1 + 0.5) * 2.0**-52
