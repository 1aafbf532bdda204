"""Non-private Rasch estimators: spectral (:mod:`.spectral`), conditional ML (:mod:`.cmle`, with
the elementary symmetric functions of :mod:`._esf`) and person abilities (:mod:`.abilities`).
Imports only :mod:`privirt.stats`, :mod:`privirt.data` and the base modules."""
