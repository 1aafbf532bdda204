"""Values that several layers share, defined once: the library, the sweeps, the service and the
command line import them from here (no privirt import: importing this module is cheap, so the
command line's help texts may be built from it without loading the library).
"""

from __future__ import annotations

__all__ = ["DEFAULT_DELTA", "DEFAULT_DELTA_TEXT", "MISSING_DOMAINS", "MECHANISMS"]

#: δ of a private call that gives neither δ nor a ledger, as written in help texts and messages
DEFAULT_DELTA_TEXT = "1e-4"
#: δ of a private call that gives neither δ nor a ledger (against a ledger: the ledger's
#: :meth:`~privirt.Ledger.default_delta`); the default δ of the sweeps and of ``privirt demo``
DEFAULT_DELTA: float = float(DEFAULT_DELTA_TEXT)

#: the declared input domains of a private method's ``missing=`` (``--missing``): complete data,
#: or cells missing completely at random
MISSING_DOMAINS: tuple[str, ...] = ("none", "mcar")

#: the noise mechanisms of Algorithm 2 (``mechanism=`` of the spectral method, ``--mechanism``):
#: discrete Gaussian or discrete Laplace noise on the pairwise counts, or randomized response
MECHANISMS: tuple[str, ...] = ("gaussian", "laplace", "randomized_response")
