"""``privirt serve``: the stored copy's encoding, the δ limits, the page's plot, the CLI's checks
of its options and the order of the request checks (no service process needed)."""

from __future__ import annotations

import hashlib
import io
import sqlite3

import numpy as np
import pytest

pytest.importorskip("fastapi")

from ._serve import LSAT6, cli, setup_state  # noqa: E402


def test_the_stored_copy_has_a_size_that_depends_only_on_the_shape():
    from privirt.serve.store import decode_codes, encode_codes

    rng = np.random.default_rng(14_600_001)
    zeros = np.zeros((3000, 40), np.int8)
    noisy = rng.integers(-1, 2, (3000, 40)).astype(np.int8)
    assert len(encode_codes(zeros)) == len(encode_codes(noisy))
    np.testing.assert_array_equal(decode_codes(encode_codes(noisy)), noisy)
    assert decode_codes(encode_codes(noisy)).dtype == np.int8


def test_a_state_written_with_a_compressed_blob_still_decodes(tmp_path):
    from privirt.serve.store import open_store

    state = str(tmp_path / "s.db")
    setup_state(state, {"lsat6": (LSAT6, 1.0, 1e-6, ["--weights-col", "frequency"])}, {})
    store = open_store(state)
    ds = store.datasets()[0]
    con = sqlite3.connect(state)
    did, blob = con.execute("SELECT id, data FROM datasets").fetchone()
    codes = np.load(io.BytesIO(blob), allow_pickle=False)
    old = io.BytesIO()
    np.savez_compressed(old, codes=codes)  # how states were written before
    old = old.getvalue()
    with con:
        con.execute("UPDATE datasets SET data = ?, sha256 = ? WHERE id = ?",
                    (old, hashlib.sha256(old).hexdigest(), did))
    con.close()
    np.testing.assert_array_equal(open_store(state).load_codes(did, hashlib.sha256(old).hexdigest()), codes)
    assert ds["n_persons"] == codes.shape[0]
