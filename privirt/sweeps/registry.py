"""The estimators a sweep can run: mechanism name -> :class:`Estimator`.

Each entry holds the estimator *callable* itself, the keyword arguments fixed by the name,
the option keys a ``[mechanism_options.NAME]`` table may set, whether the callable takes
``device`` and whether it is a private release.  The private entries come from the one list
of private methods (:mod:`privirt.private.methods`, each method under its sweep names); adding
another estimator to the sweeps is one :func:`register` call (see ``docs/sweeps.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..private import methods as private_methods
from ..rasch.cmle import cmle_estimate
from ..rasch.spectral import spectral_estimate

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
register("spectral", spectral_estimate, private=False, options=_SPECTRAL_OPTIONS, device=True,
         description="non-private spectral estimate")
register("cmle", cmle_estimate, private=False, options=("tol", "max_iter"), fixed={"progress": False},
         description="non-private conditional maximum likelihood")
# the private methods, from their one list (privirt.private.methods): each under its sweep
# names, with the keyword arguments each name fixes
for _method in private_methods.METHODS.values():
    try:
        _function = _method.estimate
    except ImportError as _exc:  # pragma: no cover - an installation without the method
        for _variant in _method.sweeps:
            UNAVAILABLE[_variant.name] = str(_exc)
        continue
    for _variant in _method.sweeps:
        register(_variant.name, _function, private=True, fixed=_variant.fixed,
                 options=(_method.sweep_options if _variant.options is None
                          else _variant.options), device=_method.takes_device,
                 description=_variant.description)
del _method, _function, _variant
