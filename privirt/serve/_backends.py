"""The two storage backends of :mod:`privirt.serve.store`: SQLite (a file) and PostgreSQL (a URL).

Each gives ``read()``/``write()`` context managers yielding a connection inside a transaction
(``write`` holds the lock a debit needs: SQLite's ``BEGIN IMMEDIATE``; PostgreSQL row locks are
taken with :meth:`lock`), ``q()`` (placeholders), the schema, and error translation.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
import threading
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from ..private._sqlite import immediate_transaction, make_durable, undecoded
from . import _deadline
from ._deadline import _connect_options, _Deadline
from ._modes import PRIVATE_MODE, remove_with_side_files

__all__ = ["StateError", "StateUnavailable", "NotDebited", "unavailable", "refused", "usable", "backup_target",
           "new_private_file", "_backend", "_SQLite", "_Postgres", "_TABLES", "sessions_table", "events_table"]

T = TypeVar("T")


class StateError(ValueError):
    """A state that cannot be opened, created or changed as asked (curator-facing)."""


class StateUnavailable(StateError):
    """The state cannot be reached or used now (no connection to PostgreSQL, a SQLite file
    locked or read-only): a request may be retried; other state errors (:class:`StateError`) may not."""


class NotDebited(StateUnavailable):
    """The state was unavailable before a debit's COMMIT was sent (its write transaction could
    not be opened, a SQLite file locked past the timeout, or a statement in it lost the
    connection): nothing was written."""


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the state cannot be reached or used now: a :class:`StateUnavailable`
    or a ``psycopg.OperationalError`` (a connection lost)."""
    psycopg = sys.modules.get("psycopg")  # imported by a PostgreSQL state only
    return isinstance(exc, StateUnavailable) or (psycopg is not None and isinstance(exc, psycopg.OperationalError))


def refused(exc: BaseException, state: str) -> StateError | None:
    """A one-line :class:`StateError` naming the redacted ``state`` for ``exc`` if it is a
    ``psycopg.Error`` other than a connection one (a role without rights on the state's tables,
    or on the schema to create them), else None (``exc`` is left as it is)."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None or not isinstance(exc, psycopg.Error) or unavailable(exc) or isinstance(exc, StateError):
        return None
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        hint = "grant this role the privileges it needs there, or use the role that owns the state"
    else:
        hint = "check that it is a privirt serve state made by this version"
    text = _libpq_text(exc.diag.message_primary or exc, state, quoted=True)  # without the SQL it quotes
    return StateError(f"the state {_redact(state)} cannot be used: {text}; {hint}")


@contextmanager
def usable(backend) -> Iterator[None]:
    """Its body, with a PostgreSQL error other than a connection one raised as :func:`refused`."""
    try:
        yield
    except Exception as exc:
        error = refused(exc, getattr(backend, "url", ""))
        if error is None:
            raise
        raise error from None


@contextmanager
def new_private_file(path: Path, exists: str) -> Iterator[None]:
    """Its body with ``path`` created, empty, exclusively and private (mode 0600, :mod:`._modes`;
    refused with the message ``exists`` if it exists: SQLite would open a file made meanwhile
    and overwrite it), and ``path`` with its SQLite side files removed if the body raises."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE))
    except FileExistsError:
        raise StateError(exists) from None
    except OSError as exc:  # a read-only file system, no permission
        raise StateError(f"cannot create {path} ({exc.strerror or exc}); nothing was written") from None
    try:
        yield
    except BaseException:
        remove_with_side_files(path)
        raise


def backup_target(path: Path):
    """:func:`new_private_file` for a backup copy of the state."""
    return new_private_file(path, f"{path} already exists; back up to a new file")


#: the first key of the advisory locks of ``init`` and of ``add`` (of a data set, an analyst)
_LOCK_CLASS = 0x70726976  # "priv"

_TABLES = ("meta", "datasets", "analysts", "curator_keys", "allowances", "requests", "spends", "sessions",
           "events")


def sessions_table(real: str) -> str:
    """The curator page's login sessions (schema 2): the SHA-256 of a random token, the curator
    key it was opened with, and its expiry (seconds since the epoch)."""
    return f"""CREATE TABLE sessions (
            token_hash TEXT PRIMARY KEY, curator_key_id INTEGER NOT NULL REFERENCES curator_keys(id),
            created {real} NOT NULL, expires {real} NOT NULL)"""


