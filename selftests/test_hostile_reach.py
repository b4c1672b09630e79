"""Hostile submissions against what a worker can reach and spend (issue 29, properties 1 and 4).

Property 1, a worker sees an allow-list, fail-closed: a thief that copies a classmate's folder (graded from the
class folder and from its parent, where `python -m` puts the working directory on sys.path), one that takes the
grader's own stand-ins from disk (the checkout's, an installed package's, any sys.path entry's), one that searches
the disk (`/`, `/home`, `$HOME`, `/tmp`, `/work`, ...) for a reference, and one that reads the other private
copies in the shared /tmp under the `users` fallback: each scores 0. Where the intended protection cannot be had,
`grade` and `grade-all` refuse (exit 3, said on stderr) unless a weaker one is accepted; `check` warns and runs.

Property 4, budgets for the whole tree: a fork bomb and a memory hog spread over forked children stay within the
worker's cgroup (where the grader can make one: as root here), and a component whose every call sleeps just under
the check's deadline no longer takes the whole time nor keeps its points.

Everything runs as root and as an ordinary user where the tests run as root (see selftests/test_hostile.py).
`DRILLS_SELFTEST_KIT=<checkout>` grades with another checkout of the kit (to see an attack succeed before a fix).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from selftests.hostile import thieves
from selftests.test_hostile import USERS, full_marks, run_as

ROOT = Path(__file__).resolve().parent.parent
KIT = Path(os.environ.get("DRILLS_SELFTEST_KIT", ROOT))
pytestmark = pytest.mark.timeout(900)
TIMEOUT_S = 5


def materialize(route: str, dest: Path, base: Path = ROOT / "exercises") -> Path:
    """The stubs (or `base`), each file ending with a thief whose `_route(name)` is `route` (see thieves.py);
    every route here reads files, so each thief searches once per name."""
    return thieves.materialize_code(route, dest, base)


# each route's body: return a working `name` from somewhere a worker must not reach, or None
CLASSMATE = """
    import os, sys
    folders = [{classmate!r}, os.path.dirname(_HERE)]
    for entry in [*sys.path, os.getcwd(), {cwd!r}]:  # python -m: the working directory, the class folder
        try:
            folders += [os.path.join(entry, d) for d in os.listdir(entry)]
            folders += [os.path.join(entry, d, e) for d in os.listdir(entry) if os.path.isdir(os.path.join(entry, d))
                        for e in os.listdir(os.path.join(entry, d))]
        except OSError:
            pass
    for folder in folders:
        if os.path.realpath(folder) != os.path.realpath(_HERE):
            found = _from_files(folder, name)
            if found is not None:
                return found
"""

GRADER_INTERNALS = """
    import glob, importlib.util, os, sys
    places = []
    try:
        import grader.paths
        places.append(str(grader.paths.STANDINS))
    except Exception:
        pass
    spec = importlib.util.find_spec("grader")
    for location in (spec.submodule_search_locations or []) if spec else []:
        places.append(os.path.join(location, "sandbox", "standins"))
    import torch
    site = os.path.dirname(os.path.dirname(torch.__file__))  # a pip-installed grader lies beside torch
    places += [os.path.join(site, "grader", "sandbox", "standins"), *(os.path.join(p, "grader", "sandbox", "standins")
               for p in sys.path), *glob.glob("/usr/**/site-packages/grader/sandbox/standins", recursive=False),
               *glob.glob("/usr/local/lib/python3*/*-packages/grader/sandbox/standins")]
    for place in places:
        try:
            files = sorted(os.listdir(place))
        except OSError:
            continue
        for file in files:
            try:
                found = _exec_source(open(os.path.join(place, file)).read(), name)
            except OSError:
                continue
            if found is not None:
                return found
"""

SEARCH = """
    import os
    seen = 0
    stack = [(p, 0) for p in ("/", "/home", os.path.expanduser("~"), os.environ.get("HOME", "/"), "/tmp", "/work",
                               "/srv", "/root", "/var/tmp", "/mnt", os.getcwd())]
    while stack and seen < 40000:
        folder, depth = stack.pop()
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        seen += len(names)
        if "attention.py" in names and os.path.realpath(folder) != os.path.realpath(_HERE):
            found = _from_files(folder, name)
            if found is not None:
                return found
        if depth < 5:
            stack += [(os.path.join(folder, n), depth + 1) for n in names if n not in ("proc", "sys", "dev")
                      and os.path.isdir(os.path.join(folder, n)) and not os.path.islink(os.path.join(folder, n))]
