"""The peak of the memory a call allocates, as tracemalloc traces it (numpy's arrays included)."""
from __future__ import annotations

import tracemalloc
from typing import Any, Callable


def traced_peak(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """``(call(*args, **kwargs), peak bytes traced during it)``; tracing is stopped after."""
    tracemalloc.start()
    try:
        result = call(*args, **kwargs)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
