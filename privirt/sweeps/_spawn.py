"""Where worker processes are spawned (macOS, Windows): refuse a script they would run again.

A spawned worker imports the main script anew; a :func:`~privirt.sweeps.run_sweep` call at its
top level, outside an ``if __name__ == "__main__":`` block, would start another sweep in every
worker.  :func:`check_spawn_safe` refuses it in one line before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_spawn_safe", "is_main_test"]


def check_spawn_safe() -> None:
    """Refuse, in one line, a script that would be re-run by every spawned worker.

    A spawned worker imports the main script again; code at its top level outside an
    ``if __name__ == "__main__":`` block runs again there (and starts another sweep).
    """
    import ast
    import sys

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        # ``python -m``: multiprocessing re-runs the module (as ``__mp_main__``) in each worker,
        # unless it is a package's ``__main__``
        if spec.name == "__main__" or spec.name.endswith(".__main__"):
            return
        path = getattr(spec, "origin", None)
    else:
        path = getattr(main, "__file__", None)
    if main is None or path is None:
        return  # an interactive session or ``python -c``: nothing is re-run
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is main.__dict__
                                     and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and is_main_test(node.test)
                and node.lineno <= line <= (node.end_lineno or node.lineno)):
            return
    raise RuntimeError(
        f"run_sweep with jobs > 1 spawns worker processes on this platform, and each would run "
        f"{Path(path).name} again from the top: put its code under "
        "`if __name__ == \"__main__\":`, or pass jobs=1"
    )


def is_main_test(test: Any) -> bool:
    """Whether an ``if`` test is ``__name__ == "__main__"`` (either way round)."""
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1