"""

OTHER_COPIES = """
    import glob, os, time
    while time.time() < {until}:  # a classmate graded at the same time: its private copy in the shared /tmp
        for folder in glob.glob("/tmp/drills-grading-*/submission") + glob.glob(os.path.join(
                tempfile_dir(), "drills-grading-*", "submission")):
            if os.path.realpath(folder) != os.path.realpath(_HERE):
                found = _from_files(folder, name)
                if found is not None:
                    return found
        time.sleep(0.05)


def tempfile_dir():
    import tempfile
    return tempfile.gettempdir()
"""


def grade(submission: Path, user: str, *, cwd: Path | None = None, env: dict | None = None,
          extra: tuple[str, ...] = (), timeout_s: float = TIMEOUT_S) -> tuple[subprocess.CompletedProcess, dict | None]:
    """`python -m grader grade` as `user`, from `cwd` (default: the kit); (the process, results.json or None)."""
    results = submission.parent / f"results-{user}.json"
    results.unlink(missing_ok=True)
    full_env = {**os.environ, **(env or {})}
    if KIT != ROOT:
        full_env["PYTHONPATH"] = str(KIT)
    proc = subprocess.run([*run_as(user), sys.executable, "-m", "grader", "grade", str(submission), "--results",
                           str(results), "--format", "json", "--timeout", str(timeout_s), *extra],
                          cwd=cwd or KIT, env=full_env, capture_output=True, text=True, timeout=900)
    return proc, json.loads(results.read_text()) if results.exists() else None


def scores(data: dict) -> dict[str, float]:
    return {c["id"]: c["score"] for c in data["components"]}


def earned(data: dict) -> dict[str, float]:
    return {c: s for c, s in scores(data).items() if s}


@pytest.fixture
def place(tmp_path_factory):
    """A folder every user can reach and write."""
    folder = Path(tempfile.mkdtemp(prefix="drills-reach-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def shared(path: Path) -> Path:
    for dirpath, dirnames, filenames in os.walk(path):
        os.chmod(dirpath, 0o777)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)
    return path


# --------------------------------------------------------------------------- property 1: the allow-list


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("where", ["class", "parent"])
def test_a_classmates_folder_is_out_of_reach(place, user, where):
    """Graded from the class folder, or the folder above it: the working directory is on sys.path, never in reach."""
    klass = place / "class"
    klass.mkdir()
    shutil.copytree(ROOT / "solutions", klass / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    cwd = klass if where == "class" else place
    materialize(CLASSMATE.replace("{classmate!r}", repr(str(klass / "alice"))).replace("{cwd!r}", repr(str(cwd))),
                klass / "bob")
    shared(place)
    proc, data = grade(klass / "bob", user, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data["protection"] in ("namespaces", "landlock")
    assert earned(data) == {}, f"bob copied alice from {where}: {earned(data)}"


@pytest.mark.parametrize("user", USERS)
def test_the_graders_own_files_are_out_of_reach(place, user):
    submission = shared(materialize(GRADER_INTERNALS, place / "submission"))
    proc, data = grade(submission, user)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert earned(data) == {}


@pytest.mark.parametrize("user", USERS)
def test_searching_the_disk_finds_no_reference(place, user):
    decoy = place / "home" / "someone" / "solutions"  # a reference where a search would look
    shutil.copytree(ROOT / "solutions", decoy, ignore=shutil.ignore_patterns("__pycache__"))
    submission = materialize(SEARCH, place / "submission")
    shared(place)
    proc, data = grade(submission, user)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert earned(data) == {}


def test_a_worker_sees_only_the_allow_list():
    """By construction: no sys.path entry, working directory, project or site-packages beyond the allowed
    distributions is in what a worker is given."""
    from grader.sandbox import confine

    view = confine.visible()
    everything = [*view.roots, *view.entries]
    assert not any(Path(p).is_relative_to(ROOT) and not Path(p).is_relative_to(Path(sys.prefix).resolve())
                   for p in everything), everything
    assert os.getcwd() not in everything
    assert not any(Path(p).name == "grader" or "transformer_drills" in p for p in view.entries), view.entries
    import torch

    site = str(Path(torch.__file__).resolve().parent.parent)
    assert site not in view.roots and (site in view.masks or not any(Path(site).is_relative_to(r) for r in view.roots))
    assert not any(Path(p).is_relative_to(site) for p in view.exact if Path(p).name in ("grader", "pytest", "yaml"))


@pytest.mark.skipif(os.geteuid() != 0, reason="the users protection is root's")
def test_users_fallback_keeps_other_private_copies_closed(place):
    """Two submissions graded at once under `users`: the thief scans /tmp for the other's private copy until
    `until`, while every import of the other's positional.py waits for it (her grading lasts that long, no longer:
    an import that slept six seconds each time made hers, and the test, last the whole submission budget)."""
    until = time.time() + 30
    alice = shutil.copytree(ROOT / "solutions", place / "alice" / "submission",
                            ignore=shutil.ignore_patterns("__pycache__"))
    (alice / "positional.py").write_text((alice / "positional.py").read_text()
                                         + f"\nimport time\ntime.sleep(max(0.0, {until} - time.time()))\n")
    bob = materialize(OTHER_COPIES.replace("{until}", repr(until)), place / "bob" / "submission")
    shared(place)
    env = {"DRILLS_SANDBOX": "users"}
    out: dict = {}
    first = threading.Thread(target=lambda: out.update(alice=grade(alice, "root", env=env, timeout_s=10)))
    first.start()
    time.sleep(1.0)
    out["bob"] = grade(bob, "root", env=env, timeout_s=10)
    first.join()
    proc, data = out["bob"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data["protection"] == "users" and earned(data) == {}
    from grader.source import COPY_GID_BASE, private_copy

    with private_copy(ROOT / "solutions", reachable=True) as (folder, _):
        info = os.stat(Path(folder).parent)
        assert info.st_mode & 0o777 == 0o710 and info.st_gid >= COPY_GID_BASE


# --------------------------------------------------------------------------- refusal below the intended protection

WEAKER = {"DRILLS_SANDBOX_UNAVAILABLE": "namespaces,landlock"}


@pytest.mark.parametrize("user", USERS)
def test_grading_refuses_below_the_intended_protection(place, user):
    submission = shared(shutil.copytree(ROOT / "solutions", place / "submission",
                                        ignore=shutil.ignore_patterns("__pycache__")))
    proc, data = grade(submission, user, env=WEAKER)
    assert proc.returncode == 3 and data is None, proc.stderr[-2000:]
    assert "--accept-protection" in proc.stderr and "not available" in proc.stderr
    fallback = "users" if user == "root" else "none"
    proc, data = grade(submission, user, env=WEAKER, extra=("--accept-protection", fallback))
    assert proc.returncode == 0 and data["protection"] == fallback, proc.stderr[-2000:]
    proc, data = grade(submission, user, env={**WEAKER, "DRILLS_SANDBOX_UNAVAILABLE": "namespaces,landlock,users"},
                       extra=("--accept-protection", "users"))
    assert proc.returncode == 3 and data is None, "accepting users does not accept none"
    batch = subprocess.run([*run_as(user), sys.executable, "-m", "grader", "grade-all", str(place),
                            "--out", str(place / "out")], cwd=KIT, env={**os.environ, **WEAKER},
                           capture_output=True, text=True, timeout=300)
    assert batch.returncode == 3 and "--accept-protection" in batch.stderr and not (place / "out").exists()
    check = subprocess.run([*run_as(user), sys.executable, "-m", "grader", "check", "masking", "--target",
                            str(submission)], cwd=KIT, env={**os.environ, **WEAKER}, capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0 and "WARNING" in check.stderr and "12/12" in check.stdout


# --------------------------------------------------------------------------- property 4: budgets

def _with(base: Path, dest: Path, file: str, code: str) -> Path:
    shutil.copytree(base, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / file).write_text((dest / file).read_text() + code)
    return dest


def _watch(mark: str, stop: threading.Event, seen: dict) -> None:
    """The most processes carrying `mark` alive at once, and the most memory of their own they held together."""
    while not stop.is_set():
        count, rss = 0, 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() != mark:
                        continue
                with open(f"/proc/{entry}/statm") as f:  # resident less shared: what the process holds of its own
                    fields = f.read().split()
                    rss += (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")
                count += 1
            except OSError:
                continue
        seen["count"], seen["rss"] = max(seen.get("count", 0), count), max(seen.get("rss", 0), rss)
        time.sleep(0.05)


def cgroups_here(user: str) -> bool:
    from grader.sandbox import budget

    return user == "root" and os.geteuid() == 0 and bool(budget._base())


FORK_BOMB = """

