"""`python -m grader drill ...`, driven as a candidate would: subprocesses, a temporary history and drills folder."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY

import pytest

from grader.contract import COMPONENTS, MODULES
from grader.drills.state import Drill
from grader.drills.history import HistoryFile
from grader.drills.workspace import (build_workspace, component_names, definition_source, hide_worded_steps,
                                    learners_code)
from grader.pristine import STUB_FILES, PristineStubsError, changed_exercises, pristine_stubs, write_shipped_stubs

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)  # subprocesses that import torch, two of which grade


@pytest.fixture()
def drills(tmp_path: Path):
    """Run `python -m grader drill ARGS` with its history and workspaces under tmp_path."""
    env = {**os.environ, "DRILLS_HOME": str(tmp_path / "home"), "DRILLS_ROOT": str(tmp_path / "drills"),
           "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}

    def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "grader", "drill", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=240)

    run.home = tmp_path / "home"
    run.root = tmp_path / "drills"
    return run


def workspaces(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def history(home: Path) -> list[dict]:
    return json.loads((home / "history.json").read_text())["drills"]


def project_copy(dest: Path, *, reference: bool) -> Path:
    """What `python -m grader drill` needs of the project, copied to `dest`: a course checkout, or a release."""
    keep = ("grader", "tests", "exercises", "course.yml", "pyproject.toml") + (("solutions",) if reference else ())
    for name in keep:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "stubs"))
        else:
            shutil.copy(ROOT / name, dest / name)
    return dest


def git_commit_all(repo: Path) -> None:
    """`git init` (if need be) and commit everything in `repo`, whatever the user's git configuration."""
    git = ["git", "-c", "user.name=drill", "-c", "user.email=drill@example.com", "-c", "commit.gpgsign=false",
           "-c", "core.hooksPath=/dev/null"]
    if not (repo / ".git").exists():
        subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "work"], cwd=repo, check=True)


def learner_finished_everything(project: Path) -> None:
    """The learner's exercises/ holds working code for every component (here: the reference's)."""
    for module in MODULES:
        shutil.copy(ROOT / "solutions" / f"{module}.py", project / "exercises" / f"{module}.py")


def test_a_drill_started_failed_hinted_passed_revealed_and_in_the_history(drills):
    started = drills("start", "masking")
    assert started.returncode == 0, started.stderr
    [workspace] = workspaces(drills.root)
    assert workspace.name.endswith("-masking")
    assert "causal_mask, apply_mask" in started.stdout and "drill check" in started.stdout
    assert {p.name for p in workspace.glob("*.py")} == {f"{m}.py" for m in MODULES} | {"__init__.py"}
    source = (workspace / "attention.py").read_text()
    assert 'NotImplementedError("masking: write causal_mask")' in source
    assert "TODO (masking), in words:" in definition_source(source, "causal_mask")  # the steps, outside interviews
    assert "NotImplementedError" not in definition_source(source, "split_heads")  # working code around it

    failed = drills("check")
    assert failed.returncode == 1
    assert "not started" in failed.stdout and "remaining" in failed.stdout

    first, second = drills("hint"), drills("hint")
    assert "hint 1/3" in first.stdout and "hint 2/3" in second.stdout
    refused = drills("reveal")
    assert refused.returncode == 1 and "has not passed yet" in refused.stderr

    # the learner replaces the raise lines and keeps the stubs' docstrings
    (workspace / "attention.py").write_text(source.replace(
        'raise NotImplementedError("masking: write causal_mask")',
        'k_len = q_len if k_len is None else k_len\n    if k_len < q_len:\n        raise ValueError("short keys")\n'
        '    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len)').replace(
        'raise NotImplementedError("masking: write apply_mask")',
        'return scores if mask is None else scores.masked_fill(~mask, float("-inf"))  # mine'))
    passed = drills("check")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed in" in passed.stdout and "2 hints" in passed.stdout

    revealed = drills("reveal")
    assert revealed.returncode == 0, revealed.stderr
    assert "reference: attention.causal_mask" in revealed.stdout and "yours: attention.apply_mask" in revealed.stdout
    assert "# mine" in revealed.stdout and 'raise ValueError("short keys")' in revealed.stdout  # the learner's code
    assert "TODO (masking)" not in revealed.stdout  # not the stub's docstring

    [entry] = history(drills.home)
    assert entry["outcome"] == "passed"
    assert entry["components"]["masking"]["hints"] == 2 and entry["components"]["masking"]["time_s"] > 0
    shown = drills("history")
    assert shown.returncode == 0
    assert "masking" in shown.stdout and "best" in shown.stdout and "█" in shown.stdout
    row = next(line for line in shown.stdout.splitlines() if "passed" in line and "│" in line)
    assert " 2 " in row


