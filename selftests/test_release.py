"""`python -m grader release OUTDIR`: the student bundle holds no reference code, and works on its own."""
from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import load_course
from grader.channels.package.release import context_dependents

ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DRILLS_TARGET")}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "bundle"
    result = subprocess.run([sys.executable, "-m", "grader", "release", str(out)], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return out


def _normalize(text: str) -> str:
    return "\n".join(l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#"))


def reference_bodies() -> list[tuple[str, str]]:
    """(qualified name, normalized body without its docstring) of every function in solutions/."""
    bodies = []
    for path in sorted((ROOT / "solutions").glob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]
            if body:
                text = _normalize("\n".join(lines[body[0].lineno - 1:body[-1].end_lineno]))
                bodies.append((f"{path.name}:{node.name}:{node.lineno}", text))
    return bodies


def test_bundle_layout_has_no_solutions_and_no_hidden_checks(bundle):
    names = {p.name for p in bundle.iterdir()}
    assert {"exercises", "tests", "grader", "course.yml", "README.md", "pyproject.toml"} <= names
    assert "solutions" not in names and "selftests" not in names
    assert (bundle / ".github" / "workflows" / "classroom.yml").is_file()  # a GitHub Classroom template
    assert not list(bundle.rglob("__pycache__"))
    assert (bundle / "grader" / "show" / "expected.npz").is_file()  # `show`'s expected panels, without stand-ins
    assert not [p for p in bundle.rglob("*") if "solution" in p.name.lower()]
    hidden = [(c.id, h) for c in load_course().components for h in c.hidden]
    public = load_course(bundle / "course.yml")
    for component, check in hidden:
        source = (bundle / "tests" / f"test_{component}.py").read_text()
        assert not re.search(rf"^def {check}\b", source, re.M), f"hidden check {check} shipped"
        assert check not in public.component(component).checks
    # every public check is still there, with its weight
    for component in load_course().components:
        expected = {k: v for k, v in component.checks.items() if k not in component.hidden}
        assert public.component(component.id).checks == expected


def test_bundle_ships_no_trusted_implementations(bundle):
    """The full stand-ins would be answers: the release keeps only what checks use directly."""
    shipped = sorted(p.name for p in (bundle / "grader" / "sandbox" / "standins").glob("*.py"))
    assert shipped == ["__init__.py", "parameters.py", "recording.py"]
    tree = ast.parse((bundle / "grader" / "sandbox" / "standins" / "recording.py").read_text())
    recorder = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert not any(isinstance(n, ast.Attribute) and n.attr == "cat" for n in ast.walk(recorder)), \
        "the recording cache must pass calls on, not be a cache itself"


def test_bundle_contains_no_reference_code(bundle):
    bodies = reference_bodies()
    assert len(bodies) >= 15
    files = {str(p.relative_to(bundle)): _normalize(p.read_text()) for p in bundle.rglob("*")
             if p.is_file() and p.suffix in (".py", ".md", ".yml", ".toml", ".txt", "")}
    leaks = []
    for name, body in bodies:
        for rel, text in files.items():
            # One-line bodies may be the last rung of course.yml's hint ladder, on purpose.
            if body in text and (body.count("\n") >= 1 or not rel.endswith(".yml")):
                leaks.append(f"{name} in {rel}")
    assert not leaks, "reference code in the bundle:\n" + "\n".join(leaks)


def _readme_commands(readme: str) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines()
            if line.strip().startswith("python -m")]


@pytest.mark.timeout(300)
def test_readme_commands_work_in_the_bundle(bundle):
    commands = _readme_commands((bundle / "README.md").read_text())
    assert any("grader check" in c for c in commands) and any("grader grade" in c for c in commands)
    for command in commands:
        argv = [sys.executable, *shlex.split(command)[1:]]
        result = subprocess.run(argv, cwd=bundle, env=_env(), capture_output=True, text=True, timeout=300)
        ok = (0, 1) if " pytest " in f" {command} " else (0,)  # pytest exits 1 when the stubs fail
        assert result.returncode in ok, f"{command}: exit {result.returncode}\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        if "grader check" in command:
            assert "not started" in result.stdout
    results = json.loads((bundle / "results.json").read_text())
    assert results["score"] == 0  # the untouched bundle grades 0
    assert {t["tags"][0] for t in results["tests"]} == {c.id for c in load_course().components}


def _project_copy(dest: Path) -> Path:
    """What `release` reads, copied from this checkout (its current code, not only what is committed)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("grader", "tests", "exercises", "solutions", ".github"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("course.yml", "pyproject.toml", "kit.py"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def _release_from(project: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**_env(), "GIT_CEILING_DIRECTORIES": str(project.parent)}  # never the git repository around it
    return subprocess.run([sys.executable, "-m", "grader", "release", str(out), *extra], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(120)
def test_release_ships_the_committed_stubs_whatever_exercises_holds(tmp_path):
    project = _project_copy(tmp_path / "project")
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "course"], check=True)
    stub = (project / "exercises" / "attention.py").read_text()
    (project / "exercises" / "attention.py").write_text(stub + "\n# the learner's work\n")
    (project / "exercises" / "notes.py").write_text("x = 1\n")
    result = _release_from(project, tmp_path / "bundle")
    assert result.returncode == 0, result.stderr
    assert "local changes (attention.py)" in result.stderr and "pristine stubs" in result.stderr
    for shipped in (tmp_path / "bundle" / "exercises", tmp_path / "bundle" / "grader" / "stubs"):
        assert (shipped / "attention.py").read_text() == stub
        assert not (shipped / "notes.py").exists()
    assert sorted(p.name for p in (tmp_path / "bundle" / "exercises").iterdir()) == \
        sorted(p.name for p in (ROOT / "exercises").glob("*.py"))


@pytest.mark.timeout(120)
def test_release_without_git_refuses(tmp_path):
    project = _project_copy(tmp_path / "project")
    result = _release_from(project, tmp_path / "bundle")
    assert result.returncode == 2 and "pristine exercise stubs" in result.stderr and "git" in result.stderr
    assert not (tmp_path / "bundle").exists()


def test_student_readme_says_the_bundle_grades_in_context(bundle):
    readme = (bundle / "README.md").read_text()
    assert "replaced by trusted stand-ins" not in readme and "graded on its own (" not in readme
    for component in load_course().components:
        row = next((l for l in readme.splitlines() if l.startswith(f"| `{component.id}` | `")), "")
        assert set(re.findall(r"`(\w+)`", row)[1:]) == set(context_dependents(component.id)), component.id
