"""``privirt serve``: set up and run the curator service (``docs/serve.md``).

Registered as a subcommand of ``privirt`` by ``privirt/cli/serve.py``; building the parser
imports nothing heavy (FastAPI and uvicorn load only for ``run``).
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import sys
from pathlib import Path

from .._constants import MISSING_DOMAINS
from ._input import add_long_columns
from ._stdout import print_done, show_once
from ._types import Once, number, positive_int

_DESCRIPTION = """\
A curator service: analysts get private estimates of your data sets, each within an allowance
they cannot bypass; you see every spend.  Neighbouring relation: replace one person's row.

Set up (STATE is a file path for SQLite, or a postgresql:// URL shared by several replicas):

  privirt serve init STATE [--max-releases N]                         # releases per analyst and data set
  privirt serve dataset add STATE NAME FILE --epsilon E --delta D
  privirt serve analyst add STATE ALICE --allowance NAME=EPS[,DELTA]   # prints ALICE's key (last line)
  privirt serve analyst allow STATE ALICE --allowance NAME=EPS[,DELTA] # grant or change an allowance
  privirt serve analyst new-key STATE ALICE                           # a new key, same record (last line)
  privirt serve curator-key STATE                                     # prints your key (last line)
  privirt serve run STATE --host 127.0.0.1 --port 8000

The data set is validated and copied into STATE when it is added (every data-dependent error is
shown to you there, never to an analyst); the file is not read again.  Keys are shown once and
stored only as hashes.  Serve over TLS whenever the service leaves the machine: a reverse proxy
that terminates TLS (then add --tls-proxy: HSTS and Secure cookies), or --ssl-keyfile/--ssl-certfile.
Each analyst may have --max-in-flight requests running at once (default 2; more get 429).
The curator page is at /curator (log in with your key; the browser keeps a session, not the key).
"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve", help="set up and run the curator service for analysts (privacy allowances)",
        description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="serve_command", metavar="ACTION")

    p = sub.add_parser("init", help="create a new, empty state", description="Create a new state: an SQLite "
                       "file at a path (its folder must exist), or the tables in an empty PostgreSQL database.")
    p.add_argument("state", metavar="STATE", help="file path (SQLite) or postgresql:// URL")
    p.add_argument("--max-releases", type=positive_int, default=None, metavar="N",
                   help="releases one analyst may make on one data set (default 10000; each stores its "
                        "result: a bound on the state's storage)")
    p.set_defaults(func=_on_state(run_init))

    p = sub.add_parser("limits", help="set the state's limit of releases per analyst and data set",
                       description="Set the number of releases one analyst may make on one data set (all "
                       "allowances of the state; releases already made stay).")
    p.add_argument("state", metavar="STATE", help="file path (SQLite) or postgresql:// URL")
    p.add_argument("--max-releases", type=positive_int, required=True, metavar="N")
    p.set_defaults(func=_on_state(run_limits))

    ds = sub.add_parser("dataset", help="add a data set (with its total budget)")
    dsub = ds.add_subparsers(dest="dataset_command", metavar="ACTION")
    p = dsub.add_parser(
        "add", help="validate a responses file and add it with its total (ε, δ) budget",
        description="Validate a responses file (0/1, persons × items) and store a validated copy in STATE "
        "with the data set's total (ε, δ) budget.  Every check of the data happens here.")
    p.add_argument("state", metavar="STATE")
    p.add_argument("name", metavar="NAME", help="data set name (letters, digits, _ . -)")
    p.add_argument("file", metavar="FILE", help="responses as .csv, .tsv or .parquet")
    p.add_argument("--epsilon", action=Once, type=number, required=True, metavar="E", help="total ε of the data set (> 0)")
    p.add_argument("--delta", action=Once, type=number, required=True, metavar="D",
                   help="total δ, in [1e-15, 0.1] (a request's limit)")
    p.add_argument("--items", default=None, metavar="LIST",
                   help="the public item set (a,b,c or @FILE); required for a long table")
    p.add_argument("--n-persons", type=positive_int, default=None, metavar="N",
                   help="the public number of persons (required for a long table)")
    p.add_argument("--missing", choices=MISSING_DOMAINS, default="none",
                   help="declared domain: complete data (none, default) or cells missing completely at random")
    p.add_argument("--weights-col", default=None, metavar="COL",
                   help="a pattern table: COL holds how many persons gave each row (e.g. 'frequency')")
    p.add_argument("--format", choices=("wide", "long"), default=None, help="table layout (default: guessed)")
    p.add_argument("--person-col", default=None, metavar="COL",
                   help="the column with the person labels (wide default: a column named 'person', or an "
                   "unnamed first column; long default: person)")
    add_long_columns(p)
    p.set_defaults(func=_on_state(run_dataset_add))
    ds.set_defaults(func=_needs("privirt serve dataset add STATE NAME FILE --epsilon E --delta D"))

    an = sub.add_parser("analyst", help="add an analyst, change their allowances, give a new key, or revoke it")
    asub = an.add_subparsers(dest="analyst_command", metavar="ACTION")
    p = asub.add_parser(
        "add", help="add an analyst with allowances; prints their key (last line, shown once)",
        description="Add an analyst with an allowance on one or more data sets and print their API key as "
        "the last line (it is shown once; only its hash is stored).  DELTA defaults to the data set's δ.")
    p.add_argument("state", metavar="STATE")
    p.add_argument("name", metavar="NAME", help="analyst name (letters, digits, _ . -)")
    p.add_argument("--allowance", action="append", required=True, metavar="DATASET=EPS[,DELTA]",
                   help="an allowance (repeat for several data sets)")
    p.set_defaults(func=_on_state(run_analyst_add))
    p = asub.add_parser("revoke", help="revoke an analyst's key at once (their record stays)")
    p.add_argument("state", metavar="STATE")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=_on_state(run_analyst_revoke))
    p = asub.add_parser(
        "allow", help="grant or change an analyst's allowances (raise or lower)",
        description="Grant an existing, unrevoked analyst an allowance on a data set, or change one (raise or "
        "lower; what they spent keeps counting).  Lowered below what they spent, nothing remains and their "
        "requests there are refused.  DELTA defaults to the allowance's δ (a new one's: the data set's δ).")
    p.add_argument("state", metavar="STATE")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--allowance", action="append", required=True, metavar="DATASET=EPS[,DELTA]",
                   help="the new allowance (repeat for several data sets)")
    p.set_defaults(func=_on_state(run_analyst_allow))
    p = asub.add_parser(
        "new-key", help="give an analyst a new key (last line); the old key stops, the record stays",
        description="Replace an analyst's key (a leaked one, say) and print the new one as the last line: "
        "the old key stops at once; their allowances and spends stay, so every spend keeps counting.  A "
        "revoked analyst is restored with their record.")
    p.add_argument("state", metavar="STATE")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(func=_on_state(run_analyst_new_key))
    an.set_defaults(func=_needs("privirt serve analyst add STATE NAME --allowance DATASET=EPS[,DELTA]"))

    p = sub.add_parser("curator-key", help="print a new curator key (last line); earlier ones stop working",
                       description="Create a new curator key and print it as the last line.  Earlier curator "
                       "keys stop working (rotation).")
    p.add_argument("state", metavar="STATE")
    p.set_defaults(func=_on_state(run_curator_key))

    p = sub.add_parser("backup", help="copy a (running) SQLite state to a new file, spends included",
                       description="Copy a SQLite state to a new file with SQLite's online backup: safe while "
                       "the service runs (a plain copy of the state file can miss recent spends, which are "
                       "still in its write-ahead log).  The state is copied as it is: an older one is not upgraded.  "
                       "For PostgreSQL use pg_dump.")
    p.add_argument("state", metavar="STATE")
    p.add_argument("copy", metavar="COPY", help="the new file (refused if it exists)")
    p.set_defaults(func=run_backup)

    p = sub.add_parser("list", help="print the data sets, allowances and spends")
    p.add_argument("state", metavar="STATE")
    p.add_argument("--json", action="store_true", help="print a JSON document instead")
    p.set_defaults(func=_on_state(run_list))

    p = sub.add_parser(
        "run", help="run the service (uvicorn)",
        description="Run the service with uvicorn.  Bind to 127.0.0.1 behind a TLS reverse proxy, or give "
        "--ssl-keyfile and --ssl-certfile.  Several workers (or several replicas on a postgresql:// state) "
        "share one state safely.")
    p.add_argument("state", metavar="STATE")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=positive_int, default=8000, help="port (default 8000)")
    p.add_argument("--workers", type=positive_int, default=1, metavar="K",
                   help="worker processes (default 1; at most 4 per CPU, at least 8)")
    p.add_argument("--ssl-keyfile", default=None, metavar="PATH", help="TLS private key (PEM)")
    p.add_argument("--ssl-certfile", default=None, metavar="PATH", help="TLS certificate (PEM)")
    p.add_argument("--max-in-flight", type=positive_int, default=2, metavar="K",
                   help="requests (spending ones, data set listings) one analyst may have running at once, "
                   "per worker (default 2); more get 429 with Retry-After, nothing spent")
    p.add_argument("--tls-proxy", action="store_true",
                   help="every request reaches the service through a TLS-terminating reverse proxy: send "
                   "Strict-Transport-Security and mark the curator page's session cookie Secure (automatic "
                   "with --ssl-certfile)")
    p.add_argument("--state-deadline", type=_state_deadline, default=None, metavar="SECONDS",
                   help="a postgresql:// state only: seconds each transaction on it may take before its "
                   "connection is broken and the request answers 503 (default 30, at most 600); refused "
                   "with a SQLite state, whose file lock is waited for at most 60 s")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    p.set_defaults(func=run_serve)

    parser.set_defaults(func=_needs("`privirt serve init STATE`, then see `privirt serve --help`"))


