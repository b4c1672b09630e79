"""The from-scratch rule, enforced while the code runs (issue 29): library calls reached in ways no reading of
the source follows earn nothing, as root and as an ordinary user.

Each submission of selftests/hostile/scratch.py is the reference with the code of five components redone with
a forbidden call, reached one way each; the guards (grader/sandbox/forbid.py) stop the call and the rule's gate
(grader/engine/scoring.py) takes the component's points, and no other component loses one.
"""
from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from grader.contract import COMPONENTS
from grader.course import load_course
from grader.sandbox import standins
from grader.sandbox.executor import Executor
from grader.sandbox.protocol import StudentError
from selftests.bugs import ROOT
from selftests.hostile import scratch
from selftests.test_hostile import USERS, evidence_folder, full_marks, grade

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module", params=USERS)
def graded(request):
    """Every evasion graded once per user, two at a time."""
    base = Path(tempfile.mkdtemp(prefix="drills-scratch-"))
    base.chmod(0o755)
    jobs = {}
    for evasion in scratch.EVASIONS:
        submission = scratch.materialize(evasion, base / evasion / "submission")
        submission.parent.chmod(0o777)  # the ordinary user writes its results next to the submission
        jobs[evasion] = (submission, evidence_folder(base, f"{evasion}-evidence"), request.param)
    for how in ("source", "exec"):
        submission = scratch.materialize_replay(how, base / f"replay-{how}" / "submission")
        submission.parent.chmod(0o777)
        jobs[f"replay:{how}"] = (submission, evidence_folder(base, f"replay-{how}-evidence"), request.param)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(grade, *job) for name, job in jobs.items()}
        yield {name: future.result() for name, future in futures.items()}
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("evasion", list(scratch.EVASIONS))
def test_a_forbidden_call_however_reached_earns_nothing(graded, evasion):
    result = graded[evasion]
    assert result.returncode == 0, result.stderr[-3000:]
    full = full_marks()
    for component in COMPONENTS:
        if component in scratch.COMPONENTS:
            assert result.scores[component] == 0, f"{evasion}: {component} kept {result.scores[component]} points"
            assert any("forbidden" in m for m in result.outputs[component]), result.outputs[component]
        else:
            assert result.scores[component] == pytest.approx(full[component], abs=0.01), \
                f"{evasion}: {component} lost points: {result.outputs[component]}"


@pytest.mark.parametrize("how", ["source", "exec"])
def test_a_stolen_stand_in_replayed_earns_nothing(graded, how):
    """The stand-ins a worker holds of other components' names (those of grouped_query_attention, tiny_lm, the
    norms, cross_entropy and optimizer), handed in as those components' code, are built from calls the rule
    forbids them: pasted or executed from a string (which no reading sees), they earn nothing there, and cost
    nothing elsewhere."""
    result = graded[f"replay:{how}"]
    assert result.returncode == 0, result.stderr[-3000:]
    full = full_marks()
    replayed = {component for _, _, component in scratch.REPLAYED}
    for component in COMPONENTS:
        expected = 0 if component in replayed else full[component]
        assert result.scores[component] == pytest.approx(expected, abs=0.01), \
            f"replayed ({how}): {component} has {result.scores[component]}: {result.outputs[component]}"


CENSUS = """

def _census():
    # every stand-in piece this worker holds: compiled code in any frame's scope, instantiated pieces in memory
    import gc, os, sys, types
    found = set()
    frame = sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for value in list(scope.values()):
                if isinstance(value, dict) and any(isinstance(v, types.CodeType) for v in value.values()):
                    found |= {k for k in value if isinstance(k, str)}
                for holder in (value, getattr(value, "package", None)):
                    if isinstance(getattr(holder, "pieces", None), dict):
                        found |= set(holder.pieces)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and os.sep + "standins" + os.sep in obj.__code__.co_filename:
            found.add(os.path.basename(obj.__code__.co_filename)[:-3])
    raise RuntimeError("census: " + " ".join(sorted(found)) + " :end")
"""


@pytest.mark.parametrize("component, file, entry", [
    ("multi_head_attention", "attention.py", "scaled_dot_product_attention"),
    ("rope", "rope.py", "apply_rope"),
    ("layer_norm", "norms.py", "LayerNorm.forward"),
])
def test_a_worker_holds_only_the_stand_ins_its_checks_can_reach(tmp_path, component, file, entry):
    """Code run while C is graded finds (walking the stack, the garbage collector) only the stand-ins of the
    contract modules C's checks reach (grader/engine/reach.py): never another track's answers to carry out."""
    import re

    from grader.engine.reach import pieces_for
    from grader.engine.remote import remote_targets
    from grader.sandbox.protocol import StudentError as Raised

    folder = shutil.copytree(ROOT / "solutions", tmp_path / "submission", ignore=shutil.ignore_patterns("__pycache__"))
    owner, _, method = entry.rpartition(".")
    spy = (f"\n{owner}.{method} = lambda self, *a, **k: _census()\n" if owner else f"\n{entry} = lambda *a, **k: _census()\n")
    (folder / file).write_text((folder / file).read_text() + CENSUS + spy)
    with remote_targets(folder) as pool:
        target = pool.target(component)
        with pytest.raises(Raised) as raised:
            if owner:
                target.new(f"{file[:-3]}.{owner}", 8)(torch.randn(2, 3, 8))
            else:
                target.fn(f"{file[:-3]}.{entry}")(*(torch.randn(2, 2, 3, 4) for _ in range(3)))
    held = set(re.search(r"census: (.*?) :end", str(raised.value)).group(1).split())
    assert held == set(pieces_for(folder, component)), held
    assert not held & {"gqa", "gpt", "optim", "losses", "sampling", "window_attention", "windows", "vit_model"}


@pytest.mark.parametrize("evasion", list(scratch.EVASIONS))
def test_without_the_guards_the_evasion_gives_the_right_answer(tmp_path, evasion):
    """What the guards take away is a working result: unguarded (the checks' own process), it is right."""
    folder = scratch.materialize(evasion, tmp_path / "submission")
    x = torch.randn(3, 5, dtype=torch.float64)
    for forbidden, expect in (((), torch.softmax(x, -1)), (load_course().component("cross_entropy").forbidden, None)):
        executor = Executor(folder, "cross_entropy", code=standins.read(standins.available_for("cross_entropy")),
                            forbidden=forbidden)
        try:
            if expect is not None:
                assert torch.allclose(executor.run("call", name="training.softmax", args=(x,)), expect)
            else:
                with pytest.raises(StudentError, match="ForbiddenCall: .* is forbidden in cross_entropy"):
                    executor.run("call", name="training.softmax", args=(x,))
        finally:
            executor.close()
    assert torch.softmax(x, -1) is not None and torch.softmax.__module__ != __name__  # put back on close


def test_the_guards_are_gone_when_the_component_is(tmp_path):
    """A worker shared by components guards only the one graded: closing it puts every name back."""
    before = {name: getattr(torch.nn.functional, name) for name in ("softmax", "layer_norm", "rms_norm")}
    init = torch.nn.LayerNorm.__init__
    folder = scratch.materialize("helper", tmp_path / "submission")
    for component in ("cross_entropy", "layer_norm", "rms_norm", "optimizer", "multi_head_attention"):
        executor = Executor(folder, component, code=standins.read(standins.available_for(component)),
                            forbidden=load_course().component(component).forbidden)
        executor.close()
    assert {name: getattr(torch.nn.functional, name) for name in before} == before
    assert torch.nn.LayerNorm.__init__ is init and "softmax" not in vars(torch.Tensor)
