"""What several benchmarks share: :func:`run_in_tree` runs code against another checkout of privirt
(``--baseline DIR``): a child Python process whose working directory and ``PYTHONPATH`` are the
checkout, so ``import privirt`` takes that tree's code (a child should still assert
``privirt.__file__``: the benchmarks put their own checkout first on ``sys.path`` when imported);
:func:`busy_core` keeps another core busy (the brief's busy machine); :func:`jsonl_rows` and
:func:`by_cell` read a benchmark's JSON-lines output and group it by its (n, m, ε) cell."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path


@contextlib.contextmanager
def busy_core(on: bool = True) -> Iterator[None]:
    """A spinning Python process beside the benchmark while the block runs (nothing if not ``on``)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def run_in_tree(tree: Path, code: str) -> tuple[str | None, str]:
    """Run ``code`` (``python -c``) with privirt from ``tree``: (stdout, "") on success, else
    (None, the last line of stderr or the exit status)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tree, env=env)
    if out.returncode == 0:
        return out.stdout, ""
    return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"


def jsonl_rows(path: str | Path) -> list[dict]:
    """The rows of a JSON-lines file (blank lines skipped)."""
    import json

    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def by_cell(rows: Iterable[dict]) -> dict[tuple, list[dict]]:
    """``rows`` grouped by their ``(n, m, eps)`` cell, cells and rows in the order first seen."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["n"], r["m"], r["eps"]), []).append(r)
    return cells
