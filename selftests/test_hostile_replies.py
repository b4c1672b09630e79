"""What a worker sends is untrusted data, and one student's code decides only that student's score.

The attacks (selftests/hostile/replies.py) write their own replies to the
grader where the worker would, or set the worker's flags: the grader bounds
what it decodes, checks each reply against the request it answers, cuts every
text in one place, and grades a component again at most once whatever a
worker says. Then classmates graded together by grade-all, in both orders,
each score as when graded alone. Every grading runs as root and as an
ordinary user where the tests run as root (selftests/test_hostile.py's users).
"""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.results import MESSAGE_LIMIT
from grader.sandbox import protocol, wire
from selftests.hostile.replies import REPLY_ATTACKS, materialize, student
from selftests.test_hostile import ROOT, USERS, evidence_folder, full_marks, grade, run_as

pytestmark = pytest.mark.timeout(1800)


# --- the codec and the reply's check, without a worker ----------------------------------------------------------

def laughs(depth: int) -> list:
    value: list = ["ha" * 32]
    for _ in range(depth):
        value = [value, value]
    return value


def test_shared_references_are_refused_before_they_are_rebuilt():
    data = pickle.dumps({"id": 1, "ok": laughs(60)}, protocol=5)
    assert len(data) < 2000  # 2**60 lists, once rebuilt
    with pytest.raises(wire.WireError, match="twice"):
        wire.loads(data)


def test_what_a_message_rebuilds_is_bounded_even_without_shared_containers():
    text = "x" * (1 << 20)  # one string, referred to again in two bytes each time: 4 GiB once counted per place
    data = pickle.dumps({"id": 1, "ok": [text] * 4096}, protocol=5)
    assert len(data) < (1 << 20) + 64 * 1024
    with pytest.raises(wire.WireError, match="larger"):
        wire.loads(data)
    tensor = {wire.TENSOR: "uint8", "shape": [1 << 20], "device": "cpu", "data": bytes(1 << 20)}
    many = pickle.dumps([dict(tensor) for _ in range(4)], protocol=5)  # each tensor dict its own, its bytes shared
    assert len(wire.loads(many, limit=8 << 20)) == 4
    with pytest.raises(wire.WireError, match="larger"):
        wire.loads(many, limit=3 << 20)
    with pytest.raises(wire.WireError, match="larger"):
        wire.loads(b"x" * 100, limit=99)


def test_honest_messages_share_nothing_and_pass():
    t = torch_tensor()
    message = {"ok": ([t, t], {"a": (t, ()), "b": ((), [])}, "same", "same", None, 1.5)}
    again = wire.loads(wire.dumps(message))
    assert again["ok"][2:] == ("same", "same", None, 1.5) and again["ok"][0][1].equal(t)


def torch_tensor():
    import torch

    return torch.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("forged", [
    {"ok": 1},  # no id
    {"id": 2, "ok": 1},  # another request's
    {"id": True, "ok": 1},  # (True == 1)
    {"id": 1},  # neither result nor error
    {"id": 1, "ok": 1, "error": {"class": "StudentError"}},
    {"id": 1, "ok": 1, "score": 1000},  # a field no reply has
    {"id": 1, "ok": 1, "crossed": "x"},  # a switch's field in another reply
    {"id": 1, "ok": 1, "meta_loaded": "yes"},
    {"id": 1, "error": "text"},
    {"id": 1, "error": {"class": 3}},
    {"id": 1, "error": {"class": "StudentError", "kinds": ["k"] * (protocol.KINDS_LIMIT + 1)}},
    {"id": 1, "error": {"class": "StudentError", "extra": 1}},
    [1, 2],
], ids=repr)
def test_a_reply_that_does_not_answer_its_request_is_refused(forged):
    with pytest.raises(wire.WireError):
        protocol.checked_reply(forged, "call", 1)


@pytest.mark.parametrize("op, result", [("load", 1), ("new", None), ("new", {"__ref__": 1}), ("tensor_info", [1]),
                                        ("grad", None), ("call_many", (1,)), ("load_weights", "ok")])
def test_a_result_of_another_kind_of_request_is_refused(op, result):
    with pytest.raises(wire.WireError):
        protocol.checked_reply({"id": 3, "ok": result}, op, 3)
    honest = {"load": None, "new": wire.Ref(1, "Module"), "tensor_info": {}, "grad": {}, "call_many": [],
              "load_weights": None}[op]
    assert protocol.checked_reply({"id": 3, "ok": honest}, op, 3) == {"ok": honest}


def test_every_text_of_a_reply_is_cut_in_one_place():
    huge = "m" * (6 << 20)
    reply = protocol.checked_reply({"id": 7, "error": {"class": "CrossedOver" + huge, "type": huge, "message": huge,
                                                       "where": huge, "kinds": [huge, 3]}}, "call", 7)
    error = reply["error"]
    assert len(error["message"]) == len(error["where"]) == MESSAGE_LIMIT
    assert len(error["class"]) <= 40 and len(error["type"]) <= 200 and all(len(k) <= 200 for k in error["kinds"])
    assert error["kinds"][1] == "<not text: int>"
    switch = protocol.checked_reply({"id": 8, "ok": True, "crossed": huge}, "switch", 8)
    assert len(switch["crossed"]) <= 200
    with pytest.raises(wire.WireError):
        protocol.checked_reply({"id": 8, "ok": "yes", "crossed": None}, "switch", 8)


