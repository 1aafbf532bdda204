"""The one list of private methods: name -> :class:`PrivateMethod`.

Everything that offers a choice of private method reads it from here: ``privirt estimate
--method`` (:mod:`privirt.cli.estimate`), the sweeps (:mod:`privirt.sweeps.registry`), the
default chooser (:mod:`privirt.private.choose`) and a service.  Adding a private method is one
:func:`register` call at the end of this module (``docs/architecture.md``).

Importing this module is cheap (no numpy): an entry names the module that implements it
through a *loader* (a function with a function-level import, so that the import graph of
``tests/test_architecture.py`` sees the dependency) and the names of its callables there;
:attr:`PrivateMethod.estimate` and friends import on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Mapping

from .._constants import MECHANISMS, MISSING_DOMAINS

__all__ = ["PrivateMethod", "SweepVariant", "METHODS", "register", "get", "names",
           "COMMON_OPTIONS"]

#: keyword arguments every private method's ``estimate`` takes (the caller's business, not an
#: option of the method): the target, the seed contract, the ledger and the public declarations
COMMON_OPTIONS = frozenset({"epsilon", "delta", "seed", "ledger", "note", "items", "n_persons",
                            "engine", "client"})
#: values a method's ``missing=`` option may accept (the declared input domain)
DOMAINS = MISSING_DOMAINS


@dataclass(frozen=True)
class SweepVariant:
    """One mechanism name of the sweeps built on a private method (``fixed`` kwargs).

    ``options``: the keys its ``[mechanism_options.NAME]`` table may set, where they differ
    from the method's ``sweep_options`` (``None``: the method's); an option that the fixed
    arguments make meaningless is left out, so that it is refused rather than ignored.
    """

    name: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    options: tuple[str, ...] | None = None


@dataclass(frozen=True, eq=False)
class PrivateMethod:
    """One private method.

    Attributes
    ----------
    name : str
        ``privirt.private.methods.get(NAME)``; on the command line ``privirt estimate --method NAME``
        for a Rasch method, while a method of another model is chosen by ``--model`` (the
        ``twopl`` entry by ``--model 2pl``: ``--method twopl`` says so).
    load : callable
        ``load()`` returns the module that implements the method.
    estimate_name, release_name, from_release_name : str or None
        Names in that module of ``estimate(X, *, epsilon, delta, seed, ledger, ...)`` (a result
        with ``.beta``, ``.privacy`` and, with intervals, ``.se`` and ``.ci``), of the release
        (the publishable noisy statistics) and of the post-processing of a release.
    options : frozenset of str
        The method's own public keyword options of ``estimate`` (beyond :data:`COMMON_OPTIONS`),
        e.g. ``mechanism`` or ``n_boot``.
    missing : tuple of str
        Values its ``missing=`` option accepts (the declared input domain, :data:`DOMAINS`);
        empty: the method has no such option and handles missing cells as they are.
    intervals : bool
        Whether its results carry standard errors and intervals.
    mechanisms : tuple of str
        The noise mechanisms it can use (its ``mechanism=`` choices, or the one it uses).
    takes_device : bool
        Whether ``estimate`` accepts ``device=``.
    sweeps : tuple of SweepVariant
        The mechanism names under which the sweeps run it (default: one, its own name).
    sweep_options : tuple of str
        Keyword arguments a sweep's ``[mechanism_options.NAME]`` table may set (a variant's
        own ``options`` replace them for its name).
    description : str
        One line for help texts and documentation.
    model : str
        The IRT model it estimates: ``"rasch"`` (results with ``.beta``; the choices of
        ``--method``) or ``"2pl"`` (results with ``.a`` and ``.b``; ``--model 2pl``).
    """

    name: str
    load: Callable[[], ModuleType]
    estimate_name: str
    release_name: str | None = None
    from_release_name: str | None = None
    options: frozenset[str] = frozenset()
    missing: tuple[str, ...] = ()
    intervals: bool = False
    mechanisms: tuple[str, ...] = ()
    takes_device: bool = False
    sweeps: tuple[SweepVariant, ...] = ()
    sweep_options: tuple[str, ...] = ()
    description: str = ""
    model: str = "rasch"

    def _get(self, attr: str | None) -> Callable[..., Any] | None:
        return None if attr is None else getattr(self.load(), attr)

    @property
    def estimate(self) -> Callable[..., Any]:
        """``estimate(X, *, epsilon, delta, ...)``: release and estimate in one call."""
        return self._get(self.estimate_name)

    @property
    def release(self) -> Callable[..., Any] | None:
        """The release alone (publishable noisy statistics), or None."""
        return self._get(self.release_name)

    @property
    def from_release(self) -> Callable[..., Any] | None:
        """Estimates from a release (post-processing, no privacy cost), or None."""
        return self._get(self.from_release_name)


#: name -> entry, in registration order (the order of choices, plots and tables)
METHODS: dict[str, PrivateMethod] = {}


def register(name: str, load: Callable[[], ModuleType], *, estimate: str,
             release: str | None = None, from_release: str | None = None,
             options: tuple[str, ...] = (), missing: tuple[str, ...] = (),
             intervals: bool = False, mechanisms: tuple[str, ...] = (),
             device: bool = False, sweeps: tuple[SweepVariant, ...] | None = None,
             sweep_options: tuple[str, ...] = (), description: str = "",
             model: str = "rasch") -> PrivateMethod:
    """Add a private method under ``name`` and return its entry.

    Raises
    ------
    ValueError
        If ``name`` is taken or not an identifier, ``load`` is not callable, ``model`` (other
        than ``"rasch"``) has a method already (``--model`` runs a model's one method), an option is one
        of :data:`COMMON_OPTIONS`, or ``missing`` names an unknown domain.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a private method's name must be an identifier, got {name!r}")
    if name in METHODS:
        raise ValueError(f"private method {name!r} is already registered")
    if not callable(load):
        raise ValueError(f"the loader of {name!r} must be callable, got {load!r}")
    taken = [m.name for m in METHODS.values() if m.model == model != "rasch"]
    if taken:  # (the command line's --model picks a model's one method)
        raise ValueError(f"private method {name!r}: the {model} model has its private method already, "
                         f"{taken[0]!r} (--model {model} runs it: one method per model other than the Rasch "
                         f"model); to replace it, remove {taken[0]!r} from METHODS first")
    clash = sorted(set(options) & COMMON_OPTIONS)
    if clash:
        raise ValueError(f"private method {name!r}: {clash} are common to every method; do not "
                         "list them as its options")
    unknown = sorted(set(missing) - set(DOMAINS))
    if unknown:
        raise ValueError(f"private method {name!r}: unknown input domain(s) {unknown}; "
                         f"known: {', '.join(DOMAINS)}")
    if missing and "missing" not in options:
        options = (*options, "missing")
    entry = PrivateMethod(
        name=name, load=load, estimate_name=estimate, release_name=release,
        from_release_name=from_release, options=frozenset(options), missing=tuple(missing),
        intervals=bool(intervals), mechanisms=tuple(mechanisms), takes_device=bool(device),
        sweeps=tuple(sweeps) if sweeps is not None else (SweepVariant(name, {}, description),),
        sweep_options=tuple(sweep_options), description=description, model=model,
    )
    METHODS[name] = entry
    return entry


def get(name: Any) -> PrivateMethod:
    """The entry registered as ``name`` (ValueError naming the known ones otherwise)."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown private method {name!r}; known: {', '.join(METHODS)}") from None


def names(model: str | None = "rasch") -> tuple[str, ...]:
    """Registered private method names of ``model`` (all with None), in registration order."""
    return tuple(n for n, m in METHODS.items() if model is None or m.model == model)


# ---------------------------------------------------------------------------------------
# the methods
def _algorithm2() -> ModuleType:
    from .counts import api

    return api


def _totals() -> ModuleType:
    from .totals import api

    return api


def _twopl() -> ModuleType:
    from . import twopl

    return twopl


# The sweeps measure point estimates: the noisy-count mechanisms run without bootstrap
# intervals (n_boot = 0; β is the same); randomized response has none.  The paper's
# mechanisms keep Algorithm 2's spectral post-processing (estimator = "spectral").
register(
    "spectral", _algorithm2,
    estimate="private_spectral_estimate", release="release_counts",
    from_release="spectral_from_release",
    options=("mechanism", "p0", "shuffle", "sensitivity", "rr_estimator", "estimator",
             "confidence", "n_boot"),
    intervals=True, mechanisms=MECHANISMS, device=True,
    sweeps=(
        SweepVariant("gaussian", {"mechanism": "gaussian", "p0": 1.0, "n_boot": 0,
                                  "estimator": "spectral"},
                     "discrete Gaussian, dense comparison graph"),
        SweepVariant("gaussian_sparse", {"mechanism": "gaussian", "p0": "auto", "n_boot": 0,
                                         "estimator": "spectral"},
                     "discrete Gaussian, sparse Erdős–Rényi comparison graph (p0 = 'auto')"),
        SweepVariant("gaussian_paper", {"mechanism": "gaussian", "p0": 1.0,
                                        "sensitivity": "paper", "n_boot": 0,
                                        "estimator": "spectral"},
                     "discrete Gaussian calibrated with the paper's looser sensitivity "
                     "(Lemma 4.1)"),
        SweepVariant("gaussian_noise_aware", {"mechanism": "gaussian", "p0": 1.0, "n_boot": 0,
                                              "estimator": "noise_aware"},
                     "discrete Gaussian counts (the release of 'gaussian'), noise-aware "
                     "quasi-likelihood instead of clipping"),
        SweepVariant("laplace", {"mechanism": "laplace", "p0": 1.0, "n_boot": 0,
                                 "estimator": "spectral"},
                     "discrete Laplace, dense comparison graph"),
        # (randomized response has no sensitivity to choose: only p0 is an option there)
        *(SweepVariant(name, {"mechanism": "randomized_response", "shuffle": shuffle,
                              "rr_estimator": rr}, text, options=("p0",))
          for name, shuffle, rr, text in (
              ("rr", False, "plain",
               "randomized response (spectral estimate on the randomized bits, as the paper)"),
              ("rr_shuffle", True, "plain",
               "randomized response with shuffling (amplified central guarantee)"),
              ("rr_debiased", False, "debiased",
               "randomized response, spectral estimate on debiased counts"),
              ("rr_shuffle_debiased", True, "debiased",
               "randomized response with shuffling, debiased counts"),
          )),
    ),
    sweep_options=("p0", "sensitivity"),
    description="Algorithm 2: noisy pairwise counts (Gaussian, Laplace or randomized "
                "response), spectral or noise-aware fit, bootstrap intervals",
)
register(
    "totals", _totals,
    estimate="private_totals_estimate", release="release_totals",
    from_release="estimate_from_release",
    options=("confidence", "n_boot"), missing=MISSING_DOMAINS, intervals=True,
    mechanisms=("gaussian",),
    sweeps=(SweepVariant("totals", {"n_boot": 0},
                         "discrete Gaussian on the item totals and the raw-score histogram, "
                         "marginal ML, empirical-Bayes shrinkage"),),
    sweep_options=("n_boot", "missing"),
    description="noisy item totals and raw-score histogram (discrete Gaussian), marginal ML "
                "with intervals",
)
register(
    "twopl", _twopl,
    estimate="private_2pl_estimate", release="release_2pl",
    from_release="estimate_2pl_from_release",
    options=("confidence", "n_boot"), missing=MISSING_DOMAINS, intervals=True,
    mechanisms=("gaussian",),
    sweeps=(SweepVariant("twopl", {"n_boot": 0},
                         "discrete Gaussian on the item totals and pair disagreement counts, "
                         "one-factor normal-ogive (2PNO) fit; β = 1.702·(b − mean b)"),),
    sweep_options=("n_boot", "missing"),
    description="noisy item totals and pair disagreement counts (discrete Gaussian), one-factor "
                "normal-ogive fit: discriminations a and difficulties b with intervals",
    model="2pl",
)