def _on_state(run):
    """``run`` with an error of PostgreSQL other than a connection one (a role without rights on
    the state's tables) raised as one line naming the redacted state URL, not a traceback."""
    def checked(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except Exception as exc:
            from ..serve._backends import refused

            error = refused(exc, args.state)
            if error is None:
                raise
            raise error from None

    return checked


def max_workers() -> int:
    """The most worker processes ``serve run --workers`` takes: 4 per CPU, at least 8."""
    return max(8, 4 * (os.cpu_count() or 1))


def _state_deadline(text: str) -> float:
    """``--state-deadline``: seconds, checked by :func:`privirt.serve._deadline.check_state_deadline`."""
    from ..serve._deadline import MAX_STATE_DEADLINE, STATE_DEADLINE, check_state_deadline

    try:
        return check_state_deadline(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, a number > 0 and at most {MAX_STATE_DEADLINE:g}, got "
                                         f"{text!r} (leave it out for the default, {STATE_DEADLINE:g} s)") from None


def _needs(usage: str):
    def run(args: argparse.Namespace) -> int:
        raise ValueError(f"give an action: {usage}")

    return run


def run_init(args: argparse.Namespace) -> int:
    from ..serve.store import init_store

    store = init_store(args.state, args.max_releases)  # (--max-releases is checked by argparse, before)
    print_done([f"created state {store.describe} ({store.kind}); next: privirt serve dataset add {store.describe} "
                "NAME FILE --epsilon E --delta D"], f"the state {store.describe} WAS created")
    return 0


def run_limits(args: argparse.Namespace) -> int:
    from ..serve.store import open_store

    store = open_store(args.state)
    store.set_max_releases(args.max_releases)
    print_done([f"{store.describe}: at most {args.max_releases} releases per analyst and data set"],
               f"the limit WAS set; {_see(store)}")
    return 0


def run_dataset_add(args: argparse.Namespace) -> int:
    from ..serve.service import check_dataset_name, register_dataset
    from ..serve.store import open_store
    from ._input import public_items, read_responses

    from ..private.accounting import check_delta, check_epsilon

    from ..serve._budget import check_delta_limit

    check_dataset_name(args.name)
    check_epsilon(_budget_epsilon(args.epsilon, "--epsilon", "the data set's total budget ε"), "--epsilon")
    check_delta_limit(check_delta(args.delta, "--delta"), "--delta")
    store = open_store(args.state)
    if args.name in store.dataset_names():
        raise ValueError(f"a data set named {args.name!r} exists already; its budget cannot be reset — "
                         "choose another name")
    path = Path(args.file)
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    # read as every private path reads (labels as text, empty persons and items kept), with the
    # layout options of `privirt estimate` (--format, --person-col, --item-col, --response-col)
    resp = read_responses(args, private=True)
    items = None if args.items is None else public_items(args.items)
    info = register_dataset(store, name=args.name, resp=resp, epsilon=args.epsilon, delta=args.delta,
                            items=items, n_persons=args.n_persons, missing=args.missing, source=path.name)
    print_done([f"added data set {info['name']!r}: {info['n_persons']} persons × {len(info['items'])} items "
                f"(missing: {info['missing']}), budget ε = {info['epsilon']:g}, δ = {info['delta']:g}; "
                "a validated copy is stored in the state"], f"the data set {info['name']!r} WAS added; {_see(store)}")
    return 0


def _budget_epsilon(value: float, name: str, what: str) -> float:
    """``value`` if it is a finite number > 0; else a one-line ValueError naming ``name`` that
    asks for ``what`` (the library's own words would advise leaving out ε for a non-private
    estimate, which a budget does not have).

    Parameters
    ----------
    value : float
        The ε given.
    name : str
        How the message names it (``--epsilon``).
    what : str
        What to give instead (``the data set's total budget ε``).

    Returns
    -------
    float
        ``value``, to be checked further by :func:`~privirt.private.accounting.check_epsilon`.
    """
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}; give {what} (> 0)")
    return value


