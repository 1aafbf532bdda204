"""Accuracy-vs-privacy reports from a sweep's results (see :mod:`privirt.sweeps`).

:func:`build_report` reads ``DIR/results.csv`` and writes

- ``DIR/plots/<dataset>.png``: error against ε, one line per mechanism with its mean over
  trials and a 95 % confidence band (Student t), log–log axes for the ℓ2 and ℓ∞ errors and a
  log-ε axis for the top-K accuracy; non-private baselines are drawn as horizontal lines;
- ``DIR/report.md`` and ``DIR/report.html``: the provenance of the sweep, a results table per
  data set (mean ± CI half-width of the chosen metric, mechanisms × ε), and for a target
  accuracy the smallest ε that reaches it per mechanism.

"Reaches" is deliberately strict (:mod:`.reach`): the smallest ε of the configured grid at
which the mean over trials meets the target *and keeps meeting it at every larger ε of the
grid*, so that one lucky grid point does not count; an ε whose cells were not all computed
does not meet it.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

import numpy as np
import pandas as pd

from .._files import atomic_write, writing
from .._plot_base import fallback_fonts
from . import registry
from .config import check_dataset_name
from .reach import _check_metric, _configured, cells, configured_grid, configured_mechanisms, smallest_epsilon
from .results import DEFAULT_METRIC, MANIFEST_FILE, METRICS, RESULTS_FILE, read_results

__all__ = [
    "METRICS",
    "summarize",
    "smallest_epsilon",
    "plot_dataset",
    "build_report",
    "ReportFiles",
]

DEFAULT_TARGET = 0.25
_PLOT_METRICS = ("l2_error", "linf_error", "top_k_accuracy")
_NONPRIVATE_STYLE = {"spectral": ("black", "--"), "cmle": ("dimgray", ":")}


def _t_quantile(dof: np.ndarray) -> np.ndarray:
    from scipy import stats

    q = np.full(dof.shape, np.nan)
    ok = dof >= 1
    q[ok] = stats.t.ppf(0.975, dof[ok])
    return q


def summarize(results: pd.DataFrame, metric: str = DEFAULT_METRIC) -> pd.DataFrame:
    """Mean, standard deviation and 95 % CI of ``metric`` per (data set, mechanism, ε).

    Failed cells (``status != "ok"``) are left out and counted in ``failed``; ok cells whose
    ``metric`` is undefined (empty, e.g. a relative error against constant difficulties) are
    left out and counted in ``undefined``, so that no value drops out unnoticed.

    Returns
    -------
    DataFrame
        Columns ``dataset, mechanism, epsilon, trials, failed, undefined, mean, sd, ci_low,
        ci_high``; ``trials`` counts the values averaged; ``epsilon`` is NaN for non-private
        baselines; the CI is mean ± t₀.₉₇₅ · sd/√trials (NaN with a single trial).
    """
    _check_metric(metric)
    frame = results.copy()
    frame["epsilon"] = pd.to_numeric(frame["epsilon"], errors="coerce")
    frame["_eps"] = frame["epsilon"].fillna(-1.0)
    ok = frame["status"].astype(str) == "ok"
    keys = ["dataset", "mechanism", "_eps"]
    failed = (~ok).groupby([frame[k] for k in keys]).sum().rename("failed")
    nan = ok & pd.to_numeric(frame[metric], errors="coerce").isna()
    undefined = nan.groupby([frame[k] for k in keys]).sum().rename("undefined")
    grouped = frame[ok].groupby(keys)[metric]
    table = pd.concat(
        [grouped.count().rename("trials"), grouped.mean().rename("mean"),
         grouped.std(ddof=1).rename("sd")], axis=1,
    )
    table = table.join(failed, how="outer").join(undefined, how="outer").reset_index()
    for col in ("trials", "failed", "undefined"):
        table[col] = table[col].fillna(0).astype(int)
    half = _t_quantile(table["trials"].to_numpy() - 1.0) * table["sd"].to_numpy() / np.sqrt(
        np.maximum(table["trials"].to_numpy(), 1)
    )
    table["ci_low"] = table["mean"] - half
    table["ci_high"] = table["mean"] + half
    table["epsilon"] = table["_eps"].where(table["_eps"] >= 0)
    table = table.drop(columns="_eps")
    order = {m: k for k, m in enumerate(_mechanism_order(results))}
    table["_order"] = table["mechanism"].map(order)
    table = table.sort_values(["dataset", "_order", "epsilon"], na_position="first")
    cols = ["dataset", "mechanism", "epsilon", "trials", "failed", "undefined", "mean", "sd",
            "ci_low", "ci_high"]
    return table.drop(columns="_order")[cols].reset_index(drop=True)


def _mechanism_order(results: pd.DataFrame) -> list[str]:
    """The mechanisms of ``results``: the registered ones in the registry's order, then any other
    (registered by the script that ran the sweep, unknown to this process) as they first appear."""
    present = list(dict.fromkeys(results["mechanism"]))
    known = [m for m in registry.names() if m in set(present)]
    return known + [m for m in present if m not in set(known)]


def _nonprivate(results: pd.DataFrame) -> set[str]:
    """The mechanisms of ``results`` run without ε (non-private baselines), from the results."""
    eps = pd.to_numeric(results["epsilon"], errors="coerce")
    return {m for m, e in eps.groupby(results["mechanism"]) if e.isna().all()}


# ----------------------------------------------------------------------------------------
# plots
# ----------------------------------------------------------------------------------------
@fallback_fonts
def plot_dataset(
    results: pd.DataFrame,
    dataset: str,
    *,
    metrics: Sequence[str] = _PLOT_METRICS,
    path: str | os.PathLike[str] | None = None,
    title: str | None = None,
) -> Any:
    """Error against ε for one data set: a panel per metric, a line per mechanism.

    Each private mechanism is drawn as its mean over trials with a 95 % confidence band;
    non-private baselines as a horizontal line with their band.  Error metrics use log–log
    axes, accuracies a log-ε axis.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .._plot_base import _literal, _plt, _save

    plt = _plt(path)
    sub = results[results["dataset"] == dataset]
    if sub.empty:
        raise ValueError(f"no results for data set {dataset!r}")
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.6 * len(metrics), 3.8), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    mech_order = _mechanism_order(sub)
    nonprivate = _nonprivate(sub)
    private_mechs = [m for m in mech_order if m not in nonprivate]
    eps_all = pd.to_numeric(sub["epsilon"], errors="coerce").dropna()
    empty: dict[str, tuple[str, str]] = {}  # mechanism without a value in a panel -> (colour, label)
    for ax, metric in zip(axes[0], metrics):
        _check_metric(metric)
        label, lower = METRICS[metric]
        summ = summarize(sub, metric)
        log_y = lower
        floor = _positive_floor(summ) if log_y else None
        for k, mech in enumerate(private_mechs):
            s = summ[(summ["mechanism"] == mech) & summ["epsilon"].notna()].sort_values("epsilon")
            color = colors[k % len(colors)]
            if s["mean"].notna().sum() == 0:
                empty.setdefault(mech, (color, _no_results(mech, s)))
                continue
            x, y = s["epsilon"].to_numpy(), s["mean"].to_numpy()
            lo, hi = s["ci_low"].to_numpy(), s["ci_high"].to_numpy()
            if log_y:
                y, lo, hi = (np.maximum(v, floor) for v in (y, lo, hi))
            elif metric == "top_k_accuracy":
                lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
            ax.plot(x, y, marker="o", ms=3.5, lw=1.5, color=color, label=_literal(mech))
            if np.isfinite(lo).any():
                ax.fill_between(x, lo, hi, color=color, alpha=0.18, lw=0)
        for mech in [m for m in mech_order if m in nonprivate]:
            s = summ[summ["mechanism"] == mech]
            color, style = _NONPRIVATE_STYLE.get(mech, ("gray", "--"))
            if s.empty or not np.isfinite(s["mean"].iloc[0]):
                empty.setdefault(mech, (color, _no_results(f"{mech} (non-private)", s)))
                continue
            y = float(s["mean"].iloc[0])
            lo, hi = float(s["ci_low"].iloc[0]), float(s["ci_high"].iloc[0])
            if log_y:
                y, lo, hi = (max(v, floor) if np.isfinite(v) else v for v in (y, lo, hi))
            elif metric == "top_k_accuracy" and np.isfinite(lo):
                lo, hi = max(lo, 0.0), min(hi, 1.0)
            ax.axhline(y, color=color, ls=style, lw=1.2, label=f"{_literal(mech)} (non-private)")
            if np.isfinite(lo):
                ax.axhspan(lo, hi, color=color, alpha=0.08, lw=0)
        ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        else:
            ax.set_ylim(-0.03 if metric == "top_k_accuracy" else None, 1.03)
        if len(eps_all):
            ax.set_xlim(eps_all.min() / 1.3, eps_all.max() * 1.3)
        ax.set_xlabel("privacy budget ε")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
    first = sub.iloc[0]
    n, m = int(first["n"]), int(first["m"])
    trials = int(sub["trial"].nunique())
    head = title or f"{_literal(dataset)}  (n = {n}, m = {m}, {trials} trials, mean ± 95 % CI)"
    fig.suptitle(head, fontsize=11)
    handles, labels = _legend(axes[0], empty)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 7),
                   fontsize="small", frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    out = _save(fig, path) if path is not None else fig
    return out


