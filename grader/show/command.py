"""`python -m grader show COMPONENT [--target DIR] [--out DIR]`: write a component's figures as PNG files."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..contract import COMPONENTS, unknown_components
from ..figures import FIGURES, figure_file
from ..i18n import _
from ..inert import visible
from ..paths import EXERCISES


def register(sub) -> None:
    show = sub.add_parser("show", help=_("draw a component's figures: your code's results beside the expected ones"))
    show.add_argument("component", metavar="COMPONENT", help=_("one of: {components}").format(components=", ".join(FIGURES)))
    show.add_argument("--target", default=str(EXERCISES), help=_("folder whose code is drawn (default: exercises/)"))
    show.add_argument("--out", default="figures", help=_("folder the PNG files go to (default: ./figures)"))
    show.add_argument("--timeout", type=float, metavar="S", help=_("seconds per call of your code (default: course.yml)"))
    show.set_defaults(func=_show)


def without_figures(component: str) -> str:
    """What `show` says for a component that has no figure."""
    return _("{component} has no figure; these components have: {components}").format(
        component=component, components=", ".join(FIGURES))


def _show(args: argparse.Namespace) -> int:
    error = unknown_components([args.component], COMPONENTS)
    if error:
        print(error, file=sys.stderr)
        return 2
    if args.component not in FIGURES:
        print(without_figures(args.component), file=sys.stderr)
        return 2
    if not Path(args.target).is_dir():
        print(_("no such folder: {path}").format(path=args.target), file=sys.stderr)
        return 2
    from .draw import font_note, png
    from .pictures import learner_figures

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    note = font_note()
    if note:
        print(note, file=sys.stderr)
    for figure in learner_figures(args.target, [args.component], timeout=args.timeout)[args.component]:
        path = out / figure_file(figure.component, figure.name)
        path.write_bytes(png(figure))
        print(visible(f"{path}: {figure_state(figure)}"))  # why yours could not be drawn is the submission's
        print(visible(f"  {figure.caption_text()}"))
    return 0


def figure_state(figure) -> str:
    """One line on a drawn figure (a grader.show.data.Figure): whether the learner's panels match the expected."""
    if figure.yours is None:
        why = figure.why_text()
        return _("expected only; yours: {why}").format(why=why.splitlines()[0] if why else _("nothing"))
    return _("yours matches the expected") if figure.matches else _("yours differs from the expected")