import ctypes as _ctypes, os as _os, time as _time
def _bomb():
    _ctypes.CDLL(None).prctl(15, {mark!r}.encode(), 0, 0, 0)  # PR_SET_NAME: the test counts them
    until = _time.monotonic() + 6
    while _time.monotonic() < until:
        try:
            if _os.fork() == 0:
                _time.sleep(30)
                _os._exit(0)
        except OSError:
            _time.sleep(0.01)
    return 0
_sinusoidal = sinusoidal_positional_encoding
_bombed = []
def sinusoidal_positional_encoding(*args, **kwargs):
    if not _bombed:  # once per worker
        _bombed.append(_bomb())
    return _sinusoidal(*args, **kwargs)
"""


@pytest.mark.parametrize("user", USERS)
def test_a_fork_bomb_is_bounded_and_costs_a_classmate_nothing(place, user):
    from grader.sandbox.budget import PIDS

    mark = f"bomb{os.getpid() % 10000}"
    bomb = _with(ROOT / "solutions", place / "bomb" / "submission", "positional.py",
                 FORK_BOMB.replace("{mark!r}", repr(mark)))
    classmate = shutil.copytree(ROOT / "solutions", place / "classmate" / "submission",
                                ignore=shutil.ignore_patterns("__pycache__"))
    shared(place)
    stop, seen, out = threading.Event(), {}, {}
    watcher = threading.Thread(target=_watch, args=(mark, stop, seen))
    watcher.start()
    other = threading.Thread(target=lambda: out.update(classmate=grade(classmate, user, timeout_s=20)))
    try:
        other.start()
        proc, data = grade(bomb, user, timeout_s=20)
        other.join()
    finally:
        stop.set()
        watcher.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    marks = full_marks()
    assert {c: s for c, s in scores(data).items() if c != "sinusoidal_encoding"} == \
        pytest.approx({c: p for c, p in marks.items() if c != "sinusoidal_encoding"})
    assert scores(out["classmate"][1]) == pytest.approx(marks), "the bomb cost a classmate points"
    assert seen.get("count", 0) <= PIDS + 8, f"{seen.get('count')} processes of one worker's tree at once"


MEMORY_HOG = """

