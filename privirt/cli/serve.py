"""``privirt serve``: the curator service (the commands live in :mod:`privirt.serve.cli`)."""

from __future__ import annotations


def register(subparsers) -> None:
    from ..serve.cli import register as _register

    _register(subparsers)
