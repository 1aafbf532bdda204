"""Algorithm 2 and its post-processing: the noisy pairwise counts (:mod:`.api`), the comparison
graph (:mod:`.graph`), the noise-aware fit (:mod:`.noisy_likelihood`) and the bootstrap intervals
(:mod:`.intervals`).  Imports the privacy modules of :mod:`privirt.private` and the layers below."""
