"""Posterior draws and summaries shared by the Bayesian samplers (2PNO Gibbs, 2PL MH).

Draws are kept per parameter block as arrays shaped ``(chain, draw, index)`` — for example
``draws["a"]`` is (chain, draw, item) — with the item or person labels beside them, in the
layout of numpyro and ArviZ.  When a run is too long to keep every draw
(``keep_draws=False``), a :class:`StreamingSummary` accumulates on the fly, in bounded memory,
what the summary needs: per-chain Welford means and variances (for the mean, sd and R-hat),
batch means (for the MCSE and ESS) and a systematic thinned subsample of at most
``max_kept`` draws per chain (for the quantiles).

Summary columns: ``mean, sd, q2.5, q50, q97.5, mcse, rhat, ess``.  With full draws, R-hat is
the rank-normalised split R-hat and ESS the bulk ESS (:mod:`privirt.bayes.diagnostics`); MCSE is by
batch means, as in Sheng, Welling & Zhu (2014).  In streaming mode R-hat is the classical
Gelman–Rubin statistic from the per-chain moments and ESS = variance / MCSE².
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from . import diagnostics, loglik
from .diagnostics import default_n_batches
from .._backend import to_numpy
from ..exceptions import user_stacklevel
from .twopno_gpu import streaming_update_kernel

__all__ = ["Posterior", "SamplerPosterior", "StreamingSummary", "SUMMARY_COLUMNS", "obs_label"]

SUMMARY_COLUMNS = ["mean", "sd", "q2.5", "q50", "q97.5", "mcse", "rhat", "ess"]
_QUANTILES = (0.025, 0.5, 0.975)


def _escape(label: str) -> str:
    return label.replace("\\", "\\\\").replace("|", "\\|")


def obs_label(person: str, item: str) -> str:
    """The ``obs`` label of the cell (person, item) in :meth:`Posterior.to_arviz`:
    ``"person|item"``, with every backslash and "|" inside a label escaped by a backslash
    (``"x|y"`` → ``"x\\|y"``), so that distinct cells never share a label; labels without
    either character are joined as they are."""
    return f"{_escape(person)}|{_escape(item)}"


class StreamingSummary:
    """Bounded-memory accumulator for one parameter block over all chains.

    Parameters
    ----------
    n_chains, size : int
        Number of chains and of parameters in the block.
    n_draws : int
        Number of (post burn-in, thinned) draws each chain will contribute; fixes the batch
        size of the batch means.
    n_batches : int, optional
        Number of batch means per chain; by default ⌊√n_draws⌋, at most 50 and at least 2
        where possible, the rule of :func:`privirt.bayes.diagnostics.mcse_batch_means`, so
        that a run summarised with and without its draws reports the same MCSE.
    max_kept : int
        At most this many draws per chain are kept, evenly spaced, for the quantiles.
    xp : module
        numpy or cupy; the accumulators live on that device.
    """

    def __init__(
        self,
        n_chains: int,
        size: int,
        n_draws: int,
        *,
        n_batches: int | None = None,
        max_kept: int = 1000,
        xp: Any = np,
    ) -> None:
        if n_draws < 1:
            raise ValueError("n_draws must be at least 1")
        self.xp = xp
        self.n_chains, self.size, self.n_draws = n_chains, size, n_draws
        if n_batches is None:
            n_batches = default_n_batches(n_draws)
        self.n_batches = int(max(1, min(n_batches, n_draws)))
        self.batch_size = n_draws // self.n_batches
        self.stride = max(1, -(-n_draws // max_kept))  # ceil
        n_kept = -(-n_draws // self.stride)
        self.count = 0
        self.mean = xp.zeros((n_chains, size))
        self.m2 = xp.zeros((n_chains, size))
        self.batch_sum = xp.zeros((n_chains, size))
        self.batch_means = xp.zeros((n_chains, self.n_batches, size))
        self.kept = xp.zeros((n_chains, n_kept, size))
        self._n_kept = 0

    #: the per-chain accumulator arrays (leading axis = chain)
    _ARRAYS = ("mean", "m2", "batch_sum", "batch_means", "kept")

    def select_chains(self, chains: slice) -> "StreamingSummary":
        """The accumulator restricted to ``chains`` (e.g. one data set of a batched run)."""
        if chains.start in (0, None) and chains.stop in (None, self.n_chains):
            return self
        part = object.__new__(StreamingSummary)
        part.__dict__.update(self.__dict__)
        for name in self._ARRAYS:
            setattr(part, name, getattr(self, name)[chains].copy())
        part.n_chains = part.mean.shape[0]
        return part

    def to_host(self) -> "StreamingSummary":
        """Move the accumulators to host (numpy) memory in place, e.g. after a GPU run, so
        that a finished summary does not pin device memory; returns ``self``."""
        if self.xp is not np:
            for name in self._ARRAYS:
                setattr(self, name, to_numpy(getattr(self, name)))
            self.xp = np
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Pickle state: the accumulators as host (numpy) arrays, without the array module
        (a module cannot be pickled); an unpickled summary lives in host memory."""
        state = {k: v for k, v in self.__dict__.items() if k != "xp"}
        if self.xp is not np:
            for name in self._ARRAYS:
                state[name] = to_numpy(state[name])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.xp = np

    def update(self, values: Any) -> None:
        """Add one draw per chain: ``values`` shaped (n_chains, size)."""
        if self.count >= self.n_draws:
            raise RuntimeError("StreamingSummary received more draws than announced")
        v = values
        self.count += 1
        b = (self.count - 1) // self.batch_size if self.batch_size else 0
        slot = self._n_kept if (self.count - 1) % self.stride == 0 else -1
        fused = streaming_update_kernel(self.xp)
        if fused is not None:  # on the GPU: one kernel instead of ~8 array operations
            fused(v, np.float64(self.count), np.int32(b < self.n_batches), np.int32(slot),
                  np.int64(self.kept.shape[1]), np.int64(self.size), self.mean, self.m2,
                  self.batch_sum, self.kept)
        else:
            delta = v - self.mean
            self.mean += delta / self.count
            self.m2 += delta * (v - self.mean)
            if b < self.n_batches:
                self.batch_sum += v
            if slot >= 0:
                self.kept[:, slot] = v
        if b < self.n_batches and self.count % self.batch_size == 0:
            self.batch_means[:, b] = self.batch_sum / self.batch_size
            self.batch_sum[...] = 0.0
        if slot >= 0:
            self._n_kept += 1

    def summary_arrays(self) -> dict[str, np.ndarray]:
        """Per-parameter summary statistics (host numpy arrays)."""
        if self.count < 1:
            raise RuntimeError("no draws were accumulated")
        n = self.count
        mean_c = to_numpy(self.mean)
        var_c = to_numpy(self.m2) / max(n - 1, 1)
        c = self.n_chains
        grand = mean_c.mean(axis=0)
        within = var_c.mean(axis=0)
        between = n * mean_c.var(axis=0, ddof=1) if c > 1 else np.zeros_like(grand)
        # variance of all c·n draws pooled (ddof=1), exactly what the kept-draws summary
        # reports: (c(n−1)W + (c−1)B) / (cn − 1) with B = n · var(chain means)
        if c * n >= 2:
            total_var = (c * (n - 1) * within + (c - 1) * between) / (c * n - 1)
        else:  # one pooled draw: a ddof-1 variance is undefined (NaN, as with kept draws)
            total_var = np.full(self.size, np.nan)
        sd = np.sqrt(np.maximum(total_var, 0.0))
        n_full = n // self.batch_size if self.batch_size else 0
        n_full = min(n_full, self.n_batches)
        if n_full * c >= 2:
            bm = to_numpy(self.batch_means)[:, :n_full].reshape(c * n_full, self.size)
            mcse = bm.std(axis=0, ddof=1) / np.sqrt(c * n_full)
        else:
            mcse = np.full(self.size, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            ess = np.where(mcse > 0, total_var / mcse**2, np.nan)
            if c > 1 and n > 1:
                # draws that never change (within = between = 0): 0/0 = NaN, as with kept draws
                rhat = np.sqrt(((n - 1) / n * within + between / n) / within)
            else:
                rhat = np.full(self.size, np.nan)
        kept = to_numpy(self.kept)[:, : self._n_kept].reshape(-1, self.size)
        qs = np.quantile(kept, _QUANTILES, axis=0)
        out = {
            "mean": grand, "sd": sd, "q2.5": qs[0], "q50": qs[1], "q97.5": qs[2],
            "mcse": mcse, "rhat": rhat, "ess": ess,
        }
        # Welford's m2 of a value that never changes is exactly 0 (each delta is 0)
        m2 = to_numpy(self.m2)
        diagnostics.mark_constant(  # (a chain's running mean of a constant is that constant exactly)
            out, (m2 == 0).all(axis=0) & (mean_c.max(axis=0) == mean_c.min(axis=0)), mean_c[0])
        return out


@dataclass(eq=False)
class Posterior:
    """Posterior of a Bayesian IRT sampler.

    Attributes
    ----------
    draws : dict of str to ndarray, or None
        Per block (``"a"``, ``"b"``, ``"theta"``, …) an array (chain, draw, index); None when
        the run kept no draws (``keep_draws=False``).
    labels : dict of str to pandas.Index
        Labels of each block's index (item labels for ``a``/``b``, person labels for θ).
    sampler : str
        Name of the algorithm, e.g. ``"gibbs_2pno"``.
    streaming : dict of str to StreamingSummary, or None
        Accumulators used when draws were not kept.
    acceptance : dict of str to ndarray, or None
        Metropolis–Hastings acceptance rates per block, (chain, index).
    info : dict
        Run settings (iterations, burn-in, thinning, seed, device, time, ...).
    model : {"2pno", "2pl"} or ""
        The likelihood the draws belong to ("" when unknown); with ``codes``, it lets
        :meth:`to_arviz` add the pointwise log-likelihood.
    codes : ndarray of int8, (n, k), optional
        The responses the sampler read (1, 0, −1 for missing).
    """

    draws: dict[str, np.ndarray] | None
    labels: dict[str, pd.Index]
    sampler: str = ""
    streaming: dict[str, StreamingSummary] | None = None
    acceptance: dict[str, np.ndarray] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    codes: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.draws is None and self.streaming is None:
            raise ValueError("a Posterior needs draws or streaming summaries")
        blocks = self.draws if self.draws is not None else self.streaming
        for name in blocks:  # type: ignore[union-attr]
            if name not in self.labels:
                raise ValueError(f"no labels given for parameter block {name!r}")
        if self.draws is not None:
            for name, d in self.draws.items():
                if d.ndim != 3 or d.shape[2] != len(self.labels[name]):
                    raise ValueError(
                        f"draws[{name!r}] must be (chain, draw, {len(self.labels[name])}), "
                        f"got {d.shape}"
                    )

    # -- structure ---------------------------------------------------------------------
    @property
    def params(self) -> list[str]:
        """Names of the parameter blocks."""
        return list((self.draws if self.draws is not None else self.streaming).keys())  # type: ignore[union-attr]

    @property
    def n_chains(self) -> int:
        if self.draws is not None:
            return next(iter(self.draws.values())).shape[0]
        return next(iter(self.streaming.values())).n_chains  # type: ignore[union-attr]

    @property
    def n_draws(self) -> int:
        """Draws per chain (after burn-in and thinning)."""
        if self.draws is not None:
            return next(iter(self.draws.values())).shape[1]
        return next(iter(self.streaming.values())).count  # type: ignore[union-attr]

    def __repr__(self) -> str:
        blocks = ", ".join(f"{p}[{len(self.labels[p])}]" for p in self.params)
        kept = "draws kept" if self.draws is not None else "streaming summaries"
        return (
            f"Posterior({self.sampler}: {self.n_chains} chain(s) × {self.n_draws} draws; "
            f"{blocks}; {kept})"
        )

    def _check_param(self, param: str) -> None:
        if param not in self.params:
            raise ValueError(f"unknown parameter {param!r}; choose from {self.params}")

    def get_draws(self, param: str) -> np.ndarray:
        """Draws of one block as (chain, draw, index); raises if draws were not kept."""
        self._check_param(param)
        if self.draws is None:
            raise ValueError(
                "this run kept no draws (keep_draws=False); summaries are available, draws not"
            )
        return self.draws[param]

    def draws_frame(self, param: str, chain: int | None = None) -> pd.DataFrame:
        """Draws of one block as a DataFrame (rows: (chain, draw), columns: labels)."""
        d = self.get_draws(param)
        if chain is not None:
            if (
                isinstance(chain, bool)
                or not isinstance(chain, (int, np.integer))
                or not 0 <= chain < d.shape[0]
            ):
                raise ValueError(f"chain must be an integer in [0, {d.shape[0]}), got {chain!r}")
            d = d[chain : chain + 1]
        c, n, k = d.shape
        index = pd.MultiIndex.from_product(
            [range(c) if chain is None else [chain], range(n)], names=["chain", "draw"]
        )
        return pd.DataFrame(d.reshape(c * n, k), index=index, columns=self.labels[param])

    # -- summaries ---------------------------------------------------------------------
    def _summary_arrays(self, param: str) -> dict[str, np.ndarray]:
        if self.draws is None:
            return self.streaming[param].summary_arrays()  # type: ignore[index]
        s = diagnostics.summarize(self.draws[param], _QUANTILES)
        q = s.pop("q")
        return dict(s, **{"q2.5": q[0], "q50": q[1], "q97.5": q[2]})

    def summary(self, param: str | None = None) -> pd.DataFrame:
        """Posterior summary table.

        Parameters
        ----------
        param : str, optional
            A block name (``"a"``, ``"b"``, ``"theta"``, …): a DataFrame indexed by that
            block's labels.  Omitted: all blocks under a (parameter, label) MultiIndex.

        Returns
        -------
        pandas.DataFrame
            Columns ``mean, sd, q2.5, q50, q97.5, mcse, rhat, ess``.
        """
        if param is not None:
            self._check_param(param)
            arrays = self._summary_arrays(param)
            return pd.DataFrame(
                {c: arrays[c] for c in SUMMARY_COLUMNS}, index=self.labels[param].copy()
            )
        frames = {p: self.summary(p) for p in self.params}
        return pd.concat(frames, names=["parameter", "label"])

    def mean(self, param: str) -> pd.Series:
        """Posterior means of one block, labelled."""
        return self.summary(param)["mean"]

    def acceptance_rates(self) -> pd.DataFrame:
        """Mean acceptance rate per block and chain (MH samplers only)."""
        if not self.acceptance:
            raise ValueError(f"{self.sampler or 'this sampler'} records no acceptance rates")
        rows = {
            block: np.asarray(rates).mean(axis=-1) for block, rates in self.acceptance.items()
        }
        return pd.DataFrame(rows, index=pd.RangeIndex(self.n_chains, name="chain"))

    # -- interoperability ---------------------------------------------------------------
    def log_likelihood(self, by: str = "cell") -> np.ndarray:
        """Pointwise log-likelihood (chain, draw, obs); see
        :func:`~privirt.bayes.pointwise_log_likelihood`."""
        if self.codes is None or self.model not in loglik.MODELS:
            raise ValueError("this posterior carries no data or model to evaluate")
        draws = {p: self.get_draws(p) for p in ("theta", "a", "b")}
        return loglik.pointwise_log_likelihood(self.model, draws, self.codes, by=by)

    def _obs_coords(self, by: str) -> dict[str, tuple[str, list[str]]]:
        """Coordinates of the log-likelihood's ``obs`` dimension: ``obs`` itself (the person
        labels, or one :func:`obs_label` per observed cell, row-major) and, along it, the
        non-index ``person`` (and for cells ``item``) labels."""
        persons = list(map(str, self.labels["theta"]))
        if by == "person":
            return {"obs": ("obs", persons), "person": ("obs", persons)}
        items = list(map(str, self.labels["a"]))
        rows, cols = np.nonzero(self.codes >= 0)
        who, what = [persons[i] for i in rows], [items[j] for j in cols]
        return {"obs": ("obs", list(map(obs_label, who, what))),
                "person": ("obs", who), "item": ("obs", what)}

    def to_arviz(self, log_likelihood: str | None = "auto") -> Any:
        """An :class:`arviz.InferenceData` with the draws, labelled coordinates and, when the
        posterior knows its model and data, the pointwise log-likelihood.

        Parameters
        ----------
        log_likelihood : {"auto", "cell", "person"} or None
            Group ``log_likelihood`` with variable ``y`` over dimension ``obs``: one term
            per observed response (``"cell"``, labels ``"person|item"`` by :func:`obs_label`,
            unique, with non-index coordinates ``person`` and ``item`` along ``obs``) or per
            person (``"person"``, labelled by person); ``"auto"`` is ``"cell"`` unless that
            array would exceed ``privirt.bayes.loglik.MAX_CELL_TERMS`` values, then
            ``"person"`` (with a warning), and no group for a posterior without model and
            data; None leaves the group out.
        """
        if log_likelihood not in ("auto", "cell", "person", None):
            raise ValueError(
                f"log_likelihood must be 'auto', 'cell', 'person' or None, got {log_likelihood!r}"
            )
        try:
            import arviz as az  # type: ignore[import-not-found]
        except ImportError as exc:
            raise ImportError(
                "to_arviz needs ArviZ: python -m pip install \"privirt[arviz]\""
            ) from exc
        if self.draws is None:
            raise ValueError("this run kept no draws (keep_draws=False); nothing to convert")
        dims = {p: [f"{p}_dim"] for p in self.params}
        coords = {f"{p}_dim": list(map(str, self.labels[p])) for p in self.params}
        idata = az.from_dict(posterior=dict(self.draws), coords=coords, dims=dims)
        known = self.codes is not None and self.model in loglik.MODELS
        if log_likelihood is None or (log_likelihood == "auto" and not known):
            return idata
        if log_likelihood == "auto":
            cells = self.n_chains * self.n_draws * int((self.codes >= 0).sum())
            log_likelihood = "cell" if cells <= loglik.MAX_CELL_TERMS else "person"
            if log_likelihood == "person":
                warnings.warn(
                    f"the per-response log-likelihood would hold {cells:,} values; the "
                    "log_likelihood group holds one term per person instead (pass "
                    'log_likelihood="cell" to force per-response terms)',
                    UserWarning, stacklevel=user_stacklevel(),
                )
        ll = self.log_likelihood(log_likelihood)
        idata.add_groups({"log_likelihood": {"y": ll}}, dims={"y": ["obs"]})
        idata.log_likelihood = idata.log_likelihood.assign_coords(self._obs_coords(log_likelihood))
        return idata

    @classmethod
    def from_draws(
        cls,
        draws: Mapping[str, np.ndarray],
        labels: Mapping[str, pd.Index],
        **kwargs: Any,
    ) -> "Posterior":
        return cls(draws={k: np.asarray(v) for k, v in draws.items()}, labels=dict(labels), **kwargs)


#: The samplers' posterior (the same class: :class:`Posterior` holds the model and data).
SamplerPosterior = Posterior