def test_interview_mode_shows_only_pass_or_fail_until_the_drill_ends(drills):
    assert drills("start", "scaling", "--no-hints").returncode == 0
    [workspace] = workspaces(drills.root)
    stub = definition_source((workspace / "attention.py").read_text(), "attention_scores")
    assert "in words" not in stub and "1. Transpose the last two dimensions" not in stub
    assert "TODO (scaling): write it from memory" in stub and "NotImplementedError" in stub
    checked = drills("check")
    assert checked.returncode == 1
    assert "FAIL  test_attention_scores_values" in checked.stdout
    assert "NotImplementedError" not in checked.stdout and "write attention_scores" not in checked.stdout
    assert "points" not in checked.stdout
    hint = drills("hint")
    assert hint.returncode == 1 and "interview mode" in hint.stderr
    gave_up = drills("reveal", "--give-up")
    assert gave_up.returncode == 0
    assert "reference: attention.attention_scores" in gave_up.stdout
    assert "nothing written: your attention_scores" in gave_up.stdout
    assert history(drills.home)[0]["components"]["scaling"]["result"] == "gave up"


def test_random_selection_prefers_weak_components_and_an_open_drill_is_never_overwritten(drills):
    def drill(started: str, component: str, result: str, time_s: float, hints: int) -> dict:
        return {"id": started, "started": started, "components": {component: {"result": result, "time_s": time_s,
                                                                                "hints": hints}}}

    past = [drill("2025-01-01T10:00:00", c, "passed", 120, 0) for c in COMPONENTS]
    past.append(drill("2025-01-02T10:00:00", "head_splitting", "gave up", 900, 3))
    drills.home.mkdir()
    (drills.home / "history.json").write_text(json.dumps({"version": 1, "drills": past}))
    assert drills("start", "--random", "1", "--seed", "1").returncode == 0
    [first] = workspaces(drills.root)
    assert first.name.endswith("-head_splitting")  # the weakest
    (first / "attention.py").write_text("# my attempt\n")

    refused = drills("start", "--random", "1", "--seed", "2")
    assert refused.returncode == 1 and "still open" in refused.stderr and "--force" in refused.stderr
    forced = drills("start", "--random", "1", "--seed", "2", "--force")
    assert forced.returncode == 0 and "Abandoned" in forced.stdout
    # two drills started within one second get a "-2" suffix rather than sharing a folder
    names = [re.sub(r"-\d+$", "", p.name.split("-", 2)[2]) for p in workspaces(drills.root)]
    assert names == ["head_splitting", "head_splitting"]
    assert (first / "attention.py").read_text() == "# my attempt\n"  # nothing of the earlier drill overwritten
    assert history(drills.home)[-1]["components"]["head_splitting"]["result"] == "abandoned"

    never = [d for d in past if "kv_cache" not in d["components"]]
    (drills.home / "history.json").write_text(json.dumps({"version": 1, "drills": never}))
    started = drills("start", "--random", "2", "--seed", "3", "--force")
    assert started.returncode == 0, started.stderr
    assert workspaces(drills.root)[-1].name.endswith("-kv_cache-head_splitting")  # never drilled, then weakest


def test_an_unreadable_history_is_left_alone_by_history_and_moved_aside_by_a_drill_that_ends(drills):
    drills.home.mkdir()
    (drills.home / "history.json").write_text("{not json")
    shown = drills("history")
    assert shown.returncode == 0
    assert "unreadable" in shown.stderr and "No finished drills yet" in shown.stdout
    assert [p.name for p in drills.home.iterdir()] == ["history.json"]  # the read-only command changed nothing
    assert (drills.home / "history.json").read_text() == "{not json"

    assert drills("start", "scaling").returncode == 0
    gave_up = drills("reveal", "--give-up")  # writes the history: repairs it
    assert gave_up.returncode == 0 and "moved aside" in gave_up.stderr
    [aside] = drills.home.glob("history.json.corrupt-*")
    assert aside.read_text() == "{not json"
    assert [d["components"] for d in history(drills.home)] == [{"scaling": {"result": "gave up", "time_s": ANY,
                                                                            "hints": 0}}]


def _past(started: str, component: str) -> dict:
    return {"id": started, "started": started, "components": {component: {"result": "passed", "time_s": 100,
                                                                           "hints": 1}}}


