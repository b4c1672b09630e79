"""Hostile submissions: the grader always finishes, writes its report, and gives no unearned point.

Every attack is graded twice where the tests run as root: as root (as on
Gradescope), and as an ordinary user created for the test (an instructor's
laptop, a teaching assistant, a non-root CI runner).
"""
from __future__ import annotations

import functools
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.contract import COMPONENTS
from grader.sandbox import confine
from selftests.hostile import ATTACKS, conftest_attack, thieves, unreadable_files_attack

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 5  # short, so that the hangs cost little; long enough for any check under load
ORDINARY_USER = "drills-selftest"
SECRET_VARIABLE = "DRILLS_SELFTEST_SECRET"
USERS = ["root", "ordinary"] if os.geteuid() == 0 else ["ordinary"]
pytestmark = pytest.mark.timeout(900)


@dataclass
class Graded:
    returncode: int
    stderr: str
    scores: dict[str, float]
    outputs: dict[str, list[str]]
    seconds: float
    evidence: Path
    text: str = ""  # results.json as written
    protection: str = ""
    seen: set[int] = field(default_factory=set)  # pids of processes that carried the attack's mark


@functools.lru_cache(maxsize=None)
def run_as(user: str) -> tuple[str, ...]:
    """The command prefix that runs a command as `user` ("root": as is; "ordinary": a user without privileges)."""
    if user == "root" or os.geteuid() != 0:
        return ()
    try:
        pwd.getpwnam(ORDINARY_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ORDINARY_USER],
                       check=True, capture_output=True)
    prefix = ["runuser", "-u", ORDINARY_USER, "--"]
    probe = subprocess.run([*prefix, sys.executable, "-c", "import grader.cli, torch"], cwd=ROOT, capture_output=True)
    assert probe.returncode == 0, (f"an ordinary user cannot run this checkout's Python and grader ({ROOT}); "
                                   f"make the checkout world-readable:\n{probe.stderr.decode()[-500:]}")
    return tuple(prefix)


def _marked(mark: str) -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            for name in ("cmdline", "comm"):
                try:
                    with open(f"/proc/{entry}/{name}", "rb") as f:
                        if mark.encode() in f.read():
                            pids.add(int(entry))
                except OSError:
                    pass
    return pids


