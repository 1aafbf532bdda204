"""A full disk for the tests of output failures: the OS's message, a stdout that cannot be
written, and privirt's file writes failing at their last block."""

from __future__ import annotations

import errno
import io
import os

#: the OS's text for ENOSPC, as the messages quote it
NO_SPACE = os.strerror(errno.ENOSPC)


class FullStdout(io.StringIO):
    """stdout on a full disk (no file descriptor, as a pipe to a closed reader has none here)."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, NO_SPACE)


class _FullDiskOs:
    """``os`` for :mod:`privirt._files` on a full disk: writing a file's last block fails."""

    def __getattr__(self, name: str):
        return getattr(os, name)

    @staticmethod
    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, NO_SPACE)


def fill_disk(monkeypatch) -> None:
    """Make every file privirt writes (``privirt._files``: --out, ledgers' copies, reports) fail
    as on a full disk, for the rest of the test."""
    import privirt._files

    monkeypatch.setattr(privirt._files, "os", _FullDiskOs())