def _no_results(mech: str, s: pd.DataFrame) -> str:
    """Legend label of a mechanism without a value in a panel: why (its cells failed, or their
    metric is undefined)."""
    why = [f"{int(s[c].sum())} {c}" for c in ("failed", "undefined") if len(s) and s[c].sum()]
    return f"{mech} (no results: {', '.join(why) or 'no cells'})"


def _legend(axes: Sequence[Any], empty: dict[str, tuple[str, str]]) -> tuple[list, list]:
    """The figure's legend entries: every panel's lines once (a mechanism may have values in
    one panel only), then an empty entry per mechanism with no value in any panel, so that it
    does not drop out of the figure unnoticed (the table says "— (k failed)")."""
    from matplotlib.lines import Line2D

    from .._plot_base import _literal

    entries: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(lab, h)
    drawn = {lab.removesuffix(" (non-private)") for lab in entries}
    for mech, (color, label) in empty.items():
        if _literal(mech) not in drawn:
            entries.setdefault(_literal(label), Line2D([], [], color=color, marker="o", ms=3.5,
                                                       lw=1.5, alpha=0.35))
    return list(entries.values()), list(entries)


def _positive_floor(summ: pd.DataFrame) -> float:
    vals = summ["mean"].to_numpy(dtype=float)
    vals = vals[np.isfinite(vals) & (vals > 0)]
    return float(vals.min()) / 10.0 if len(vals) else 1e-6


