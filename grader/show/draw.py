"""Drawing a figure's data (data.py) as a PNG with matplotlib's Agg backend: expected above, the learner's below.

matplotlib is imported here only, by `show` and the HTML page, never on the
grading path. No pyplot: each picture is its own `Figure` on an Agg canvas,
so nothing global (a GUI backend, open figures) is touched.

The words are drawn in the language in use. Chinese needs a font with CJK
glyphs, which matplotlib does not ship: the first installed one found
(`cjk_font`: Noto Sans CJK, Source Han Sans, WenQuanYi, ... as fontconfig or
the system's font folders list them) backs DejaVu Sans up glyph by glyph.
Where there is none, a figure keeps to its English source text rather than
drawing empty boxes, and `font_note` says so (`show` prints it).
"""
from __future__ import annotations

import functools
import io
import re
import unicodedata
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import numpy as np

from .. import i18n
from ..i18n import N_, _
from .data import CLASSES, HEAT, MASK, SIGNED, Figure, Panel

MAY_ATTEND = "#2f5f98"
NOTHING = "#d9d9d9"  # a cell the learner's result left empty or filled with something unexpected
LATIN = "DejaVu Sans"  # matplotlib's own font: Latin, Greek, maths
# Words in the names of fonts (families or files) that may hold CJK glyphs; cjk_font checks that one does.
CJK_NAMES = ("cjk", "source han", "sourcehan", "wenquanyi", "wqy", "droid sans fallback", "droidsansfallback",
             "pingfang", "hiragino", "yahei", "msyh", "simhei", "simsun", "heiti", "songti", "ar pl", "uming", "ukai",
             "noto sans sc", "notosanssc")
CJK_SAMPLE = "注意力掩码多头位置编码：，（）"  # glyphs a Chinese figure cannot do without


@functools.cache
def cjk_font() -> str | None:
    """The family name of an installed font with CJK glyphs (added to matplotlib's list if new), or None."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    def covers(path: str) -> bool:
        try:
            charmap = FT2Font(path).get_charmap()
        except (OSError, RuntimeError, ValueError):
            return False
        return all(ord(c) in charmap for c in CJK_SAMPLE)

    def named(*names: str) -> bool:
        return any(word in name.lower() for name in names for word in CJK_NAMES)

    for entry in font_manager.fontManager.ttflist:  # those matplotlib's font cache knows
        if named(entry.name, Path(entry.fname).name) and covers(entry.fname):
            return entry.name
    for path in sorted(font_manager.findSystemFonts()):  # installed since that cache was made
        if named(Path(path).name) and covers(path):
            font_manager.fontManager.addfont(path)
            return font_manager.FontProperties(fname=path).get_name()
    return None


def english_only() -> bool:
    """Whether a figure keeps to English although another language is in use: no font has its glyphs."""
    return i18n.language() != i18n.DEFAULT and cjk_font() is None


def font_note() -> str:
    """What `show` says when the figures' words stay English for want of a font (else nothing)."""
    if not english_only():
        return ""
    return _("no installed font has Chinese glyphs, so the figures' words are in English; install one "
             "(Debian: apt-get install fonts-wqy-microhei or fonts-noto-cjk) to read them in Chinese")


