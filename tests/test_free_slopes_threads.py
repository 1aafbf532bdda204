"""``slopes="free"``: the draws do not depend on the number of BLAS threads.

The starting values' SVD (:func:`privirt.bayes.slopes.leading_scores`) ran on BLAS's threads,
and its last bits (~4e-15) followed their number, and through them every draw: a run with
OPENBLAS_NUM_THREADS=1 and one with 2 gave different draws.  It now runs on one thread.
"""

from __future__ import annotations

import subprocess
import sys
from tests._env import child_env

_RUN = """
import hashlib, warnings
import numpy as np, privirt
warnings.simplefilter("ignore")
X = np.asarray(privirt.simulate_2pno(1500, 30, seed=94_000_110)[0], float)
X[np.random.default_rng(94_000_111).random(X.shape) < 0.05] = np.nan
p = privirt.gibbs_2pno(X, n_iter=4, warmup=2, n_chains=1, seed=94_000_112, progress=False,
                       engine="numpy", slopes="free", anchors={0: "+", 5: "-"}, priors={"a": (0, 4)})
print(hashlib.sha256(b"".join(p.draws[k].tobytes() for k in ("a", "b", "theta"))).hexdigest())
"""


def _draws_hash(threads: int) -> str:
    env = child_env(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                    MKL_NUM_THREADS=str(threads))
    done = subprocess.run([sys.executable, "-c", _RUN], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_free_slopes_draws_are_the_same_on_one_and_two_blas_threads():
    one, two = _draws_hash(1), _draws_hash(2)
    assert len(one) == 64 and one == two