# ----------------------------------------------------------------------------------------
# markdown / HTML
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReportFiles:
    """Paths written by :func:`build_report`."""

    markdown: Path
    html: Path
    plots: tuple[Path, ...]


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or not np.isfinite(x):
        return "—"
    return f"{x:.{digits}g}"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub pipe table (hand-written: pandas' to_markdown needs the optional tabulate)."""
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _results_table(summ: pd.DataFrame, dataset: str, shown: dict[float, str],
                   trials: int | None = None) -> tuple[list[str], list[list[str]]]:
    """One data set's table; ``shown`` (:func:`_epsilon_labels`) labels each ε of the whole
    grid, so that every table of a report prints an ε alike; a private cell with fewer cells
    than the configured ``trials`` (an interrupted sweep) says how many it has."""
    s = summ[summ["dataset"] == dataset]
    eps = sorted(s["epsilon"].dropna().unique())
    # a sweep of non-private baselines only has no ε column: give their values one
    header = ["mechanism"] + ([f"ε = {shown[e]}" for e in eps] or ["value"])
    rows = []
    for mech in dict.fromkeys(s["mechanism"]):
        ms = s[s["mechanism"] == mech]
        if ms["epsilon"].isna().all():  # a non-private mechanism: one value, at any ε
            r = ms.iloc[0]
            rows.append([f"{mech} (non-private)", _cell(r) + " (any ε)"]
                        + [""] * (len(header) - 2))
            continue
        by_eps = {float(r["epsilon"]): r for _, r in ms.iterrows()}
        rows.append([mech] + [_cell(by_eps[e], trials) if e in by_eps else "" for e in eps])
    return header, rows


def _epsilon_labels(summ: pd.DataFrame) -> dict[float, str]:
    """Every ε of the whole grid (all data sets) -> its label: one ε is printed alike in every
    table (labelled per data set, 1.0001 read "1" in its own table, "1.0001" in another)."""
    grid = sorted(summ["epsilon"].dropna().unique())
    return dict(zip(grid, _distinct_labels(grid)))


def _distinct_labels(values: Sequence[float], digits: int = 3) -> list[str]:
    """``values`` printed with ``digits`` significant digits, or as many more as it takes for
    them to differ (the grid keeps 6: 1.0, 1.002 and 1.004 all printed as 1)."""
    for d in range(digits, 18):
        labels = [f"{v:.{d}g}" for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(float(v)) for v in values]


def _cell(r: pd.Series, trials: int | None = None) -> str:
    text = _fmt(r["mean"])
    if np.isfinite(r["ci_high"]) and np.isfinite(r["mean"]):
        text += f" ± {_fmt(r['ci_high'] - r['mean'], 2)}"
    if r["failed"]:
        text += f" ({int(r['failed'])} failed)"
    if r["undefined"]:
        text += f" ({int(r['undefined'])} undefined)"
    done = int(cells(r))
    if trials and done < trials:
        text += f" ({done} of {trials} trials)"
    return text


def _reach_cell(row: pd.Series, shown: dict[float, str]) -> str:
    text = shown.get(row["epsilon"], _fmt(row["epsilon"]))
    return text + " (incomplete)" if row["incomplete"] else text


def _plot_metrics(metric: str) -> tuple[str, ...]:
    """The panels of a data set's figure: ``metric`` first, then the usual ones."""
    return (metric, *(m for m in _PLOT_METRICS if m != metric))


#: what to do when a report file cannot be written (each file is whole or left as it was)
_AGAIN = "free some space (or make the folder writable), then make the report again"


def build_report(
    directory: str | os.PathLike[str],
    *,
    metric: str | None = None,
    target: float | None = None,
) -> ReportFiles:
    """Turn a sweep's ``results.csv`` into plots, ``report.md`` and ``report.html``.

    Parameters
    ----------
    directory : path
        The sweep's output folder (or its ``results.csv``; any other file is refused).
    metric : str, optional
        Metric of the tables and of the target (default: the sweep configuration's
        ``[report] metric``, else ``"relative_l2_error"``); one of :data:`METRICS`.
    target : float, optional
        Target value of ``metric`` (default: the configuration's ``[report] target``, else
        0.25): an upper bound for errors, a lower bound for accuracies.

    Returns
    -------
    ReportFiles
    """
    directory = Path(directory)
    if directory.is_file():  # the results file itself: the report goes beside it
        if directory.name != RESULTS_FILE:  # (the folder's own results.csv is what is read)
            raise ValueError(f"{directory} is a file, not a sweep's output folder: give the "
                             f"folder that holds {RESULTS_FILE} (the report is written there)")
        directory = directory.parent
    results = read_results(directory)
    if results.empty:
        raise ValueError(f"{directory} has no finished cells yet; run the sweep first")
    manifest = _manifest(directory)
    cfg_report = manifest.get("config", {}).get("report", {}) if manifest else {}
    metric = metric or cfg_report.get("metric", DEFAULT_METRIC)
    _check_metric(metric)
    if target is None:
        target = float(cfg_report.get("target", DEFAULT_TARGET))
    if not np.isfinite(target):
        raise ValueError(f"target must be a finite number, got {target!r}")

    plot_dir = directory / "plots"
    datasets = list(dict.fromkeys(results["dataset"]))
    for ds in datasets:  # (the file may have been edited: a name must not lead out of DIR/plots)
        check_dataset_name(str(ds), f"{directory / RESULTS_FILE}")
    _check_outputs(directory, [plot_dir / f"{ds}.png" for ds in datasets])
    plots = []
    plt = None
    for ds in datasets:
        path = plot_dir / f"{ds}.png"
        # the report's metric leads the figure (it is the one the target is about)
        with writing(path, _AGAIN):
            fig = plot_dataset(results, ds, path=path, metrics=_plot_metrics(metric))
        if plt is None:
            from .._plot_base import _plt

            plt = _plt()
        plt.close(fig)
        plots.append(path)

    summ = summarize(results, metric)
    reach = smallest_epsilon(summ, target, metric, configured_grid(manifest), configured_mechanisms(manifest))
    label, lower = METRICS[metric]
    name = manifest.get("config", {}).get("name", directory.name) if manifest else directory.name
    sections = _sections(results, summ, reach, manifest, name, metric, label, lower, target,
                         datasets, plots, directory)
    md_path = directory / "report.md"
    html_path = directory / "report.html"
    with writing(md_path, _AGAIN), atomic_write(md_path) as fh:
        fh.write(_to_markdown(sections))
    with writing(html_path, _AGAIN), atomic_write(html_path) as fh:
        fh.write(_to_html(sections, title=f"privirt sweep: {name}"))
    return ReportFiles(markdown=md_path, html=html_path, plots=tuple(plots))


def _check_outputs(directory: Path, plots: Sequence[Path]) -> None:
    """Refuse, in one line and before anything is drawn, a report whose files cannot be
    written: ``report.md``, ``report.html`` or a plot that is a folder, ``plots`` that is a
    file, a plot or a folder that is not writable.

    Raises
    ------
    ValueError
        Naming the blocking path and what to do.
    """
    plot_dir = directory / "plots"
    if plot_dir.exists() and not plot_dir.is_dir():
        raise ValueError(f"cannot write the report: {plot_dir} is a file, where the plots "
                         "folder goes; move it away and run the report again")
    for path in (directory / "report.md", directory / "report.html", *plots):
        if path.is_dir():
            raise ValueError(f"cannot write the report: {path} is a folder; move it away and "
                             "run the report again")
    for path in plots:  # (drawn in place: report.md and .html replace theirs whole)
        if path.is_file() and not os.access(path, os.W_OK):
            raise ValueError(f"cannot write the report: {path} is not writable; move it away "
                             "and run the report again")
    for folder in (directory, plot_dir):
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"cannot write the report: the folder {folder} is not writable")


