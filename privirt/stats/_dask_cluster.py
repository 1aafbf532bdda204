"""The Dask engine's clients of a scheduler address, and a cluster lost during a computation.

A computation whose scheduler goes away (killed, its host down) or whose workers keep dying
raises Dask's own errors (``FutureCancelledError ... scheduler-connection-lost``,
``KilledWorker``, ``CommClosedError``); :func:`computed` turns them into one ``ValueError``
naming the scheduler, raised before any debit.  Closing a client made here after such a loss
cancels Dask's attempt to reconnect, which ``distributed`` logs as an error with a traceback
(the loss is already reported), so that close is made with the client's log silenced.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Dask's errors for a lost cluster (``FutureCancelledError`` is a ``CancelledError``)."""
    from concurrent.futures import CancelledError

    from distributed.comm import CommClosedError
    from distributed.scheduler import KilledWorker

    return (CancelledError, CommClosedError, KilledWorker)


def scheduler_address(client: Any) -> str:
    """The address of ``client``'s scheduler, as given or as the client knows it."""
    if isinstance(client, str):
        return client
    address = getattr(getattr(client, "scheduler", None), "address", None)
    return str(address) if address else "(unknown address)"


def computed(future: Any, client: Any, *, private: bool) -> Any:
    """``future.result()``; a lost cluster raises one ``ValueError`` naming the scheduler.

    Any other failure cancels the rest of the computation and is raised as it is.  ``private``:
    a private path, whose debit comes after the computation (the message says that nothing
    was spent).
    """
    try:
        return future.result()
    except _lost_errors() as exc:  # the future is already cancelled or failed
        from distributed.scheduler import KilledWorker

        where = scheduler_address(client)
        if isinstance(exc, KilledWorker):
            what = (f"the Dask cluster at {where} lost its workers during the computation (workers "
                    "died while running a task, KilledWorker)")
            advice = "check the workers (their memory and logs) and run again"
        else:
            what = (f"lost the Dask scheduler at {where} during the computation "
                    f"({getattr(exc, 'reason', None) or type(exc).__name__})")
            advice = "check that the scheduler is running and reachable, and run again"
        spent = " (nothing was spent)" if private else ""
        raise ValueError(f"{what}; {advice}{spent}") from None
    except BaseException:
        future.cancel()  # a failed computation: stop the rest, return nothing
        raise


def _check_address(address: str) -> None:
    """Raise ``ValueError`` for an address that no scheduler can have, as ``distributed`` parses it.

    ``Client(address)`` closes the client it made only when the connection fails (``OSError``);
    on a malformed address (``ValueError``) it leaves that client running: its event-loop
    thread, the process's default client and ``dask.config`` ``scheduler`` set.  Its finaliser
    then ran at the garbage collector's whim, and when that was in the starting thread of the
    next client's event loop it waited for the lock held by that start: 10 s, then an
    ``AssertionError`` from ``distributed`` instead of a message.  A port out of range was
    retried until the connect timeout.
    """
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address

    scheme, location = parse_address(address)
    try:
        _, port = registry.get_backend(scheme).get_address_host_port(location)
    except NotImplementedError:  # (inproc, ucx: no host and port to check)
        return
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is not in 1-65535")


@contextlib.contextmanager
def address_client(address: str) -> Iterator[Any]:
    """A client of the scheduler at ``address``, closed on exit (quietly after a lost scheduler)."""
    from distributed import Client

    try:
        _check_address(address)  # before a Client exists: none is left behind
        own = Client(address)  # waits distributed.comm.timeouts.connect
    except (OSError, ValueError, TypeError) as exc:  # unreachable, or a malformed address
        raise ValueError(
            f"cannot reach the Dask scheduler at {address!r} ({exc}); check the address "
            "or leave it out to start a local cluster"
        ) from None
    try:
        yield own
    finally:
        if own.status == "running":
            own.close()
        else:  # reconnecting to a lost scheduler: closing cancels that, which Dask logs
            log = logging.getLogger("distributed.client")
            level = log.level
            log.setLevel(logging.CRITICAL + 1)
            try:
                own.close()
            finally:
                log.setLevel(level)
