"""Bayesian IRT samplers: the 2PNO Gibbs sampler and the 2PL Metropolis–Hastings sampler.

One :class:`Schedule` (``n_iter``, ``warmup``, ``thin``, ``n_chains``; one thinning rule),
one driver (progress, timing, the ``info`` keys in :data:`COMMON_INFO_KEYS`), the model
maths per sampler (:mod:`.twopno` with :mod:`.truncnorm`, the fused CPU engine
:mod:`.twopno_fused` with its numba kernel :mod:`.twopno_numba`, :mod:`.twopno_gpu` with its
CUDA source ``gibbs_2pno.cu``, :mod:`.twopl`, :mod:`.twopl_setup`), and the
:mod:`.posterior` with its :mod:`.diagnostics` and pointwise log-likelihood
(:mod:`.loglik`) for ``arviz.loo`` / ``arviz.waic``.  Imports only :mod:`privirt.data` and
the base modules (non-private; a private Bayesian method lives in :mod:`privirt.private`).
"""

from __future__ import annotations

from .diagnostics import ess_bulk, mcse_batch_means, rhat
from .posterior import SUMMARY_COLUMNS, Posterior, SamplerPosterior, StreamingSummary
from .driver import COMMON_INFO_KEYS
from .gibbs import gibbs_2pno, gibbs_2pno_replicate
from .loglik import pointwise_log_likelihood
from .mh import mh_2pl
from .schedule import Schedule
from .twopl_setup import ACCEPTANCE_BAND, DEFAULT_PRIORS, DEFAULT_PROPOSAL_SD, TARGET_ACCEPTANCE

__all__ = [
    "gibbs_2pno", "gibbs_2pno_replicate", "mh_2pl", "Schedule", "Posterior",
    "SamplerPosterior", "StreamingSummary", "SUMMARY_COLUMNS", "COMMON_INFO_KEYS",
    "pointwise_log_likelihood", "rhat", "ess_bulk", "mcse_batch_means",
    "DEFAULT_PRIORS", "DEFAULT_PROPOSAL_SD", "TARGET_ACCEPTANCE", "ACCEPTANCE_BAND",
]
