"""The ``privirt`` command line.

Each subcommand lives in its own module in this package and defines
``register(subparsers) -> None``, which adds an :mod:`argparse` parser whose defaults carry
``func=run`` (a callable taking the parsed namespace and returning an exit status).  Modules
are discovered automatically, so adding a command means adding a module.

Errors in user input (bad files, bad values, an exhausted budget) end the program with a
one-line ``privirt: error: ...`` message and a non-zero status, never a traceback.
The top layer: may import any ``privirt`` module; command modules never import each other
(shared helpers live in the ``_``-prefixed modules).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from typing import Sequence

from ..exceptions import BudgetExceeded, PrivirtError

EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_SIGPIPE = 128 + 13  # what a shell reports for a process ended by SIGPIPE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="privirt",
        description="Item response theory with differential privacy.",
    )
    parser.add_argument("--version", action="version", version=f"privirt {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(sub)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings of a command as one ``privirt: warning: ...`` line (no source location)."""
    print(f"privirt: warning: {_one_line(message)}", file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader went away (`privirt ... | head`): stop quietly, as Unix tools do
        _silence_stdout()
        return EXIT_SIGPIPE


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            status = args.func(args)
    except BrokenPipeError:
        raise  # handled in main(), also for --help
    except BudgetExceeded as exc:
        print(f"privirt: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BUDGET
    except (ValueError, OSError, ImportError, PrivirtError) as exc:
        print(f"privirt: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("privirt: interrupted", file=sys.stderr)
        return 130
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
