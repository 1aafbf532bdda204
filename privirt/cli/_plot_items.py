"""Which items the samplers' ``--plots`` draw (``privirt gibbs``, ``privirt mh``).

A roll call has hundreds of items: a figure for each took the 106th Senate's 672 votes nine
minutes to draw.  Both commands plot the :data:`TRACE_ITEMS` items whose a (and, apart, whose
b) mixed worst: the traces worth a look.
"""

from __future__ import annotations

from typing import Any

#: items in the a and b trace plots: those with the largest R-hat
TRACE_ITEMS = 6
#: the rule, as the commands print it after their file list
PLOTTED_RULE = f"a and b: the {TRACE_ITEMS} items with the largest R-hat, those without one first"


def worst_mixing(rhat: Any, k: int) -> list:
    """The labels of the ``k`` parameters that mixed worst: those without an R-hat (NaN: draws
    that never changed, a stuck chain) first, then the largest R-hat."""
    return list(rhat.sort_values(ascending=False, kind="stable", na_position="first").index[:k])


def plotted_items(summary: Any, k: int = TRACE_ITEMS) -> dict[str, list]:
    """The items whose traces ``--plots`` draws, per block.

    Parameters
    ----------
    summary : pandas.DataFrame
        The posterior summary, indexed by (parameter, label), with an ``rhat`` column.
    k : int
        How many items per block.

    Returns
    -------
    dict
        ``{"a": labels, "b": labels}``: the :func:`worst_mixing` ``k`` items of each block.
    """
    return {block: worst_mixing(summary.loc[block]["rhat"], k) for block in ("a", "b")}
