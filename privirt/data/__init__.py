"""Input data: the :class:`~privirt.data.responses.Responses` matrix (:mod:`.responses`), the
bundled and downloadable data sets (:mod:`.datasets`) and simulated data with known truth
(:mod:`.simulate`).  Imports only the base modules (``privirt._*``, ``privirt.exceptions``)."""