def _manifest(directory: Path) -> dict[str, Any]:
    path = directory / MANIFEST_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}


# A report is a list of blocks: ("h1"|"h2"|"p"|"img"|"table", payload)
Block = tuple[str, Any]


def _sections(results, summ, reach, manifest, name, metric, label, lower, target, datasets,
              plots, directory) -> list[Block]:
    blocks: list[Block] = [("h1", f"privirt sweep: {name}")]
    grid = configured_grid(manifest)
    # a configured data set with no cell yet (an interrupted sweep) was left out of the report
    # (a real data set with only non-private mechanisms gets no cell by design: not waiting)
    private = configured_mechanisms(manifest)
    by_design = {str(ds.get("name")) for ds in _configured(manifest)
                 if isinstance(ds, dict) and ds.get("source") != "synthetic" and not private.get(str(ds.get("name")))}
    waiting = [d for d in dict.fromkeys([*grid, *private]) if d not in set(datasets) and d not in by_design]
    n_ok = int((results["status"] == "ok").sum())
    n_fail = len(results) - n_ok
    prov = [f"{len(results)} cells ({n_ok} ok, {n_fail} failed) over {len(datasets)} data "
            f"set(s) and mechanisms {', '.join(dict.fromkeys(results['mechanism']))}."]
    if waiting:
        prov.append(f"Configured but not started yet: data set(s) {', '.join(waiting)} (no "
                    "cells; privirt sweep --resume runs them).")
    if manifest:
        sw, mach = manifest.get("software", {}), manifest.get("machine", {})
        runs = [r for r in manifest.get("runs", []) if isinstance(r, dict)]
        secs = sum(float(r.get("seconds") or 0.0) for r in runs)
        # stopped early: marked by the run, or (killed outright) never marked finished
        stopped = [r for r in runs if r.get("interrupted") or "finished" not in r]
        untimed = sum(1 for r in stopped if r.get("seconds") is None)
        note = ""
        if stopped:
            note = f" ({len(stopped)} interrupted" + (
                f"; {untimed} recorded no time, not counted)" if untimed else ")")
        prov.append(f"privirt {sw.get('privirt', '?')}, Python {sw.get('python', '?')}, numpy "
                    f"{sw.get('numpy', '?')}; {mach.get('cpu_count', '?')} CPU(s), "
                    f"{mach.get('platform', '?')}; {len(runs)} run(s){note}, "
                    f"{secs:.1f} s of sweep time; seed {manifest.get('config', {}).get('seed')}.")
        versions = {json.dumps(r["software"], sort_keys=True) for r in runs
                    if isinstance(r, dict) and r.get("cells_to_compute") and r.get("software")}
        if len(versions) > 1:
            listed = "; ".join(
                ", ".join(f"{k} {v}" for k, v in sorted(json.loads(t).items()))
                for t in sorted(versions))
            prov.append(f"The cells were computed by {len(versions)} different software "
                        f"versions over the runs of this sweep ({listed}): results may mix.")
    blocks.append(("p", " ".join(prov)))
    blocks.append(("p", "Every cell used seeded noise so that the sweep is reproducible; seeded "
                        "noise is not private (private=False). These figures measure accuracy "
                        "and release nothing."))
    blocks.append(("p", "Errors are measured against the simulated difficulties on synthetic "
                        "data and against the non-private spectral estimate on real data (as "
                        "Nguyen & Zhang do); both sides are centred."))
    direction = "at most" if lower else "at least"
    blocks.append(("h2", f"Smallest ε reaching the target ({metric} {direction} {target:g})"))
    blocks.append(("p", "Smallest ε of the grid at which the mean over trials meets the target "
                        "and keeps meeting it at every larger ε; — means not reached within the "
                        "grid."))
    mechs = [m for m in _mechanism_order(results) if m in set(reach["mechanism"])]
    mechs += [m for m in dict.fromkeys(reach["mechanism"]) if m not in mechs]  # (no cell yet)
    shown = _epsilon_labels(summ)  # the grid's ε as the tables below print them
    rows = []
    for ds in [*datasets, *waiting]:
        r = reach[reach["dataset"] == ds]
        by = {row["mechanism"]: row for _, row in r.iterrows()}
        rows.append([ds] + [_reach_cell(by[m], shown) if m in by else "" for m in mechs])
    blocks.append(("table", (["data set"] + mechs, rows)))
    if reach["incomplete"].any():
        blocks.append(("p", "(incomplete): the search stopped at an ε of the grid whose cells "
                            "were not all computed (an interrupted sweep), which counts as not "
                            "met; finish the sweep with privirt sweep --resume for the final "
                            "answer."))
    for ds, plot in zip(datasets, plots):
        first = results[results["dataset"] == ds].iloc[0]
        blocks.append(("h2", f"{ds} (source {first['source']}, n = {int(first['n'])}, "
                             f"m = {int(first['m'])})"))
        # a link, percent-encoded: a data set's name may hold spaces, '#', '[' or '&'
        blocks.append(("img", (quote(os.path.relpath(plot, directory).replace(os.sep, "/"), safe="/"),
                               f"error against ε for {ds}")))
        note = ""
        if summ.loc[summ["dataset"] == ds, "undefined"].any():
            note = (" \"(k undefined)\": k ok cells whose value is undefined (empty in "
                    "results.csv), left out of the mean.")
        blocks.append(("p", f"{label}: mean ± 95 % CI half-width over trials.{note}"))
        blocks.append(("table", _results_table(summ, ds, shown, grid.get(ds, ((), None))[1])))
    failures = results[results["status"] != "ok"]
    if len(failures):
        blocks.append(("h2", "Failed cells"))
        counts = failures.groupby(["dataset", "mechanism", "status"]).size().reset_index()
        rows = [[r["dataset"], r["mechanism"], str(r[0]), r["status"]]
                for _, r in counts.iterrows()]
        blocks.append(("table", (["data set", "mechanism", "cells", "error"], rows)))
    return blocks


