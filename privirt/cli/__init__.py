"""The ``privirt`` command line.

Each subcommand lives in its own module in this package and defines
``register(subparsers) -> None``, which adds an :mod:`argparse` parser whose defaults carry
``func=run`` (a callable taking the parsed namespace and returning an exit status).  Modules
are discovered automatically, so adding a command means adding a module.

Errors in user input (bad files, bad values, an exhausted budget) end the program with a
one-line ``privirt: error: ...`` message and a non-zero status, never a traceback.  A command
interrupted (Ctrl-C, or SIGTERM/SIGHUP: ``kill``, ``timeout``, a closed terminal) or failing
after it debited a ledger says so on that line: how much was spent (asked ε, δ and the cost)
and in which ledger; the exit status is 130, 143 or 129, as a shell reports those signals.
The top layer: may import any ``privirt`` module; command modules never import each other
(shared helpers live in the ``_``-prefixed modules).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import pkgutil
import re
import sys
import warnings
from typing import Sequence

from ..exceptions import BudgetExceeded, PrivirtError

EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_SIGPIPE = 128 + 13  # what a shell reports for a process ended by SIGPIPE


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line with a ``--help`` hint (no usage
    block), exit status 2; subcommands' parsers are of this class too."""

    def error(self, message: str):  # type: ignore[override]
        if "://" in message:  # e.g. a state URL in the wrong place: never echo its password
            message = _mask_url_secrets(message)
        self.exit(EXIT_USAGE, f"privirt: error: {_one_line(message)} (see `{self.prog} --help`)\n")


#: a URL's password (``scheme://user:PASSWORD@``, to the last ``@`` before a ``/`` or a quote, so
#: that a password with spaces, ``#`` or ``?`` is masked whole) and a secret query value
#: (``password=``, ``sslpassword=``, ``..._secret=``: to the next ``&`` or quote)
_URL_PASSWORD = re.compile(r"(://[^\s:/@'\"]*:)[^/'\"]*@")
_URL_SECRET = re.compile(r"(?i)([\w.-]*(?:password|secret)=)[^&'\"]*")


def _mask_url_secrets(text: str) -> str:
    """``text`` (an argparse message repeating what was typed) with every URL's password and
    secret query values masked as ``***``; anything else, other URLs included, as typed."""
    return _URL_SECRET.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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


#: commands whose input names options as the library does (a sweep's configuration keys):
#: their messages are not rewritten into flags
_LIBRARY_WORDS = frozenset({"sweep"})


def _warning_printer(flags: bool):
    """``warnings.showwarning`` for a command: each warning as one ``privirt: warning: ...``
    line (no source location, on a line of its own after a bar), in flag words unless ``flags``
    is False."""
    from .._progress import end_open_line
    from ._words import cli_text

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = _one_line(message)
        end_open_line()  # a terminal bar drawn mid-line: the warning starts on a line of its own
        print(f"privirt: warning: {cli_text(text) if flags else text}", file=sys.stderr)

    return show


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    from ._stdout import silence_stdout

    silence_stdout()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the program is, as Ctrl-C raises KeyboardInterrupt (and
    handled as it is: a debit it lands after is reported); ``status`` is 128 + the signal."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


@contextlib.contextmanager
def _terminate_as_interrupt():
    """While ``main`` runs (in the main thread): SIGTERM and SIGHUP raise :class:`Terminated`
    (their default ends the process at once, saying nothing, even after a debit).  A signal
    that is ignored (``nohup``) or handled outside Python stays so; a second one ends the process as by default; a
    forked child (a sweep's worker) that inherited the handler dies as by default.  The
    previous handlers are restored on return."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()

    def handler(signum: int, frame) -> None:
        signal.signal(signum, signal.SIG_DFL)
        if os.getpid() != pid:
            os.kill(os.getpid(), signum)
            return
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        # (None: a handler set outside Python, which could not be put back)
        if signum is not None and signal.getsignal(signum) not in (signal.SIG_IGN, None):
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _tolerant_stdout() -> None:
    """Let stdout write any text (``×``, ``ρ``, a label) whatever its encoding: what it cannot
    encode is written as ``\\xd7``-style escapes, as on stderr, so that a private run's output
    never fails after the debit (``PYTHONIOENCODING=ascii``, a latin-1 terminal)."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):  # (a detached or closed stream: left as it is)
            reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    run: dict = {}  # _main puts its journal mark here once the command may spend
    _tolerant_stdout()
    with _terminate_as_interrupt():
        try:
            return _main(argv, run)
        except BrokenPipeError:
            # the reader went away (`privirt ... | head`): stop quietly, as Unix tools do
            _silence_stdout()
            return EXIT_SIGPIPE
        except KeyboardInterrupt as exc:
            # before the command began (parsing, imports), or a second interrupt while _main
            # reported the first: a debit since the mark is reported, else nothing was spent
            argv = sys.argv[1:] if argv is None else argv
            spends = any(_names_ledger(a) for a in argv)
            said = _spent(run["mark"]) if "mark" in run else ""
            _say(f"privirt: interrupted{said or (_NOTHING_SPENT if spends else '')}")
            return getattr(exc, "status", 130)