def test_one_bad_history_entry_is_skipped_and_the_others_are_shown(drills):
    drills.home.mkdir()
    entries = [_past("2025-01-01T10:00:00", "masking"), {"started": 3, "components": {}},
               _past("2025-01-02T10:00:00", "kv_cache"), "oops"]
    text = json.dumps({"version": 1, "drills": entries})
    (drills.home / "history.json").write_text(text)
    shown = drills("history")
    assert shown.returncode == 0, shown.stderr
    assert "masking" in shown.stdout and "kv_cache" in shown.stdout and "1:40" in shown.stdout
    assert "skipping 2 entries" in shown.stderr and "entry 2:" in shown.stderr and "entry 4:" in shown.stderr
    assert [p.name for p in drills.home.iterdir()] == ["history.json"]
    assert (drills.home / "history.json").read_text() == text


def test_appending_drops_only_the_bad_entries_and_keeps_the_file_as_it_was(tmp_path):
    path = tmp_path / "history.json"
    good = _past("2025-01-01T10:00:00", "scaling")
    text = json.dumps({"version": 1, "drills": [{"oops": 1}, good]})
    path.write_text(text)
    history_file = HistoryFile(path)
    assert history_file.load() == [good] and "skipping 1 entry" in history_file.warnings[0]
    assert path.read_text() == text and list(tmp_path.iterdir()) == [path]
    new = _past("2025-01-03T10:00:00", "masking")
    history_file.append(new)
    assert "dropped" in history_file.warnings[-1]
    assert HistoryFile(path).load() == [good, new]
    [aside] = tmp_path.glob("history.json.corrupt-*")
    assert aside.read_text() == text
    history_file.append(new)  # nothing left to repair: no second copy
    assert len(list(tmp_path.glob("history.json.corrupt-*"))) == 1 and len(HistoryFile(path).load()) == 3


def test_a_student_release_drills_the_stubs_and_has_no_reference(drills, tmp_path):
    release = project_copy(tmp_path / "release", reference=False)
    write_shipped_stubs(release, pristine_stubs())  # what `release` ships
    # GitHub Classroom: the release is a repository, and the learner has committed finished work
    learner_finished_everything(release)
    git_commit_all(release)
    assert changed_exercises(release) == [f"{m}.py" for m in MODULES]
    started = drills("start", "scaling", cwd=release)
    assert started.returncode == 0, started.stderr
    assert "without the reference" in started.stdout
    [workspace] = workspaces(drills.root)
    for name in STUB_FILES:
        assert (workspace / name).read_text() == (ROOT / "exercises" / name).read_text(), name
    revealed = drills("reveal", "--give-up", cwd=release)
    assert revealed.returncode == 0
    assert "reference is not included" in revealed.stdout


def test_a_drill_starts_from_the_pristine_stubs_whatever_exercises_holds(drills, tmp_path):
    project = project_copy(tmp_path / "course", reference=True)
    git_commit_all(project)
    assert changed_exercises(project) == []
    learner_finished_everything(project)  # not committed: git's HEAD still has the stubs
    assert changed_exercises(project) == [f"{m}.py" for m in MODULES]
    started = drills("start", "masking", cwd=project)
    assert started.returncode == 0, started.stderr
    [workspace] = workspaces(drills.root)
    source = (workspace / "attention.py").read_text()
    stub = (ROOT / "exercises" / "attention.py").read_text()
    for name in ("causal_mask", "apply_mask"):
        assert definition_source(source, name) == definition_source(stub, name)
    assert "NotImplementedError" not in definition_source(source, "split_heads")


def test_pristine_stubs_are_never_the_learners_and_their_absence_is_said(tmp_path, monkeypatch):
    project = project_copy(tmp_path / "p", reference=False)
    with pytest.raises(PristineStubsError) as nowhere:
        pristine_stubs(project)  # not a repository, no shipped copy
    assert "grader/stubs" in str(nowhere.value) and "not a git repository" in str(nowhere.value)

    learner_finished_everything(project)
    git_commit_all(project)  # finished work committed to exercises/: HEAD is not the stubs
    with pytest.raises(PristineStubsError, match=r"holds written code.*attention\.causal_mask"):
        pristine_stubs(project)

    with monkeypatch.context() as m:
        m.setenv("PATH", str(tmp_path / "empty"))
        with pytest.raises(PristineStubsError, match="git is not installed"):
            pristine_stubs(project)

    stubs = {name: (ROOT / "exercises" / name).read_text() for name in STUB_FILES}
    write_shipped_stubs(project, stubs)
    assert pristine_stubs(project) == stubs
    assert changed_exercises(project) == [f"{m}.py" for m in MODULES]
    (project / "grader" / "stubs" / "vit.py").unlink()
    with pytest.raises(PristineStubsError, match="incomplete"):
        pristine_stubs(project)


