"""The journal of debits committed by this process, so that a run interrupted or failing
**after** its debit can say that the budget was spent and how much.

:class:`~privirt.private.ledger.Ledger` journals each committed debit (:class:`Spend`); the
private entry points are wrapped in :func:`reports_spends`, which adds the debits to an
exception raised after them (``exc.privirt_spends`` and ``exc.__notes__``); the CLI reads
:func:`spends_since` a :func:`journal_mark` to print them; ``_format_spends`` lays out a
ledger's spends for ``budget show``.  Imports only ``accounting``.
"""

from __future__ import annotations

import collections
import functools
import itertools
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .accounting import ApproxDP, PrivacyCost

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Spend", "journal_mark", "spends_since", "note_spent", "reports_spends"]


# ---------------------------------------------------------------------------------------
# the journal of debits committed by this process (what an interrupted run must report)
@dataclass(frozen=True)
class Spend:
    """A debit committed to a ledger by this process.

    Attributes
    ----------
    path : Path
        The ledger file.
    spend_id : int
        The spend's id in the ledger.
    cost : PrivacyCost
        What was debited (ρ for a Gaussian, ε and δ otherwise).
    mechanism : str
        The ledger entry's label.
    asked : ApproxDP or None
        The (ε, δ) the call asked for.
    certain : bool
        False when the process was interrupted during the commit itself and the check that
        followed could not tell whether it completed.
    """

    path: Path
    spend_id: int
    cost: PrivacyCost
    mechanism: str
    asked: ApproxDP | None = None
    certain: bool = True
    seq: int = 0
    thread: int = 0

    def describe(self) -> str:
        """One line: how much was spent, where."""
        asked = "" if self.asked is None else f"asked ε={self.asked.epsilon:.6g}, δ={self.asked.delta:.3g}; "
        verb = "WAS spent" if self.certain else "may have been spent"
        return (f"the privacy budget {verb} ({asked}cost {self.cost}) as spend #{self.spend_id} of "
                f"ledger {self.path}; the spend stays recorded")


# One journal per thread (the last 4096 debits of that thread): a call's own debits cannot be
# pushed out by other threads' (one journal shared by all threads lost a failing call's spend
# when another thread debited 4096 times meanwhile).  The journal lives in a thread-local, so
# it goes with its thread; the weak map finds it by thread ident for ``spends_since(thread=)``
# (its single-key set and get are atomic: no lock, which a forked child could inherit held).
_LOCAL = threading.local()
_BY_THREAD: weakref.WeakValueDictionary[int, collections.deque[Spend]] = weakref.WeakValueDictionary()
_SEQ = itertools.count(1)  # debits and marks share it: next() is atomic under the GIL


def _thread_journal() -> collections.deque[Spend]:
    """The calling thread's journal (created on its first debit)."""
    journal = getattr(_LOCAL, "journal", None)
    if journal is None:
        journal = _LOCAL.journal = collections.deque(maxlen=4096)
        _BY_THREAD[threading.get_ident()] = journal
    return journal


def journal_mark() -> int:
    """A mark for :func:`spends_since`: every debit journaled after this call has a larger
    sequence number, every earlier one of the calling thread a smaller one."""
    return next(_SEQ)


def spends_since(mark: int, *, thread: int | None = None) -> list[Spend]:
    """Debits committed by this process (by the calling thread unless ``thread`` is given)
    after ``mark`` (from :func:`journal_mark`), oldest first."""
    if thread is None:
        journal = getattr(_LOCAL, "journal", None)
    else:
        journal = _BY_THREAD.get(thread)
    return [r for r in list(journal or ()) if r.seq > mark]


def _journal(rec: Spend) -> Spend:
    seq = next(_SEQ)
    rec = Spend(rec.path, rec.spend_id, rec.cost, rec.mechanism, rec.asked, rec.certain, seq,
                threading.get_ident())
    _thread_journal().append(rec)
    return rec


def note_spent(exc: BaseException, spends: list[Spend]) -> None:
    """Attach ``spends`` to ``exc``: ``exc.privirt_spends`` and one note each (``__notes__``)."""
    have = list(getattr(exc, "privirt_spends", []) or [])
    new = [r for r in spends if all((r.path, r.spend_id) != (h.path, h.spend_id) for h in have)]
    if not new:
        return
    try:
        exc.privirt_spends = have + new  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - exceptions with __slots__
        pass
    for r in new:
        exc.add_note(f"privirt: {r.describe()}")


F = TypeVar("F", bound=Callable[..., Any])


def reports_spends(fn: F) -> F:
    """Decorate a private entry point: an exception or interrupt raised after it debited a
    ledger carries the debit (:func:`note_spent`)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark = journal_mark()
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            spent = spends_since(mark)
            if spent:
                note_spent(exc, spent)
            raise

    return wrapper  # type: ignore[return-value]


def _format_spends(df: "pd.DataFrame") -> "pd.DataFrame":
    """The spends as ``budget show`` lists them: the (ε, δ) asked beside the cost debited."""
    import pandas as pd

    def asked(row) -> str:
        if pd.isna(row["asked_epsilon"]):
            return "(not recorded)"
        return f"ε={row['asked_epsilon']:.6g}, δ={row['asked_delta']:.3g}"

    def cost(row) -> str:
        return str(PrivacyCost(rho=row["rho"], epsilon=row["epsilon"], delta=row["delta"]))

    return pd.DataFrame({
        "time": df["time"].str.slice(0, 19),
        "mechanism": df["mechanism"],
        "asked": [asked(r) for _, r in df.iterrows()],
        "cost": [cost(r) for _, r in df.iterrows()],
        "note": df["note"],
    }, index=df.index)