def _to_markdown(blocks: Sequence[Block]) -> str:
    out = []
    for kind, payload in blocks:
        if kind == "h1":
            out.append(f"# {payload}")
        elif kind == "h2":
            out.append(f"## {payload}")
        elif kind == "p":
            out.append(payload)
        elif kind == "img":
            src, alt = payload
            alt = alt.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
            out.append(f"![{alt}]({src})")
        elif kind == "table":
            out.append(_md_table(*payload))
    return "\n\n".join(out) + "\n"


def _to_html(blocks: Sequence[Block], *, title: str) -> str:
    e = html.escape
    body = []
    for kind, payload in blocks:
        if kind in ("h1", "h2"):
            body.append(f"<{kind}>{e(payload)}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{e(payload)}</p>")
        elif kind == "img":
            src, alt = payload
            body.append(f'<p><img src="{e(src)}" alt="{e(alt)}" style="max-width:100%"></p>')
        elif kind == "table":
            header, rows = payload
            frame = pd.DataFrame(rows, columns=header)
            body.append(frame.to_html(index=False, border=0, classes="results", escape=True))
    style = ("body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
             "table.results{border-collapse:collapse;font-size:90%}"
             "table.results td,table.results th{border:1px solid #ccc;padding:3px 8px;"
             "text-align:right}table.results td:first-child{text-align:left}")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
            f"<title>{e(title)}</title><style>{style}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
