"""The Parquet files of a Dask data set: a folder (searched recursively), a glob or a file."""

from __future__ import annotations

import os
from typing import Any

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")


def parquet_files(source: Any) -> tuple[Any, list[str]]:
    """The file system and the sorted Parquet files of ``source`` (a path, folder or glob).

    In a folder, files and folders whose name starts with ``_`` or ``.`` are skipped, as
    pyarrow and pandas skip them.
    """
    import fsspec

    text = os.fspath(source)
    fs, _, paths = fsspec.get_fs_token_paths(text)
    files: list[str] = []
    for p in paths:
        if fs.isdir(p):
            root = p.rstrip("/") + "/"
            found = [f for f in fs.find(p) if f.lower().endswith(PARQUET_SUFFIXES)]
            # skip metadata, hidden files and anything under a hidden or ``_`` folder
            # (_metadata, .crc, _temporary/, .staging/, ...): pyarrow's ``ignore_prefixes``
            # rule, so that the same files are read as by pandas and pyarrow
            files.extend(f for f in found if not any(
                part.startswith(("_", ".")) for part in
                (f[len(root):] if f.startswith(root) else f.rsplit("/", 1)[-1]).split("/")))
        elif fs.exists(p):
            with fs.open(p, "rb") as fh:  # a named file: Parquet's magic bytes, not pyarrow's
                magic = fh.read(4)        # "ArrowInvalid: Parquet magic bytes not found" later
            if magic != b"PAR1":
                raise ValueError(f"{p} is not a Parquet file (engine='dask' reads Parquet); use "
                                 "engine='local', or convert it to Parquet first")
            files.append(p)
    if not files:
        raise FileNotFoundError(f"no Parquet files at {text!r} (a folder, a glob or a file)")
    return fs, sorted(files)
