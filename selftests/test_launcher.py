"""kit.py, the launcher the README opens with (issue 34 §2): its pieces as units (the venv's layout per platform,
torch's source, its options, `test` = `make test`), the READMEs' first commands, and one real run that creates a
venv in a temporary folder, installs the torch build this suite runs on and the kit, and grades, printing the
table `python -m grader check` prints."""
from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest

from selftests.bugs import ROOT

sys.path.insert(0, str(ROOT))
import kit  # noqa: E402  (the launcher is a script at the root, not in a package)

sys.path.remove(str(ROOT))

READMES = ["README.md", "README.zh-CN.md"]


def test_the_venv_python_is_scripts_python_exe_on_windows_and_bin_python_elsewhere():
    assert kit.venv_python(PureWindowsPath(r"C:\kit\.venv"), windows=True) == PureWindowsPath(
        r"C:\kit\.venv\Scripts\python.exe")
    assert kit.venv_python(PurePosixPath("/kit/.venv"), windows=False) == PurePosixPath("/kit/.venv/bin/python")


def test_a_windows_layout_is_found_where_the_platform_is_windows(tmp_path, monkeypatch):
    """With a fresh stamp and Scripts\\python.exe in place, set_up installs nothing and returns that Python."""
    monkeypatch.setattr(kit, "WINDOWS", True)
    python = tmp_path / "Scripts" / "python.exe"
    python.parent.mkdir()
    python.write_text("")
    (tmp_path / kit.STAMP).write_text("")
    monkeypatch.setattr(kit, "pip", lambda *args: pytest.fail("installed into a set-up venv"))
    assert kit.set_up(tmp_path, kit.DEFAULT_TORCH, cpu=False, extras="", explicit_torch=False) == python


def test_cpu_takes_torch_from_pytorchs_cpu_index_on_linux_and_windows_only():
    for platform in ("linux", "win32"):
        args = kit.torch_install_args("torch>=2.2", cpu=True, platform=platform)
        assert args[args.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
        assert "--index-url" not in kit.torch_install_args("torch>=2.2", cpu=False, platform=platform)
    assert "--index-url" not in kit.torch_install_args("torch>=2.2", cpu=True, platform="darwin")
    assert "CUDA" in kit.torch_build("linux") and "CPU" in kit.torch_build("linux", cpu=True)
    assert "CPU" in kit.torch_build("win32") and "MPS" in kit.torch_build("darwin")


def test_options_come_before_the_verb_and_the_rest_goes_to_the_grader(monkeypatch):
    for var in ("TORCH", "EXTRAS", "KIT_CPU"):
        monkeypatch.delenv(var, raising=False)
    options, rest = kit.parse(["--cpu", "--torch", "torch==2.13.0", "--venv=v", "check", "masking", "--cpu"])
    assert options["cpu"] and options["torch"] == "torch==2.13.0" and options["venv"] == Path("v").resolve()
    assert rest == ["check", "masking", "--cpu"]
    monkeypatch.setenv("TORCH", "torch==2.12.0")
    assert kit.parse(["check"])[0]["torch"] == "torch==2.12.0"
    assert kit.command(PurePosixPath("p"), ["check", "masking"]) == ["p", "-m", "grader", "check", "masking"]
    assert kit.command(PurePosixPath("p"), ["show", "rope"]) == ["p", "-m", "grader", "show", "rope"]


def test_kit_test_runs_what_make_test_runs():
    recipe = re.search(r"^test: .*\n\t\$\(BIN\)/python (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe, "the Makefile has no test recipe"
    assert kit.command(PurePosixPath("p"), ["test"])[1:] == shlex.split(recipe.group(1))


def first_commands(readme: str) -> list[str]:
    """The commands of the README's first code block, comments dropped."""
    block = re.search(r"^```\w*\n(.*?)^```", (ROOT / readme).read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert block, f"{readme} has no code block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.split("#")[0].strip()]


@pytest.mark.parametrize("readme", READMES)
def test_each_readme_opens_with_the_launchers_two_commands(readme):
    assert first_commands(readme) == ["python kit.py check", "python kit.py test"], readme
    text = (ROOT / readme).read_text(encoding="utf-8")
    for spelled in ("py kit.py check", "make grade", "make test", "--cpu", kit.CPU_INDEX, "PowerShell", "cmd"):
        assert spelled in text.split("\n## ")[0] + text.split("\n## ")[1], (readme, spelled)


def test_the_launcher_creates_a_venv_and_grades_as_the_grader_does(tmp_path):
    """One real run: a new venv with this suite's torch (from pip's cache or the local wheels, as `.ci/run` pins it),
    then `python kit.py check` prints on stdout the very table `python -m grader check` prints."""
    venv = tmp_path / "venv"
    env = {**os.environ, "TORCH": f"torch=={importlib.metadata.version('torch')}", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("EXTRAS", None)
    base = getattr(sys, "_base_executable", sys.executable)  # a learner starts from the system's Python
    started = time.monotonic()
    ran = subprocess.run([base, str(ROOT / "kit.py"), "--venv", str(venv), "check"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    took = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert kit.venv_python(venv).is_file() and "torch=" in (venv / kit.STAMP).read_text()
    assert "kit: creating" in ran.stderr and "kit: ready" in ran.stderr
    direct = subprocess.run([sys.executable, "-m", "grader", "check"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert direct.returncode == 0, direct.stderr[-3000:]
    assert ran.stdout == direct.stdout and "total" in ran.stdout
    # set up: a second run installs nothing
    again = subprocess.run([base, str(ROOT / "kit.py"), "--venv", str(venv), "check", "masking"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "kit:" not in again.stderr, again.stderr[-3000:]
    assert re.search(r"^masking\s+0/\d+\s+not started", again.stdout, re.MULTILINE), again.stdout
    print(f"kit.py set up a venv and graded in {took:.1f} s")


# --------------------------------------------------------------------------- Windows fallbacks on the learner's path

def test_a_submission_is_read_and_a_link_refused_without_o_nofollow(tmp_path, monkeypatch):
    """Windows has no O_NOFOLLOW, O_NONBLOCK or O_CLOEXEC: grader/source.py opens with what there is and refuses a
    link by looking first."""
    from grader import source

    monkeypatch.setattr(source, "_NO_FOLLOW", 0)
    monkeypatch.setattr(source, "_READ_FLAGS", os.O_RDONLY)
    (tmp_path / "attention.py").write_bytes(b"x = 1\r\n")
    assert source.read_file(tmp_path / "attention.py") == b"x = 1\r\n"
    (tmp_path / "norms.py").symlink_to(tmp_path / "attention.py")
    with pytest.raises(source.UnreadableFile, match="symbolic link"):
        source.read_file(tmp_path / "norms.py")


def test_the_catalogues_cache_needs_no_getuid(monkeypatch, tmp_path):
    """Windows has no os.getuid: a Chinese run's compiled catalogue goes to the user's own temporary folder."""
    from grader import i18n

    monkeypatch.delattr(os, "getuid")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert i18n._cache_dirs()[1] == tmp_path / "transformer-drills"
