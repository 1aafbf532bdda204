"""Andersen's (1973) conditional likelihood-ratio test of the Rasch model.

The persons are split into groups (by the raw-score median or mean, or by a person covariate);
the Rasch item difficulties are estimated by CML in every group and in the whole sample, and

    LR = 2 (Σ_g ℓ_g(β̂_g) − ℓ(β̂)),    df = (G − 1)(m − 1),

is asymptotically χ² under the model (the difficulties are the same in every group).
An item that cannot be estimated within some group (answered by no person with a non-extreme
score there, or right or wrong for all of them) is dropped from every fit with a warning, as
eRm's ``LRtest`` does, and ``m`` counts the items kept.  Formulas: ``docs/fit.md``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..data._labels import _py
from ..data.responses import Responses, ResponsesLike, as_responses
from ..exceptions import user_stacklevel

__all__ = ["AndersenResult", "andersen_test"]

#: A median or mean split of data with missing cells warns where its smaller group holds less than
#: this share of the persons (the cut is per pattern of answered items: docs/fit.md)
LOPSIDED_SHARE = 0.1


@dataclass(frozen=True, eq=False)
class AndersenResult:
    """Result of :func:`andersen_test`.

    Attributes
    ----------
    statistic : float
        The likelihood-ratio statistic ``2 (Σ_g ℓ_g − ℓ)``.
    df : int
        Degrees of freedom ``(G − 1)(m − 1)``, ``m`` the items kept.
    pvalue : float
        Upper χ² tail probability of ``statistic``.
    split : str
        How the persons were split.
    loglik : float
        Conditional log-likelihood of the whole sample.
    loglik_groups : pandas.Series
        Conditional log-likelihood of each group.
    n_persons : pandas.Series
        Persons in each group (all of them; those with an extreme score carry no
        conditional information).
    beta, se : pandas.DataFrame
        Items kept × groups: each group's centred CML difficulties and standard errors.
    items_dropped : list
        Items left out because some group cannot estimate them.
    """

    statistic: float
    df: int
    pvalue: float
    split: str
    loglik: float
    loglik_groups: pd.Series
    n_persons: pd.Series
    beta: pd.DataFrame
    se: pd.DataFrame
    items_dropped: list = field(default_factory=list)

    def __str__(self) -> str:
        groups = ", ".join(f"{g}: {n}" for g, n in self.n_persons.items())
        text = (f"Andersen LR test ({self.split}; persons {groups}): LR = {self.statistic:.3f}, "
                f"df = {self.df}, p = {self.pvalue:.4g}")
        if self.items_dropped:
            text += f"; items dropped: {', '.join(str(i) for i in self.items_dropped)}"
        return text


def andersen_test(
    X: ResponsesLike,
    split: Any = "median",
    *,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> AndersenResult:
    """Andersen's likelihood-ratio test of equal item difficulties across person groups.

    Parameters
    ----------
    X : ResponsesLike
        Persons × items 0/1 responses, NaN/None for missing.
    split : "median", "mean", or array-like / pandas.Series
        ``"median"`` (default, as eRm): persons whose raw score (number right) is above the
        median raw score against the rest; ``"mean"`` likewise with the mean; with missing
        cells the median (mean) is taken among the persons who answered the same items
        (``docs/fit.md``); or one group label per person (a Series indexed by the same persons
        in the same order, or an array in row order; two or more groups, no missing labels).
    tol, max_iter
        Passed to :func:`privirt.cmle_estimate`; a fit that does not converge within them
        warns, naming the group.

    Returns
    -------
    AndersenResult

    Raises
    ------
    ValueError
        Fewer than two groups, a group without any person of non-extreme score, fewer than
        two items left once the items a group cannot estimate are dropped, or a CML fit
        whose estimates are infinite (the message names the group).

    Warns
    -----
    UserWarning
        When items are dropped because some group cannot estimate them, or when a median or
        mean split of data with missing cells leaves fewer than :data:`LOPSIDED_SHARE` of the
        persons in one group.

    Examples
    --------
    >>> import privirt
    >>> res = privirt.andersen_test(privirt.load_dataset("lsat7"), split="mean")
    >>> res.df, round(res.pvalue, 3)
    (4, 0.028)
    """
    from ..rasch.cmle import cmle_estimate

    # the split names the data's persons, those without a response too (they are dropped below,
    # with their group label: a split matching the data was refused when one person was empty)
    full = as_responses(X, empty="keep")
    groups, label = _groups(full, split)
    resp = as_responses(X)
    if resp.n_persons != full.n_persons:
        groups = groups[full.persons.get_indexer(resp.persons)]
    names = list(pd.unique(groups))
    if isinstance(split, str):
        names = [g for g in ("low", "high") if g in names]
    else:
        try:
            names = sorted(names)
        except TypeError:
            pass
    if len(names) < 2:
        if not isinstance(split, str):
            why = (": split differently (e.g. split='median', split='mean' or a covariate with "
                   "two or more groups)")
        elif resp.has_missing:
            why = ("; with missing cells the cut is taken among the persons who answered the same "
                   "items, and here nearly every person answered a set of their own: split by a "
                   "covariate instead")
        else:
            why = f": {_split_hint(split, resp)}"
        raise ValueError(f"the split ({label}) puts every person in one group; the test "
                         f"needs at least two groups{why}")
    members = {g: groups == g for g in names}
    sizes = {g: int(members[g].sum()) for g in names}
    if isinstance(split, str) and resp.has_missing and min(sizes.values()) < LOPSIDED_SHARE * resp.n_persons:
        few = min(sizes, key=sizes.get)
        warnings.warn(
            f"Andersen test: the {split} split put {sizes[few]} of {resp.n_persons} persons in "
            f"{few!r}: with missing cells the cut is taken among the persons who answered the same "
            "items, and a person who answered a set of their own is always 'low'; the test then "
            "has little power: split by a covariate instead",
            UserWarning, stacklevel=user_stacklevel(),
        )
    hint = _split_hint(split, resp)
    keep, culprits = _estimable_items(resp, members, hint)
    dropped = list(resp.items[~keep])
    if dropped:
        warnings.warn(
            f"Andersen test: dropped {len(dropped)} item(s) that some group cannot estimate "
            f"(no non-extreme response, or all right or all wrong there): "
            f"{', '.join(str(i) for i in dropped[:10])}",
            UserWarning, stacklevel=user_stacklevel(),
        )
    cols = np.flatnonzero(keep)
    if cols.size < 2:
        raise ValueError(_too_few_items(cols.size, names, culprits, hint))

    def fit(rows: np.ndarray, name: str, whole: bool = False):
        sub = resp.subset(rows, cols)
        sub = sub.subset(np.flatnonzero((sub.codes >= 0).any(axis=1)))
        try:
            res = cmle_estimate(sub, tol=tol, max_iter=max_iter, progress=False)  # (no progress= here)
        except ValueError as exc:
            # what fails the whole sample fails every group on the same items: no split cures it
            raise ValueError(f"Andersen test, {name}: "
                             f"{_cml_advice(str(exc), None if whole else hint)}") from None
        if not res.converged:
            warnings.warn(f"Andersen test, {name}: the CML fit did not converge in max_iter={max_iter} "
                          f"iterations (tol={tol:g}); the statistic is not the test's (raise max_iter)",
                          UserWarning, stacklevel=user_stacklevel())
        return res

    whole = fit(np.arange(resp.n_persons), "whole sample", whole=True)
    fits = {g: fit(np.flatnonzero(members[g]), f"group {g!r}") for g in names}
    ll_groups = pd.Series({g: f.loglik for g, f in fits.items()}, name="loglik")
    stat = max(2.0 * (float(ll_groups.sum()) - whole.loglik), 0.0)
    df = (len(names) - 1) * (cols.size - 1)
    return AndersenResult(
        statistic=stat,
        df=df,
        pvalue=float(stats.chi2.sf(stat, df)),
        split=label,
        loglik=float(whole.loglik),
        loglik_groups=ll_groups,
        n_persons=pd.Series(sizes, name="n_persons"),
        beta=pd.DataFrame({g: f.beta for g, f in fits.items()}),
        se=pd.DataFrame({g: f.se for g, f in fits.items()}),
        items_dropped=dropped,
    )


def _groups(resp: Responses, split: Any) -> tuple[np.ndarray, str]:
    """One group label per person and a description of the split."""
    if isinstance(split, str):
        if split not in ("median", "mean"):
            raise ValueError(f"split must be 'median', 'mean' or one group label per person, "
                             f"got {split!r}")
        obs = resp.codes >= 0
        score = (resp.codes == 1).sum(axis=1).astype(np.float64)
        # the cut is taken among the persons who answered the same items (as eRm does), so
        # that with missing data scores are compared on the same items; with complete data
        # it is the median (mean) of all raw scores
        _, pattern = np.unique(np.packbits(obs, axis=1), axis=0, return_inverse=True)
        pattern = pattern.ravel()
        cut = np.empty(resp.n_persons)
        for p in np.unique(pattern):
            rows = pattern == p
            cut[rows] = np.median(score[rows]) if split == "median" else score[rows].mean()
        groups = np.where(score > cut, "high", "low").astype(object)
        what = f"raw score > {split}" + (f" {cut[0]:g}" if np.all(cut == cut[0]) else "")
        return groups, what
    if isinstance(split, pd.Series):
        if not split.index.equals(resp.persons):
            raise ValueError("split's persons do not match the responses' persons in labels and "
                             "order; pass split.reindex(<persons>)")
        values = split.to_numpy(dtype=object)
        label = f"by {split.name}" if split.name is not None else "by covariate"
    else:
        values = np.asarray(split, dtype=object)
        label = "by covariate"
        if values.ndim != 1:
            raise ValueError(f"split must be one-dimensional, got shape {values.shape}")
    if values.size != resp.n_persons:
        raise ValueError(f"split has {values.size} labels but the responses have "
                         f"{resp.n_persons} persons")
    missing = pd.isna(values)
    if missing.any():
        raise ValueError(f"split has no group for {int(missing.sum())} person(s) (e.g. row "
                         f"{int(np.flatnonzero(missing)[0])}); drop them from the data first")
    return values, label


def _split_hint(split: Any, resp: Responses) -> str:
    """Advice to split differently, never naming the split just used, nor the other score split
    where it too leaves a group without a non-extreme score (two items: every such score is 1,
    and median and mean each sent the user to the other)."""
    if isinstance(split, str):  # two score groups: merging them leaves no test
        other = "mean" if split == "median" else "median"
        groups, _ = _groups(resp, other)
        score = (resp.codes == 1).sum(axis=1)
        inner = (score > 0) & (score < (resp.codes >= 0).sum(axis=1))
        if all(inner[groups == g].any() for g in ("low", "high")):
            return f"split differently (e.g. split={other!r} or a covariate)"
        return ("no raw-score split leaves a non-extreme score in both groups; split by a "
                "covariate (one group label per person) or add items")
    return "split differently (e.g. split='median', split='mean' or another covariate) or merge groups"


def _cml_advice(text: str, hint: str | None) -> str:
    """``cmle_estimate``'s message with its remedy "use spectral_estimate (regularised)", which the
    test (CML in every group) cannot take, replaced by dropping the items and, for a group,
    ``hint`` (``None``: no split helps)."""
    remedies = ["drop those items from the data"] + ([hint] if hint else [])
    instead = " or ".join(remedies)
    text = text.replace(" or use spectral_estimate (regularised)",
                        (", " if len(remedies) > 1 else " or ") + instead)
    return text.replace("use spectral_estimate (regularised)", instead)


def _too_few_items(n_left: int, names: list, culprits: set, hint: str) -> str:
    """The refusal of a split that leaves fewer than two items, naming the groups that cannot
    estimate the others (a few, then "...") and how to split differently."""
    bad = [g for g in names if g in culprits]
    shown = ", ".join(repr(_py(g)) for g in bad[:3]) + (", ..." if len(bad) > 3 else "")
    remedy = hint if "add items" in hint else f"{hint}, or add items"
    return (f"Andersen test: only {n_left} item(s) can be estimated in every group: group(s) "
            f"{shown} cannot estimate the others (no non-extreme response, or all right or all "
            f"wrong there); the test needs at least two: {remedy}")


def _estimable_items(resp: Responses, members: dict, hint: str) -> tuple[np.ndarray, set]:
    """Items every group can estimate by CML, found by dropping until nothing changes
    (dropping an item changes scores, hence which persons are extreme), and the groups that
    dropped some; ``hint``: how else to split, for the error when a group has no information."""
    keep = np.ones(resp.n_items, dtype=bool)
    culprits: set = set()
    while True:
        bad = np.zeros_like(keep)
        for g, rows in members.items():
            codes = resp.codes[rows][:, keep]
            answered = (codes >= 0).sum(axis=1)
            score = (codes == 1).sum(axis=1)
            inner = (score > 0) & (score < answered)
            if not inner.any():
                raise ValueError(
                    f"Andersen test: group {g!r} has no person with a non-extreme score, so "
                    f"it carries no conditional information; {hint}"
                )
            c = codes[inner]
            n_ans = (c >= 0).sum(axis=0)
            right = (c == 1).sum(axis=0)
            mine = (n_ans == 0) | (right == 0) | (right == n_ans)
            if mine.any():
                culprits.add(g)
            bad[np.flatnonzero(keep)] |= mine
        if not bad.any():
            return keep, culprits
        keep &= ~bad
        if keep.sum() < 2:
            return keep, culprits