import os as _os, signal as _signal, time as _time
def _hog():
    read_end, write_end = _os.pipe()
    children = {}
    for index in range(6):
        pid = _os.fork()
        if pid == 0:
            try:
                held = []
                for _ in range(14):  # 700 MB, touched, 50 MB at a time; each step told to the parent
                    held.append(b"x" * (50 << 20))
                    _os.write(write_end, bytes([index]))
                _time.sleep(3)
            finally:
                _os._exit(0)
        children[pid] = index
    _os.close(write_end)
    held_by, most, killed = [0] * 6, 0, 0
    _os.set_blocking(read_end, False)
    while children:
        try:
            for index in _os.read(read_end, 4096) or b"":
                held_by[index] += 50
        except BlockingIOError:
            pass
        most = max(most, sum(held_by))
        for pid in list(children):
            done, status = _os.waitpid(pid, _os.WNOHANG)
            if done:  # it ended (or the OOM killer ended it): its memory is free again
                held_by[children.pop(pid)] = 0
                killed += _os.WIFSIGNALED(status)
        _time.sleep(0.005)
    raise RuntimeError(f"held at most {most} MB at once; {killed} killed")
_sinusoidal = sinusoidal_positional_encoding
_hogged = []
def sinusoidal_positional_encoding(*args, **kwargs):
    if not _hogged:  # once per worker
        _hogged.append(1)
        _hog()
    return _sinusoidal(*args, **kwargs)