def parse_allowance(text: str) -> tuple[str, float, float | None]:
    from ..private.accounting import check_delta, check_epsilon

    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise ValueError(f"--allowance {text!r}: write DATASET=EPS or DATASET=EPS,DELTA")
    parts = value.split(",")
    if len(parts) > 2:
        raise ValueError(f"--allowance {text!r}: write DATASET=EPS or DATASET=EPS,DELTA")
    try:
        eps = float(parts[0])
        dlt = float(parts[1]) if len(parts) == 2 else None
    except ValueError:
        raise ValueError(f"--allowance {text!r}: EPS and DELTA must be numbers") from None
    eps = check_epsilon(_budget_epsilon(eps, "the allowance's epsilon", f"the ε the analyst may spend on {name!r}"),
                        "the allowance's epsilon")
    if dlt is not None:
        dlt = check_delta(dlt, "the allowance's delta")
    return name, eps, dlt


def _allowances(args: argparse.Namespace, budgets: dict, default: dict) -> dict[str, tuple[float, float | None]]:
    """The ``--allowance`` options as ``{data set: (ε, δ)}``, checked (one line each); a δ left out
    is ``default[data set]`` (None: the store keeps the allowance's own)."""
    from ..serve._budget import check_delta_limit

    allowances: dict[str, tuple[float, float | None]] = {}
    for text in args.allowance:
        name, eps, dlt = parse_allowance(text)
        if name not in budgets:
            raise ValueError(f"--allowance {text!r}: no data set named {name!r}; add it first with "
                             "`privirt serve dataset add`")
        if name in allowances:
            raise ValueError(f"--allowance names {name!r} twice")
        allowances[name] = (eps, default.get(name) if dlt is None else dlt)
        if allowances[name][1] is not None:
            what = "DELTA" if dlt is not None else f"DELTA (defaulted to the data set's δ, {default[name]:g})"
            check_delta_limit(allowances[name][1], f"--allowance {text!r}: {what}")
    return allowances


