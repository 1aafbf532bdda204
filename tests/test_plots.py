"""Plot helpers: argument errors say what is wrong (the drawing itself is tested with the
samplers that produce the posteriors)."""

from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import privirt

pytest.importorskip("matplotlib")
from privirt import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    """Figures are returned to the caller, who closes them: here, after each test (pyplot
    warns past 20 open figures, and privirt's RuntimeWarnings are errors in this suite)."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="module")
def small_posterior():
    X, *_ = privirt.simulate_2pno(60, 4, seed=1)
    return privirt.gibbs_2pno(X, n_iter=40, warmup=20, seed=1, progress=False)


def test_trace_plot_unknown_or_no_labels(small_posterior):
    # an unknown label was a bare KeyError and an empty list a matplotlib error about
    # "rows"; the sibling plots name the unknown labels in a ValueError
    with pytest.raises(ValueError, match=r"unknown a label\(s\) \['nope'\]"):
        plots.trace_plot(small_posterior, "a", labels=["nope"])
    with pytest.raises(ValueError, match="labels is empty"):
        plots.trace_plot(small_posterior, "a", labels=[])
    label = small_posterior.labels["a"][1]
    fig = plots.trace_plot(small_posterior, "a", labels=[label])
    assert len(fig.axes) == 2


# -- Rasch model checks -------------------------------------------------------------------
@pytest.fixture(scope="module")
def lsat7():
    X = privirt.load_dataset("lsat7")
    est = privirt.cmle_estimate(X)
    return X, est, privirt.estimate_abilities(X, est.beta)


def test_item_information_curves(lsat7, tmp_path):
    _, est, _ = lsat7
    fig = plots.item_information_curves(est, path=tmp_path / "iic.png")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 5
    # each curve peaks at 1/4 at its item's difficulty
    for line in ax.get_lines():
        x, y = line.get_data()
        assert max(y) == pytest.approx(0.25, abs=1e-3)
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == list(est.beta.index)
    assert (tmp_path / "iic.png").stat().st_size > 0
    fig = plots.item_information_curves(est, items=["item2", "item4"])
    assert len(fig.axes[0].get_lines()) == 2
    with pytest.raises(ValueError, match=r"unknown item label\(s\) \['nope'\]"):
        plots.item_information_curves(est, items=["nope"])
    with pytest.raises(ValueError, match="theta_range"):
        plots.item_information_curves(est, theta_range=(2, -2))
    many = pd.Series(np.linspace(-2, 2, 30))
    fig = plots.item_information_curves(many)  # colour bar instead of a legend
    assert fig.axes[0].get_legend() is None and len(fig.axes) == 2


def test_test_information_curve(lsat7, tmp_path):
    _, est, ab = lsat7
    fig = plots.test_information_curve(est, theta=ab, path=tmp_path / "tic.png")
    info_ax, se_ax = fig.axes
    x, y = info_ax.get_lines()[0].get_data()
    np.testing.assert_allclose(y, privirt.test_information(est, x)["information"])
    x, se = se_ax.get_lines()[0].get_data()
    np.testing.assert_allclose(se, 1 / np.sqrt(privirt.test_information(est, x)["information"]))
    labels = [t.get_text() for t in info_ax.get_legend().get_texts()]
    assert labels == ["test information", "item difficulties", "person abilities",
                      "standard error"]


def test_wright_map(lsat7, tmp_path):
    _, est, ab = lsat7
    fig = plots.wright_map(est, ab, path=tmp_path / "wm.png")
    persons, items = fig.axes
    texts = " ".join(t.get_text() for t in items.texts)
    assert all(label in texts for label in est.beta.index)
    # persons and items share the logit axis
    assert persons.get_ylim() == items.get_ylim()
    # 60 items with long names: rows of labels one text line apart, none overlapping
    beta = pd.Series(np.random.default_rng(0).normal(0, 1, 60),
                     index=[f"question_{i}" for i in range(60)])
    fig = plots.wright_map(beta, np.random.default_rng(1).normal(0, 1, 3000))
    ys = sorted(t.get_position()[1] for t in fig.axes[1].texts)
    assert np.min(np.diff(ys)) > 0
    shown = " ".join(t.get_text() for t in fig.axes[1].texts)
    hidden = sum(int(k) for k in re.findall(r"\+(\d+) more", shown))
    assert shown.count("question_") + hidden == 60
    with pytest.raises(ValueError, match="no finite ability"):
        plots.wright_map(est, [np.inf, np.nan])


def test_andersen_plot(tmp_path):
    X, _, _ = privirt.simulate_rasch(400, 6, seed=31)
    res = privirt.andersen_test(X)
    fig = plots.andersen_plot(res, path=tmp_path / "a.png")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "β in group low" and "LR =" in ax.get_title()
    with pytest.raises(ValueError, match="groups must name two"):
        plots.andersen_plot(res, groups=["low", "x"])


def _figure_texts(fig) -> str:
    return " ".join([fig._suptitle.get_text() if fig._suptitle else ""]
                    + [t.get_text() for t in fig.texts]
                    + [ax.get_title() for ax in fig.axes])


def test_andersen_plot_names_the_items_the_test_dropped():
    """An item a group cannot estimate was left out of the figure without a word (only
    ``str(result)`` named it): the figure now names it, and many dropped items end in "+k more"."""
    X, _, _ = privirt.simulate_rasch(200, 6, seed=91800006)
    X = pd.DataFrame(X, columns=[f"i{j}" for j in range(6)])
    score = X.sum(axis=1)
    X["easy"] = np.where(score > score.median(), 1, np.arange(200) % 2)  # all right in "high"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = privirt.andersen_test(X)
    assert list(res.items_dropped) == ["easy"]
    text = _figure_texts(plots.andersen_plot(res))
    assert "items dropped (not estimable in a group): easy" in text
    res = dataclasses.replace(res, items_dropped=[f"item_{k}" for k in range(9)])
    text = _figure_texts(plots.andersen_plot(res))
    shown = re.search(r"items dropped \(not estimable in a group\): (.*)", text).group(1)
    listed = re.findall(r"item_\d+", shown)
    assert listed == [f"item_{k}" for k in range(len(listed))] and 0 < len(listed) < 9
    assert f"+{9 - len(listed)} more" in shown
    res = dataclasses.replace(res, items_dropped=[])
    assert "dropped" not in _figure_texts(plots.andersen_plot(res))


@pytest.mark.parametrize("bins", [0, -3, float("nan"), "10", True])
def test_wright_map_refuses_bins_that_are_not_a_positive_integer(bins):
    X, *_ = privirt.simulate_rasch(100, 5, seed=1)
    beta = privirt.spectral_estimate(X).beta
    with pytest.raises(ValueError, match="bins must be a positive integer"):
        plots.wright_map(beta, np.linspace(-2, 2, 100), bins=bins)


def _drawn_texts(fig) -> list[str]:
    """The strings a figure draws (after drawing it), each checked to be drawn as plain text."""
    from matplotlib.text import Text

    fig.canvas.draw()
    out = []
    for t in fig.findobj(Text):
        shown, math = t._preprocess_math(t.get_text())
        assert not math, t.get_text()
        out.append(shown)
    return out


def test_labels_with_dollar_signs_are_drawn_as_written(tmp_path):
    # "$a^$" failed with a mathtext ParseSyntaxException (after other files were written) and
    # "price $5 … price $10" was drawn as a formula: user labels are drawn literally
    beta = pd.Series([-1.0, 0.0, 1.0, 0.5], index=["Q1", "$a^$", "price $5", "price $10"])
    theta = np.random.default_rng(3).normal(size=50)
    drawn = " ".join(_drawn_texts(plots.wright_map(beta, theta, path=tmp_path / "wm.png")))
    assert all(label in drawn for label in beta.index)
    drawn = _drawn_texts(plots.item_information_curves(beta, path=tmp_path / "iic.png"))
    assert set(beta.index) <= set(drawn)


@pytest.mark.parametrize("count", [11, 12, 13, 20])
def test_item_response_curves_keep_up_to_20_items_identifiable(count):
    # 13-20 named items drew no legend (their labels were lost) and 11-12 curves shared the
    # 10 default colours, so the legend could not tell items 11 and 12 from items 1 and 2
    X, *_ = privirt.simulate_2pno(80, 21, seed=2800005)
    X = pd.DataFrame(X, columns=[f"item{k}" for k in range(21)])
    post = privirt.gibbs_2pno(X, n_iter=30, warmup=10, seed=2800006, progress=False)
    items = list(X.columns[:count])
    ax = plots.item_response_curves(post, items=items, band=False).axes[0]
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == items
    from matplotlib.colors import to_hex

    colours = [to_hex(line.get_color()) for line in ax.get_lines()]
    assert len(colours) == count and len(set(colours)) == count


@pytest.mark.parametrize("theta", [
    [True, False, True, False],
    np.array([True, False, True, False]),
    pd.DataFrame({"theta": [True, False, True, False]}),
], ids=["list", "array", "frame"])
def test_bool_abilities_are_refused_by_the_ability_plots(theta):
    # True/False given as theta were drawn as abilities 1.0/0.0
    beta = pd.Series([-1.0, 0.0, 1.0], index=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"^theta must hold numbers, not True/False$"):
        plots.wright_map(beta, theta)
    with pytest.raises(ValueError, match=r"^theta must hold numbers, not True/False$"):
        plots.test_information_curve(beta, theta=theta)


@pytest.mark.parametrize("theta", [[0.1 + 0.2, 0.3, -1.0, 1.0, 1.0],
                                   [0.0, 1e-9, -1.0, 1.0, 1.0]], ids=["rounding", "1e-9"])
def test_wright_map_persons_stay_visible_when_two_abilities_nearly_coincide(theta):
    # the bars were 0.8 × the smallest gap between levels high: 0 logits for 0.1 + 0.2 and
    # 0.3, so the persons panel was blank; now bars of at least 1 % of the axis, or a histogram
    persons = plots.wright_map([-1.0, 0.0, 1.0], theta).axes[0]
    lo, hi = persons.get_ylim()
    bars = [p for p in persons.patches if p.get_width() > 0]
    assert bars and min(p.get_height() for p in bars) >= 0.01 * (hi - lo)
    assert sum(p.get_width() for p in bars) == len(theta)  # every person counted


@pytest.mark.parametrize("call, message", [
    (lambda post, p: plots.item_response_curves(post, items=[], path=p), "items is empty"),
    (lambda post, p: plots.item_response_curves(post, theta_range=(4, -4), path=p),
     "theta_range must be two finite numbers, low < high"),
    (lambda post, p: plots.item_response_curves(post, theta_range=(np.nan, 1), path=p),
     "theta_range must be two finite numbers, low < high"),
    (lambda post, p: plots.ideal_point_plot(post, labels=[], path=p), "labels is empty"),
], ids=["irc-items", "irc-reversed", "irc-nan", "ideal-labels"])
def test_empty_selections_and_bad_theta_ranges_are_refused_before_drawing(
        small_posterior, tmp_path, call, message):
    # these drew (and saved) an empty plot, reversed or NaN curves; the sibling plots refuse
    path = tmp_path / "plot.png"
    with pytest.raises(ValueError, match=f"^{message}"):
        call(small_posterior, path)
    assert not path.exists()


@pytest.mark.parametrize("name, message", [
    ("a/b/wm.txt", r"has suffix '\.txt': end it in \.png, \.pdf or \.svg"),
    ("a/b/noext", r"has no suffix: end it in \.png, \.pdf or \.svg"),
])
def test_a_plot_path_without_a_suffix_matplotlib_writes_is_refused_before_anything(
        tmp_path, name, message):
    # a .txt path made the folders a/ and a/b/, then failed in matplotlib after drawing; a
    # path without a suffix wrote noext.png, not the file asked for
    with pytest.raises(ValueError, match=f"^path .*{message}"):
        plots.wright_map([-1.0, 0.0, 1.0], [0.0, 0.5], path=tmp_path / name)
    assert list(tmp_path.iterdir()) == []
    plots.wright_map([-1.0, 0.0, 1.0], [0.0, 0.5], path=tmp_path / "a" / "b" / "wm.svg")
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["wm.svg"]


@pytest.mark.parametrize("call, message", [
    (lambda b: plots.wright_map(b, pd.DataFrame({"x": [1.0]})),
     "theta is a DataFrame without a 'theta' column"),
    (lambda b: plots.test_information_curve(b, theta=pd.DataFrame({"x": [1.0]})),
     "theta is a DataFrame without a 'theta' column"),
    (lambda b: plots.wright_map(b, ["x", "y"]), "theta must be numeric"),
    (lambda b: plots.test_information_curve(b, theta_range=(2,)),
     r"theta_range must be two finite numbers, low < high, got \(2,\)"),
    (lambda b: plots.item_information_curves(b, theta_range="ab"),
     "theta_range must be two finite numbers, low < high, got 'ab'"),
    (lambda b: plots.wright_map(b, [0.0, 1.0], max_item_labels="x"),
     "max_item_labels must be a non-negative integer"),
    (lambda b: plots.wright_map(b, [0.0, 1.0], max_item_labels=-1),
     "max_item_labels must be a non-negative integer"),
], ids=["wm-frame", "tic-frame", "wm-strings", "range-short", "range-str", "labels-str",
        "labels-negative"])
def test_bad_plot_arguments_get_one_line_naming_the_argument(call, message):
    # these were a KeyError "'theta'", "could not convert string to float", "not enough values
    # to unpack", a TypeError from '<', or (max_item_labels=-1) accepted
    beta = pd.Series([-1.0, 0.0, 1.0], index=["a", "b", "c"])
    with pytest.raises(ValueError, match=f"^{message}") as info:
        call(beta)
    assert "\n" not in str(info.value)


def test_wright_map_docstring_describes_how_nearby_labels_are_drawn():
    # it said labels of nearby items "are spread apart"; they share one row, cut to "+k more"
    beta = pd.Series([0.001 * i for i in range(8)], index=[f"long_item_name_{i}" for i in range(8)])
    texts = [t.get_text() for t in plots.wright_map(beta, [0.0, 1.0]).axes[1].texts]
    assert len(texts) == 1 and re.search(r"long_item_name_0  .*\+\d+ more$", texts[0])
    doc = " ".join(plots.wright_map.__doc__.split())
    assert "spread apart" not in doc
    assert "labels share a row" in doc and '"+k more"' in doc


def test_test_information_curve_far_from_every_item_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.test_information_curve([1000.0, 1001.0])


@pytest.mark.parametrize("plot", ["wright_map", "test_information_curve"])
def test_a_two_dimensional_theta_is_refused_not_flattened(plot):
    """A persons × 2 array was flattened into twice as many 'persons' on the map."""
    from privirt import plots

    import matplotlib.pyplot as plt

    theta = np.arange(12.0).reshape(6, 2) / 6
    with pytest.raises(ValueError, match=r"^theta must be one value per person \(1-D\), got shape \(6, 2\)"):
        getattr(plots, plot)([-1.0, 0.0, 1.0], theta=theta)
    plt.close("all")
    plt.close(getattr(plots, plot)([-1.0, 0.0, 1.0], theta=0.5))  # one person: still drawn


@pytest.mark.parametrize("items, message", [
    ("ab", r"items must be a sequence of item labels, not the string 'ab'"),
    (3, r"items must be a sequence of item labels, got 3"),
    (np.ones((2, 2)), r"items has an unhashable label"),
])
def test_item_plots_check_items_as_the_private_paths_do(items, message):
    # items="ab" drew the items 'a' and 'b' (a string split into characters); 3 and a 2-D
    # array failed with TypeError ('int' object is not iterable, unhashable type)
    beta = pd.Series([-1.0, 0.0, 1.0, 2.0], index=["a", "b", "ab", "c"])
    with pytest.raises(ValueError, match=message):
        plots.item_information_curves(beta, items=items)
    X = pd.DataFrame(np.random.default_rng(62_000_010).integers(0, 2, (30, 4)), columns=beta.index)
    post = privirt.gibbs_2pno(X, n_iter=20, warmup=10, seed=62_000_011, progress=False, slopes="free")
    with pytest.raises(ValueError, match=message):
        plots.item_response_curves(post, items=items)


def test_a_failed_plot_write_leaves_the_earlier_plot_whole(tmp_path, monkeypatch):
    """A full disk while saving: the plot already there stays as it was (no truncated or empty
    file under the final name), no temporary file is left, and the error names the plot."""
    import errno

    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from privirt._plot_base import _save

    path = tmp_path / "p.png"
    fig = plt.figure()
    _save(fig, path)
    good = path.read_bytes()
    assert good.startswith(b"\x89PNG")

    def full(self, fname, **kwargs):
        with open(fname, "wb") as fh:  # a partial write, then the disk is full
            fh.write(b"\x89PN")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full)
    with pytest.raises(OSError, match=re.escape(str(path))):
        _save(fig, path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["p.png"]


def test_item_response_curves_follow_the_posteriors_model():
    # an mh_2pl posterior was drawn with the default model "2pno": probit curves and a "2PNO"
    # title for logistic a and b (0.12 off the logistic curve in a reviewer's case)
    from scipy import special

    X, *_ = privirt.simulate_2pno(60, 3, seed=96_000_101)
    post = privirt.mh_2pl(X, n_iter=40, warmup=20, seed=96_000_102, progress=False)
    assert post.model == "2pl"
    ax = plots.item_response_curves(post, band=False).axes[0]
    assert "2PL" in ax.get_title()
    a, b = post.summary().loc["a", "mean"].to_numpy(), post.summary().loc["b", "mean"].to_numpy()
    for line, aj, bj in zip(ax.get_lines(), a, b):
        x, y = line.get_data()
        np.testing.assert_allclose(y, special.expit(aj * np.asarray(x) - bj), rtol=1e-12)
    with pytest.raises(ValueError, match="contradicts the posterior's model"):
        plots.item_response_curves(post, model="2pno")


def test_labels_in_chinese_japanese_or_korean_are_drawn_with_an_installed_font(tmp_path):
    # with matplotlib's default font alone they were empty boxes, one "Glyph ... missing from
    # font(s) DejaVu Sans" warning a character, though a font holding them was installed
    import matplotlib

    from privirt._plot_base import _fallback_families

    if not _fallback_families():
        pytest.skip("no font with CJK glyphs is installed (Debian: fonts-droid-fallback)")
    before = list(matplotlib.rcParams["font.family"])
    beta = pd.Series([-1.0, 0.0, 1.0], index=["日本語", "中文", "q3"])  # (Droid lacks Hangul)
    theta = np.random.default_rng(96_000_201).normal(size=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (matplotlib's missing-glyph warning is a UserWarning)
        plots.wright_map(beta, theta, path=tmp_path / "wm.png")
        fig = plots.item_information_curves(beta, path=tmp_path / "iic.png")
    legend = [t for t in fig.axes[0].get_legend().get_texts() if t.get_text() == "日本語"][0]
    assert legend.get_fontfamily()[-len(_fallback_families()):] == list(_fallback_families())
    assert list(matplotlib.rcParams["font.family"]) == before  # (the user's settings are kept)
