"""The one wording of a list of flagged items in the samplers' warnings and refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: how many flagged items a message names before it cuts the list
SHOWN = 5


def name_items(items: pd.Index, mask: np.ndarray, shown: int = SHOWN) -> str:
    """The items flagged by ``mask``, e.g. ``"rc1, rc9, ... (76 of 672 items)"``.

    Parameters
    ----------
    items : pandas.Index
        Every item's label.
    mask : numpy.ndarray
        Boolean, one entry per item: the flagged ones.
    shown : int, optional
        How many flagged items to name; a longer list is cut with ``"..."`` and its count.

    Returns
    -------
    str
        The first ``shown`` flagged labels, comma separated, plus ``", ... (k of n items)"``
        when more are flagged.
    """
    flagged = items[np.asarray(mask, dtype=bool)]
    names = ", ".join(str(x) for x in flagged[:shown])
    if len(flagged) > shown:
        names += f", ... ({len(flagged)} of {len(items)} items)"
    return names
