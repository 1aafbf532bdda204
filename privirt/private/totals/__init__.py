"""The private totals estimator: release, estimate and both in one (:mod:`.api`), with the
marginal Rasch maths for complete (:mod:`.marginal`) and MCAR data (:mod:`.marginal_missing`;
its bootstrap :mod:`.mcar_bootstrap`).
Imports the privacy modules of :mod:`privirt.private` and the layers below."""