def _cap(eps: float, budget: dict) -> str:
    return " (more than the data set's total budget, which caps it)" if eps > budget["epsilon"] else ""


def run_analyst_add(args: argparse.Namespace) -> int:
    from ..serve.service import check_dataset_name
    from ..serve.store import open_store

    check_dataset_name(args.name, "analyst")
    store = open_store(args.state)
    budgets = {d["name"]: d for d in store.datasets()}
    allowances = _allowances(args, budgets, {name: d["delta"] for name, d in budgets.items()})
    key = store.add_analyst(args.name, allowances)
    show_once([*(f"allowance for {args.name!r} on {name!r}: ε = {eps:g}, δ = {dlt:g}{_cap(eps, budgets[name])}"
                 for name, (eps, dlt) in allowances.items()),
               f"API key of {args.name!r} (shown once; give it to the analyst over a safe channel):", key],
              f"analyst {args.name!r} was added but the key could not be shown; give them a new key with "
              f"`{_new_key_command(store, args.name)}`")
    return 0


def _new_key_command(store, name: str) -> str:
    """``privirt serve analyst new-key STATE NAME`` (the state as the store describes it: a
    URL's password masked), quoted for a shell."""
    import shlex

    return f"privirt serve analyst new-key {shlex.quote(store.describe)} {shlex.quote(name)}"