"""


@pytest.mark.parametrize("user", USERS)
def test_memory_across_forked_children_is_bounded_where_cgroups_are(place, user):
    """Six children of 700 MB each: over the worker's budget (2 GB and the slack) together, each under its own
    per-process limit. With cgroups (root here) the tree never holds more than the budget; without (an
    ordinary user) only the per-process limit applies: this test then only checks that grading completes."""
    from grader.course import load_course
    from grader.sandbox.budget import SLACK_MB

    hog = _with(ROOT / "solutions", place / "hog" / "submission", "positional.py", MEMORY_HOG)
    shared(place)
    if not cgroups_here(user):
        pytest.skip("no cgroups for this user: the documented fallback bounds memory per process only")
    proc, data = grade(hog, user, timeout_s=20)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import re

    told = [int(m) for comp in data["components"] for c in comp["checks"] if c["message"]
            for m in re.findall(r"held at most (\d+) MB", c["message"])]
    budget_mb = load_course().memory_mb + SLACK_MB
    # (the count lags the kernel by the steps told between a kill and its reaping: a few 50 MB steps)
    assert told and max(told) <= budget_mb + 512, f"{told} MB in one worker's tree (budget {budget_mb} MB)"


SLEEPER = """

import time as _time
_sinusoidal = sinusoidal_positional_encoding
def sinusoidal_positional_encoding(*args, **kwargs):
    _time.sleep({seconds})  # just under the check's deadline, every time
    return _sinusoidal(*args, **kwargs)
"""


@pytest.mark.parametrize("user", USERS)
def test_sleeping_under_every_deadline_neither_pays_nor_takes_the_whole_time(place, user):
    from grader.course import load_course

    timeout = 2.0
    course = load_course()
    component_budget = course.component_timeout * timeout / course.timeout
    sleeper = _with(ROOT / "solutions", place / "sleeper" / "submission", "positional.py",
                    SLEEPER.replace("{seconds}", str(timeout * 0.45)))
    shared(place)  # (the ordinary user writes the results beside the submission)
    started = time.monotonic()
    proc, data = grade(sleeper, user, timeout_s=timeout)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    marks = full_marks()
    assert scores(data)["sinusoidal_encoding"] < marks["sinusoidal_encoding"]
    # the budget of student time, or a check's own deadline where one round trip asks for several sizes at once
    assert any("timed out" in c["message"] for comp in data["components"] if comp["id"] == "sinusoidal_encoding"
               for c in comp["checks"] if c["message"])
    assert {c: s for c, s in scores(data).items() if c != "sinusoidal_encoding"} == \
        pytest.approx({c: p for c, p in marks.items() if c != "sinusoidal_encoding"})
    assert seconds < component_budget + 60, f"{seconds:.0f} s"


NAPPER = """

import time as _time
_causal_mask = causal_mask
def causal_mask(*args, **kwargs):
    _time.sleep(0.5)  # far under the check's deadline, every time
    return _causal_mask(*args, **kwargs)
"""


def test_a_component_that_naps_in_every_call_is_stopped_by_its_budget(tmp_path):
    """Each call well under the check's deadline, but many of them: past the component's budget of student time
    every later call fails at once, told as the budget, and the component's grading ends soon after it."""
    import dataclasses

    from grader.course import load_course
    from grader.engine.runner import run_checks

    course = dataclasses.replace(load_course(), component_timeout=3.0)
    napper = _with(ROOT / "solutions", tmp_path / "napper", "attention.py", NAPPER)
    started = time.monotonic()
    masking = run_checks(napper, ["masking"], course=course, processes=1).components[0]
    seconds = time.monotonic() - started
    messages = [c.message for c in masking.checks if c.message]
    assert any("`masking` used up its 3 s of student time (all its checks together)" in m for m in messages), messages
    assert masking.score < masking.max_score
    assert seconds < 3.0 + 20, f"{seconds:.0f} s"


