"""`python -m grader train`: train your own TinyLM on the capstone's task and watch it learn.

The task and the training loop are tiny_lm's graded training check's, the very
ones it runs: course content, in tests/checklib/training/, read through the one
seam to the checks' library (grader/checks_library.py) when the command runs (a
grader installed without its course refuses every command, this one too:
grader/cli.py).

Trust: this command runs the learner's own code on their own machine, as plain
pytest does: no sandbox, but in a child process with a time limit, so that an
endless loop ends (`--timeout`).
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import torch

from ..check_text import render
from ..i18n import DEFAULT, N_, _, language, set_language
from ..paths import EXERCISES, ROOT


def _training():
    """The capstone's training task and loop (tests/checklib/training/tiny_lm.py).

    Imported in the child that trains, never while the command line is built: the process that grades must
    not hold a check's helper before it forks its zygote (docs/instructors.md)."""
    from ..checks_library import checklib

    return checklib("training.tiny_lm").training.tiny_lm


def _child(args: argparse.Namespace) -> int:
    """Runs in the child process: trains, draws the curve, prints the continuation."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ..sandbox.loader import ImplementationLoadError
    from ..engine.target import open_target
    from ..sandbox.protocol import NotStarted, StudentError

    console = Console(soft_wrap=True)
    training = _training()
    task = training.TASK
    steps = args.steps or task.steps
    try:
        target = open_target(args.target)
    except ImplementationLoadError as exc:
        label = escape(_("cannot load your code:"))
        console.print(f"[bold red]{label}[/] {escape(str(exc))}", highlight=False)
        return 1
    console.print(_("training {task}\n  code: {target}; {steps} steps of torch.optim.AdamW, learning rates from "
                    "your lr_at").format(task=render(task.describe()), target=args.target, steps=steps),
                  markup=False, highlight=False)
    try:
        lr = training.schedule(task, target.fn("training.lr_at"), steps)
        lr(0)
        model = target.new("gpt.TinyLM", *task.model_args())
        with Progress(TextColumn("[bold]" + escape(_("train"))), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TextColumn(escape(_("loss")) + " {task.fields[loss]}"), TimeElapsedColumn(), console=console,
                      transient=not console.is_terminal) as progress:
            bar = progress.add_task("train", total=steps, loss="-")
            losses = training.train(model, task, lr, steps=steps,
                           on_step=lambda s, loss: progress.update(bar, advance=1, loss=f"{loss:.3f}"))
    except NotStarted as exc:
        waiting = _not_started(args.target, training.NEEDS)
        also = _("; not started yet: {components}").format(components=", ".join(waiting)) if waiting else ""
        explained = _("the training runs your whole model (gpt.py and every part it is built on) and your "
                      "lr_at{also}\n  finish them first (python -m grader check COMPONENT)").format(also=also)
        console.print(f"[bold red]{escape(_said(exc))}[/]\n  {escape(explained)}", highlight=False)
        return 1
    except (StudentError, training.TrainingFailed) as exc:
        label = escape(_("the training failed:"))
        console.print(f"[bold red]{label}[/] {escape(str(exc))}", highlight=False)
        return 1
    console.print(_("loss: {first:.3f} at the start, {last:.3f} after {steps} steps (a model that only guesses "
                    "scores {guess:.3f})").format(first=losses[0], last=losses[-1], steps=steps,
                                                  guess=math.log(task.vocab_size)), highlight=False)
    _plot(losses, Path(args.out), task, console)
    _continue(target, model, training, console)
    return 0


def _not_started(folder: str, needed: tuple[str, ...]) -> list[str]:
    """The `needed` components (the task's NEEDS) whose stubs are untouched (that exist in this version of the
    course)."""
    from ..contract import COMPONENTS
    from ..engine.scratch import not_started

    waiting = []
    for component in needed:
        try:
            if component in COMPONENTS and not_started(folder, component):
                waiting.append(component)
        except Exception:  # noqa: BLE001 - a file that does not parse: the training's own error says more
            continue
    return waiting


def _said(exc: Exception) -> str:
    """A NotStarted as the learner reads it: the stub's own (English) words in English, the error's name else."""
    if language() == DEFAULT:
        return str(exc)
    return _("not started: your code raises NotImplementedError")


def _plot(losses: list[float], out: Path, task, console) -> None:
    try:
        import matplotlib
    except ImportError:
        console.print(_("matplotlib is not installed (pip install matplotlib): no picture of the loss curve"))
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..show.draw import english_only, fonts

    tr = (lambda text: text) if english_only() else _  # English where no font has the language's glyphs
    with fonts():
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(range(len(losses)), losses, label=tr(N_("your TinyLM")))
        ax.axhline(math.log(task.vocab_size), color="grey", linestyle="--", label=tr(N_("guessing (log V)")))
        ax.set_xlabel(tr(N_("step")))
        ax.set_ylabel(tr(N_("cross-entropy loss")))
        ax.set_title(tr(N_("TinyLM on repeated motifs")))
        ax.legend()
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=100)
        plt.close(fig)
    console.print(_("loss curve saved to {path}").format(path=out), markup=False, highlight=False)


def _continue(target, model, training, console) -> None:
    from ..sandbox.protocol import NotStarted, StudentError

    task = training.TASK
    prompt = training.prompts(task, 3)
    length = task.seq_len + task.period
    try:
        out = target.fn("sampling.generate")(model, prompt, length - prompt.size(1))
    except NotStarted as exc:
        console.print(_("no continuation: sampling is {error}").format(error=_said(exc)), markup=False, highlight=False)
        return
    except StudentError as exc:
        console.print(_("no continuation: generate failed: {error}").format(error=exc), markup=False,
                      highlight=False)
        return
    want = training.expected_continuation(task, prompt, length)
    console.print(_("greedy continuations (prompt | what your model wrote):"), markup=False)
    for got, right in zip(out.tolist(), want.tolist()):
        p = prompt.size(1)
        mark = _("right") if got == right else _("expected {tokens}").format(tokens=" ".join(map(str, right[p:])))
        console.print(f"  {' '.join(map(str, got[:p]))} | {' '.join(map(str, got[p:]))}   ({mark})", highlight=False)


def _train(args: argparse.Namespace) -> int:
    """Start the child that runs the learner's code, and stop it after `--timeout` seconds."""
    if args.steps is not None and args.steps < 1:
        print(_("train: --steps must be at least 1"), file=sys.stderr)
        return 2
    command = [sys.executable, "-m", __name__, "--child", "--target", str(Path(args.target).resolve()),
               "--out", str(Path(args.out).resolve()), "--lang", language()] + (["--steps", str(args.steps)] if args.steps else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    try:
        return subprocess.run(command, env=env, timeout=args.timeout).returncode
    except KeyboardInterrupt:
        print(_("train: interrupted"), file=sys.stderr)
        return 130
    except subprocess.TimeoutExpired:
        print(_("train: stopped after {seconds:g} s (an endless loop, or a much slower model than expected; "
                "--timeout changes the limit)").format(seconds=args.timeout), file=sys.stderr)
        return 1


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default=str(EXERCISES), help=_("folder with the code to train "
                        "(default: exercises/)"))
    parser.add_argument("--steps", type=int, metavar="N", help=_("training steps (default: as many as tiny_lm's "
                                                                 "training check takes)"))
    parser.add_argument("--out", default="loss_curve.png", metavar="PNG", help=_("where to save the loss curve "
                        "(default: loss_curve.png)"))


def register(subparsers) -> None:
    parser = subparsers.add_parser("train", help=_("train your TinyLM on a small task: progress, loss curve, "
                                   "a continuation"))
    _add_options(parser)
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S", help=_("stop after S seconds (default 600)"))
    parser.set_defaults(func=_train)


def main(argv: list[str]) -> int:
    """The child process's entry point (`python -m grader.train.command --child ...`)."""
    parser = argparse.ArgumentParser(prog="python -m grader.train.command")
    _add_options(parser)
    parser.add_argument("--child", action="store_true", required=True)
    parser.add_argument("--lang", default=None)
    args = parser.parse_args(argv)
    set_language(args.lang)
    torch.set_num_threads(1)
    return _child(args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