def events_table(serial: str) -> str:
    """The curator's actions (schema 3): time, action, the object's name, public parameters
    (JSON) and who (``cli`` or the curator key's row id) — never a key or a key's hash."""
    return f"""CREATE TABLE events (
            id {serial}, time TEXT NOT NULL, action TEXT NOT NULL, name TEXT NOT NULL,
            params TEXT NOT NULL, who TEXT NOT NULL)"""


def _schema(serial: str, real: str, blob: str) -> list[str]:
    return [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE datasets (
            id {serial}, name TEXT UNIQUE NOT NULL,
            epsilon {real} NOT NULL CHECK (epsilon > 0), delta {real} NOT NULL CHECK (delta > 0 AND delta < 1),
            n_persons INTEGER NOT NULL, items TEXT NOT NULL, missing TEXT NOT NULL,
            data {blob} NOT NULL, sha256 TEXT NOT NULL, source TEXT NOT NULL, created TEXT NOT NULL)""",
        f"""CREATE TABLE analysts (
            id {serial}, name TEXT UNIQUE NOT NULL, key_id TEXT UNIQUE NOT NULL,
            key_hash TEXT NOT NULL, created TEXT NOT NULL, revoked TEXT)""",
        f"""CREATE TABLE curator_keys (
            id {serial}, key_id TEXT UNIQUE NOT NULL, key_hash TEXT NOT NULL,
            created TEXT NOT NULL, revoked TEXT)""",
        f"""CREATE TABLE allowances (
            analyst_id INTEGER NOT NULL REFERENCES analysts(id),
            dataset_id INTEGER NOT NULL REFERENCES datasets(id),
            epsilon {real} NOT NULL CHECK (epsilon > 0), delta {real} NOT NULL CHECK (delta > 0 AND delta < 1),
            PRIMARY KEY (analyst_id, dataset_id))""",
        """CREATE TABLE requests (
            id TEXT PRIMARY KEY, analyst_id INTEGER NOT NULL REFERENCES analysts(id),
            dataset_id INTEGER NOT NULL REFERENCES datasets(id), idem_key TEXT,
            endpoint TEXT NOT NULL, params TEXT NOT NULL, status TEXT NOT NULL,
            created TEXT NOT NULL, finished TEXT, result TEXT, error TEXT,
            UNIQUE (analyst_id, idem_key))""",
        f"""CREATE TABLE spends (
            id {serial}, request_id TEXT UNIQUE NOT NULL REFERENCES requests(id),
            analyst_id INTEGER NOT NULL REFERENCES analysts(id),
            dataset_id INTEGER NOT NULL REFERENCES datasets(id), time TEXT NOT NULL,
            mechanism TEXT NOT NULL, rho {real} NOT NULL CHECK (rho >= 0),
            epsilon {real} NOT NULL CHECK (epsilon >= 0), delta {real} NOT NULL CHECK (delta >= 0),
            note TEXT NOT NULL)""",
        "CREATE INDEX spends_dataset ON spends (dataset_id, analyst_id)",
        sessions_table(real),
        events_table(serial),
    ]


class _SQLite:
    kind = "sqlite"
    serial, real = "INTEGER PRIMARY KEY AUTOINCREMENT", "REAL"
    schema = _schema(serial, real, "BLOB")

    def __init__(self, path: str, timeout: float = 60.0):
        # resolved once: a later os.chdir (or a re-pointed symlink) must not move the service's
        # debits to another state file of the same name; messages name it as given
        self.path = Path(os.path.realpath(path))
        self.timeout = timeout
        self.describe = str(Path(path))
        self._local = threading.local()

    def exists(self) -> bool:
        return self.path.exists()

    def close(self) -> None:
        self._drop()

    def _conn(self) -> sqlite3.Connection:
        """One connection per thread, reused (opening one costs more than a query)."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None)
            con.execute("PRAGMA foreign_keys=ON")
            self._local.con = con
        return con

    @contextmanager
    def read(self, durable: bool = True) -> Iterator[Any]:
        try:
            con = self._conn()
            if durable:
                make_durable(con)
            else:
                con.execute("PRAGMA synchronous=NORMAL")
            yield con
        except sqlite3.OperationalError as exc:
            self._drop()
            raise (self._read_only_folder(exc) or _friendly_sqlite(exc, self.describe)) from exc
        except UnicodeDecodeError as exc:  # SQLite's "malformed database schema" quoting bytes not UTF-8
            self._drop()
            raise StateError(f"{self.describe} is damaged or is not a privirt serve state ({undecoded(exc)}); "
                             "restore it from a backup copy (one `privirt serve backup` made), or check the path") from exc

    def _read_only_folder(self, exc: sqlite3.OperationalError) -> StateError | None:
        """Why SQLite could not open the state (``SQLITE_CANTOPEN``) if its folder is read-only: a
        WAL state needs ``<name>-shm`` and ``<name>-wal`` beside it, even to be read; else None."""
        if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_CANTOPEN or os.access(self.path.parent, os.W_OK):
            return None
        given = Path(self.describe).parent  # named as given unless a link leads elsewhere
        folder = given if Path(os.path.realpath(given)) == self.path.parent else self.path.parent
        made = self.path.exists() and os.path.getsize(self.path) > 0  # (init's own new file is empty)
        remedy = "copy the state to a writable folder" if made else "create the state in a writable folder"
        return StateUnavailable(f"the state {self.describe} cannot be opened: its folder {folder} is read-only "
                                f"(SQLite needs to create {self.path.name}-shm/-wal beside it): {remedy}")

    def _drop(self) -> None:
        con = getattr(self._local, "con", None)
        self._local.con = None
        if con is not None:
            try:
                con.close()
            except sqlite3.Error:  # pragma: no cover
                pass

    @contextmanager
    def write(self, durable: bool = True) -> Iterator[Any]:
        """``durable=False`` (storing a result): committed but not fsynced (WAL ``NORMAL``): it
        survives a crash of the process, and a power loss can only lose the result, never a debit."""
        with self.read(durable) as con, immediate_transaction(con):
            yield con

    def q(self, sql: str) -> str:
        return sql

    def lock(self, con, table: str, row_id: int) -> None:
        """Nothing to do: BEGIN IMMEDIATE already holds the database's write lock."""

    def tables(self, con) -> set[str]:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    tables_to_create = tables  # BEGIN IMMEDIATE already holds the database's write lock

    def named(self, con, table: str, name: str) -> bool:
        """Whether ``table`` (``datasets``, ``analysts``) has a row of this name."""
        return con.execute(f"SELECT 1 FROM {table} WHERE name = ?", (name,)).fetchone() is not None

    def prepare(self, con) -> None:
        con.execute("PRAGMA journal_mode=WAL")

    def is_unique_violation(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in str(exc)

    def idempotent(self, work: Callable[[], T]) -> T:
        """``work()`` (a file has no connection to lose)."""
        return work()


def _friendly_sqlite(exc: sqlite3.OperationalError, path: str) -> Exception:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StateUnavailable(f"the state {path} stayed locked by another process; nothing was spent — retry")
    if "readonly" in text or "read-only" in text:
        return StateUnavailable(f"the state {path} cannot be written (read-only); nothing was spent")
    if "no such table" in text:
        return StateError(f"{path} is not a privirt serve state; create one with `privirt serve init {path}`")
    return StateError(f"the state {path} cannot be used: {text}")


class _Postgres:
    kind = "postgresql"
    serial, real = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "DOUBLE PRECISION"
    schema = _schema(serial, real, "BYTEA")

    def __init__(self, url: str):
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:  # pragma: no cover - the serve extra installs it
            raise StateError("a postgresql:// state needs psycopg: pip install 'privirt[serve]'") from exc
        self.url = url
        self.describe = _redact(url)
        _check_user_part(url, self.describe)
        self._local = threading.local()
        #: seconds each transaction may take (``privirt serve run --state-deadline``); None:
        #: ``_deadline.STATE_DEADLINE``
        self.deadline: float | None = None

    def exists(self) -> bool:
        return True

    def _conn(self):
        import psycopg

        con = getattr(self._local, "con", None)
        deadline = getattr(self._local, "deadline", None)
        if con is None or con.closed or con.broken:
            try:
                con = psycopg.connect(self.url, autocommit=False, **_connect_options(self.url))
            except psycopg.OperationalError as exc:
                raise StateUnavailable(f"cannot connect to the state {self.describe}: "
                                 f"{_libpq_text(exc, self.url, quoted=True)}") from None
            except psycopg.Error as exc:  # the URL itself (ProgrammingError while libpq parses it)
                text = _libpq_text(exc, self.url)
                hint = "write a '%' of the password as %25" if "percent" in text else "fix the postgresql:// URL"
                raise StateError(f"cannot connect to the state {self.describe}: {text}; {hint}") from None
            # the debit is correct under READ COMMITTED only (its sums must see a spend committed
            # while it waited for the data set's row lock): whatever the server's default
            # (default_transaction_isolation), every transaction begins with
            # BEGIN ISOLATION LEVEL READ COMMITTED
            con.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
            if deadline is not None:
                deadline.watch(con)
            try:
                self._durable(con)
            except BaseException:
                con.close()
                raise
            self._local.con = con
        elif deadline is not None:
            deadline.watch(con)
        return con

    @staticmethod
    def _durable(con) -> None:
        """Make ``con``'s commits wait for their WAL flush: a server, database or role default of
        ``synchronous_commit = off`` is raised to ``on`` for the session (a debit answered, its
        noise released, must survive a crash of PostgreSQL); ``local``, ``remote_write``, ``on``
        and ``remote_apply`` all flush locally and are kept as the administrator set them."""
        with con.transaction():
            if con.execute("SELECT current_setting('synchronous_commit')").fetchone()[0] == "off":
                con.execute("SET SESSION synchronous_commit = on")

    def _begin(self, stack: ExitStack):
        """The thread's connection in a new transaction (entered on ``stack``).

        BEGIN is the transaction's first statement: where it raises ``OperationalError`` on a
        reused connection (lost meanwhile: ended by an administrator, a PostgreSQL restart), the
        transaction begins once more on a fresh connection — safe, as nothing was sent in it.
        """
        import psycopg

        old = getattr(self._local, "con", None)
        reused = old is not None and not (old.closed or old.broken)
        con = self._conn()
        try:
            stack.enter_context(con.transaction())
        except psycopg.OperationalError:
            self._drop()
            deadline = getattr(self._local, "deadline", None)
            if not reused or (deadline is not None and deadline.passed):
                raise
            con = self._conn()
            stack.enter_context(con.transaction())
        return con

    def _settle(self) -> None:
        """After a transaction: a lost connection is closed (the next transaction opens a fresh
        one), not rolled back, which would raise and hide the error that lost it."""
        con = getattr(self._local, "con", None)
        if con is not None and (con.closed or con.broken):
            self._drop()
        elif con is not None and con.info.transaction_status != 0:  # pragma: no cover - defensive
            con.rollback()

    @contextmanager
    def read(self, durable: bool = True) -> Iterator[Any]:
        """``durable`` is ignored: every commit waits for its WAL flush (``synchronous_commit``
        at least ``local``: :meth:`_durable`), results too — a result answered with 200 survives a
        crash of PostgreSQL right after it (docs/serve.md: stored, then returned).

        The transaction (the outermost of the thread) has :attr:`deadline` seconds (unset:
        ``_deadline.STATE_DEADLINE``): then its connection is broken and it raises
        :class:`StateUnavailable` (before the ``COMMIT`` was sent nothing was written; from then
        on, its outcome is unknown)."""
        # (read now: a test may set _deadline.STATE_DEADLINE)
        seconds = _deadline.STATE_DEADLINE if self.deadline is None else self.deadline
        deadline = None
        if seconds and getattr(self._local, "deadline", None) is None:
            deadline = self._local.deadline = _Deadline(seconds)
        try:
            with ExitStack() as stack:
                stack.callback(self._settle)  # runs after the transaction's end
                yield self._begin(stack)
        except Exception as exc:
            if deadline is None or not deadline.passed or not unavailable(exc):
                raise
            raise StateUnavailable(f"the state {self.describe} did not answer within {seconds:g} s (PostgreSQL "
                                   "stopped or unreachable); retry once it answers") from exc
        finally:
            if deadline is not None:
                self._local.deadline = None
                deadline.cancel()

    write = read

    def q(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def lock(self, con, table: str, row_id: int) -> None:
        con.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", (row_id,))

    def tables(self, con) -> set[str]:
        rows = con.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return {r[0] for r in rows}

    def tables_to_create(self, con) -> set[str]:
        """:meth:`tables`, under a transaction-level advisory lock held until the commit: a
        second ``init`` at once waits, then sees the tables (not a duplicate-key error)."""
        con.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_CLASS,))
        return self.tables(con)

    def named(self, con, table: str, name: str) -> bool:
        """Whether ``table`` (``datasets``, ``analysts``) has a row of this name, under an advisory
        lock on the name held until the commit: a second ``add`` of the name at once waits, then
        finds the row (a check-then-insert, not a unique-violation error)."""
        con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, f"{table}:{name}"))
        return con.execute(f"SELECT 1 FROM {table} WHERE name = %s", (name,)).fetchone() is not None

    def prepare(self, con) -> None:
        pass

    def is_unique_violation(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(exc, psycopg.errors.UniqueViolation)

    def _drop(self) -> None:
        con = getattr(self._local, "con", None)
        self._local.con = None
        if con is not None:
            con.close()

    def idempotent(self, work: Callable[[], T]) -> T:
        """``work()`` and, if it lost its connection (``psycopg.OperationalError`` with PostgreSQL
        up: the connection ended by an administrator, a restart or the network), ``work()`` once
        more on a fresh connection.  Only for a ``work`` that may run twice (storing a result): a
        lost COMMIT may or may not have been applied."""
        import psycopg

        try:
            return work()
        except psycopg.OperationalError:
            self._drop()
            return work()


def _secret_key(key: str) -> bool:
    """Whether a libpq connection parameter holds a secret: ``password``, ``sslpassword`` (the
    client key's passphrase), any other name ending in ``password`` (case-insensitive), and
    ``oauth_client_secret`` (libpq 18)."""
    key = key.strip().lower()
    return key.endswith(("password", "secret"))


def _url_fields(url: str) -> tuple[str, str | None, str | None, str]:
    """``(prefix, user, password, rest)`` of ``url``'s user part for masking: after ``://`` the
    user part runs to the last ``@`` before any ``/`` (libpq stops at the first; a raw ``@``,
    ``#`` or ``?`` in a password is masked whole either way) and its password from the first
    ``:``; ``rest`` is what follows (host, path, query).  ``user`` is ``None`` without a user
    part, ``password`` without a ``:``."""
    scheme, sep, after = url.partition("://")
    if not sep:
        return url, None, None, ""
    head = after.partition("/")[0]
    at = head.rfind("@")
    if at < 0 and ":" in head:  # a raw '/' in a password ('u:ab/c@host/db': libpq reads 'u' as the host)
        at = after.partition("?")[0].rfind("@")
    if at < 0:
        return scheme + sep, None, None, after
    user, colon, password = after[:at].partition(":")
    return scheme + sep, user, (password if colon else None), after[at + 1:]


#: ``key=value`` fields of a URL's query (after ``?`` or ``&``, wherever they stand)
_FIELD = re.compile(r"(?<=[?&])([^=&?]*)=([^&]*)")


def _secrets(url: str) -> list[str]:
    """The password of ``url``'s user part (whole, and every run of its ``@``-separated pieces:
    libpq ends it at the first ``@``) and the values of its secret fields (:func:`_secret_key`),
    raw and percent-decoded (found by text, so that a URL libpq cannot parse is covered too)."""
    from urllib.parse import unquote

    _, _, password, rest = _url_fields(url)
    found = [value for key, value in _FIELD.findall(rest) if _secret_key(unquote(key))]
    for whole in ([] if password is None else {password, unquote(password)}):
        parts = whole.split("@")  # each run of its '@'-separated pieces: libpq ends it at any of them
        found += ["@".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
    return [s for raw in found if raw for s in {raw, unquote(raw)}]


def _libpq_text(exc: BaseException | str, url: str, quoted: bool = False) -> str:
    """psycopg's message on one line, at most 200 characters, without the URL's secrets: every
    quoted fragment libpq copied from the URL (a whole URI, a bad ``%`` token of a password) is
    dropped unless it is a plain word (an option's name or value; ``quoted=True`` keeps them all),
    and any secret left is masked."""
    import re

    text = " ".join(str(exc).split())
    if not quoted:
        text = re.sub(r"(\"[^\"]*\"|'[^']*')", lambda m: m[0] if re.fullmatch(r".[\w.-]*.", m[0]) else "(…)", text)
    for secret in sorted(_secrets(url), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
        else:  # a short one only where it stands alone: inside words it made 'conn***ction fail***d'
            text = re.sub(rf"(?<![\w*]){re.escape(secret)}(?![\w*])", "***", text)
    return text[:200]


def _check_user_part(url: str, describe: str) -> None:
    """A one-line :class:`StateError` if ``url``'s user part holds a raw ``@`` or ``/``: libpq
    ends the user part at the first ``@`` (or the host at the first ``/``) and would read the rest
    of a password as the host (and print it); a second ``@`` before the query, or a ``/`` before
    the ``@``, is refused."""
    body = url.partition("://")[2].partition("?")[0]
    if body.count("@") > 1:
        raise StateError(f"the state URL {describe} has a raw '@' in its user name or password; write each "
                         "'@' of them as %40 (postgresql://user:pa%40ss@host:port/db)")
    if "/" in body.partition("@")[0] and "@" in body:  # libpq would read 'u:ab' as host and port
        raise StateError(f"the state URL {describe} has a raw '/' in its user name or password (or a raw '@' "
                         "in its database name); write each '/' of them as %2F and '@' as %40")


def _redact(url: str) -> str:
    """The URL without its secrets (for messages): ``user:***@`` and ``password=***``,
    ``sslpassword=***`` ... in its fields (:func:`_secret_key`); the rest is left exactly as
    given.  The user part is found by :func:`_url_fields` (a password holding ``#``, ``?`` or a
    raw ``@`` is masked whole; ``urlsplit`` read the first two as a fragment or a query)."""
    from urllib.parse import unquote_plus

    prefix, user, password, rest = _url_fields(url)
    if user is not None:
        prefix += user + (":***" if password is not None else "") + "@"
    rest = _FIELD.sub(lambda f: f"{f[1]}=***" if _secret_key(unquote_plus(f[1])) else f[0], rest)
    return prefix + rest


#: libpq's connection keywords (a ``key=value`` conninfo string holding one is not a file path)
_LIBPQ_KEYS = frozenset(
    "host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout "
    "client_encoding options application_name fallback_application_name keepalives keepalives_idle "
    "keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode sslnegotiation "
    "requiressl sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir "
    "sslsni requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib "
    "gssdelegation service target_session_attrs load_balance_hosts".split())


def _conninfo(text: str) -> tuple[bool, bool]:
    """``(conninfo, secret)``: whether ``text`` is a libpq ``key=value`` conninfo string (a
    secret field anywhere, or only ``key=value`` words with one of libpq's keywords at least),
    and whether it holds a secret field (``password=``, ``sslpassword=``: :func:`_secret_key`)."""
    words = re.sub(r"\s*=\s*", "=", text).split()
    keys = [w.partition("=")[0] for w in words if re.match(r"[\w-]+=", w)]
    secret = any(_secret_key(key) for key in keys)
    plain = bool(words) and len(keys) == len(words) and any(key.lower() in _LIBPQ_KEYS for key in keys)
    return secret or plain, secret


def _backend(state: str | Path):
    text = str(state)
    if text.startswith(("postgresql://", "postgres://")):
        return _Postgres(text)
    conninfo, secret = _conninfo(text)
    if conninfo:  # not echoed: it may hold a password
        raise StateError("STATE looks like a PostgreSQL conninfo string; write it as a postgresql://user@host:"
                         f"port/db URL{' (password=*** hidden)' if secret else ''}")
    if not text or text == ":memory:" or text.startswith("file:"):
        raise StateError("STATE must be a file path (SQLite) or a postgresql:// URL")
    return _SQLite(text)