def png(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes: a row of expected panels, then the learner's (or why there are none)."""
    with fonts():  # the texts made later (tick labels, at drawing) too
        out = io.BytesIO()
        canvas(figure).savefig(out, format="png", dpi=dpi)
    return out.getvalue()


def fonts():
    """matplotlib's fonts for the language in use: DejaVu Sans, then a CJK font for the glyphs it lacks."""
    from matplotlib import rc_context

    cjk = None if i18n.language() == i18n.DEFAULT or english_only() else cjk_font()
    return rc_context({"font.family": [LATIN, cjk]}) if cjk else nullcontext()


def canvas(figure: Figure):
    """The figure as a matplotlib Figure, its words in the language in use (English where no font has that
    language's glyphs); `png` saves it."""
    with fonts():  # a text takes its font when it is made
        return _canvas(figure, english_only())


def _canvas(figure: Figure, english: bool):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as Canvas

    tr = _identity if english else _translate
    columns = max(len(figure.expected), len(figure.yours or []), 1)
    width = max(7.5, min(3.2 * columns + 0.6, 18.0))
    cell = min(width / columns, 4.0)
    fig = Canvas(figsize=(width, 2 * cell + 1.6))
    FigureCanvasAgg(fig)
    caption = "\n".join(wrap(figure.caption_text(tr), int(width * 14)))
    fig.suptitle(f"{figure.component}: {figure.name}\n{caption}", fontsize=9)
    grid = fig.add_gridspec(2, columns, hspace=0.5, wspace=0.35, top=1 - 1.2 / (2 * cell + 1.6), bottom=0.06)
    for column, panel in enumerate(figure.expected):
        _panel(fig.add_subplot(grid[0, column]), panel, figure.expected[column], tr("expected"), tr)
    if not figure.expected:
        _words(fig.add_subplot(grid[0, :]),
               "\n".join([tr("expected: nothing to draw"), *map(tr, figure.notes)]), "#555555")
    if figure.yours is None:
        _words(fig.add_subplot(grid[1, :]),
               tr("yours: nothing to draw") + "\n" + figure.why_text(english), "#a03030")
    else:
        for column, panel in enumerate(figure.yours):
            reference = figure.expected[column] if column < len(figure.expected) else panel
            differs = bool(figure.expected) and not (column < len(figure.expected) and panel.same_as(reference))
            _panel(fig.add_subplot(grid[1, column]), panel, reference,
                   tr("yours (differs)") if differs else tr("yours"), tr, alarm=differs)
    return fig


def _identity(text: str) -> str:
    return text


def _translate(text: str) -> str:
    return _(text) if text else text  # gettext("") is the catalogue's header


# Marked for extraction: the words png() draws (translated through `tr` there).
_ROWS = (N_("expected"), N_("yours"), N_("yours (differs)"), N_("expected: nothing to draw"),
         N_("yours: nothing to draw"), N_("{row}: {title}"))

_CJK = "\u2e80-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef"  # ideographs, their punctuation, full-width forms
_WIDE = re.compile(rf"\s+|[{_CJK}]|[^\s{_CJK}]+")  # a space, one CJK character, or a word of anything else


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns (a CJK character is two): broken at spaces, and between CJK
    characters, which need none (textwrap breaks at spaces only)."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        line, space = "", False
        for token in _WIDE.findall(paragraph):
            if token.isspace():
                space = True
                continue
            piece = (" " if space and line else "") + token
            if line and _columns(line + piece) > width:
                lines.append(line)
                line = token
            else:
                line += piece
            space = False
        lines.append(line)
    return lines


def _words(ax, text: str, colour: str) -> None:
    """A panel of text only (why there is nothing to draw)."""
    ax.axis("off")
    lines = [wrapped for line in text.splitlines() for wrapped in wrap(line, 100)]
    ax.text(0.5, 0.5, "\n".join(lines[:10]), ha="center", va="center", fontsize=10, color=colour,
            transform=ax.transAxes)


def _panel(ax, panel: Panel, reference: Panel, row: str, tr: Callable[[str], str], alarm: bool = False) -> None:
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
    title = tr("{row}: {title}").format(row=row, title=panel.title_text(tr))
    ax.set_title("\n".join(wrap(title, 48)), fontsize=8, color="#a03030" if alarm else "black")
    ax.set_xlabel(tr(panel.xlabel), fontsize=7)
    ax.set_ylabel(tr(panel.ylabel), fontsize=7)
    ax.tick_params(labelsize=6)
    step = max(1, cols // 8)
    ax.set_xticks(range(0, cols, step))
    ax.set_yticks(range(0, rows, max(1, rows // 8)))
