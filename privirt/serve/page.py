"""The curator page: server-rendered HTML, inline CSS and SVG, no scripts, no external assets.

Shows each data set's budget (spent / remaining), each analyst's allowances and spending over
time (one inline SVG plot per analyst: cumulative composed ε per data set, with the allowance as
a dashed line; at most :data:`PLOT_POINTS` points a curve and :data:`PAGE_POINTS` a page, each
a zCDP conversion) and the audit log: every spend, or the newest :data:`AUDIT_ROWS` (the heading then
says so, and where all of them are), and the newest :data:`EVENT_ROWS` curator actions.  Every
value is escaped.
"""

from __future__ import annotations

import datetime as _dt
from html import escape

from mechanisms.measures import format_down, format_up

__all__ = ["render_page", "login_page", "cumulative_epsilon", "AUDIT_ROWS", "EVENT_ROWS", "PLOT_WINDOW",
           "PLOT_POINTS", "PAGE_POINTS", "KEY_TOO_LONG"]

#: Most spends the page's audit log shows (the newest; a page of 10^4+ rows is slow).
AUDIT_ROWS = 1000
#: Most curator actions the page's audit section shows (the newest).
EVENT_ROWS = 200
#: Most spends of an allowance its curve covers (the latest; composed over all of them).
PLOT_WINDOW = 400
#: Most points of one allowance's curve: its spends are thinned to this many columns of the
#: plot's 380 px (4 px each), one point per column (each point a composed total: a conversion).
PLOT_POINTS = 95
#: Most points of all curves of a page together: with more than PAGE_POINTS // PLOT_POINTS
#: allowances spent on, each curve gets PAGE_POINTS // (their number) columns (at least one).
PAGE_POINTS = 1500

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2433;background:#f6f7f9}
header{background:#1d2433;color:#fff;padding:14px 28px;display:flex;justify-content:space-between;align-items:center}
header h1{font-size:20px;margin:0;font-weight:600}
main{padding:12px 28px 40px;max-width:1200px}
h2{font-size:17px;margin:26px 0 10px;border-bottom:1px solid #d8dce3;padding-bottom:4px}
table{border-collapse:collapse;background:#fff;font-size:13px;width:100%}
th,td{border:1px solid #e1e4ea;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{background:#e6e9ef;border-radius:3px;height:10px;width:160px;display:inline-block;vertical-align:middle}
.bar span{display:block;height:10px;border-radius:3px;background:#3b6fd8}
.bar span.hi{background:#d8553b}
.plots{display:flex;flex-wrap:wrap;gap:16px}
figure{background:#fff;border:1px solid #e1e4ea;margin:0;padding:8px 10px}
figcaption{font-size:13px;font-weight:600;margin-bottom:4px}
.revoked{color:#b23;font-weight:600}
.legend{font-size:12px;margin-top:2px}
.muted{color:#667;font-size:12px}
form{margin:0}
button{font-size:13px;padding:4px 10px}
"""
_COLOURS = ["#3b6fd8", "#d8553b", "#2a9d6f", "#8a5cc7", "#c99a1b", "#1b9bc9"]


def _parse_time(t: str) -> float:
    return _dt.datetime.fromisoformat(t).timestamp()


def cumulative_epsilon(spends: list[dict], delta: float, last: int | None = None) -> list[float]:
    """Composed ε after each spend (zCDP composition at the allowance's δ, as the ledger).

    Parameters
    ----------
    spends : list of dict
        Every spend of the allowance, oldest first (``rho``, ``epsilon``, ``delta``).
    delta : float
        The allowance's δ, at which the spends are composed.
    last : int, optional
        Return only the points of the latest ``last`` spends; each is still composed over
        every spend up to it (so the last point is the composed total of all spends).

    Returns
    -------
    list of float
        The composed ε after each (of the latest ``last``) spend(s).
    """
    from ._budget import Spent

    costs = [(s["rho"], s["epsilon"], s["delta"]) for s in spends]
    first = 0 if last is None else max(0, len(costs) - int(last))
    running = Spent.of(costs[:first])  # the sums of the spends before the points shown
    out = []
    for c in costs[first:]:
        running = running.plus(c)
        out.append(float(running.total(delta)))
    return out


def _plots(names: list[str], allowances: list[dict], spends: list[dict]) -> list[str]:
    """One plot per analyst (:func:`_plot`): the curves of their allowances, from the spends
    grouped once by (analyst, data set) and thinned by :func:`_curve`."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for s in spends:
        groups.setdefault((s["analyst"], s["dataset"]), []).append(s)
    mine: dict[str, list[tuple[dict, list[dict]]]] = {}
    for a in allowances:
        mine.setdefault(a["analyst"], []).append((a, groups.get((a["analyst"], a["dataset"]), [])))
    busy = sum(1 for a in allowances if (a["analyst"], a["dataset"]) in groups)
    columns = max(1, min(PLOT_POINTS, PAGE_POINTS // max(busy, 1)))
    out = []
    for name in names:
        shown = [(a, own, [_parse_time(s["time"]) for s in own[-PLOT_WINDOW:]]) for a, own in mine.get(name, [])]
        times = [t for _, _, ts in shown for t in ts]
        span = (min(times), max(times)) if times else None
        out.append(_plot(name, [_curve(a, own, ts, span, columns) for a, own, ts in shown], span))
    return out


def _curve(a: dict, spends: list[dict], times: list[float], span: tuple[float, float] | None,
           columns: int) -> tuple[str, list[float], list[float], float, float]:
    """The series of allowance ``a`` for :func:`_plot`: its latest :data:`PLOT_WINDOW` spends
    (``times``: theirs), composed over all of ``spends``, thinned to one point per column of
    ``columns`` across ``span``: the composed ε after the column's last spend, drawn from its
    first spend's time.  Each point is the exact composed total there, and the step curve is
    never below the true one (it rises at most a column early); without thinning it is the
    true curve.  One conversion per point (the last is the allowance's ``spent_epsilon`` when
    ``spends`` are all of its spends), and one for the ε before the window."""
    from ._budget import Spent

    delta, window = a["delta"], spends[-PLOT_WINDOW:]
    head = spends[:len(spends) - len(window)]
    running = Spent.of([(s["rho"], s["epsilon"], s["delta"]) for s in head])
    before = float(running.total(delta)) if head else 0.0
    if not window:
        return a["dataset"], [], [], a["epsilon"], before
    t0, t1 = span
    width = t1 - t0
    cols, c = [], 0
    for t in times:  # (never back a column: the points stay at most ``columns``)
        c = max(c, min(columns - 1, int((t - t0) / width * columns)) if width > 1e-6 else 0)
        cols.append(c)
    xs, ys, first = [], [], 0
    for i, s in enumerate(window):
        running = running + Spent.of([(s["rho"], s["epsilon"], s["delta"])])
        if i + 1 < len(window) and cols[i + 1] == cols[i]:
            continue
        whole = i + 1 == len(window) and running.n == a.get("n_spends")
        xs.append(times[first])
        ys.append(float(a["spent_epsilon"]) if whole else float(running.total(delta)))
        first = i + 1
    return a["dataset"], xs, ys, a["epsilon"], before


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _fmt_spent(x: float) -> str:
    """A spent ε, rounded up: never printed below what was spent."""
    return format_up(x, 4)


def _fmt_left(x: float) -> str:
    """A remaining ε, rounded down: asking for the printed amount fits."""
    return format_down(x, 4)


def _bar(spent: float, total: float) -> str:
    share = 0.0 if total <= 0 else max(0.0, min(1.0, spent / total))
    cls = ' class="hi"' if share > 0.8 else ""
    return (f'<span class="bar" role="img" aria-label="{share:.0%} spent"><span{cls} '
            f'style="width:{share * 100:.1f}%"></span></span> {share:.0%}')


def _plot(analyst: str, series: list[tuple[str, list[float], list[float], float, float]],
          span: tuple[float, float] | None = None) -> str:
    """An SVG of cumulative ε against time, one line per data set (name, times, eps, allowance,
    the composed ε before the first point shown); ``span``: the time axis (default: the times'
    range)."""
    W, H, L, R, T, B = 440, 190, 48, 12, 10, 38
    times = [t for _, ts, _, _, _ in series for t in ts]
    if not times:
        return (f'<figure><figcaption>{escape(analyst)}</figcaption>'
                '<p class="muted">no spends yet</p></figure>')
    t0, t1 = span if span is not None else (min(times), max(times))
    if t1 - t0 < 1e-6:
        t0, t1 = t0 - 1.0, t1 + 1.0
    ymax = max([a for _, _, _, a, _ in series] + [max(es) for _, _, es, _, _ in series if es]) * 1.08
    ymax = ymax if ymax > 0 else 1.0

    def x(t: float) -> float:
        return L + (W - L - R) * (t - t0) / (t1 - t0)

    def y(e: float) -> float:
        return T + (H - T - B) * (1.0 - e / ymax)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
             f'aria-label="cumulative privacy spending of {escape(analyst)}">',
             f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="#fafbfc" stroke="#ccd"/>']
    for k in range(5):
        v = ymax * k / 4
        parts.append(f'<line x1="{L}" x2="{W - R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eceef2"/>'
                     f'<text x="{L - 4}" y="{y(v) + 4:.1f}" font-size="10" text-anchor="end">{_fmt(v)}</text>')
    fmt = "%H:%M:%S" if t1 - t0 < 86400 else "%Y-%m-%d"
    for t, anchor in ((t0, "start"), (t1, "end")):
        label = _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime(fmt)
        parts.append(f'<text x="{x(t):.1f}" y="{H - B + 14}" font-size="10" text-anchor="{anchor}">{label}</text>')
    parts.append(f'<text x="{(L + W - R) / 2}" y="{H - 6}" font-size="10" text-anchor="middle">time (UTC)</text>')
    parts.append(f'<text x="12" y="{(T + H - B) / 2}" font-size="10" text-anchor="middle" '
                 f'transform="rotate(-90 12 {(T + H - B) / 2})">ε spent</text>')
    legend = []
    for k, (ds, ts, es, allow, before) in enumerate(series):
        c = _COLOURS[k % len(_COLOURS)]
        parts.append(f'<line x1="{L}" x2="{W - R}" y1="{y(allow):.1f}" y2="{y(allow):.1f}" stroke="{c}" '
                     'stroke-dasharray="5 4" stroke-width="1"/>')
        if ts:
            pts = [(x(t0), y(before))]
            prev = before
            for t, e in zip(ts, es):
                pts += [(x(t), y(prev)), (x(t), y(e))]
                prev = e
            pts.append((x(t1), y(prev)))
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
        legend.append(f'<span style="color:{c}">&#9632; {escape(ds)}</span> '
                      f'<span class="muted">(allowance ε = {_fmt(allow)}, dashed)</span>')
    parts.append("</svg>")
    return (f'<figure><figcaption>{escape(analyst)}</figcaption>{"".join(parts)}'
            f'<div class="legend">{"<br>".join(legend)}</div></figure>')


def render_page(datasets: list[dict], allowances: list[dict], spends: list[dict],
                analysts: list[dict], events: list[dict] = (),
                audit: tuple[list[dict], int] | None = None) -> str:
    """The whole curator page as one HTML string.

    Parameters
    ----------
    datasets, allowances, analysts : list of dict
        As :class:`~privirt.serve.store.Store` reads them.
    spends : list of dict
        Every spend, oldest first; the plots read only ``time``, ``analyst``, ``dataset``,
        ``rho``, ``epsilon`` and ``delta`` (:meth:`Store.spend_costs`).
    events : list of dict, optional
        The curator's actions, oldest first.
    audit : (list of dict, int), optional
        The newest spends in full, oldest first, and the number of all spends
        (:meth:`Store.newest_spends`) for the audit log; default: taken from ``spends``.
    """
    rows = []
    for d in datasets:
        rows.append(
            f"<tr><td>{escape(d['name'])}</td><td class='num'>{d['n_persons']}</td>"
            f"<td class='num'>{len(d['items'])}</td><td>{escape(d['missing'])}</td>"
            f"<td class='num'>{_fmt(d['epsilon'])}</td><td class='num'>{d['delta']:.3g}</td>"
            f"<td class='num'>{_fmt_spent(d['spent_epsilon'])}</td><td class='num'>{_fmt_left(d['remaining_epsilon'])}</td>"
            f"<td>{_bar(d['spent_epsilon'], d['epsilon'])}</td><td class='num'>{d['n_spends']}</td></tr>")
    ds_table = ("<table><thead><tr><th>data set</th><th>persons</th><th>items</th><th>missing</th>"
                "<th>budget ε</th><th>δ</th><th>spent ε</th><th>remaining ε</th><th>used</th><th>spends</th>"
                "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")

    revoked = {a["name"]: a["revoked"] for a in analysts}
    rows = []
    for a in allowances:
        state = f"<span class='revoked'>revoked {escape(a['revoked'][:19].replace('T', ' '))}</span>" if a["revoked"] else "active"
        rows.append(
            f"<tr><td>{escape(a['analyst'])}</td><td>{state}</td><td>{escape(a['dataset'])}</td>"
            f"<td class='num'>{_fmt(a['epsilon'])}</td><td class='num'>{a['delta']:.3g}</td>"
            f"<td class='num'>{_fmt_spent(a['spent_epsilon'])}</td><td class='num'>{_fmt_left(a['remaining_epsilon'])}</td>"
            f"<td>{_bar(a['spent_epsilon'], a['epsilon'])}</td><td class='num'>{a['n_spends']}</td></tr>")
    al_table = ("<table><thead><tr><th>analyst</th><th>key</th><th>data set</th><th>allowance ε</th><th>δ</th>"
                "<th>spent ε</th><th>remaining ε</th><th>used</th><th>spends</th></tr></thead><tbody>"
                + "".join(rows) + "</tbody></table>")

    plots = _plots(sorted(revoked), allowances, spends)

    newest, n_spends = (spends[-AUDIT_ROWS:], len(spends)) if audit is None else audit
    rows = []
    for s in reversed(newest[-AUDIT_ROWS:]):
        rows.append(
            f"<tr><td class='num'>{s['id']}</td><td>{escape(s['time'][:19].replace('T', ' '))}</td>"
            f"<td>{escape(s['analyst'])}</td><td>{escape(s['dataset'])}</td><td>{escape(s['endpoint'])}</td>"
            f"<td>{escape(_what(s['params']))}</td><td>{escape(s['mechanism'])}</td>"
            f"<td class='num'>{_fmt_spent(s['rho'])}</td><td class='num'>{_fmt_spent(s['epsilon'])}</td>"
            f"<td class='num'>{s['delta']:.3g}</td><td>{escape(s['status'])}</td></tr>")
    log = ("<table><thead><tr><th>#</th><th>time (UTC)</th><th>analyst</th><th>data set</th><th>endpoint</th>"
           "<th>request</th><th>mechanism</th><th>ρ</th><th>ε</th><th>δ</th><th>status</th></tr></thead><tbody>"
           + "".join(rows) + "</tbody></table>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>privirt curator</title><style>{_CSS}</style></head><body>"
        "<header><h1>privirt serve — curator</h1>"
        "<form method='post' action='/curator/logout'><button type='submit'>log out</button></form></header>"
        "<main><p class='muted'>Read-only. Budgets compose under zCDP at each budget's δ (as privirt's ledger); "
        "remaining ε is what a pure-ε request could still spend. Revoke keys with "
        "<code>privirt serve analyst revoke STATE NAME</code>, replace one with <code>analyst new-key</code>, "
        "change allowances with <code>analyst allow</code>.</p>"
        f"<h2>Data sets</h2>{ds_table}"
        f"<h2>Analysts and allowances</h2>{al_table}"
        f"<h2>Spending over time</h2><div class='plots'>{''.join(plots)}</div>"
        f"<h2>Audit log ({_shown(n_spends)})</h2>{log}"
        f"{_events(list(events))}"
        "</main></body></html>"
    )


def _shown(n: int) -> str:
    """The audit log heading's count: all ``n`` spends, or the newest :data:`AUDIT_ROWS` of them
    and where to find the rest."""
    if n <= AUDIT_ROWS:
        return f"{n} spends, newest first"
    return (f"the newest {AUDIT_ROWS} of {n} spends, newest first; all of them: "
            "<code>privirt serve list STATE</code> or <code>GET /v1/curator/spends</code>")


def _events(events: list[dict]) -> str:
    """The audit section's table of curator actions, the newest :data:`EVENT_ROWS` first."""
    import json

    rows = "".join(
        f"<tr><td class='num'>{e['id']}</td><td>{escape(e['time'][:19].replace('T', ' '))}</td>"
        f"<td>{escape(e['action'])}</td><td>{escape(e['name'])}</td>"
        f"<td>{escape(json.dumps(e['params'], sort_keys=True, ensure_ascii=False))}</td><td>{escape(e['who'])}</td></tr>"
        for e in reversed(events[-EVENT_ROWS:]))
    more = (f"the newest {EVENT_ROWS} of {len(events)}, newest first; all of them: <code>privirt serve list "
            "STATE</code> or <code>GET /v1/curator/events</code>" if len(events) > EVENT_ROWS
            else f"{len(events)}, newest first")
    return (f"<h3>Curator actions ({more})</h3><table><thead><tr><th>#</th><th>time (UTC)</th><th>action</th>"
            "<th>name</th><th>parameters</th><th>who</th></tr></thead><tbody>" + rows + "</tbody></table>")


def _what(params: dict) -> str:
    kind = params.get("method") or params.get("kind") or ""
    mech = params.get("mechanism")
    text = f"{kind} ε={params.get('epsilon')} δ={params.get('delta')}"
    return text + (f" {mech}" if mech else "")


#: the login page's line for a form over the service's body limit (413)
KEY_TOO_LONG = "That key is far too long: paste the curator key only."


def login_page(error: bool | str = False) -> str:
    """The login form; ``error``: True after a key that was not accepted, or the line to show."""
    text = "That key was not accepted." if error is True else (error or "")
    msg = f"<p class='revoked'>{escape(text)}</p>" if text else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>privirt curator — log in</title>"
        f"<style>{_CSS}</style></head><body><header><h1>privirt serve — curator</h1></header><main>"
        f"<h2>Log in</h2>{msg}<form method='post' action='/curator/login'>"
        "<label>Curator key <input type='password' name='key' autocomplete='off' size='60' required></label> "
        "<button type='submit'>log in</button></form>"
        "<p class='muted'>Print a key with <code>privirt serve curator-key STATE</code>. Logging in opens a "
        "session for 8 hours, kept in an HttpOnly cookie (a random token, never the key); logging out or "
        "rotating the key ends it.</p></main></body></html>"
    )
