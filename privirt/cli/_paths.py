"""Output paths checked before any work: a command refuses a bad ``--out`` or ``--plots``
in one line, before it reads data, samples or spends budget, and never creates folders the
user did not ask for."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from .._files import TEMPORARY_EXTRA_BYTES, check_creatable

__all__ = ["check_output_file", "check_output_dir", "check_out_and_plots", "write_plot", "OutNotWritten",
           "out_not_written", "plots_then_raise"]


def check_output_file(path: str | Path, flag: str, suffixes: Sequence[str],
                      inputs: Sequence[str | Path | None | tuple] = ()) -> Path:
    """``path`` as a file to write: a known suffix, in a folder that exists and is writable,
    and none of the command's ``inputs`` (the run would overwrite the data it read, or the
    ledger it debited): paths, or ``(what, path)`` pairs such as ``("the ledger", path)``.

    Raises
    ------
    ValueError
        Naming ``flag``, the problem and what to do.
    """
    p = Path(path)
    try:
        return _check_output_file(p, flag, suffixes, inputs)
    except OSError as e:  # a name over NAME_MAX or a path over PATH_MAX fails is_dir() itself
        if e.errno != errno.ENAMETOOLONG:
            raise
        longest = max(len(os.fsencode(part)) for part in p.parts)
        if longest > _limit(_existing_folder(p), "PC_NAME_MAX", 255) - TEMPORARY_EXTRA_BYTES:
            raise ValueError(f"{flag}: a name in the path is too long ({longest} bytes); give a "
                             "shorter name") from None
        raise ValueError(f"{flag}: the path is too long ({len(os.fsencode(os.fspath(p)))} bytes as given); "
                         "give a file in a folder with a shorter path") from None


def _existing_folder(p: Path) -> Path:
    """The nearest folder of ``p`` that exists (for its limits), else the current one."""
    for parent in p.parents:
        try:
            if parent.is_dir():
                return parent
        except OSError:
            continue
    return Path(".")


def _check_output_file(p: Path, flag: str, suffixes: Sequence[str],
                       inputs: Sequence[str | Path | None | tuple]) -> Path:
    allowed = " or ".join(suffixes)
    if p.is_dir():
        raise ValueError(f"{flag} {p} is a folder; give a file name ending in {allowed}")
    if p.suffix.lower() not in suffixes:
        raise ValueError(f"{flag} must end in {allowed}, got {p.name!r}")
    folder = p.resolve().parent
    link = f" (a link to {os.path.realpath(p)})" if p.is_symlink() else ""
    if not folder.is_dir():
        if folder.exists():  # ('d1.csv/o.csv' with d1.csv a file: "does not exist" misled)
            raise ValueError(f"{flag} {p}{link}: {folder} is a file, not a folder; give a file in a folder")
        raise ValueError(f"{flag} {p}{link}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{flag} {p}{link}: the folder {folder} is not writable")
    if p.exists() and not os.access(p, os.W_OK):  # (else a private run would spend, then fail to write)
        raise ValueError(f"{flag} {p} exists and is not writable; give another file name")
    for source in inputs:
        what, source = source if isinstance(source, tuple) else ("the input file", source)
        if source is not None and str(source) != "-" and _same_file(p, Path(source)):
            raise ValueError(f"{flag} {p} is {what} {source}: writing there would overwrite it; "
                             "give another file name")
    _check_creatable(p, flag, folder)
    return p


def _check_creatable(p: Path, flag: str, folder: Path) -> None:
    """Create and remove the temporary file the write will use (os.access passes a name too long
    for the temporary file, and folders such as /proc that refuse new files)."""
    try:
        check_creatable(p)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            real = os.fsencode(os.path.realpath(p))
            name = os.path.basename(real)
            longest = _limit(folder, "PC_NAME_MAX", 255) - TEMPORARY_EXTRA_BYTES
            if len(name) > longest:
                raise ValueError(f"{flag} {p}: the file name is too long ({len(name)} bytes; at most "
                                 f"{longest} here); give a shorter name") from None
            # the name fits: the whole path is over PATH_MAX (which counts the final NUL)
            longest = _limit(folder, "PC_PATH_MAX", 4096) - 1 - TEMPORARY_EXTRA_BYTES
            raise ValueError(f"{flag} {p}: the path is too long ({len(real)} bytes as an absolute path; "
                             f"at most {longest} here); give a file in a folder with a shorter "
                             "path") from None
        raise ValueError(f"{flag} {p}: cannot create files in the folder {folder} "
                         f"({e.strerror or e}); give another folder") from None


def _limit(folder: Path, name: str, default: int) -> int:
    """:func:`os.pathconf`'s ``name`` limit for ``folder``; ``default`` where it has none."""
    try:
        value = os.pathconf(folder, name)
    except (OSError, ValueError):
        return default
    return default if value < 0 else value


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)  # also through links
    return a.resolve() == b.resolve()