def run_analyst_revoke(args: argparse.Namespace) -> int:
    from ..serve.service import check_dataset_name
    from ..serve.store import open_store

    check_dataset_name(args.name, "analyst")  # (a name no analyst can have: one line, not a codec error)
    store = open_store(args.state)
    if not store.revoke_analyst(args.name):
        raise ValueError(f"no active analyst named {args.name!r} (see `privirt serve list {store.describe}`)")
    print_done([f"revoked the key of {args.name!r}; their spends stay on record"],
               f"the key of {args.name!r} WAS revoked; {_see(store)}")
    return 0


def run_analyst_allow(args: argparse.Namespace) -> int:
    from mechanisms.measures import format_up

    from ..serve.service import check_dataset_name
    from ..serve.store import open_store

    check_dataset_name(args.name, "analyst")
    store = open_store(args.state)
    budgets = {d["name"]: d for d in store.datasets()}
    lines = []
    for a in store.set_allowances(args.name, _allowances(args, budgets, {})):
        was = "new" if a["was"] is None else f"was ε = {a['was']['epsilon']:g}, δ = {a['was']['delta']:g}"
        lines.append(f"allowance for {args.name!r} on {a['dataset']!r}: ε = {a['epsilon']:g}, δ = {a['delta']:g} "
                     f"({was}){_cap(a['epsilon'], budgets[a['dataset']])}")
        if a["remaining_epsilon"] <= 0:
            lines.append(f"  remaining ε = 0: {args.name!r} already spent ε = {format_up(a['spent_epsilon'], 6)} "
                         "there; their requests on it are refused")
    print_done(lines, f"the allowances of {args.name!r} WERE set; {_see(store)}")
    return 0


def _see(store) -> str:
    """Where to see what a command changed: ``see `privirt serve list STATE```, quoted for a shell."""
    import shlex

    return f"see `privirt serve list {shlex.quote(store.describe)}`"


def run_analyst_new_key(args: argparse.Namespace) -> int:
    from ..serve.service import check_dataset_name
    from ..serve.store import open_store

    check_dataset_name(args.name, "analyst")  # (a name no analyst can have: one line, not a codec error)
    store = open_store(args.state)
    key, revoked = store.new_analyst_key(args.name)
    restored = [] if revoked is None else [
        f"restored {args.name!r} (revoked on {revoked[:10]}) with their allowances and spends"]
    show_once([*restored, f"new API key of {args.name!r} (their old key no longer works; their allowances and "
               "spends stay; shown once, give it to the analyst over a safe channel):", key],
              f"the new key of {args.name!r} could not be shown and their old key no longer works; give them "
              f"another with `{_new_key_command(store, args.name)}`")
    return 0


def run_curator_key(args: argparse.Namespace) -> int:
    from ..serve.store import open_store

    import shlex

    store = open_store(args.state)
    key = store.new_curator_key()
    show_once(["curator key (shown once; earlier curator keys no longer work):", key],
              "the old curator keys were revoked and the new one could not be shown; run "
              f"`privirt serve curator-key {shlex.quote(store.describe)}` again")
    return 0