def _names_ledger(arg: object) -> bool:
    """Whether a command-line word is ``--ledger`` (``--ledger=PATH``), or an abbreviation of it
    that argparse takes (no other flag starts with ``--le``)."""
    flag = str(arg).split("=", 1)[0]
    return len(flag) >= 4 and "--ledger".startswith(flag)


def _non_private_path(args: argparse.Namespace | None) -> bool:
    """Whether leaving out ``--epsilon`` gives this command line a non-private estimate:
    ``privirt estimate`` of the Rasch model with no ``--method`` or a non-private one (not
    ``--method totals`` nor ``--model 2pl``, private only)."""
    from ._words import NON_PRIVATE_COMMANDS

    if getattr(args, "command", None) not in NON_PRIVATE_COMMANDS:
        return False
    from .estimate import METHODS

    return getattr(args, "model", "rasch") != "2pl" and getattr(args, "method", None) in (None, *METHODS)


def _main(argv: Sequence[str] | None, run: dict | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # name the subcommand's --help, not the top-level one
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        (sub.choices.get(getattr(args, "command", None)) or parser).error(
            f"unrecognized arguments: {' '.join(extra)}")
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for messages that quote the command
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from ..private.spends import journal_mark
    from ._stdout import StdoutFailed, flush_stdout, guarded_stdout, not_printed

    flags = getattr(args, "command", None) not in _LIBRARY_WORDS
    mark = journal_mark()
    if run is not None:
        run["mark"] = mark
    try:
        with warnings.catch_warnings(), guarded_stdout():
            warnings.showwarning = _warning_printer(flags)
            status = args.func(args)
            flush_stdout()  # (block-buffered: a full disk fails only now; one line, not a bare errno)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): main() ends quietly ...
        said = _spent(mark)
        if said:  # ... but a debit is reported, as for an interruption
            with contextlib.suppress(OSError):
                _say(f"privirt: stdout closed{said}")
        raise
    except StdoutFailed as exc:  # a print the command did not catch: one line, not a bare errno
        _silence_stdout()
        _say(f"privirt: error: {not_printed(exc)}{_spent(mark)}")
        return EXIT_USAGE
    except BudgetExceeded as exc:
        _say(f"privirt: error: {_one_line(exc)}{_spent(mark)}")
        return EXIT_BUDGET
    except (ValueError, OSError, ImportError, PrivirtError) as exc:
        from ._words import cli_message

        _say(f"privirt: error: {cli_message(exc, flags=flags, non_private=_non_private_path(args))}"
             f"{_spent(mark)}")
        return EXIT_USAGE
    except MemoryError as exc:  # a run too large for this machine (numpy names the array it could not allocate)
        text = " ".join(str(exc).split()) or "MemoryError"
        if not text.startswith("the kept draws"):
            text = f"not enough memory ({text}); use a smaller problem or a machine with more memory"
        _say(f"privirt: error: {text}{_spent(mark)}")
        return EXIT_USAGE
    except KeyboardInterrupt as exc:  # Ctrl-C, or Terminated (SIGTERM, SIGHUP)
        said = _spent(mark) or (_NOTHING_SPENT if getattr(args, "ledger", None) is not None else "")
        _say(f"privirt: interrupted{said}")
        return getattr(exc, "status", 130)
    except BaseException as exc:
        from .._backend import gpu_error_text, is_gpu_error

        said = _spent(mark)
        if isinstance(exc, Exception) and is_gpu_error(exc):  # a GPU that passed the probe, then failed
            said = said or (_NOTHING_SPENT if getattr(args, "ledger", None) is not None else "")
            _say(f"privirt: error: the GPU failed ({gpu_error_text(exc)}); run again with {_cpu_words(args)}{said}")
            return EXIT_USAGE
        # an internal error: its traceback, then (last, where it is seen) whether budget was spent
        _end_progress_line()
        if not said:
            raise
        import traceback

        traceback.print_exc()
        _say(f"privirt: error: internal error{said}")
        return 1
    return int(status or 0)


def _cpu_words(args: argparse.Namespace) -> str:
    """How this command is told to use the CPU: ``--device cpu``, or the sweep's configuration key."""
    if getattr(args, "command", None) == "sweep":
        return 'device = "cpu" in the sweep configuration'
    if hasattr(args, "device"):
        return "--device cpu"
    return "the GPU hidden (CUDA_VISIBLE_DEVICES set to an empty value)"


def _end_progress_line() -> None:
    from .._progress import end_open_line

    end_open_line()


def _say(line: str) -> None:
    """Print ``line`` on stderr on a line of its own: a terminal progress bar the failure left
    mid-line (it ends in "\r") is ended first."""
    _end_progress_line()
    print(line, file=sys.stderr)


#: said of an interrupted run with a ledger that debited nothing (a debit comes before any
#: noise is drawn, so nothing was released either); a run without a ledger is not journaled
_NOTHING_SPENT = " (nothing was spent)"


def _spent(mark: int) -> str:
    """``; the privacy budget WAS spent (...)`` for every debit this command made, or ``""``."""
    from ..private.spends import spends_since

    return "".join(f"; {rec.describe()}" for rec in spends_since(mark))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