def check_output_dir(path: str | Path, flag: str, names: Sequence[str] = ()) -> Path:
    """``path`` as a folder to write files into: an existing folder, or a new one whose
    parent exists (it is created, its parents never are), in which none of the files
    ``names`` the command will write exists as anything but a regular file (a folder, a FIFO).

    Raises
    ------
    ValueError
        Naming ``flag``, the problem and what to do.
    """
    p = Path(path)
    if p.is_symlink() and not p.exists():
        raise ValueError(f"{flag} {p} is a link to nothing; give a folder name")
    if p.exists() and not p.is_dir():
        raise ValueError(f"{flag} {p} exists and is not a folder; give a folder name")
    parent = p.resolve().parent
    if not p.exists() and parent.exists() and not parent.is_dir():
        raise ValueError(f"{flag} {p}: {p.parent} is a file, not a folder; choose another output folder")
    if not p.exists() and not parent.is_dir():
        raise ValueError(
            f"{flag} {p}: the folder {p.parent} does not exist; create it first"
        )
    if not os.access(p if p.exists() else parent, os.W_OK):
        raise ValueError(f"{flag} {p}: not writable")
    for name in names if p.exists() else ():
        file = p / name
        if file.exists() and not file.is_file():  # (through links: a link to a file is fine)
            what = "a folder" if file.is_dir() else "not a regular file"
            raise ValueError(f"{flag} {p}: {file} is {what}; remove it or give another folder")
    return p


def write_plot(folder: Path, name: str, draw: Callable[[Path], Any]) -> None:
    """Draw a figure into ``folder / name`` with ``draw(path)`` and close it; an OSError while
    saving (a full disk, a file made meanwhile) is one line naming the file.

    Raises
    ------
    ValueError
        ``could not write PATH (reason); give another --plots folder``.
    """
    import matplotlib.pyplot as plt

    path = Path(folder) / name
    before = set(plt.get_fignums())
    try:
        fig = draw(path)
    except OSError as e:
        for number in set(plt.get_fignums()) - before:  # the figure that could not be saved
            plt.close(number)
        raise ValueError(f"could not write {path} ({e.strerror or e}); give another --plots "
                         "folder") from None
    plt.close(fig)


def check_out_and_plots(out: str | Path | None, plots: str | Path | None) -> None:
    """``--out`` (a file) and ``--plots`` (a folder) are not the same path, and the folder is not
    inside the file (else the run would do all its work, then fail on the other).  An ``--out``
    file inside an existing ``--plots`` folder is fine (the plots are ``.png`` files).

    Raises
    ------
    ValueError
        Naming both flags and what to do.
    """
    if out is None or plots is None:
        return
    file, folder = Path(os.path.realpath(out)), Path(os.path.realpath(plots))
    if file == folder:
        raise ValueError(f"--plots {plots} is the --out file; give another folder")
    if file in folder.parents:
        raise ValueError(f"--plots {plots} is inside the --out file {out}; give another folder")


class OutNotWritten(ValueError):
    """An output file that could not be written after the result was printed on stdout."""


def out_not_written(path: str | Path, exc: OSError, flag: str = "--out") -> OutNotWritten:
    """The one line for a ``flag`` file that could not be written after the result was printed
    on stdout (a full disk, a folder removed meanwhile): the path, the reason and what to do.
    A debit is added to it by :func:`privirt.cli.main`."""
    return OutNotWritten(f"could not write {flag} {path} ({exc.strerror or exc}); the result is printed above; "
                      f"copy it from there, and free some space or give another {flag} before the next run")


def plots_then_raise(failed: OutNotWritten | None, plots: str | Path | None,
                     write_plots: Callable[[], None]) -> None:
    """Write the ``--plots`` (``write_plots()``, when ``plots`` is given), then raise ``failed``,
    the ``--out`` failure, if any: a full disk loses neither the plots nor the warnings printed
    before this; when the plots cannot be written either, the one line says so too.

    Raises
    ------
    ValueError
        ``failed``, with ``; the plots were not written either: ...`` when they failed too; or
        the plots' own error when ``--out`` was written.
    """
    if plots is not None:
        try:
            write_plots()
        except (ValueError, OSError) as exc:
            if failed is None:
                raise
            why = (f"could not write --plots {plots} ({exc.strerror or exc})" if isinstance(exc, OSError)
                   else str(exc))
            raise OutNotWritten(f"{failed}; the plots were not written either: {why}") from None
    if failed is not None:
        raise failed
