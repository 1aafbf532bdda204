"""Numerically safe one-sided truncated normal sampling (vectorised numpy).

The 2PNO Gibbs sampler needs, for every observed cell and every iteration, a draw
Z ~ N(μ, 1) restricted to Z > 0 (correct response) or Z < 0 (incorrect response), and for
every item a slope a ~ N(m, s²) restricted to a > 0.  All of these reduce to the standard
lower-truncated normal

    X ~ N(0, 1) conditioned on X > L,

by location-scale and reflection (X → −X turns an upper bound into a lower one).

Method (inverse CDF on the *upper* tail)
----------------------------------------
With V ~ U(0, 1], P(X > x | X > L) = Φ(−x) / Φ(−L), hence

    X = −Φ⁻¹( V · Φ(−L) ).

Working with the upper-tail probability Φ(−L) avoids the cancellation of the textbook
``Φ⁻¹(Φ(L) + U (1 − Φ(L)))`` (which returns ``inf``/``nan`` as soon as Φ(L) rounds to 1,
i.e. L ≳ 8.3).  For L ≤ ``FAR_TAIL`` (5) the product V · Φ(−L) ≥ V · 2.9e−7 is an ordinary
double and ``scipy.special.ndtri`` is accurate there.  For L > 5 (far tail) the same
identity is evaluated in log space,

    X = −Φ⁻¹_exp( log V + log Φ(−L) ),

with ``scipy.special.log_ndtr`` and ``scipy.special.ndtri_exp``, which stay accurate however
far out the bound is (L = 30 or 300 give finite draws just above L).  Both branches are exact
(no approximation beyond floating point), so the result has exactly the truncated normal
distribution.  ``V = 1 − U`` with ``U`` from :meth:`numpy.random.Generator.random` lies in
(0, 1], so no draw is infinite: V = 1 returns the bound itself.  From |L| ≥ ``POINT_MASS``
(1e150) on the draw is the bound itself (see :func:`std_truncnorm_upper`), as in the fused
engines' kernels.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["std_truncnorm_lower", "std_truncnorm_upper", "truncnorm_draw", "FAR_TAIL", "POINT_MASS"]

FAR_TAIL = 5.0
#: |bound| from which a far-tail draw is the bound itself (the fused/numba/CUDA kernels' rule)
POINT_MASS = 1e150


_ONE_MINUS = 1.0 - 2.0**-53  # largest double below 1


def std_truncnorm_upper(upper: np.ndarray, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Transform uniforms into draws of Y ~ N(0, 1) | Y < ``upper``.

    Y = Φ⁻¹(V · Φ(upper)), in log space (``ndtri_exp``/``log_ndtr``) where
    ``upper < −FAR_TAIL``, and ``upper`` itself where ``upper ≤ −POINT_MASS``.

    Parameters
    ----------
    upper : ndarray
        Truncation points (finite, or +inf for no truncation).
    v : ndarray
        Uniforms in (0, 1], same shape as ``upper``.
    out : ndarray, optional
        Where to write the result (may be ``v`` itself; must not be ``upper``).

    Returns
    -------
    ndarray
        Draws, each ≤ its bound and finite.
    """
    upper = np.asarray(upper, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if upper.ndim == 0:
        return std_truncnorm_upper(upper.reshape(1), v.reshape(1))[0]
    # upper ≤ −1e150: Y − upper is about −E/|upper| with E ≤ 37 (V ≥ 2⁻⁵³), below half an ulp
    # of upper, so every draw rounds to upper; log_ndtr(upper) ~ −upper²/2 overflows to −inf from
    # about −2e154 on, which gave −inf.  The bound itself, as the fused engines return there.
    mass = upper <= -POINT_MASS
    far = (upper < -FAR_TAIL) & ~mass
    # far-tail draws first: ``out`` may be ``v`` itself and is overwritten below
    tail = (
        special.ndtri_exp(np.log(v[far]) + special.log_ndtr(upper[far])) if far.any() else None
    )
    p = special.ndtr(upper)
    np.multiply(p, v, out=p)
    np.minimum(p, _ONE_MINUS, out=p)  # Φ⁻¹(1) = inf: only reachable when upper > 8.3
    y = special.ndtri(p, out=out if out is not None else p)
    if tail is not None:
        y[far] = tail
    if mass.any():
        y[mass] = upper[mass]
    return y


def std_truncnorm_lower(lower: np.ndarray, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Transform uniforms into draws of X ~ N(0, 1) | X > ``lower``.

    By reflection, X = −Y with Y ~ N(0, 1) | Y < −lower (see :func:`std_truncnorm_upper`).

    Parameters
    ----------
    lower : ndarray
        Truncation points L (finite, or −inf for no truncation).
    v : ndarray
        Uniforms in (0, 1], same shape as ``lower``.
    out : ndarray, optional
        Where to write the result (may be ``v`` itself).

    Returns
    -------
    ndarray
        Draws, each ≥ its bound and finite.
    """
    x = std_truncnorm_upper(-np.asarray(lower, dtype=np.float64), v, out=out)
    return np.negative(x, out=x) if isinstance(x, np.ndarray) else -x


def truncnorm_draw(
    mean: np.ndarray | float,
    sd: np.ndarray | float,
    *,
    lower: np.ndarray | float | None = None,
    upper: np.ndarray | float | None = None,
    rng: np.random.Generator | int | None = None,
    size: int | tuple[int, ...] | None = None,
) -> np.ndarray:
    """Draw from N(mean, sd²) truncated to one side: ``> lower`` or ``< upper``.

    Parameters
    ----------
    mean, sd : float or ndarray
        Location and scale (sd > 0), broadcast together with the bound.
    lower, upper : float or ndarray
        Exactly one of them: the truncation point.
    rng : numpy.random.Generator or int, optional
        Source of uniforms.
    size : int or tuple, optional
        Output shape (default: the broadcast shape of the arguments).

    Returns
    -------
    ndarray
        Draws strictly on the requested side of the bound (or equal to it with probability
        at most 2⁻⁵³).

    Examples
    --------
    >>> x = truncnorm_draw(0.0, 1.0, lower=30.0, rng=1, size=3)
    >>> bool((x >= 30).all() and (x < 31).all())
    True
    """
    if (lower is None) == (upper is None):
        raise ValueError("give exactly one of lower= or upper=")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    mean = np.asarray(mean, dtype=np.float64)
    sd = np.asarray(sd, dtype=np.float64)
    if np.any(~(sd > 0)):
        raise ValueError("sd must be positive")
    if lower is not None:
        bound = (np.asarray(lower, dtype=np.float64) - mean) / sd
        sign = 1.0
    else:
        bound = (mean - np.asarray(upper, dtype=np.float64)) / sd
        sign = -1.0
    shape = np.broadcast_shapes(bound.shape, sd.shape) if size is None else (
        (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    )
    bound = np.broadcast_to(bound, shape)
    v = 1.0 - gen.random(shape)
    x = std_truncnorm_lower(bound, v)
    return mean + sign * sd * x
