"""The service's HTTP routes: :mod:`.analyst` (``/v1/...``) and :mod:`.curator` (``/v1/curator/...``
and the ``/curator`` page)."""
