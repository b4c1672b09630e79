"""The kit's launcher: the same two commands on Linux, macOS and Windows, with nothing but Python 3.10+.

    python kit.py check     set up .venv on first use, then grade your exercises/ (python -m grader check)
    python kit.py test      set up .venv on first use, then run the project's own test suite

(On Windows `py kit.py ...` where `python` is not on the PATH.) Any other arguments go to the grader:
`python kit.py check masking -v`, `python kit.py show rope`, `python kit.py drill ...`. Options before the verb:

    --cpu           torch from PyTorch's CPU index (Linux and Windows; macOS wheels are CPU/MPS already); or KIT_CPU=1
    --torch SPEC    the torch requirement to install (default: the TORCH variable, else torch>=2.2)
    --venv DIR      the virtual environment (default: .venv beside this file)
    --extras NAMES  the kit's extras, as `make EXTRAS=` (default: the EXTRAS variable), e.g. nbgrader
    --setup-only    set up and stop (also: `python kit.py setup`)

It uses the standard library only (it runs before torch is installed): it creates the venv with the `venv`
module, installs torch and then the kit (`pip install -e .`) into it, writes `.venv/.installed` (the same stamp
the Makefile uses, so `make` and this script share one venv), then runs the verb with the venv's own Python
(`bin/python`, or `Scripts\\python.exe` on Windows). Like the Makefile it installs again when pyproject.toml is
newer than the stamp; it also installs torch again when --cpu or --torch asks for another build than the one
the stamp records.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path, PurePath

ROOT = Path(__file__).resolve().parent
DEFAULT_TORCH = "torch>=2.2"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
STAMP = ".installed"
WINDOWS = os.name == "nt"  # a venv's layout: Scripts\\python.exe here, bin/python elsewhere
# `make test`'s command (the Makefile): keep the two alike.
TEST_ARGS = ["-m", "pytest", "selftests", "-q", "--durations=40"]

USAGE = __doc__.split("\n\n", 1)[1].split("\nIt uses", 1)[0]


def venv_python(venv: PurePath, windows: bool | None = None) -> PurePath:
    """The venv's interpreter: Scripts\\python.exe on Windows, bin/python elsewhere."""
    if windows is None:
        windows = WINDOWS
    return venv / "Scripts" / "python.exe" if windows else venv / "bin" / "python"


def torch_build(platform: str = sys.platform, cpu: bool = False) -> str:
    """In words, which torch build pip installs here (the README's table)."""
    if platform == "darwin":
        return "the macOS wheel (CPU and Apple's MPS; there is no CUDA build)"
    if cpu:
        return "the CPU-only build, from " + CPU_INDEX
    if platform.startswith("win"):
        return "PyPI's Windows wheel (CPU only; --cpu gives the same build)"
    return "PyPI's default build (on x86-64 Linux a CUDA build, several GB with NVIDIA's libraries; --cpu for the CPU one)"


def torch_install_args(spec: str, cpu: bool, platform: str = sys.platform) -> list[str]:
    """pip's arguments that install torch: from PyTorch's CPU index with --cpu (Linux, Windows), else from PyPI."""
    args = ["install", "--quiet", spec]
    if cpu and platform != "darwin":
        args[1:1] = ["--index-url", CPU_INDEX]
    return args


def kit_install_args(extras: str) -> list[str]:
    return ["install", "--quiet", "-e", f"{ROOT}[{extras}]" if extras else str(ROOT)]


def say(text: str) -> None:
    print(f"kit: {text}", file=sys.stderr, flush=True)


def pip(python: PurePath, args: list[str]) -> None:
    command = [str(python), "-m", "pip", *args]
    if subprocess.call(command) != 0:
        raise SystemExit(f"kit: this failed: {subprocess.list2cmdline(command)}")