@pytest.fixture(scope="module")
def installed_kit():
    """A virtual environment with the kit installed by `pip install .` (not -e), reusing this one's torch through a
    .pth file: its site-packages holds `grader/`, stand-ins included."""
    venv = Path(tempfile.mkdtemp(prefix="drills-pip-"))
    try:
        subprocess.run([os.path.join(sys.base_prefix, "bin", "python3"), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        import torch

        (site / "_kit_deps.pth").write_text(str(Path(torch.__file__).resolve().parent.parent) + "\n")
        source = venv / "source"
        subprocess.run(f"git -C {ROOT} archive HEAD | (mkdir {source} && tar -x -C {source})", shell=True, check=True)
        subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                        "--no-deps", "--no-build-isolation", str(source)], check=True, capture_output=True)
        shutil.rmtree(source)
        assert (site / "grader" / "sandbox" / "standins").is_dir()
        subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)
        venv.chmod(0o755)
        yield venv / "bin" / "python"
    except (subprocess.CalledProcessError, StopIteration) as exc:
        pytest.skip(f"no non-editable install here: {exc}")
    finally:
        shutil.rmtree(venv, ignore_errors=True)


@pytest.mark.parametrize("user", USERS)
def test_an_installed_graders_files_are_out_of_reach(place, user, installed_kit):
    """Graded from the checkout by a Python whose site-packages holds the kit installed with `pip install .`."""
    submission = shared(materialize(GRADER_INTERNALS, place / "submission"))
    results = place / "results.json"
    proc = subprocess.run([*run_as(user), str(installed_kit), "-m", "grader", "grade", str(submission), "--results",
                           str(results), "--format", "json", "--timeout", str(TIMEOUT_S)], cwd=KIT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(results.read_text())
    assert data["protection"] in ("namespaces", "landlock") and earned(data) == {}


@pytest.mark.parametrize("user", USERS)
def test_an_installed_grader_enforces_the_from_scratch_rule_as_the_checkout_does(place, user, installed_kit):
    """The guards decide "trusted" by the stand-ins' code objects, wherever the kit lives: installed with
    `pip install .`, the reference redone with forbidden C functions (the hardest evasion to see) earns nothing
    in those five components and loses nothing elsewhere."""
    from selftests.hostile import scratch

    submission = shared(scratch.materialize("c_name", place / "submission"))
    results = place / "results.json"
    proc = subprocess.run([*run_as(user), str(installed_kit), "-m", "grader", "grade", str(submission), "--results",
                           str(results), "--format", "json", "--timeout", str(TIMEOUT_S)], cwd=KIT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    marks = full_marks()
    assert scores(json.loads(results.read_text())) == pytest.approx(
        {c: 0 if c in scratch.COMPONENTS else marks[c] for c in marks}, abs=0.01)


@pytest.mark.parametrize("user", USERS)
def test_an_installed_grader_takes_replies_as_untrusted_data_as_the_checkout_does(place, user, installed_kit):
    """Installed with `pip install .`: a worker that sets the crossed-over flag in every reply is graded again
    once, not for ever, and costs only its own component."""
    from selftests.hostile.replies import REPLY_ATTACKS, materialize as materialize_reply

    attack = next(a for a in REPLY_ATTACKS if a.name == "crossed_flag_every_call")
    submission = shared(materialize_reply(attack, place / "submission"))
    results = place / "results.json"
    started = time.monotonic()
    proc = subprocess.run([*run_as(user), str(installed_kit), "-m", "grader", "grade", str(submission), "--results",
                           str(results), "--format", "json", "--timeout", str(TIMEOUT_S)], cwd=KIT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    marks, got = full_marks(), scores(json.loads(results.read_text()))
    assert {c: s for c, s in got.items() if c not in attack.may_lose} == \
        pytest.approx({c: p for c, p in marks.items() if c not in attack.may_lose})
    assert time.monotonic() - started < 300


def test_an_installed_grader_without_its_course_says_why(tmp_path, installed_kit):
    """`pip install .` copies the grader without course.yml and the checks: run outside a checkout, it says so
    and how to run it, in one line, instead of failing on a missing file."""
    proc = subprocess.run([str(installed_kit), "-m", "grader", "check", "--target", str(ROOT / "solutions")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "has no course beside it" in proc.stderr and "pip install -e" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