def test_a_corrupt_state_of_the_latest_drill_stops_check_hint_and_reveal(drills):
    assert drills("start", "scaling").returncode == 0
    assert drills("start", "masking", "--force").returncode == 0
    [older] = [p for p in workspaces(drills.root) if p.name.endswith("-scaling")]
    [latest] = [p for p in workspaces(drills.root) if p.name.endswith("-masking")]
    older_state = (older / "drill.json").read_text()
    (latest / "drill.json").write_text('{"id": "x", "components": ["masking"')
    for command in ("check", "hint", "reveal"):
        done = drills(command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert f"{latest / 'drill.json'}" in done.stderr and "not valid JSON" in done.stderr, command
        assert "--force" in done.stderr, command
        assert "scaling" not in done.stdout and "masking" not in done.stdout, command  # nothing graded or hinted
    assert (older / "drill.json").read_text() == older_state  # the older drill was not touched

    refused = drills("start", "head_splitting")
    assert refused.returncode == 1 and "--force" in refused.stderr
    forced = drills("start", "head_splitting", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "moved aside" in forced.stdout
    assert [p.name for p in latest.glob("drill.json*")] != ["drill.json"]
    assert (latest / "attention.py").is_file()  # the learner's code is kept
    hint = drills("hint")
    assert hint.returncode == 0 and "head_splitting, hint 1/" in hint.stdout


def test_a_corrupt_state_of_an_older_drill_is_skipped_with_a_warning(drills):
    assert drills("start", "scaling").returncode == 0
    old = drills.root / "20200101-120000-masking"
    old.mkdir()
    (old / "drill.json").write_text(json.dumps({"id": "x", "components": ["nope"]}))
    hint = drills("hint")
    assert hint.returncode == 0 and "scaling, hint 1/" in hint.stdout
    assert "older drill" in hint.stderr and str(old) in hint.stderr


@pytest.mark.parametrize("change, problem", [
    (lambda d: d.pop("started_at"), "missing started_at"),
    (lambda d: d.update(components=["nope"]), "components"),
    (lambda d: d.update(status="done"), "status"),
    (lambda d: d.update(passed_at={"masking": "soon"}), "passed_at"),
])
def test_a_state_file_of_the_wrong_shape_is_refused(tmp_path, change, problem):
    Drill("d", ["masking"], 1.0, 15.0, False, True, workspace=tmp_path).save()
    assert Drill.load(tmp_path).components == ["masking"]
    data = json.loads((tmp_path / "drill.json").read_text())
    change(data)
    (tmp_path / "drill.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=problem):
        Drill.load(tmp_path)


@pytest.mark.parametrize("component", COMPONENTS)
def test_a_workspace_stubs_exactly_the_drilled_component(tmp_path, component):
    build_workspace(tmp_path / "w", [component])
    drilled = component_names(component)
    for module in MODULES:
        source = (tmp_path / "w" / f"{module}.py").read_text()
        ast.parse(source)
        reference = (ROOT / "solutions" / f"{module}.py").read_text()
        for name in _names(reference):
            stubbed = "NotImplementedError" in (definition_source(source, name) or "")
            expected = name in drilled.get(module, []) or name.split(".")[0] in drilled.get(module, [])
            assert stubbed == expected, f"{module}.{name}"


def _names(source: str) -> list[str]:
    """Every top-level def and method of a module, as `name` or `Class.method`."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names += [f"{node.name}.{m.name}" for m in node.body if isinstance(m, ast.FunctionDef)]
    return names


def test_an_unknown_component_gets_a_did_you_mean(drills):
    refused = drills("start", "masks")
    assert refused.returncode == 2 and "masks (did you mean masking?)" in refused.stderr
    assert not drills.root.exists() or not workspaces(drills.root)


def _without_docstrings(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0].value.value = ""
    return ast.dump(tree)


@pytest.mark.parametrize("module", MODULES)
def test_interview_stubs_hide_the_worded_steps_and_nothing_else(module):
    stub = pristine_stubs()[f"{module}.py"]
    hidden = hide_worded_steps(stub)
    assert "in words" in stub and "in words" not in hidden
    assert _without_docstrings(hidden) == _without_docstrings(stub)  # the code is the stub's
    for tag in re.findall(r"TODO \(([^)]*)\).*in words:", stub):
        assert f"TODO ({tag}): write it from memory" in hidden


def test_hiding_the_worded_steps_keeps_docstrings_closed_and_code_untouched():
    source = ('def f():\n    """Spec.\n\n    TODO (scaling), in words:\n      1. the key line."""\n'
              '    s = "TODO (scaling), in words:"\n    raise NotImplementedError\n')
    hidden = hide_worded_steps(source)
    assert "the key line" not in hidden and hidden.count('"""') == 2
    assert '    s = "TODO (scaling), in words:"' in hidden  # not a docstring
    assert "Spec." in hidden and "TODO (scaling): write it from memory" in hidden


def test_the_learners_code_is_the_definition_without_the_stubs_docstrings():
    stub = pristine_stubs()["attention.py"]
    assert learners_code(stub, "causal_mask") == "" and learners_code(stub, "MultiHeadAttention") == ""
    assert learners_code(stub, "nope") is None
    written = stub.replace('raise NotImplementedError("scaling: write attention_scores")',
                           "return q @ k.transpose(-2, -1) / q.size(-1) ** 0.5")
    mine = learners_code(written, "attention_scores")
    assert mine.startswith("def attention_scores(") and mine.endswith("return q @ k.transpose(-2, -1) / q.size(-1) ** 0.5")
    assert '"""' not in mine and "TODO" not in mine
    half = stub.replace('raise NotImplementedError("qkv_projection: write MultiHeadAttention.project_qkv")',
                        "return self.w_q(x), self.w_k(x), self.w_v(x)")
    mha = learners_code(half, "MultiHeadAttention")
    assert "return self.w_q(x)" in mha and "TODO" not in mha and '"""' not in mha
    assert learners_code(half, "MultiHeadAttention.__init__") == ""


def test_hint_without_a_name_moves_on_to_the_next_failing_component_with_hints_left(drills):
    from grader.course import load_course

    assert drills("start", "scaling", "masking").returncode == 0
    [workspace] = workspaces(drills.root)
    rungs = len(load_course(ROOT / "course.yml").component("scaling").hint_ladder)
    for n in range(1, rungs + 1):
        assert f"scaling, hint {n}/{rungs}" in drills("hint").stdout
    moved = drills("hint")  # scaling's ladder is used up: the next failing component
    assert moved.returncode == 0 and "masking, hint 1/" in moved.stdout, moved.stdout + moved.stderr
    exhausted = drills("hint", "scaling")
    assert exhausted.returncode == 1 and "No more hints for scaling" in exhausted.stdout

    state = json.loads((workspace / "drill.json").read_text())
    state.update(last_status={"scaling": "failed", "masking": "passed"})
    (workspace / "drill.json").write_text(json.dumps(state))
    none_left = drills("hint")  # masking passes and scaling has none left
    assert none_left.returncode == 1 and "No more hints for any failing component (scaling)" in none_left.stdout

    state.update(last_status={"scaling": "passed", "masking": "failed"}, hints_used={"masking": 1})
    (workspace / "drill.json").write_text(json.dumps(state))
    assert "masking, hint 2/" in drills("hint").stdout  # a passing component is skipped, hints left or not


def test_a_chinese_drill_holds_no_english_prose(drills):
    """start, hint, check, reveal and history in Chinese. The reveal's panels hold code (the reference's,
    with its English docstring and comments, and the learner's) and are left out; their titles are read."""
    from selftests.test_i18n import english_prose

    started = drills("--lang", "zh", "start", "masking")
    assert started.returncode == 0, started.stderr
    [workspace] = workspaces(drills.root)
    hint = drills("--lang", "zh", "hint")
    shutil.copy(ROOT / "solutions" / "attention.py", workspace / "attention.py")
    passed = drills("--lang", "zh", "check")
    revealed = drills("--lang", "zh", "reveal")
    shown = drills("--lang", "zh", "history")
    for run in (started, hint, passed, revealed, shown):
        assert run.returncode == 0, run.stdout + run.stderr
    assert "练习开始" in started.stdout and "提示 1/" in hint.stdout and "通过" in passed.stdout
    assert "参考实现：attention.causal_mask" in revealed.stdout
    assert "你的：attention.apply_mask" in revealed.stdout
    outside_panels = "\n".join(line for line in revealed.stdout.splitlines() if not line.lstrip().startswith("│"))
    for text in (started.stdout, hint.stdout, passed.stdout, outside_panels, shown.stdout):
        assert english_prose(text) == [], text
