"""The figure plumbing of :mod:`privirt.plots` and the sweep report: pyplot on a headless
backend where there is no display, user labels drawn as written, and saving a figure to a
path whose suffix names its format (checked before anything is drawn)."""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from ._files import figure_path, temporary_path

def _plt(path: str | Path | None = None) -> Any:
    """pyplot (with a headless backend where there is no display); ``path`` is checked first."""
    try:
        import matplotlib

        if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "cairo"):
            import os

            if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
                matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError('plotting needs matplotlib: python -m pip install "privirt[plots]"') from exc
    if path is not None:
        figure_path(path)
    return plt


#: fonts with the glyphs DejaVu Sans (matplotlib's default) lacks (CJK, Hangul), by the names
#: Linux, macOS and Windows install them under; those installed follow the user's own fonts
FALLBACK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK KR",
                  "Source Han Sans", "Droid Sans Fallback", "WenQuanYi Zen Hei", "Hiragino Sans",
                  "Apple SD Gothic Neo", "Microsoft YaHei", "Yu Gothic", "Malgun Gothic",
                  "Arial Unicode MS")


@functools.lru_cache(maxsize=1)
def _fallback_families() -> tuple[str, ...]:
    """The :data:`FALLBACK_FONTS` that matplotlib finds on this machine."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    return tuple(name for name in FALLBACK_FONTS if name in installed)


def fallback_fonts(plot: Callable[..., Any]) -> Callable[..., Any]:
    """Draw ``plot``'s figure with the installed :data:`FALLBACK_FONTS` after the user's fonts.

    matplotlib falls back glyph by glyph through ``font.family``; with its default alone a
    label in Chinese, Japanese or Korean was drawn as empty boxes, with one "Glyph missing"
    warning a character, though a font holding it was installed.  The fonts apply to the texts
    made while the figure is built and saved (``rc_context``: the user's settings are not
    changed)."""
    @functools.wraps(plot)
    def drawn(*args: Any, **kwargs: Any) -> Any:
        try:
            import matplotlib
        except ImportError:  # (the plot refuses it in its own words)
            return plot(*args, **kwargs)
        own = list(matplotlib.rcParams["font.family"])
        extra = [f for f in _fallback_families() if f not in own]
        if not extra:
            return plot(*args, **kwargs)
        with matplotlib.rc_context({"font.family": own + extra}):
            return plot(*args, **kwargs)
    return drawn


def _literal(label: Any) -> str:
    """A user-supplied label (an item, person, group or data-set name) as text that matplotlib
    draws as written: ``$`` is escaped, so that ``"$a^$"`` is not read as mathtext (which drew
    it as a formula, or failed with a parse error, after other files were written)."""
    return str(label).replace("$", r"\$")


def _names(labels: Sequence[Any], most: int = 5) -> str:
    """``labels`` as ``"a, b, c"`` for a figure: the first ``most``, then ``"+k more"``."""
    shown = ", ".join(_literal(lab) for lab in labels[:most])
    return shown + (f" +{len(labels) - most} more" if len(labels) > most else "")


def _save(fig: Any, path: str | Path | None) -> Any:
    """Save ``fig`` to ``path`` (creating missing folders) when a path is given; return it.

    The figure is written whole or not at all, as :func:`privirt._files.atomic_write` writes a
    text file: to a temporary file in the same folder, then renamed onto ``path`` (a full disk
    leaves an earlier plot as it was, never an empty or truncated one).  An OSError names
    ``path``, not the temporary file."""
    if path is not None:
        path = figure_path(path)  # (refused before any folder is made)
        path.parent.mkdir(parents=True, exist_ok=True)
        final = Path(os.path.realpath(path))  # through a symlink: its target is replaced
        tmp = temporary_path(final)
        try:
            fig.savefig(tmp, dpi=120, bbox_inches="tight", format=final.suffix[1:].lower())
            with contextlib.suppress(OSError):  # an existing plot keeps its permissions
                os.chmod(tmp, os.stat(final).st_mode & 0o7777)
            os.replace(tmp, final)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError) and exc.errno is not None:
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
            raise
    return fig
