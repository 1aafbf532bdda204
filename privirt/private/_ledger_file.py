"""What a ledger file must hold for this privirt to use it: its schema version and neighbouring
relation (checked when it is opened and at every debit), and the existence checks of its path
(a name too long is a :class:`~privirt.exceptions.LedgerError`, not a raw ``OSError``)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Iterable, Sequence

from ..exceptions import LedgerError
from ._sqlite import _damaged
from .accounting import MAX_EPSILON, NEIGHBOURING_RELATION

__all__ = ["SCHEMA_VERSION", "budget_delta_ok", "budget_epsilon_ok", "check_budget", "finite_real", "check_folders", "check_side_file_names", "check_spends",
           "check_stored", "file_exists"]

#: the stored values of a spend that :func:`check_spends` checks, in the order given
SPEND_VALUES = ("rho", "epsilon", "delta", "asked_epsilon", "asked_delta")

#: the ledger schema this privirt writes and reads (older ledgers are migrated at their next debit)
SCHEMA_VERSION = 2

#: the longest suffix of SQLite's side files (``NAME-journal``; ``NAME-wal``, ``NAME-shm``)
_SIDE_SUFFIX = "-journal"


def check_stored(path: Path, relation: object, schema_version: object) -> None:
    """Refuse a ledger this privirt cannot account for: one written by a newer privirt (its
    spends may carry costs this version does not know) or for another neighbouring relation
    (its budget protects another unit than privirt's releases are calibrated for).

    Parameters
    ----------
    path : Path
        The ledger as the user gave it (for the message).
    relation, schema_version : object
        The budget row's stored ``relation`` and ``schema_version``.

    Raises
    ------
    LedgerError
        One line naming the ledger and what to do; nothing is spent.
    """
    if not isinstance(schema_version, int) or schema_version > SCHEMA_VERSION:
        raise LedgerError(
            f"the ledger {path} was written by a newer privirt (schema {schema_version!r}; this privirt "
            f"reads schemas up to {SCHEMA_VERSION}); nothing was spent — upgrade privirt to use it"
        )
    if relation != NEIGHBOURING_RELATION:
        raise LedgerError(
            f"the ledger {path} is for the neighbouring relation {relation!r}, not {NEIGHBOURING_RELATION!r} "
            f"(the one privirt's releases are calibrated for); nothing was spent — use a ledger made "
            f"for {NEIGHBOURING_RELATION!r}"
        )


def finite_real(value: object) -> bool:
    """Whether a stored value is a finite number (a hand edit can store text or an infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def budget_epsilon_ok(epsilon: object) -> bool:
    """Whether a stored budget ε is a number in (0, MAX_EPSILON] (an infinite one: no limit)."""
    return finite_real(epsilon) and 0 < epsilon <= MAX_EPSILON


def budget_delta_ok(delta: object) -> bool:
    """Whether a stored budget δ is a number in (0, 1)."""
    return finite_real(delta) and 0 < delta < 1


def check_budget(path: Path, epsilon: object, delta: object) -> tuple[float, float]:
    """The stored budget ``(epsilon, delta)`` as floats, or a damaged-ledger
    :class:`~privirt.exceptions.LedgerError`: a hand edit SQLite's CHECK lets through (text, an
    infinite ε: an unlimited budget) is refused, with nothing spent (the service's state is
    checked by the same rule, :func:`privirt.serve._budget.stored_budget`)."""
    if not budget_epsilon_ok(epsilon):
        raise _damaged(path, f"its budget ε is {epsilon!r}, not a number in (0, {MAX_EPSILON:g}]")
    if not budget_delta_ok(delta):
        raise _damaged(path, f"its budget δ is {delta!r}, not a number in (0, 1)")
    return float(epsilon), float(delta)


def check_spends(path: Path, rows: Iterable[Sequence[object]]) -> None:
    """Refuse stored spends ``(id, rho, epsilon, delta, asked_epsilon, asked_delta)`` whose values
    are not finite numbers >= 0 (δ's at most 1; an ``asked_*`` may be NULL): a damaged-ledger
    :class:`~privirt.exceptions.LedgerError` naming the spend, with nothing spent."""
    for spend_id, *values in rows:
        for name, value in zip(SPEND_VALUES, values):
            if value is None and name.startswith("asked_"):
                continue
            if not (finite_real(value) and 0 <= value <= (1 if name.endswith("delta") else math.inf)):
                limit = "a number in [0, 1]" if name.endswith("delta") else "a finite number >= 0"
                raise _damaged(path, f"spend #{spend_id} has {name} = {value!r}, not {limit}")


def file_exists(file: Path, shown: Path, *, creating: bool = False) -> bool:
    """Whether the ledger file ``file`` exists; a path the system cannot even look up (a name
    too long, ...) is a :class:`LedgerError` naming ``shown`` (the path as given), with nothing
    spent."""
    try:
        return file.exists()
    except OSError as exc:
        verb = "create" if creating else "open"
        raise LedgerError(f"cannot {verb} the ledger {shown} ({exc.strerror or exc}); nothing was spent — "
                          "check the path") from exc


def check_not_folder(file: Path, shown: Path) -> None:
    """Refuse a ledger path that is a folder (``mkdir adir; privirt budget init adir``).

    Raises
    ------
    LedgerError
        One line naming ``shown`` (the path as given) and what to do; nothing was spent.
    """
    if os.path.isdir(file):
        raise LedgerError(f"{shown} is a folder, not a ledger file; nothing was spent — choose a file "
                          f"path (such as {shown / 'budget.ledger'})")


def check_folders(file: Path, shown: Path) -> None:
    """Refuse to create a ledger whose folder does not exist, or is a file.

    Checked on the path as given: ``file`` is resolved by text (``realpath`` turns
    ``nosuchdir/../x.ledger`` into ``x.ledger``, which the system would not open).  A symbolic
    link whose target's folder is missing is named with its target, not its own folder.

    Parameters
    ----------
    file : Path
        The ledger file, resolved.
    shown : Path
        The path as the user gave it (for the message).

    Raises
    ------
    NotADirectoryError, FileNotFoundError
        One line naming the folder and what to do; nothing is created.
    """
    folder = shown.parent
    in_the_way = next((p for p in (folder, *folder.parents) if os.path.exists(p)), None)
    if in_the_way is not None and not os.path.isdir(in_the_way):  # "afile/x.ledger"
        raise NotADirectoryError(f"{in_the_way} is a file, not a folder; choose another path for the ledger")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"folder {folder} does not exist; create it first (mkdir -p {folder}) or choose "
                                "another path for the ledger")
    if not os.path.isdir(file.parent) and os.path.islink(shown):  # the folder the link leads to
        target = Path(os.readlink(shown))
        where = folder / target  # (a relative target is read from the link's folder)
        if os.path.islink(where):  # a chain of links: name where it ends
            target = where = file
        raise FileNotFoundError(f"{shown} is a symbolic link to {target}, whose folder {where.parent} does not "
                                "exist; create it or choose another path for the ledger")
    if not os.path.isdir(file.parent):
        raise FileNotFoundError(f"folder {file.parent} does not exist; create it first or choose another path "
                                "for the ledger")


def check_side_file_names(file: Path, shown: Path) -> None:
    """Refuse to create a ledger ``file`` whose SQLite side files (``NAME-journal``,
    ``NAME-wal``, ``NAME-shm``) would pass its folder's name limit: SQLite could never open it
    to debit (``unable to open database file``).

    Parameters
    ----------
    file : Path
        The ledger file, resolved (its folder exists).
    shown : Path
        The path as the user gave it (for the message).

    Raises
    ------
    LedgerError
        One line naming the ledger and the longest name allowed; nothing is created.
    """
    try:
        name_max = os.pathconf(file.parent, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # (no pathconf on Windows)
        name_max = 255
    size = len(os.fsencode(file.name))
    longest = name_max - len(_SIDE_SUFFIX)
    if size > longest:
        raise LedgerError(
            f"cannot create the ledger {shown}: its file name is {size} bytes long, at most {longest} "
            f"here (SQLite's side file NAME{_SIDE_SUFFIX} must fit the folder's limit of {name_max} "
            "bytes); choose a shorter name"
        )
    # the whole path too: SQLite's unix VFS opens paths of at most 512 bytes (MAX_PATHNAME), its
    # side file's included, and a longer one failed later as 'unable to open database file',
    # blamed on the folder's permissions and free space
    size = len(os.fsencode(str(file)))
    if os.name == "posix" and size + len(_SIDE_SUFFIX) > _SQLITE_MAX_PATHNAME:
        raise LedgerError(
            f"cannot create the ledger {shown}: its path is {size} bytes long, at most "
            f"{_SQLITE_MAX_PATHNAME - len(_SIDE_SUFFIX)} for SQLite (with its side file NAME{_SIDE_SUFFIX}); "
            "choose a folder with a shorter path"
        )


#: SQLite's unix VFS limit on a file's path (MAX_PATHNAME)
_SQLITE_MAX_PATHNAME = 512
