"""Drawing a figure's data (data.py) as a PNG with matplotlib's Agg backend: expected above, the learner's below.

matplotlib is imported here only, by `show` and the HTML page, never on the
grading path. No pyplot: each picture is its own `Figure` on an Agg canvas,
so nothing global (a GUI backend, open figures) is touched.
"""
from __future__ import annotations

import io
import textwrap

import numpy as np

from .data import CLASSES, HEAT, MASK, SIGNED, Figure, Panel

MAY_ATTEND = "#2f5f98"
NOTHING = "#d9d9d9"  # a cell the learner's result left empty or filled with something unexpected


def png(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes: a row of expected panels, then the learner's (or why there are none)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as Canvas

    columns = max(len(figure.expected), len(figure.yours or []), 1)
    width = max(7.5, min(3.2 * columns + 0.6, 18.0))
    cell = min(width / columns, 4.0)
    fig = Canvas(figsize=(width, 2 * cell + 1.6))
    FigureCanvasAgg(fig)
    caption = "\n".join(textwrap.wrap(figure.caption, int(width * 14)))
    fig.suptitle(f"{figure.component}: {figure.name}\n{caption}", fontsize=9)
    grid = fig.add_gridspec(2, columns, hspace=0.5, wspace=0.35, top=1 - 1.2 / (2 * cell + 1.6), bottom=0.06)
    for column, panel in enumerate(figure.expected):
        _panel(fig.add_subplot(grid[0, column]), panel, figure.expected[column], "expected")
    if not figure.expected:
        _words(fig.add_subplot(grid[0, :]), "expected: nothing to draw\n" + "\n".join(figure.notes), "#555555")
    if figure.yours is None:
        _words(fig.add_subplot(grid[1, :]), "yours: nothing to draw\n" + figure.why, "#a03030")
    else:
        for column, panel in enumerate(figure.yours):
            reference = figure.expected[column] if column < len(figure.expected) else panel
            differs = bool(figure.expected) and not (column < len(figure.expected) and panel.same_as(reference))
            _panel(fig.add_subplot(grid[1, column]), panel, reference, "yours" + (" (differs)" if differs else ""),
                   alarm=differs)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi)
    return out.getvalue()


def _words(ax, text: str, colour: str) -> None:
    """A panel of text only (why there is nothing to draw)."""
    ax.axis("off")
    lines = [wrapped for line in text.splitlines() for wrapped in textwrap.wrap(line, 100) or [""]]
    ax.text(0.5, 0.5, "\n".join(lines[:10]), ha="center", va="center", fontsize=10, color=colour,
            transform=ax.transAxes)


def _panel(ax, panel: Panel, reference: Panel, row: str, alarm: bool = False) -> None:
    """One panel, on the colour scale of its expected counterpart (so that a difference shows as one)."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    values = panel.values
    rows, cols = values.shape if values.ndim == 2 else (1, values.size)
    values = values.reshape(rows, cols)
    if panel.kind == MASK:
        cmap, vmin, vmax = ListedColormap(["white", MAY_ATTEND]).with_extremes(bad=NOTHING), 0, 1
        shown = values.astype(float)
    elif panel.kind == CLASSES:
        cmap = ListedColormap(colormaps["tab20"].colors).with_extremes(bad=NOTHING)
        shown = np.ma.masked_less(values.astype(float), 0)
        vmin, vmax = -0.5, 19.5
        shown = np.ma.masked_array(np.mod(shown, 20), shown.mask)
    else:
        finite = reference.values[np.isfinite(reference.values)]
        if panel.kind == SIGNED:
            bound = float(np.abs(finite).max()) if finite.size else 1.0
            cmap, vmin, vmax = colormaps["RdBu_r"].with_extremes(bad=NOTHING), -bound, bound
        else:
            cmap = colormaps["viridis"].with_extremes(bad=NOTHING)
            vmin, vmax = panel.scale or ((float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0))
            vmax = vmax if vmax > vmin else vmin + 1.0
        shown = np.ma.masked_invalid(values.astype(float))
    image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="auto")
    if panel.kind == MASK or (panel.kind == CLASSES and rows * cols <= 400):
        ax.set_xticks(np.arange(-0.5, cols), minor=True)
        ax.set_yticks(np.arange(-0.5, rows), minor=True)
        ax.grid(which="minor", color="#999999", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
    if panel.kind in (HEAT, SIGNED) and rows * cols > 64:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if panel.labels is not None and rows * cols <= 400 and panel.labels.shape == (rows, cols):
        size = max(4.5, min(9.0, 60 / max(rows, cols)))
        for (r, c), text in np.ndenumerate(panel.labels):
            if text:
                dark = panel.kind == HEAT and image.norm(float(values[r, c])) < 0.45  # viridis is dark below
                ax.text(c, r, text, ha="center", va="center", fontsize=size, color="white" if dark else "black")
    ax.set_title("\n".join(textwrap.wrap(f"{row}: {panel.title}", 48)), fontsize=8, color="#a03030" if alarm else "black")
    ax.set_xlabel(panel.xlabel, fontsize=7)
    ax.set_ylabel(panel.ylabel, fontsize=7)
    ax.tick_params(labelsize=6)
    step = max(1, cols // 8)
    ax.set_xticks(range(0, cols, step))
    ax.set_yticks(range(0, rows, max(1, rows // 8)))