def run_backup(args: argparse.Namespace) -> int:
    from ..serve.store import backup_store

    n = backup_store(args.state, args.copy)
    print_done([f"backed up {args.state} to {args.copy} ({n} spends)"], f"the copy {args.copy} WAS made")
    return 0


def run_list(args: argparse.Namespace) -> int:
    import json

    from mechanisms.measures import format_down, format_up

    from ..serve.store import open_store

    store = open_store(args.state)
    datasets = [{k: v for k, v in d.items() if k != "items"} | {"n_items": len(d["items"])}
                for d in store.datasets()]
    allowances = store.allowances()
    spends = store.spends()
    events = store.events()
    if args.json:
        print(json.dumps({"state": store.describe, "max_releases": store.max_releases(), "datasets": datasets,
                          "allowances": allowances, "spends": spends, "events": events}, indent=2))
        return 0
    print(f"state: {store.describe} ({store.kind}); at most {store.max_releases()} releases per analyst and "
          "data set")
    print("data sets:" if datasets else "data sets: none (add one with `privirt serve dataset add`)")
    for d in datasets:
        print(f"  {d['name']}: {d['n_persons']} persons × {d['n_items']} items, missing {d['missing']}; "
              f"budget ε = {d['epsilon']:g}, δ = {d['delta']:g}; spent ε = {format_up(d['spent_epsilon'], 6)}, "
              f"remaining ε = {format_down(d['remaining_epsilon'], 6)} ({d['n_spends']} spends)")
    print("allowances:" if allowances else "allowances: none (add an analyst with `privirt serve analyst add`)")
    for a in allowances:
        state = " [revoked]" if a["revoked"] else ""
        print(f"  {a['analyst']}{state} on {a['dataset']}: ε = {a['epsilon']:g}, δ = {a['delta']:g}; "
              f"spent ε = {format_up(a['spent_epsilon'], 6)}, remaining ε = {format_down(a['remaining_epsilon'], 6)}")
    print(f"spends: {len(spends)}")
    for s in spends:
        print(f"  #{s['id']} {s['time'][:19]} {s['analyst']} {s['dataset']} {s['endpoint']} {s['mechanism']} "
              f"rho={s['rho']:.6g} eps={s['epsilon']:.6g} delta={s['delta']:.3g} [{s['status']}]")
    print(f"curator actions: {len(events)}")
    for e in events:
        print(f"  #{e['id']} {e['time'][:19]} {e['action']} {e['name']} "
              f"{json.dumps(e['params'], sort_keys=True, ensure_ascii=False)} by {e['who']}")
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_readable(path: str, flag: str) -> None:
    """A one-line error naming ``flag`` and ``path`` unless ``path`` is a file this process can read."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{flag} {path}: no such file")
    if not p.is_file():
        raise ValueError(f"{flag} {path}: not a file")
    try:
        with p.open("rb"):
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot be read ({exc.strerror or exc})") from None


def _check_listen(host: str, port: int) -> None:
    """A one-line error naming ``--host`` or ``--port`` unless this process can listen on
    ``(host, port)``: each address ``host`` resolves to is bound (as uvicorn binds it, with
    ``SO_REUSEADDR``) and closed at once, so that uvicorn never starts with it."""
    import errno
    import socket

    try:
        # "" is every address to asyncio's create_server (uvicorn), as None is to getaddrinfo
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or " ".join(str(exc).split())
        raise ValueError(f"--host {host}: not an address or host name this machine can resolve ({reason}); "
                         "give one of its addresses, e.g. 127.0.0.1 or 0.0.0.0") from None
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == getattr(socket, "AF_INET6", None):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
        except OSError as exc:
            reason = exc.strerror or " ".join(str(exc).split())
            if exc.errno == errno.EADDRINUSE:
                raise ValueError(f"--port {port}: already in use on {address[0]} ({reason}); stop what listens "
                                 "there or pick another --port") from None
            if exc.errno == errno.EACCES:
                raise ValueError(f"--port {port}: not allowed to listen on it ({reason}); ports below 1024 "
                                 "need privileges, pick another --port") from None
            raise ValueError(f"--host {host}: cannot listen on {address[0]} port {port} ({reason}); give an "
                             "address of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None


def run_serve(args: argparse.Namespace) -> int:
    try:  # before anything that imports them, so that a missing extra is named (not 'No module named ...')
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise ImportError("privirt serve run needs the serve extra: python -m pip install \"privirt[serve]\"") from None
    from ..serve.store import open_store

    # the options are checked here, so that uvicorn never starts with them (it printed a traceback)
    if not 1 <= args.port <= 65535:
        raise ValueError(f"--port must be 1-65535, got {args.port}")
    if args.workers > max_workers():  # (uvicorn started them all, with no end on SIGTERM)
        raise ValueError(f"--workers must be at most {max_workers()} (4 per CPU of this machine, at least 8), "
                         f"got {args.workers}: each worker is a process holding the data sets")
    if (args.ssl_keyfile is None) != (args.ssl_certfile is None):
        raise ValueError("give both --ssl-keyfile and --ssl-certfile, or neither")
    for flag, path in (("--ssl-keyfile", args.ssl_keyfile), ("--ssl-certfile", args.ssl_certfile)):
        if path is not None:
            _check_readable(path, flag)
    if args.ssl_certfile is not None:  # a pair that is not PEM, or a key that is not the certificate's
        import ssl

        class _Encrypted(Exception):
            pass

        def _no_prompt() -> bytes:  # (OpenSSL asked on the terminal, then failed without one)
            raise _Encrypted

        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(args.ssl_certfile, args.ssl_keyfile,
                                                                    password=_no_prompt)
        except _Encrypted:
            raise ValueError(f"--ssl-keyfile {args.ssl_keyfile} is encrypted with a passphrase, which the service "
                             "cannot ask for; give it the key unencrypted (openssl pkey -in KEY -out PLAIN.pem) "
                             "in a file only the service's user can read") from None
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"--ssl-certfile {args.ssl_certfile} and --ssl-keyfile {args.ssl_keyfile} are not "
                             f"a PEM certificate and its private key ({' '.join(str(exc).split())}); give the "
                             "pair your certificate authority issued") from None
    # a bad STATE, or a damaged data set in it, is one line here, not a traceback in every worker
    from ..serve.service import load_datasets

    store = open_store(args.state)
    if (warning := store.readable_by_others()) is not None:  # (its mode is not changed: the curator decides)
        print(f"privirt: warning: {warning}", file=sys.stderr)
    if args.state_deadline is not None:  # (refused for a SQLite state)
        store.set_deadline(args.state_deadline)
    load_datasets(store, keep=False)
    del store  # (its connection to a postgresql:// state would stay open for the server's whole life)
    _check_listen(args.host, args.port)  # last, so that the address is still free for uvicorn
    if not _is_loopback(args.host) and args.ssl_certfile is None:
        print("privirt: warning: serving without TLS on a non-loopback address; API keys would cross the "
              "network in clear — put a TLS reverse proxy in front or give --ssl-keyfile/--ssl-certfile",
              file=sys.stderr)
    os.environ["PRIVIRT_SERVE_STATE"] = args.state
    os.environ["PRIVIRT_SERVE_MAX_IN_FLIGHT"] = str(args.max_in_flight)
    os.environ["PRIVIRT_SERVE_TLS_PROXY"] = "1" if args.tls_proxy else "0"
    if args.state_deadline is None:  # (the default, not one left in the environment)
        os.environ.pop("PRIVIRT_SERVE_STATE_DEADLINE", None)
    else:  # every worker process reads it in app_from_env
        os.environ["PRIVIRT_SERVE_STATE_DEADLINE"] = repr(args.state_deadline)
    uvicorn.run("privirt.serve.app:app_from_env", factory=True, host=args.host, port=args.port,
                workers=args.workers, ssl_keyfile=args.ssl_keyfile, ssl_certfile=args.ssl_certfile,
                log_level=args.log_level, server_header=False, proxy_headers=False)
    return 0
