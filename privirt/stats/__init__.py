"""Exact statistics of a responses matrix on every engine: pairwise counts (:mod:`.counts`),
sufficient statistics (:mod:`.sufficient`) and the Dask engine (:mod:`.dask_engine`).
Imports only :mod:`privirt.data` and the base modules; never noised here (see :mod:`privirt.private`)."""
