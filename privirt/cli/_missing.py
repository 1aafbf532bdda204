"""The missing-data pre-checks of ``privirt estimate`` (Rasch methods and ``--model 2pl``): under
``--missing none`` every cell of the public table must be in the data, with one message for
each way it is not and the command to run instead."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["command_with", "declare_mcar", "check_complete"]


def command_with(args: argparse.Namespace, flag: str, value: str) -> str:
    """The command as typed (``args.argv``), with ``flag value`` set: the line to run instead."""
    import shlex

    argv = list(getattr(args, "argv", None) or ["estimate", str(args.file)])
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == flag:
            skip = True
            continue
        if word.startswith(flag + "="):
            continue
        out.append(word)
    return shlex.join(["privirt", *out, flag, value])


def declare_mcar(args: argparse.Namespace, method: str, n_items: int) -> str:
    """What to do about missing cells under ``--missing none``: declare MCAR (where the method's
    MCAR release holds the public number of items) or use Algorithm 2 (``method="2pl"``: the
    2PL model, whose only remedy is MCAR)."""
    from ..private.totals.marginal_missing import MCAR_MAX_ITEMS, mcar_release_holds

    if method == "totals" and not mcar_release_holds(n_items):
        return (f"use --method spectral, which takes missing cells as they are (the totals method's MCAR "
                f"release is built for up to {MCAR_MAX_ITEMS} items; nothing was spent)")
    declare = ("if cells are missing completely at random, declare --missing mcar: "
               f"`{command_with(args, '--missing', 'mcar')}`")
    return f"{declare} (nothing was spent)" if method == "2pl" else f"{declare}; or use --method spectral (nothing was spent)"


def check_complete(resp, args: argparse.Namespace, items: list | None, *, method: str, what: str,
                   n_items: int) -> None:
    """Refuse, under ``--missing none``, data whose public table has missing cells: cells missing
    in the file, ``--items`` naming an item nobody answered, ``--n-persons`` counting absent
    persons.  ``what`` names the run in the message (``"the totals method"``, ``"--model 2pl"``)."""
    if (args.missing or "none") != "none":
        return
    name = Path(args.file).name
    if items is not None:
        from ..data._labels import match_items

        # an item outside the public set (a typo, 'Q1' for 'q1') leaves cells missing too: that,
        # not "declare --missing mcar" (which then fails on it), is the problem to name
        match_items(items, resp.items, public=True)
    if getattr(resp, "has_missing", False):
        raise ValueError(f"{name} has missing cells but {what} was run for complete data; "
                         f"{declare_mcar(args, method, n_items)}")
    present = {str(i) for i in resp.items}
    if items is not None and any(str(i) not in present for i in items):
        # (no count or label of them: the refusal is the data holder's, but says no more than the API's)
        raise ValueError(f"--items names item(s) that nobody answered in {name}; their cells are all "
                         f"missing: {declare_mcar(args, method, n_items)}")
    if args.n_persons is not None and args.n_persons > resp.n_persons:
        raise ValueError(f"--n-persons {args.n_persons} counts persons absent from {name}; they are "
                         f"all-missing rows: {declare_mcar(args, method, n_items)}")