def test_a_module_added_by_student_code_is_dropped_and_one_torch_imported_is_kept():
    code = """
import sys, types, importlib.util
import torch
from grader.sandbox.state import ProcessState
state = ProcessState()
import math, torch.nn.functional as F
import torch._dynamo, decimal  # torch's own imports, after the state was taken: kept
sys.modules['math'] = types.ModuleType('math')
sys.modules['torch.nn.functional'] = types.ModuleType('torch.nn.functional')
sys.modules['einops_plugin'] = types.ModuleType('einops_plugin')
fake = types.ModuleType('torch._fake_part'); fake.__spec__ = importlib.util.spec_from_loader('torch._fake_part', None)
sys.modules['torch._fake_part'] = fake
state.restore()
assert sys.modules['math'] is math and sys.modules['torch.nn.functional'] is F
assert 'einops_plugin' not in sys.modules and 'torch._fake_part' not in sys.modules
assert 'torch._dynamo' in sys.modules and 'torch._dynamo.config' in sys.modules and '_decimal' in sys.modules
assert torch.empty(2, 3, device='meta').sum(0).shape == (3,)
print('ok')
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == "ok", proc.stderr[-3000:]


# --- the attacks, graded as root and as an ordinary user --------------------------------------------------------

@pytest.fixture(scope="module", params=USERS)
def attacked(request):
    user = request.param
    base = Path(tempfile.mkdtemp(prefix="drills-replies-"))
    base.chmod(0o755)
    jobs = {}
    for attack in REPLY_ATTACKS:
        folder = materialize(attack, base / attack.name / "submission")
        folder.parent.chmod(0o777)  # the ordinary user writes its results next to the submission
        jobs[attack.name] = (folder, evidence_folder(base, f"{attack.name}-evidence"), user)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(grade, *job) for name, job in jobs.items()}
        graded = {name: future.result() for name, future in futures.items()}
    yield graded
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("attack", REPLY_ATTACKS, ids=[a.name for a in REPLY_ATTACKS])
def test_a_forged_reply_or_flag_is_bounded_and_costs_only_its_component(attacked, attack):
    graded = attacked[attack.name]
    assert graded.returncode == 0, graded.stderr[-3000:]
    full = full_marks()
    assert {c: s for c, s in graded.scores.items() if c not in attack.may_lose} == \
        {c: p for c, p in full.items() if c not in attack.may_lose}
    assert all(graded.scores[c] <= full[c] for c in attack.may_lose)
    assert all(len(m) <= MESSAGE_LIMIT for messages in graded.outputs.values() for m in messages)
    assert len(graded.text) < 1 << 20  # the report: no 6 MiB text reached it
    assert graded.seconds < 300  # (the replayed flag graded again for ever; the laughs decoded for ever)


def test_a_forged_crossed_over_error_is_a_failure_where_nothing_can_cross(attacked):
    """Graded again once, in a worker of its own, the forged error fails the checks that call the method."""
    graded = attacked["forged_crossed_reply_every_call"]
    assert graded.scores["rms_norm"] < full_marks()["rms_norm"]
    assert any("CrossedOver" in m for m in graded.outputs["rms_norm"])


# --- classmates graded together ---------------------------------------------------------------------------------

KINDS = ("fake_modules", "plain", "helper_bug", "helper_ok")


def grade_class(base: Path, order: tuple[str, ...], user: str) -> dict[str, float]:
    """grade-all of the classmates `order`, one job, so in that order (students are taken by name)."""
    subs = base / "submissions"
    for place, kind in enumerate(order):
        student(subs / f"s{place}_{kind}", kind)
    out = base / "out"
    out.mkdir()
    out.chmod(0o777)
    proc = subprocess.run([*run_as(user), sys.executable, "-m", "grader", "grade-all", str(subs), "--out", str(out),
                           "--jobs", "1", "--timeout", "5"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = {}
    for place, kind in enumerate(order):
        record = json.loads((out / "results" / f"s{place}_{kind}.json").read_text())
        assert record["status"] == "graded", record
        scores[kind] = record["components"]  # (rounded to 4 places: records.py)
    return scores


@pytest.mark.parametrize("user", USERS)
def test_classmates_graded_together_in_either_order_score_as_each_alone(user):
    """A student whose LayerNorm leaves a fake math and torch.nn.functional in sys.modules beside a correct one; two
    whose norms.py differ only in a helper class's `forward` (which the cache's key used to leave out)."""
    tmp_path = Path(tempfile.mkdtemp(prefix="drills-classmates-"))  # (pytest's own folders: root's alone)
    tmp_path.chmod(0o755)
    try:
        _graded_together_and_alone(tmp_path, user)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _graded_together_and_alone(tmp_path: Path, user: str) -> None:
    alone = {}
    for kind in KINDS:
        folder = student(tmp_path / "alone" / kind / "submission", kind)
        folder.parent.chmod(0o777)
        graded = grade(folder, evidence_folder(tmp_path / "alone" / kind, "evidence"), user)
        assert graded.returncode == 0, graded.stderr[-3000:]
        alone[kind] = {c: round(score, 4) for c, score in graded.scores.items()}
    assert alone["fake_modules"] == alone["plain"] == alone["helper_ok"] == full_marks()
    assert alone["helper_bug"]["scaling"] < full_marks()["scaling"]
    for name, order in (("forward", KINDS), ("backward", tuple(reversed(KINDS)))):
        (tmp_path / name).mkdir(mode=0o755)
        together = grade_class(tmp_path / name, order, user)
        assert together == alone, name