def stamp_torch(venv: Path) -> str | None:
    """The torch build the stamp records ("SPEC INDEX"), or None without a stamp or a record (`make`'s stamp)."""
    try:
        lines = (venv / STAMP).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    return next((line.split("=", 1)[1] for line in lines if line.startswith("torch=")), None)


def set_up(venv: Path, spec: str, cpu: bool, extras: str, explicit_torch: bool) -> Path:
    """Create and fill the venv where needed; return its Python."""
    python = Path(venv_python(venv))
    stamp = venv / STAMP
    wanted = f"{spec} {CPU_INDEX if cpu and sys.platform != 'darwin' else 'pypi'}"
    fresh = stamp.is_file() and stamp.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime
    if fresh and python.is_file() and (not explicit_torch or stamp_torch(venv) == wanted):
        return python
    if not python.is_file():
        say(f"creating {venv} with Python {sys.version.split()[0]} ({sys.executable})")
        if subprocess.call([sys.executable, "-m", "venv", str(venv)]) != 0 or not python.is_file():
            raise SystemExit(
                "kit: could not create the virtual environment. On Debian or Ubuntu install the venv module "
                "(sudo apt install python3-venv), then run this again."
            )
        pip(python, ["install", "--quiet", "--upgrade", "pip"])
    say(f"installing {spec}: {torch_build(cpu=cpu)}")
    pip(python, torch_install_args(spec, cpu))
    say("installing the kit (pip install -e .)" + (f" with [{extras}]" if extras else ""))
    pip(python, kit_install_args(extras))
    stamp.write_text(f"torch={wanted}\nextras={extras}\n", encoding="utf-8")
    say(f"ready: {python}")
    return python


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    """The launcher's options (before the verb), and the rest."""
    options = {
        "cpu": os.environ.get("KIT_CPU", "") not in ("", "0"),
        "torch": os.environ.get("TORCH") or None,
        "venv": ROOT / ".venv",
        "extras": os.environ.get("EXTRAS", ""),
        "setup_only": False,
    }
    rest = list(argv)
    while rest and rest[0].startswith("--"):
        flag = rest.pop(0)
        name, eq, value = flag.partition("=")
        if name in ("--torch", "--venv", "--extras"):
            if not eq:
                if not rest:
                    raise SystemExit(f"kit: {name} needs a value\n\n{USAGE}")
                value = rest.pop(0)
            options[name[2:]] = Path(value).resolve() if name == "--venv" else value
        elif name == "--cpu":
            options["cpu"] = True
        elif name == "--setup-only":
            options["setup_only"] = True
        elif name == "--help":
            print(USAGE)
            raise SystemExit(0)
        else:
            raise SystemExit(f"kit: unknown option {flag}\n\n{USAGE}")
    return options, rest


def command(python: PurePath, rest: list[str]) -> list[str]:
    """What a verb runs with the venv's Python: `test` the suite as `make test` does, anything else the grader."""
    if rest[:1] == ["test"]:
        return [str(python), *TEST_ARGS, *rest[1:]]
    return [str(python), "-m", "grader", *rest]


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 10):
        raise SystemExit(f"kit: the kit needs Python 3.10 or newer; this is {sys.version.split()[0]}")
    options, rest = parse(argv)
    if not rest and not options["setup_only"] or rest[:1] in (["-h"], ["help"]):
        print(USAGE)
        return 0
    if rest[:1] == ["test"] and not (ROOT / "selftests").is_dir():  # a student release ships no selftests
        raise SystemExit("kit: this copy has no test suite (selftests/); `python kit.py check` grades your exercises")
    python = set_up(
        options["venv"],
        options["torch"] or DEFAULT_TORCH,
        options["cpu"],
        options["extras"],
        explicit_torch=bool(options["torch"] or options["cpu"]),
    )
    if options["setup_only"] or rest == ["setup"]:
        return 0
    process = subprocess.Popen(command(python, rest), cwd=ROOT if rest[:1] == ["test"] else None)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:  # the child has the Ctrl-C too: let it end its own way
            continue


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