def grade(submission: Path, evidence: Path, user: str = USERS[0], mark: str = "") -> Graded:
    results = submission.parent / "results.json"
    env = {**os.environ, SECRET_VARIABLE: "s3cret-" + mark}
    started = time.monotonic()
    seen: set[int] = set()
    proc = subprocess.Popen(
        [*run_as(user), sys.executable, "-m", "grader", "grade", str(submission), "--results", str(results),
         "--timeout", str(TIMEOUT_S), "--format", "json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    while proc.poll() is None and mark:
        seen |= _marked(mark)
        time.sleep(0.02)
    _, stderr = proc.communicate(timeout=600)
    seconds = time.monotonic() - started
    text = results.read_text()
    data = json.loads(text)
    scores = {c["id"]: c["score"] for c in data["components"]}
    outputs = {c["id"]: [k["message"] for k in c["checks"] if k["message"]] for c in data["components"]}
    assert data["score"] == pytest.approx(sum(scores.values()), abs=0.01)
    return Graded(proc.returncode, stderr, scores, outputs, seconds, evidence, text, data.get("protection", ""), seen)


def evidence_folder(base: Path, name: str) -> Path:
    """A folder any user can reach and write, where attacks leave what they managed."""
    folder = base / name
    folder.mkdir()
    folder.chmod(0o777)
    return folder


class Listener:
    """A server on the grading machine that records who connects (nobody may)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()


@pytest.fixture(scope="session")
def listener():
    server = Listener()
    yield server
    server.stop.set()
    server.sock.close()


@pytest.fixture(scope="session")
def secret_file():
    """A file only root may read, as a submission's symbolic link would point at."""
    folder = Path(tempfile.mkdtemp(prefix="drills-secret-"))
    path = folder / "secret.txt"
    path.write_text("TOP-SECRET-CONTENT\n")
    path.chmod(0o600)
    yield path
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session", params=USERS)
def hostile(request, listener, secret_file):
    """Every attack and thief graded once per user, two at a time (these machines have two cores)."""
    user = request.param
    base = Path(tempfile.mkdtemp(prefix="drills-hostile-"))
    base.chmod(0o755)
    jobs = {}
    for attack in ATTACKS:
        evidence = evidence_folder(base, f"{attack.name}-evidence")
        mark = str(secrets.randbelow(10**8) + 10**8)
        jobs[attack.name] = (attack.materialize(base / attack.name / "submission", evidence, mark, listener.port),
                             evidence, user, mark)
    jobs["conftest"] = (conftest_attack(base / "conftest" / "submission"), evidence_folder(base, "conftest-evidence"),
                        user, "")
    jobs["unreadable"] = (unreadable_files_attack(base / "unreadable" / "submission", secret_file),
                          evidence_folder(base, "unreadable-evidence"), user, "")
    for route in thieves.ROUTES:
        jobs[f"thief:{route}"] = (thieves.materialize(route, base / f"thief-{route}" / "submission"),
                                  evidence_folder(base, f"thief-{route}-evidence"), user, "")
    for job in jobs.values():  # the ordinary user writes its results next to the submission
        job[0].parent.chmod(0o777)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(grade, *job) for name, job in jobs.items()}
        graded = {name: future.result() for name, future in futures.items()}
    graded["_marks"] = {name: job[3] for name, job in jobs.items()}
    graded["_user"] = user
    yield graded
    shutil.rmtree(base, ignore_errors=True)


def full_marks() -> dict[str, float]:
    from grader.course import load_course

    return {c.id: c.points for c in load_course().components}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_earns_nothing_and_costs_only_its_component(hostile, attack):
    graded = hostile[attack.name]
    assert graded.returncode == 0, graded.stderr[-3000:]
    full = full_marks()
    for component in COMPONENTS:
        if component in attack.may_lose:
            assert graded.scores[component] < full[component], f"{attack.description}: {component} kept full marks"
        else:
            assert graded.scores[component] == pytest.approx(full[component], abs=0.01), \
                f"{attack.description}: {component} lost points: {graded.outputs[component]}"
    assert graded.seconds < 120, f"grading took {graded.seconds:.0f} s"
    assert sorted(p.name for p in graded.evidence.iterdir()) == [], "the attack got something done"


def test_the_sandbox_was_in_force(hostile):
    protections = {graded.protection for name, graded in hostile.items() if not name.startswith("_")}
    assert protections == {"namespaces"}, protections


@pytest.mark.skipif(os.geteuid() != 0 or not confine.works(confine.NAMESPACES), reason="root with namespaces only")
def test_each_worker_is_born_pid_1_of_a_pid_namespace_of_its_own(tmp_path):
    """As root the zygote forks each worker straight into a new PID namespace (confine.fork), and its own next
    children are born in its own namespace again."""
    plan = confine.Plan.for_copy(confine.NAMESPACES, tmp_path / "submission")
    own = os.readlink("/proc/self/ns/pid")
    children, seen = [], []
    for _ in range(2):  # both alive at once: a namespace's number may be reused once it is gone
        answer, told = os.pipe()
        go, wait = os.pipe()
        pid = confine.fork(plan)
        if pid == 0:
            for other in [wait, *(w for _, w in children)]:
                os.close(other)  # (the second child would keep the first one's pipe open)
            os.write(told, f"{os.getpid()} {os.readlink('/proc/self/ns/pid')}".encode())
            os.read(go, 1)
            os._exit(0)
        os.close(told)
        os.close(go)
        seen.append(os.read(answer, 200).decode().split())
        children.append((pid, wait))
        assert os.readlink("/proc/self/ns/pid_for_children") == own
    for pid, wait in children:
        os.close(wait)
        os.waitpid(pid, 0)
    assert [pid for pid, _ in seen] == ["1", "1"]
    assert len({ns for _, ns in seen} | {own}) == 3, seen


def test_hang_is_reported_as_a_timeout_naming_the_function(hostile):
    outputs = hostile["hang"].outputs["head_splitting"]
    assert any(f"timed out after {TIMEOUT_S:g} s in `attention.split_heads`" in o for o in outputs), outputs


def test_crash_is_reported_as_a_crash(hostile):
    outputs = hostile["segfault"].outputs["scaling"]
    assert any("SIGSEGV" in o for o in outputs), outputs


def test_import_time_exit_is_reported_with_the_file(hostile):
    outputs = hostile["os_exit_at_import"].outputs["sinusoidal_encoding"]
    assert all("positional.py" in o for o in outputs), outputs


@pytest.mark.parametrize("name", ["stray_process", "pid_hopper"])
def test_stray_processes_were_started_and_are_gone(hostile, name):
    graded = hostile[name]
    assert graded.seen, "the attack did not get to start its processes, so the test proves nothing"
    time.sleep(0.2)
    assert not [pid for pid in _marked(hostile["_marks"][name]) if alive(pid)], "a process outlived grading"


def test_the_environment_does_not_reach_student_code(hostile):
    graded = hostile["environment"]
    assert graded.outputs["sinusoidal_encoding"], "the attack's message did not come back"
    assert "s3cret-" not in graded.text
    assert "PATH" in graded.text, "the attack did not get to print the environment it sees"


def test_scratch_space_is_limited_and_left_clean(hostile):
    mark = hostile["_marks"]["fill_tmp"]
    leftovers = [p for folder in ("/tmp", "/dev/shm", os.path.expanduser("~")) for p in Path(folder).glob(f"fill{mark}")]
    assert leftovers == []


def test_no_connection_reaches_the_machine(hostile, listener):
    assert hostile["network"].returncode == 0
    assert listener.connections == 0


def test_conftest_and_test_files_in_the_submission_are_ignored(hostile):
    graded = hostile["conftest"]
    assert graded.returncode == 0
    assert graded.scores["sinusoidal_encoding"] == 0
    assert graded.scores["head_splitting"] == pytest.approx(full_marks()["head_splitting"])


def test_links_and_fifos_are_refused_and_nothing_is_opened_through_them(hostile, secret_file):
    graded = hostile["unreadable"]
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert graded.scores["kv_cache"] == 0 and graded.scores["sinusoidal_encoding"] == 0
    assert any("symbolic link" in o for o in graded.outputs["kv_cache"]), graded.outputs["kv_cache"]
    assert any("not a regular file" in o for o in graded.outputs["sinusoidal_encoding"])
    assert graded.scores["masking"] == pytest.approx(full_marks()["masking"])
    assert secret_file.stat().st_mode & 0o777 == 0o600
    assert "TOP-SECRET" not in graded.text


@pytest.mark.parametrize("route", list(thieves.ROUTES))
def test_no_answer_within_reach(hostile, route):
    graded = hostile[f"thief:{route}"]
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert {c: s for c, s in graded.scores.items() if s} == {}, f"the thief took points by {route}"


def test_thieves_would_succeed_without_the_sandbox(tmp_path):
    """The routes are real: with no sandbox, the reference on disk and git are in reach."""
    submission = thieves.materialize("files", tmp_path / "submission")
    env = {**os.environ, "DRILLS_SANDBOX": "none"}
    results = tmp_path / "results.json"
    subprocess.run([sys.executable, "-m", "grader", "grade", str(submission), "--results", str(results), "--format",
                    "json", "--timeout", str(TIMEOUT_S)], cwd=ROOT, env=env, capture_output=True, timeout=300, check=True)
    data = json.loads(results.read_text())
    assert data["protection"] == "none" and data["score"] > 50


def test_worker_cannot_read_solutions_or_checks(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="drills-evidence-"))
    base.chmod(0o755)
    evidence = evidence_folder(base, "evidence")
    attack = next(a for a in ATTACKS if a.name == "forged_results")
    submission = attack.materialize(tmp_path / "submission", evidence)
    probe = (submission / "kv_cache.py").read_text() + (
        "\nimport os as _os\n"
        f"for _path in {str(ROOT / 'solutions' / 'attention.py')!r}, {str(ROOT / 'tests' / 'test_masking.py')!r}:\n"
        "    try:\n"
        "        open(_path).read()\n"
        "        raise RuntimeError('read ' + _path)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    (submission / "kv_cache.py").write_text(probe)
    graded = grade(submission, evidence)
    assert graded.scores == pytest.approx(full_marks(), abs=0.01)
    shutil.rmtree(evidence.parent, ignore_errors=True)


def test_the_grader_waits_for_every_process_it_started(tmp_path):
    """Nothing the grader started is still running, or handed to another parent, once it has exited."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    attack = next(a for a in ATTACKS if a.name == "pid_hopper")
    mark = str(secrets.randbelow(10**8) + 10**8)
    submission = attack.materialize(tmp_path / "submission", evidence_folder(tmp_path, "evidence"), mark)
    def children() -> set[int]:
        found = set()
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rpartition(")")[2].split()[1]) == os.getpid():
                        found.add(int(entry))
            except (OSError, ValueError):
                pass
        return found

    before = children()  # (other tests of this session may keep processes of their own)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: what the grader leaves behind would come to this process
    try:
        for sandbox in ("namespaces", "landlock"):
            result = subprocess.run([sys.executable, "-m", "grader", "grade", str(submission), "--results",
                                     str(tmp_path / "r.json"), "--timeout", str(TIMEOUT_S)], cwd=ROOT,
                                    env={**os.environ, "DRILLS_SANDBOX": sandbox}, capture_output=True, timeout=300)
            assert result.returncode == 0, result.stderr[-2000:]
            assert children() - before == set(), f"with {sandbox}: the grader left processes behind"
            assert not [pid for pid in _marked(mark) if alive(pid)]
    finally:
        libc.prctl(36, 0, 0, 0, 0)


FALLBACKS = [("landlock", ("files", "git", "import_standins", "search_disk"))]
if os.geteuid() == 0:  # other students' folders are only as closed as their permissions under "users"
    FALLBACKS.append(("users", ("files", "git", "import_standins")))


@pytest.mark.parametrize("protection, routes", FALLBACKS, ids=[f[0] for f in FALLBACKS])
def test_the_fallbacks_keep_the_answers_out_of_reach_too(tmp_path, protection, routes):
    """Where namespaces are refused (a container), Landlock closes the same routes; as root without either,
    users of their own do for the reference, the checks and git."""
    env = {**os.environ, "DRILLS_SANDBOX": protection}
    for route in routes:
        submission = thieves.materialize(route, tmp_path / route / "submission")
        results = tmp_path / route / "results.json"
        subprocess.run([sys.executable, "-m", "grader", "grade", str(submission), "--results", str(results),
                        "--format", "json", "--timeout", str(TIMEOUT_S)], cwd=ROOT, env=env, capture_output=True,
                       timeout=300, check=True)
        data = json.loads(results.read_text())
        assert data["protection"] == protection and data["score"] == 0, route
    for name in ("solutions", "tests", ".git"):
        assert (ROOT / name).stat().st_mode & 0o077, f"{name} was not opened again after grading"


def test_a_pythonpath_entry_is_out_of_reach(tmp_path):
    """A worker sees an allow-list, never sys.path (issue 29): a module on PYTHONPATH, under /tmp, is not
    importable by student code (the worker's own /tmp hides it, and nothing binds it back)."""
    library = Path(tempfile.mkdtemp(prefix="drills-library-"))
    try:
        library.chmod(0o755)
        (library / "drills_probe_module.py").write_text("ANSWER = 42\n")
        (library / "drills_probe_module.py").chmod(0o644)
        submission = tmp_path / "submission"
        shutil.copytree(ROOT / "solutions", submission, ignore=shutil.ignore_patterns("__pycache__"))
        positional = submission / "positional.py"
        positional.write_text(positional.read_text() + "\nimport drills_probe_module\nassert drills_probe_module.ANSWER == 42\n")
        env = {**os.environ, "PYTHONPATH": str(library)}
        results = tmp_path / "results.json"
        subprocess.run([sys.executable, "-m", "grader", "grade", str(submission), "--results", str(results), "--format",
                        "json"], cwd=ROOT, env=env, capture_output=True, timeout=300, check=True)
        data = json.loads(results.read_text())
        assert {c["id"]: c["score"] for c in data["components"]}["sinusoidal_encoding"] == 0
    finally:
        shutil.rmtree(library, ignore_errors=True)
