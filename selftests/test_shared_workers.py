"""Components that share a worker (grader/engine/planning.py's SHARED_WORKERS) are graded as if each had its own.

A shared worker holds no stand-in of any of its components; code of one that
reaches another's name (where a worker of its own would have the stand-in) has
its component graded again, alone; what a component's code changes in the
process (torch's settings, names rebound in torch, a thread left running) is
put back, or the next component gets a fresh worker.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.channels.package.release import context_dependents
from grader.contract import COMPONENTS
from grader.course import load_course
from grader.engine.planning import SHARED_WORKERS, plan_shards, worker_group
from selftests.bugs import ROOT

# Grades a folder in one grading process (every group in one worker) and tells which components were graded again.
GRADE = """\
import json, sys
from grader.engine import plugin
from grader.engine.runner import run_checks
again = []
graded_again = plugin.Submission.grade_crossed_again
def spy(self, items, config):
    again.extend(sorted(self.crossed))
    return graded_again(self, items, config)
plugin.Submission.grade_crossed_again = spy
components = sys.argv[2].split(",") if len(sys.argv) > 2 else None
report = run_checks(sys.argv[1], components, processes=1)
print(json.dumps({"scores": {c.id: c.score for c in report.components}, "again": again}))
"""
FULL = {c.id: c.points for c in load_course().components}
LLM_GROUP = next(g for g in SHARED_WORKERS if "layer_norm" in g)


def grade(folder: Path, components: list[str] | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", GRADE, str(folder), *([",".join(components)] if components else [])],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def edited(tmp_path: Path, file: str, old: str, new: str) -> Path:
    folder = tmp_path / "submission"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    source = (folder / file).read_text()
    assert source.count(old) == 1, old
    (folder / file).write_text(source.replace(old, new))
    return folder


def test_groups_are_disjoint_sets_of_components_whose_code_runs_none_of_each_others():
    members = [c for group in SHARED_WORKERS for c in group]
    assert len(members) == len(set(members)) and set(members) <= set(COMPONENTS)
    assert all(len(group) > 1 for group in SHARED_WORKERS)
    assert worker_group("kv_cache") == {"kv_cache"}
    # the reference's call graph, as the release reads it (its checks' own reach is the next test's)
    assert {c: sorted(context_dependents(c) & group) for group in SHARED_WORKERS for c in group
            if context_dependents(c) & group} == {}


def test_the_planner_keeps_group_mates_together_where_the_load_allows():
    llm = sorted(LLM_GROUP)
    [(only, _, _)] = plan_shards(llm, 1)
    assert sorted(only) == llm
    shards = [set(group) for group, _, _ in plan_shards(list(COMPONENTS), 2)]
    assert set().union(*shards) == set(COMPONENTS) and len(shards) == 2


def test_the_reference_never_reaches_a_worker_mate():
    """Else every grading would grade those components twice: a group would only cost time."""
    graded = grade(ROOT / "solutions")
    assert graded["again"] == []
    assert graded["scores"] == FULL


def test_code_that_reaches_a_mate_is_graded_again_alone_and_fairly(tmp_path):
    """RMSNorm builds a LayerNorm (layer_norm's, a mate's: guarded in the shared worker), and LayerNorm has a
    bug: rms_norm is graded again with the stand-in LayerNorm, and loses nothing; layer_norm pays for its bug."""
    folder = edited(tmp_path, "norms.py", "        ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)\n",
                    "        LayerNorm(x.size(-1))  # another component's class, built for nothing\n"
                    "        ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)\n")
    norms = folder / "norms.py"
    norms.write_text(norms.read_text().replace("var = (x - mean).pow(2).mean(dim=-1, keepdim=True)",
                                               "var = (x - mean).pow(2).sum(dim=-1, keepdim=True) / (x.size(-1) - 1)"))
    graded = grade(folder, sorted(LLM_GROUP))
    assert graded["again"] == ["rms_norm"]
    assert graded["scores"]["layer_norm"] < FULL["layer_norm"]
    assert {c: s for c, s in graded["scores"].items() if c != "layer_norm"} == \
        {c: FULL[c] for c in LLM_GROUP if c != "layer_norm"}


@pytest.mark.parametrize("change", [
    # put back in place: torch's default dtype (SwiGLU's layers would be float64), a name rebound in torch
    "torch.set_default_dtype(torch.float64); torch.rsqrt = torch.sqrt; torch.nn.functional.silu = torch.tanh",
    # put back in place: modules replaced in sys.modules (lr_schedule's `math`, swiglu's `torch.nn.functional`)
    "import sys, types; sys.modules['math'] = types.ModuleType('math'); "
    "sys.modules['torch.nn.functional'] = types.ModuleType('torch.nn.functional')",
    # cannot be put back (a thread that keeps changing it): the next component gets a fresh worker
    "import threading, time; threading.Thread(target=lambda: [(torch.set_default_dtype(torch.float64), "
    "time.sleep(0.001)) for _ in range(10 ** 6)], daemon=True).start()",
], ids=["settings", "modules", "thread"])
def test_what_a_component_changes_in_the_process_does_not_reach_its_mates(tmp_path, change):
    folder = edited(tmp_path, "norms.py", "        self.bias = nn.Parameter(torch.zeros(d_model))\n",
                    f"        self.bias = nn.Parameter(torch.zeros(d_model))\n        {change}\n")
    graded = grade(folder, sorted(LLM_GROUP))
    assert graded["again"] == []
    assert {c: s for c, s in graded["scores"].items() if c != "layer_norm"} == \
        {c: FULL[c] for c in LLM_GROUP if c != "layer_norm"}
