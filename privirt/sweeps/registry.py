"""The estimators a sweep can run: mechanism name -> :class:`Estimator`.

Each entry holds the estimator *callable* itself, the keyword arguments fixed by the name,
the option keys a ``[mechanism_options.NAME]`` table may set, whether the callable takes
``device`` and whether it is a private release.  Adding an estimator to the sweeps is one
:func:`register` call (see ``docs/sweeps.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..cmle import cmle_estimate
from ..private import private_spectral_estimate
from ..spectral import spectral_estimate

__all__ = ["Estimator", "REGISTRY", "UNAVAILABLE", "register", "get", "names",
           "nonprivate_names"]

#: keyword arguments the sweep itself passes; an entry may not fix or expose them
_RESERVED = frozenset({"epsilon", "delta", "seed", "device", "ledger"})


@dataclass(frozen=True, eq=False)
class Estimator:
    """One mechanism name of the sweeps.

    Attributes
    ----------
    name : str
        The name used in configurations and results (``mechanisms = [...]``).
    function : callable
        ``function(X, **kwargs)`` returning a result with ``.beta`` (a Series by item or an
        array in item order) and, for private estimators, ``.privacy``.
    fixed : mapping
        Keyword arguments this name always passes (e.g. ``mechanism="laplace"``).
    option_keys : frozenset of str
        Keyword arguments a ``[mechanism_options.NAME]`` table may set.
    takes_device : bool
        Whether ``function`` accepts ``device=`` (the sweep's ``device`` is then passed).
    private : bool
        Private estimators are called with ``epsilon=``, ``delta=`` and ``seed=`` and get one
        cell per ε; non-private ones one cell per trial.
    description : str
        One line for documentation and error messages.
    """

    name: str
    function: Callable[..., Any]
    private: bool
    fixed: Mapping[str, Any] = field(default_factory=dict)
    option_keys: frozenset[str] = frozenset()
    takes_device: bool = False
    description: str = ""

    def __call__(self, X: Any, *, epsilon: float | None = None, delta: float | None = None,
                 seed: int | None = None, device: str = "auto",
                 options: Mapping[str, Any] | None = None) -> Any:
        """Run the estimator on ``X`` with the fixed arguments and ``options``."""
        kwargs: dict[str, Any] = {**self.fixed, **(options or {})}
        if self.takes_device:
            kwargs["device"] = device
        if self.private:
            return self.function(X, epsilon=epsilon, delta=delta, seed=seed, **kwargs)
        return self.function(X, **kwargs)


#: name -> entry, in registration order (the order of plots and tables)
REGISTRY: dict[str, Estimator] = {}
#: name -> why its estimator could not be imported (a configuration naming it is refused)
UNAVAILABLE: dict[str, str] = {}


def register(
    name: str,
    function: Callable[..., Any],
    *,
    private: bool,
    fixed: Mapping[str, Any] | None = None,
    options: Iterable[str] = (),
    device: bool = False,
    description: str = "",
) -> Estimator:
    """Add an estimator to the sweeps under ``name`` and return its entry.

    Raises
    ------
    ValueError
        If ``name`` is taken or empty, ``function`` is not callable, or ``fixed`` /
        ``options`` name an argument the sweep passes itself (ε, δ, seed, device, ledger).
    """
    if not isinstance(name, str) or not name or not name.replace("_", "").isalnum():
        raise ValueError(f"a mechanism name must be a non-empty identifier, got {name!r}")
    if name in REGISTRY:
        raise ValueError(f"mechanism {name!r} is already registered")
    if not callable(function):
        raise ValueError(f"the estimator for {name!r} must be callable, got {function!r}")
    fixed = dict(fixed or {})
    option_keys = frozenset(options)
    clash = sorted((set(fixed) | option_keys) & _RESERVED)
    if clash:
        raise ValueError(f"mechanism {name!r}: {clash} are passed by the sweep itself; do not "
                         "fix them or list them as options")
    entry = Estimator(name=name, function=function, private=bool(private),
                      fixed=fixed, option_keys=option_keys,
                      takes_device=bool(device), description=description)
    REGISTRY[name] = entry
    return entry


def get(name: str) -> Estimator:
    """The entry registered as ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(unknown_message(name)) from None


def unknown_message(name: Any) -> str:
    """Why ``name`` is not a usable mechanism, in one line."""
    if isinstance(name, str) and name in UNAVAILABLE:
        return (f"mechanism {name!r} is not available in this installation "
                f"({UNAVAILABLE[name]})")
    return f"unknown mechanism {name!r}; known: {', '.join(REGISTRY)}"


def names() -> tuple[str, ...]:
    """Registered mechanism names, in registration order."""
    return tuple(REGISTRY)


def nonprivate_names() -> frozenset[str]:
    """Names of the registered non-private baselines."""
    return frozenset(n for n, e in REGISTRY.items() if not e.private)


_SPECTRAL_OPTIONS = ("regularization", "tol", "max_iter", "solver", "normalizer")
_PRIVATE_SPECTRAL_OPTIONS = ("p0", "sensitivity")
# the sweep measures point estimates: the noisy-count mechanisms run without bootstrap
# intervals (n_boot = 0; β is the same); randomized response has none.  The paper's
# mechanisms keep Algorithm 2's spectral post-processing (estimator = "spectral")

register("spectral", spectral_estimate, private=False, options=_SPECTRAL_OPTIONS, device=True,
         description="non-private spectral estimate")
register("cmle", cmle_estimate, private=False, options=("tol", "max_iter"),
         description="non-private conditional maximum likelihood")
register("gaussian", private_spectral_estimate, private=True,
         fixed={"mechanism": "gaussian", "p0": 1.0, "n_boot": 0, "estimator": "spectral"}, options=_PRIVATE_SPECTRAL_OPTIONS,
         device=True, description="discrete Gaussian, dense comparison graph")
register("gaussian_sparse", private_spectral_estimate, private=True,
         fixed={"mechanism": "gaussian", "p0": "auto", "n_boot": 0, "estimator": "spectral"}, options=_PRIVATE_SPECTRAL_OPTIONS,
         device=True,
         description="discrete Gaussian, sparse Erdős–Rényi comparison graph (p0 = 'auto')")
register("gaussian_paper", private_spectral_estimate, private=True,
         fixed={"mechanism": "gaussian", "p0": 1.0, "sensitivity": "paper", "n_boot": 0, "estimator": "spectral"},
         options=_PRIVATE_SPECTRAL_OPTIONS, device=True,
         description="discrete Gaussian calibrated with the paper's looser sensitivity "
                     "(Lemma 4.1)")
register("gaussian_noise_aware", private_spectral_estimate, private=True,
         fixed={"mechanism": "gaussian", "p0": 1.0, "n_boot": 0, "estimator": "noise_aware"},
         options=_PRIVATE_SPECTRAL_OPTIONS, device=True,
         description="discrete Gaussian counts (the release of 'gaussian'), noise-aware quasi-likelihood "
                     "instead of clipping")
register("laplace", private_spectral_estimate, private=True,
         fixed={"mechanism": "laplace", "p0": 1.0, "n_boot": 0, "estimator": "spectral"}, options=_PRIVATE_SPECTRAL_OPTIONS,
         device=True, description="discrete Laplace, dense comparison graph")
for _name, _shuffle, _rr, _text in (
    ("rr", False, "plain",
     "randomized response (spectral estimate on the randomized bits, as the paper)"),
    ("rr_shuffle", True, "plain",
     "randomized response with shuffling (amplified central guarantee)"),
    ("rr_debiased", False, "debiased",
     "randomized response, spectral estimate on debiased counts"),
    ("rr_shuffle_debiased", True, "debiased",
     "randomized response with shuffling, debiased counts"),
):
    register(_name, private_spectral_estimate, private=True,
             fixed={"mechanism": "randomized_response", "shuffle": _shuffle,
                    "rr_estimator": _rr},
             options=_PRIVATE_SPECTRAL_OPTIONS, device=True, description=_text)
del _name, _shuffle, _rr, _text

try:
    from ..totals import private_totals_estimate
except ImportError as _exc:  # pragma: no cover - an installation without the totals estimator
    UNAVAILABLE["totals"] = str(_exc)
else:
    # the sweep measures point estimates: no bootstrap intervals (n_boot = 0; β is the same)
    register("totals", private_totals_estimate, private=True, fixed={"n_boot": 0},
             options=("n_boot",),
             description="discrete Gaussian on the item totals and the raw-score histogram, "
                         "marginal ML, empirical-Bayes shrinkage")

try:
    from ..private.twopl import private_2pl_estimate
except ImportError as _exc:  # pragma: no cover - an installation without the 2PL estimator
    UNAVAILABLE["twopl"] = str(_exc)
else:
    # point estimates only (n_boot = 0); the sweep's β is the result's Rasch-scale 1.702·(b − mean b)
    register("twopl", private_2pl_estimate, private=True, fixed={"n_boot": 0}, options=("n_boot",),
             description="discrete Gaussian on the item totals and co-correct pair counts, one-factor "
                         "normal-ogive (2PNO) fit; β = 1.702·(b − mean b)")
