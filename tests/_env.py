"""The environment of a test's child process (``python -m privirt``, ``python -c``)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_env(*front: str | os.PathLike, **extra: str) -> dict[str, str]:
    """This process's environment with this checkout (then ``front``) first on ``PYTHONPATH``.

    The caller's own ``PYTHONPATH`` entries are kept after them: packages installed with
    ``pip install --target`` (as on a machine whose site-packages cannot be written) stay
    importable in the child. ``extra`` sets further variables.
    """
    env = dict(os.environ)
    parts = [str(ROOT), *(str(p) for p in front)]
    if env.get("PYTHONPATH"):
        parts.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.update(extra)
    return env
